import Foundation
import Gateway
import HomeModel
import TestSupport
import WebTestSupport
import XCTest

/// Roles per home, enforced twice from one `access:` section: by the web view on every request,
/// and by a real mosquitto reading the ACL file `homemqtt access acl` wrote.
final class AccessRolesTests: XCTestCase {
    static let lock = "home/hallway/front-door-lock/front-door/target-lock-mechanism-state"
    static let light = "home/hallway/hallway-light/hallway-light/power-state"

    struct User {
        var name: String
        var password: String
        var token: String
        var role: String
        var control: [String] = []
    }

    let users = [
        User(name: "alice", password: "alice-pw", token: "alice-token-0123456789", role: "administrator"),
        User(name: "bob", password: "bob-pw", token: "bob-token-0123456789", role: "member"),
        User(
            name: "gus", password: "gus-pw", token: "gus-token-0123456789", role: "guest",
            control: ["hallway/hallway-light"]),
    ]

    var accessYAML: String {
        var lines = ["access:", "  users:"]
        for user in users {
            lines += [
                "    - name: \(user.name)",
                "      token-sha256: \(AccessConfig.hex(AccessConfig.sha256(user.token)))",
                "      roles: { \"*\": \(user.role) }",
            ]
            if !user.control.isEmpty { lines.append("      guest-control: [\(user.control.joined(separator: ", "))]") }
        }
        return lines.joined(separator: "\n")
    }

    /// `mosquitto_pub` as `user`, MQTT 5 at QoS 1 (a refused publish is dropped by the broker).
    func publish(_ broker: MosquittoBroker, as user: User, _ topic: String, _ payload: String) async throws {
        _ = try await runProcess(
            "mosquitto_pub",
            [
                "-p", "\(broker.port)", "-u", user.name, "-P", user.password, "-V", "5", "-q", "1", "-t", topic, "-m",
                payload,
            ])
    }

    /// The first message on `topic` seen by `user` within `seconds`, or nil.
    func first(
        _ broker: MosquittoBroker, as user: User, _ topic: String, within seconds: Int, after: () async throws -> Void
    )
        async throws -> String?
    {
        let subscriber = try ChildProcess(
            "mosquitto_sub",
            ["-p", "\(broker.port)", "-u", user.name, "-P", user.password, "-t", topic, "-C", "1", "-W", "\(seconds)"])
        try await Task.sleep(for: .milliseconds(400))
        try await after()
        _ = try? await subscriber.waitForExit(timeout: Double(seconds) + 5)
        let text = subscriber.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
        return text.isEmpty ? nil : text
    }

    func testAGuestIsRefusedByTheWebViewAndByTheBrokersACLAMemberIsNot() async throws {
        let directory = try TemporaryDirectory(prefix: "homemqtt-access")
        // The ACL file first, from the same config the gateway runs with.
        let probe = directory.file("probe.yml")
        try """
        broker:
          url: mqtt://gw:gw-pw@127.0.0.1:1
        state-directory: \(directory.file("state"))
        sources: [{ type: simulator, directory: "\(repositoryRoot.appendingPathComponent("Config/accessories").path)" }]
        \(accessYAML)
        """.write(toFile: probe, atomically: true, encoding: .utf8)
        let acl = directory.file("acl")
        try await runChecked(homemqttBinary, ["access", "acl", "--config", probe, "--output", acl])
        let aclText = try String(contentsOfFile: acl, encoding: .utf8)
        XCTAssertTrue(aclText.contains("user gus\n# My Home: guest\ntopic read home/#"), aclText)
        XCTAssertFalse(users.contains { aclText.contains($0.token) }, "a token in the ACL file")

        var passwords = Dictionary(uniqueKeysWithValues: users.map { ($0.name, $0.password) })
        passwords["gw"] = "gw-pw"
        let broker = try await MosquittoBroker.start(.init(users: passwords, extraConfiguration: ["acl_file \(acl)"]))
        let gateway = try await WebGateway.start(
            broker: broker, extra: accessYAML, brokerURL: "mqtt://gw:gw-pw@127.0.0.1:\(broker.port)")
        addTeardownBlock { await gateway.stopAll() }
        let (alice, bob, gus) = (users[0], users[1], users[2])

        // MQTT: everyone with a role reads; the broker drops a guest's set it does not allow,
        // so the gateway never sees it, and answers a member's and a guest's allowed one.
        let status = try await first(broker, as: gus, "home/$gateway/status", within: 5) {}
        XCTAssertEqual(status, "online")
        let refused = try await first(broker, as: alice, Self.lock + "/result", within: 3) {
            try await publish(broker, as: gus, Self.lock + "/set", "1")
        }
        XCTAssertNil(refused, "the broker let a guest's set through")
        let memberSet = try await first(broker, as: alice, Self.lock + "/result", within: 10) {
            try await publish(broker, as: bob, Self.lock + "/set", "1")
        }
        XCTAssertEqual(try memberSet.map { try JSONValue(parsing: Array($0.utf8))["status"] }, .string("ok"))
        let guestLight = try await first(broker, as: alice, Self.light + "/result", within: 10) {
            try await publish(broker, as: gus, Self.light + "/set", "true")
        }
        XCTAssertEqual(try guestLight.map { try JSONValue(parsing: Array($0.utf8))["status"] }, .string("ok"))
        let memberManages = try await first(broker, as: alice, "home/$gateway/response/room/add", within: 3) {
            try await publish(broker, as: bob, "home/$gateway/request/room/add", #"{"name": "Attic"}"#)
        }
        XCTAssertNil(memberManages, "the broker let a member's management request through")

        // The web view: the same rule on its requests, by token.
        func post(_ user: User?, _ topic: String, _ payload: String) async throws -> HTTPResult {
            var headers = ["Content-Type": "application/json"]
            if let user { headers["Authorization"] = "Bearer \(user.token)" }
            let body = JSONValue.object(["id": 1, "topic": .string(topic), "payload": .string(payload)]).encoded()
            return try await HTTP.request("POST", "\(gateway.url)/api/request", headers: headers, body: body)
        }
        func code(_ result: HTTPResult) -> String? {
            result.json?.value(at: "answer", "code")?.stringValue
                ?? result.json?.value(at: "answer", "status")?.stringValue
        }
        let anonymous = try await post(nil, Self.lock + "/set", "0")
        XCTAssertEqual(anonymous.status, 401)
        let cases: [(User, String, String, String)] = [
            (gus, Self.lock + "/set", "0", "insufficient-privileges"),
            (gus, Self.light + "/set", "false", "ok"),
            (gus, Self.lock + "/get", "", "ok"),
            (bob, Self.lock + "/set", "0", "ok"),
            (bob, "home/$gateway/request/room/add", #"{"name": "Attic"}"#, "insufficient-privileges"),
            (alice, "home/$gateway/request/room/add", #"{"name": "Attic"}"#, "ok"),
        ]
        for (user, topic, payload, expected) in cases {
            let answer = try await post(user, topic, payload)
            XCTAssertEqual(code(answer), expected, "\(user.name) \(topic): \(answer.body)")
        }
        let session = try await HTTP.get(
            "\(gateway.url)/api/session", headers: ["Authorization": "Bearer \(gus.token)"])
        XCTAssertEqual(session.json?["role"], .string("guest"))
        let pairings = try await HTTP.get(
            "\(gateway.url)/api/pairings", headers: ["Authorization": "Bearer \(bob.token)"])
        XCTAssertEqual(pairings.status, 403)
        let home = try await HTTP.get("\(gateway.url)/api/home", headers: ["Authorization": "Bearer \(gus.token)"])
        XCTAssertEqual(home.status, 200)

        await gateway.stop()
        for user in users { XCTAssertFalse(gateway.log.contains(user.token), "\(user.name)'s token was logged") }
    }
}
