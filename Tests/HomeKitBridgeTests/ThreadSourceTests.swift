import Foundation
import Gateway
import HAP
import HomeKitBridge
import HomeKitBridgeTestSupport
import HomeMQTTApp
import HomeModel
import Simulator
import TestSupport
import XCTest

/// A gateway controls a Thread accessory as it controls a Wi-Fi one (issue 42): gateway A
/// serves its Kilgo garage door opener as a Thread accessory (`homekit: thread`, HAP over CoAP
/// on UDP); gateway B, a HAP controller beside its own simulated home, pairs with it through
/// the `pair` operation (`transport: thread`) over ::1, publishes it on MQTT, writes a `set`
/// over CoAP, publishes what A changes (an event), and follows A through a restart.
final class ThreadSourceTests: XCTestCase {
    static let garage = "sim:garage"

    /// How many messages B has seen on `topic` with `payload`.
    static func count(_ gw: BridgedGateway, _ topic: String, _ payload: String) -> Int {
        gw.seen.elements.filter { $0.topic == topic && $0.string == payload }.count
    }

    /// Waits for one more message on `topic` with `payload` than `before`.
    static func another(
        _ gw: BridgedGateway, _ topic: String, _ payload: String, after before: Int, _ what: String
    ) async throws {
        try await waitUntil(what, timeout: 30) { count(gw, topic, payload) > before }
    }

    /// `pair`'s `transport`: `ip` or `thread`, anything else refused by name; left out, it stays
    /// out of the request (the gateway then decides: `_hap._udp` heard, or IP).
    func testThePairRequestsTransport() throws {
        let base: [String: JSONValue] = ["host": "::1", "port": 5683, "code": "031-45-154"]
        let thread = try HAPPair(RequestReader.request(base.merging(["transport": "thread"]) { $1 }))
        XCTAssertEqual(thread.fields["transport"], "thread")
        XCTAssertNil(try HAPPair(RequestReader.request(base)).fields["transport"])
        XCTAssertThrowsError(try HAPPair(RequestReader.request(base.merging(["transport": "ble"]) { $1 }))) {
            let failure = $0 as? GatewayFailure
            XCTAssertEqual(failure?.code, .invalidField)
            XCTAssertTrue(failure?.message.contains("must be ip or thread") ?? false, "\(String(describing: failure))")
        }
    }

    /// A gateway that pairs its own simulated Thread accessory is refused, as it is with its own
    /// bridge: the accessory would be in its home twice.
    func testAGatewayPairingItsOwnThreadAccessoryIsRefused() async throws {
        let state = try TemporaryDirectory(prefix: "thread-self")
        let files = try BridgedGateway.standaloneGarageFiles(in: state, how: "thread")
        let home = try SimulatedHome.load(directory: files, clock: .manual)
        try await BridgedGateway.run(state: state, home: home, hap: true) { gw in
            let (service, port) = try await gw.standalone(Self.garage)
            let code = try XCTUnwrap(service.setup?.code)
            let outcome = await gw.gateway.perform(
                .manage(HAPPair(host: "::1", port: port, code: code, name: nil, transport: .thread)))
            let failure = try XCTUnwrap(outcome.failure, "\(outcome)")
            XCTAssertTrue(failure.message.contains("an accessory it serves alone"), failure.message)
            let store = HAPPairingStore(directory: URL(fileURLWithPath: state.path + "/pairings"))
            XCTAssertEqual(try store.all().count, 0)
            let names = await gw.gateway.tree.accessories.map(\.displayName)
            XCTAssertEqual(names.filter { $0 == "Garage Door Opener" }.count, 1, "\(names)")
        }
    }

    func testAGatewayPairsWithAThreadAccessoryAndControlsItAcrossARestart() async throws {
        let aState = try TemporaryDirectory(prefix: "thread-accessory")
        let bState = try TemporaryDirectory(prefix: "thread-controller")
        let aFiles = try BridgedGateway.standaloneGarageFiles(in: aState, how: "thread")
        let bHome = try LoopGuardTests.home(["office-switch.yml"], in: bState)
        // A dead accessory is found within a second or two, not IP's keepalive's 30 s.
        var factory = HAPFactory()
        factory.threadProbeInterval = 0.5
        factory.threadRequestDeadline = .seconds(2)
        try await BridgedGateway.run(state: bState, home: bHome, hap: true, hapFactory: factory) { b in
            var port = 0
            var pairingID = ""
            var topics = (bState: "", bSet: "", availability: "", aState: "", aSet: "")
            let aHome = try SimulatedHome.load(directory: aFiles, clock: .manual)
            try await BridgedGateway.run(state: aState, home: aHome) { a in
                let (service, servicePort) = try await a.standalone(Self.garage)
                port = servicePort
                let code = try XCTUnwrap(service.setup?.code)

                // A wrong code: the pairing result says so, and nothing is kept.
                let wrong = code == "123-45-678" ? "876-54-321" : "123-45-678"
                let refused = await b.gateway.perform(
                    .manage(HAPPair(host: "::1", port: port, code: wrong, name: nil, transport: .thread)))
                let failure = try XCTUnwrap(refused.failure, "\(refused)")
                XCTAssertEqual(failure.code, .wrongSetupCode, failure.message)
                XCTAssertTrue(failure.message.contains("setup code"), failure.message)
                let store = HAPPairingStore(directory: URL(fileURLWithPath: bState.path + "/pairings"))
                XCTAssertEqual(try store.all().count, 0)

                // The right code: paired over CoAP, served at once, kept as a Thread pairing.
                let outcome = await b.gateway.perform(
                    .manage(HAPPair(host: "::1", port: port, code: code, name: nil, transport: .thread)))
                guard case .data(let answer) = try outcome.get() else { return XCTFail("\(outcome)") }
                XCTAssertEqual(answer["transport"], "thread", answer.encoded())
                XCTAssertEqual(answer["connected"], .bool(true), answer.encoded())
                let names = answer["accessories"]?.arrayValue?.compactMap { $0["name"]?.stringValue }
                XCTAssertEqual(names, ["Garage Door Opener"], answer.encoded())
                pairingID = try XCTUnwrap(answer["pairing"]?.stringValue)
                XCTAssertEqual(try store.all().map(\.transport), [.thread])
                guard case .data(let listing) = try await b.gateway.perform(.manage(HAPPairings())).get() else {
                    return XCTFail("no listing")
                }
                XCTAssertEqual(listing["pairings"]?.arrayValue?.first?["transport"], "thread", listing.encoded())

                // Its tree on B's MQTT, a `hap:` accessory like an IP one.
                let bTarget = try await b.seen.waitFor("B's garage target state", timeout: 20) {
                    $0.topic.hasSuffix("/target-door-state/state")
                }
                topics.bState = bTarget.topic
                topics.bSet = String(bTarget.topic.dropLast("state".count)) + "set"
                let parts = bTarget.topic.split(separator: "/")
                topics.availability = parts.dropLast(3).joined(separator: "/") + "/$availability"
                let accessory = await b.gateway.tree.accessories.first { $0.displayName == "Garage Door Opener" }
                XCTAssertEqual(accessory?.id, "hap:\(pairingID):1")
                // On B's HomeKit bridge too, like every accessory B controls (issue 42).
                let (_, bridged) = try await Controller.pair(b, state: bState)
                var bridgedNames: [String] = []
                for _ in 0..<100 {
                    bridgedNames = StandaloneAccessoryTests.names(try await bridged.accessoriesJSON())
                    if bridgedNames.contains("Garage Door Opener") { break }
                    try await Task.sleep(for: .milliseconds(100))
                }
                XCTAssertTrue(bridgedNames.contains("Garage Door Opener"), "\(bridgedNames)")
                await bridged.close()

                let aTarget = try await a.seen.waitFor("A's garage target state", timeout: 10) {
                    $0.topic.hasSuffix("/garage-door/target-door-state/state")
                }
                topics.aState = aTarget.topic
                topics.aSet = String(aTarget.topic.dropLast("state".count)) + "set"

                // A `set` on B is written over CoAP: A's simulator takes it, B's state follows.
                let aOpen = Self.count(a, topics.aState, "0")
                let bOpen = Self.count(b, topics.bState, "0")
                try await b.publish(topics.bSet, "0")
                try await Self.another(a, topics.aState, "0", after: aOpen, "A's target open after B's set")
                try await Self.another(b, topics.bState, "0", after: bOpen, "B's target state open")

                // A change on A's side (its MQTT `set`) reaches B as an event.
                let bClosed = Self.count(b, topics.bState, "1")
                try await a.publish(topics.aSet, "1")
                try await Self.another(b, topics.bState, "1", after: bClosed, "B hears A's change")
            }

            // A stopped: B finds it gone and says so.
            let offline = Self.count(b, topics.availability, "offline")
            try await Self.another(b, topics.availability, "offline", after: offline, "B's garage offline")
            let online = Self.count(b, topics.availability, "online")
            let connected = b.logs.lines.filter { $0.contains("connected to accessory \(pairingID)") }.count

            // A again, on the same port: B verifies anew, is online again and hears events again.
            let aHomeAgain = try SimulatedHome.load(directory: aFiles, clock: .manual)
            try await BridgedGateway.run(state: aState, home: aHomeAgain) { a in
                let (service, again) = try await a.standalone(Self.garage)
                XCTAssertEqual(again, port)
                try await Self.another(b, topics.availability, "online", after: online, "B's garage online again")
                let reconnected = b.logs.lines.filter { $0.contains("connected to accessory \(pairingID)") }.count
                XCTAssertGreaterThan(reconnected, connected)
                let bOpen = Self.count(b, topics.bState, "0")
                try await a.publish(topics.aSet, "0")
                try await Self.another(b, topics.bState, "0", after: bOpen, "B hears A's change after the restart")

                // `unpair` removes B's pairing on the accessory, over CoAP: its topics go, and
                // the accessory, paired with no one, takes its setup code again.
                let unpaired = await b.gateway.perform(.manage(HAPUnpair(pairing: pairingID)))
                XCTAssertNil(unpaired.failure, "\(unpaired)")
                let store = HAPPairingStore(directory: URL(fileURLWithPath: bState.path + "/pairings"))
                XCTAssertEqual(try store.all().count, 0)
                try await waitUntil("B's garage to leave its tree", timeout: 10) {
                    await !b.gateway.tree.accessories.contains { $0.displayName == "Garage Door Opener" }
                }
                let code = try XCTUnwrap(service.setup?.code)
                let paired = await b.gateway.perform(
                    .manage(HAPPair(host: "::1", port: port, code: code, name: nil, transport: .thread)))
                XCTAssertNil(paired.failure, "\(paired)")
            }
        }
    }
}
