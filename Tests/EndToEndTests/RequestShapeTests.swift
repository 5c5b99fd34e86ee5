import Foundation
import HomeModel
import MQTT
import TestSupport
import WebTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// No request can knock the gateway off its broker: a request topic the broker would refuse as
/// an answer topic (mosquitto drops a client that publishes to more than 201 levels), sent
/// through `POST /api/request` and `/ws` as any local process can to a loopback web view, is
/// answered to its sender and never published; and 10,000 random requests through every front
/// end (MQTT, `/api/request`, `/ws`, Homie) leave one broker connection, every request answered
/// and the gateway's memory bounded.
final class RequestShapeTests: XCTestCase {
    let light = "home/garage/garage-door-opener/garage-light/brightness"

    static func connections(_ broker: MosquittoBroker, _ clientID: String) -> Int {
        broker.log.components(separatedBy: " as \(clientID) ").count - 1
    }

    /// A `set` on `light` from MQTT, answered `ok` on its result topic.
    func assertSetAnswered(_ web: WebGateway, value: Int) async throws {
        let results = try await web.subscribe(light + "/result")
        try await web.publish(light + "/set", "\(value)")
        let answer = try await results.waitForMessage("the set's answer", timeout: 10) { !$0.retain }
        XCTAssertEqual(try JSONValue(parsing: answer.payload)["status"], .string("ok"), answer.string)
        await results.stop()
    }

    func testA202LevelRequestIsAnsweredToItsSenderAndTheBrokerStays() async throws {
        let web = try await WebGateway.start()
        addTeardownBlock { await web.stopAll() }
        let everything = try await web.subscribe("#")
        let deep = "home/" + String(repeating: "a/", count: 200) + "set"
        XCTAssertEqual(MQTTTopicShape.levels(deep), 202)
        let deepOp = "home/$gateway/request/" + Array(repeating: "a", count: 200).joined(separator: "/")

        // POST /api/request, as the issue's attacker did.
        for topic in [deep, deepOp] {
            let body = JSONValue.object(["topic": .string(topic), "payload": .string("1"), "id": .int(1)]).encoded()
            let posted = try await HTTP.request("POST", "\(web.url)/api/request", body: body)
            XCTAssertEqual(posted.status, 200, posted.body)
            XCTAssertEqual(posted.json?["answer"]?["status"], .string("error"), posted.body)
            XCTAssertEqual(posted.json?["answer"]?["code"], .string("unknown-topic"), posted.body)
        }
        // The same over /ws.
        let page = try await PageClient.connect("ws://127.0.0.1:\(web.port)/ws")
        addTeardownBlock { await page.close() }
        for topic in [deep, deepOp] {
            let answer = try await page.request(topic, "1")
            XCTAssertEqual(answer["status"], "error", "\(answer)")
            XCTAssertEqual(answer["code"], "unknown-topic", "\(answer)")
        }
        try await assertSetAnswered(web, value: 33)
        XCTAssertFalse(everything.messages.contains { MQTTTopicShape.levels($0.topic) > 10 })
        await everything.stop()
        XCTAssertEqual(Self.connections(web.broker, "homemqtt-web-test"), 1, web.broker.log)
        XCTAssertFalse(web.broker.log.contains("disconnected due to"), web.broker.log)
        XCTAssertFalse(web.log.contains("lost the broker"), web.log)
    }

    /// Random text for a topic level or a payload: letters, digits, punctuation, `/`, spaces,
    /// non-ASCII letters and emoji; `+`, `#` and control characters for payloads only (a
    /// topic with them is refused by the client that would publish it).
    static func randomText(_ rng: inout SeededGenerator, length: Int, forTopic: Bool) -> String {
        let topicAlphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789-_.$ é中🙂/{}\"'\\:,")
        let payloadAlphabet = topicAlphabet + Array("+#\u{1B}\t\n\u{7F}")
        let alphabet = forTopic ? topicAlphabet : payloadAlphabet
        return String((0..<length).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &rng)] })
    }

    /// A request topic: a served shape with random levels (a path that is not in the tree), a
    /// real characteristic with a random payload, a gateway request of a random name, or a
    /// random topic under the base (for the local front ends only: MQTT would not deliver it).
    static func randomRequest(
        _ rng: inout SeededGenerator, number: Int, local: Bool, known: [String]
    ) -> (topic: String, payload: String) {
        let payload =
            switch Int.random(in: 0..<4, using: &rng) {
            case 0: "\(Int.random(in: -1000...1000, using: &rng))"
            case 1: #"{"value": \#(Int.random(in: -5...500, using: &rng)), "id": \#(number)}"#
            case 2: ""
            default: randomText(&rng, length: Int.random(in: 0...300, using: &rng), forTopic: false)
            }
        func level() -> String {
            let text = randomText(&rng, length: Int.random(in: 1...20, using: &rng), forTopic: true)
                .replacingOccurrences(of: "/", with: "-")
            return text.hasPrefix("$") ? "x" + text : text
        }
        switch Int.random(in: 0..<(local ? 6 : 5), using: &rng) {
        case 0: return ("home/fz\(number)/\(level())/\(level())/\(level())/set", payload)
        case 1: return ("home/fz\(number)/\(level())/\(level())/\(level())/get", payload)
        case 2: return ("home/fz\(number)/\(level())/\(level())/$toggle", payload)
        case 3: return (known[Int.random(in: 0..<known.count, using: &rng)] + "/set", payload)
        case 4: return ("home/$gateway/request/fz-\(number)", payload)
        default:
            let depth = Int.random(in: 1...260, using: &rng)
            let tail = (0..<depth).map { _ in level() }.joined(separator: "/")
            return ("home/" + tail, payload)
        }
    }

    /// The gateway's resident memory, from /proc.
    static func residentKB(_ pid: Int32) -> Int {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    }

    func testTenThousandRandomRequestsThroughEveryFrontEnd() async throws {
        let web = try await WebGateway.start(extra: "homie:\n  enabled: true")
        addTeardownBlock { await web.stopAll() }
        guard let pid = web.process?.pid else { return XCTFail("no gateway process") }
        var rng = SeededGenerator(state: 39)
        let known = [
            light, "home/garage/garage-door-opener/garage-light/power-state",
            "home/garage/garage-door-opener/garage-door/target-door-state",
        ]
        // Memory after a first round of each kind, then after all of them.
        let answers = try await web.subscribe("home/#")
        let perFrontEnd = 2500
        var rssAfterFirst = 0

        // MQTT: every request on a topic the gateway subscribes to, each answered on its
        // result, $result or response topic (a known path's set on the shared result topic).
        // Sent 250 at a time, each batch answered before the next: a subscriber that falls
        // more than 1,000 messages behind has mosquitto drop what it sends it.
        let client = MQTTClient(configuration: web.broker.clientConfiguration(clientID: "fuzzer"))
        try await client.connect()
        var expected: Set<String> = []
        var knownSets = 0
        func unanswered() -> (missing: [String], known: Int) {
            let seen = Set(answers.messages.map(\.topic))
            let knownAnswers = answers.messages.filter { message in
                known.contains { message.topic == $0 + "/result" }
            }
            return (expected.subtracting(seen).sorted(), knownAnswers.count)
        }
        for number in 0..<perFrontEnd {
            let request = Self.randomRequest(&rng, number: number, local: false, known: known)
            try await client.publish(request.topic, payload: Array(request.payload.utf8), qos: .atLeastOnce)
            if known.contains(where: { request.topic == $0 + "/set" }) {
                knownSets += 1
            } else if request.topic.hasSuffix("/$toggle") {
                expected.insert(String(request.topic.dropLast("/$toggle".count)) + "/$result")
            } else if request.topic.hasPrefix("home/$gateway/request/") {
                expected.insert("home/$gateway/response/" + request.topic.dropFirst("home/$gateway/request/".count))
            } else {
                expected.insert(String(request.topic[..<request.topic.lastIndex(of: "/")!]) + "/result")
            }
            if number == 100 { rssAfterFirst = Self.residentKB(pid) }
            guard number % 250 == 249 else { continue }
            do {
                try await waitUntil("every MQTT request answered", timeout: 30) {
                    let (missing, knownAnswers) = unanswered()
                    return missing.isEmpty && knownAnswers >= knownSets
                }
            } catch {
                let (missing, knownAnswers) = unanswered()
                let dropped = web.broker.log.split(separator: "\n").filter { $0.contains("dropped") }.prefix(3)
                XCTFail(
                    "\(missing.count) unanswered, e.g. \(missing.prefix(5)); \(knownAnswers) of \(knownSets) "
                        + "known sets answered; broker: \(dropped)")
                throw error
            }
        }
        await client.disconnect()

        // POST /api/request: every one answered in its HTTP response.
        let session = URLSession(configuration: .ephemeral)
        for number in 0..<perFrontEnd {
            let request = Self.randomRequest(&rng, number: number, local: true, known: known)
            var post = URLRequest(url: URL(string: "\(web.url)/api/request")!)
            post.httpMethod = "POST"
            post.setValue("application/json", forHTTPHeaderField: "Content-Type")
            post.httpBody = Data(
                JSONValue.object(
                    ["topic": .string(request.topic), "payload": .string(request.payload), "id": .int(Int64(number))]
                ).encoded().utf8)
            let (data, response) = try await session.data(for: post)
            let status = (response as? HTTPURLResponse)?.statusCode ?? 0
            let json = try? JSONValue(parsing: Array(data))
            XCTAssertEqual(status, 200, "\(request.topic): \(String(decoding: data, as: UTF8.self))")
            XCTAssertNotNil(json?["answer"]?["status"], "\(request.topic): \(String(decoding: data, as: UTF8.self))")
            if status != 200 { break }
        }

        // /ws: every request answered with its id.
        let page = try await PageClient.connect("ws://127.0.0.1:\(web.port)/ws")
        addTeardownBlock { await page.close() }
        for number in 0..<perFrontEnd {
            let request = Self.randomRequest(&rng, number: number, local: true, known: known)
            let answer = try await page.request(request.topic, request.payload, timeout: 10)
            XCTAssertNotNil(answer["status"], "\(request.topic): \(answer)")
        }
        await page.close()

        // Homie: random sets on `homie/5/<device>/<node>/<property>/set`, real devices and not.
        let homie = MQTTClient(configuration: web.broker.clientConfiguration(clientID: "homie-fuzzer"))
        try await homie.connect()
        for number in 0..<perFrontEnd {
            let device = number % 3 == 0 ? "homemqtt-web-test" : "fz\(number)"
            func level() -> String {
                Self.randomText(&rng, length: Int.random(in: 1...12, using: &rng), forTopic: true)
                    .replacingOccurrences(of: "/", with: "-").replacingOccurrences(of: "$", with: "d")
            }
            let payload = Self.randomText(&rng, length: Int.random(in: 0...200, using: &rng), forTopic: false)
            try await homie.publish(
                "homie/5/\(device)/\(level())/\(level())/set", payload: Array(payload.utf8), qos: .atLeastOnce)
        }
        await homie.disconnect()

        // Still serving: a set answered; one connection each for the gateway and its Homie output.
        try await assertSetAnswered(web, value: 21)
        await answers.stop()
        XCTAssertEqual(Self.connections(web.broker, "homemqtt-web-test"), 1, web.broker.log)
        XCTAssertEqual(Self.connections(web.broker, "homemqtt-web-test-homie"), 1, web.broker.log)
        XCTAssertFalse(web.broker.log.contains("disconnected due to"), web.broker.log)
        let rss = Self.residentKB(pid)
        print("figure: gateway RSS \(rssAfterFirst) kB after 100 requests, \(rss) kB after 10,000")
        XCTAssertLessThan(rss, rssAfterFirst + 40_000, "RSS grew from \(rssAfterFirst) to \(rss) kB")
        XCTAssertTrue(web.process?.isRunning ?? false)
    }
}
