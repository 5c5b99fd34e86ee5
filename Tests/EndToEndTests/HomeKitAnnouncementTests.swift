import Foundation
import HAPServer
import HomeModel
import TestSupport
import XCTest

/// The bridge's mDNS announcement against an independent browser: python-zeroconf
/// (`hap_mdns_watch.py`, as aiohomekit and Home Assistant browse) and the `homemqtt` binary in a
/// network namespace of their own, so nothing else's mDNS is heard. The TXT record's keys,
/// aiohomekit finding the bridge by its pairing id and pairing (`sf` falls to 0), the goodbye on
/// stop, `c#` risen after an accessory was added, and the rename when another responder holds
/// the name.
final class HomeKitAnnouncementTests: XCTestCase {
    static let code = "314-15-926"
    static let name = "HomeMQTT My Home._hap._tcp.local."
    static let watcher = HAPPeer.repositoryRoot.appendingPathComponent("Tests/HAPTests/peer/hap_mdns_watch.py").path
    static let aiohomekitPair = HAPPeer.repositoryRoot.appendingPathComponent(
        "Tests/HAPTests/peer/aiohomekit_mdns_pair.py"
    ).path

    /// The namespace, its broker, the watcher, the gateway: stopped in reverse order.
    final class Rig: @unchecked Sendable {
        let ns: NetworkNamespace
        let directory: TemporaryDirectory
        var processes: [ChildProcess] = []
        var watcher: ChildProcess?
        init(ns: NetworkNamespace, directory: TemporaryDirectory) {
            self.ns = ns
            self.directory = directory
        }
        var config: String { directory.file("gateway.yml") }
        var accessories: String { directory.file("accessories") }

        func stop() async {
            for p in processes.reversed() { await p.terminate(grace: 5) }
            if let watcher {
                watcher.closeInput()
                await watcher.terminate()
            }
            await ns.delete()
        }

        /// The watcher's lines, parsed.
        var events: [JSONValue] { watcher?.outputLines.compactMap { try? JSONValue(parsing: $0) } ?? [] }

        /// Waits for the watcher's first event from index `from` on that matches.
        @discardableResult
        func event(_ what: String, from: Int = 0, timeout: Double = 20, _ match: @escaping (JSONValue) -> Bool)
            async throws -> (JSONValue, Int)
        {
            var found: (JSONValue, Int)?
            do {
                try await waitUntil(what, timeout: timeout, pollInterval: 0.05) {
                    let all = events
                    if let i = all.indices.dropFirst(from).first(where: { match(all[$0]) }) { found = (all[i], i) }
                    return found != nil
                }
            } catch {
                // What the watcher did see, so that a wait that times out says why.
                let seen = (watcher?.outputLines ?? []).suffix(30).joined(separator: "\n")
                throw PeerFailure(message: "\(error); the watcher printed:\n\(seen)")
            }
            return found ?? (.null, 0)
        }

        func startWatcher(_ arguments: [String] = []) async throws {
            let child = try ChildProcess(
                "ip", ns.exec + [HAPPeer.python.path, "-u", HomeKitAnnouncementTests.watcher] + arguments,
                standardInput: true)
            watcher = child
            try await child.waitForOutput(containing: "\"ready\"", timeout: 30)
        }

        func startGateway() throws -> ChildProcess {
            let gateway = try ChildProcess("ip", ns.exec + [try builtProduct("homemqtt"), "run", "--config", config])
            processes.append(gateway)
            return gateway
        }
    }

    /// `sh` as HAP-python computes it: base64 of SHA-512(setup id + id)'s first 4 bytes.
    static func setupHash(_ setupID: String, _ id: String) async throws -> String {
        let hash = try await runChecked(
            HAPPeer.python.path,
            [
                "-c",
                "import base64,hashlib,sys; print(base64.b64encode(hashlib.sha512((sys.argv[1]+sys.argv[2]).encode()).digest()[:4]).decode())",
                setupID, id,
            ])
        return hash.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func makeRig(port: Int) async throws -> Rig {
        try PeerProcess.requireVenv()
        TestCensus.record(.binary)
        let ns = try await NetworkNamespace.create()
        let rig = Rig(ns: ns, directory: try TemporaryDirectory(prefix: "homekit-mdns"))
        addTeardownBlock { await rig.stop() }
        let broker = try ChildProcess("ip", ns.exec + ["mosquitto", "-p", "1883"])
        rig.processes.append(broker)
        try await waitUntil("mosquitto in the namespace", timeout: 10, pollInterval: 0.1) {
            let r = try await runProcess("ip", ns.exec + ["mosquitto_pub", "-p", "1883", "-t", "probe", "-m", "x"])
            return r.status == 0
        }
        try FileManager.default.createDirectory(atPath: rig.accessories, withIntermediateDirectories: true)
        let shipped = HAPPeer.repositoryRoot.appendingPathComponent("Config/accessories")
        for file in ["garage.yml", "front-door.yml"] {
            try FileManager.default.copyItem(
                atPath: shipped.appendingPathComponent(file).path, toPath: rig.directory.file("accessories/\(file)"))
        }
        try """
        broker:
          url: mqtt://127.0.0.1:1883
          client-id: homekit-mdns
        state-directory: \(rig.directory.file("state"))
        poll-interval: 0
        sources:
          - type: simulator
            directory: \(rig.accessories)
        homeassistant:
          enabled: false
        homekit:
          enabled: true
          port: \(port)
          setup-code: \(Self.code)
        log-level: info
        """.write(toFile: rig.config, atomically: true, encoding: .utf8)
        return rig
    }

    func testZeroconfResolvesTheBridgeSeesItPairedAndGoneAndItsConfigurationRise() async throws {
        let port = 40_110
        let rig = try await makeRig(port: port)
        try await rig.startWatcher()
        var gateway = try rig.startGateway()

        let (added, _) = try await rig.event("the bridge announced") {
            $0["event"] == "added" && $0["name"]?.stringValue == Self.name
        }
        XCTAssertEqual(added["port"]?.intValue, port)
        XCTAssertEqual(added["addresses"]?.arrayValue?.contains("127.0.0.1"), true, "\(added)")
        let txt = try XCTUnwrap(added["txt"])
        let id = try XCTUnwrap(txt["id"]?.stringValue)
        XCTAssertNotNil(id.wholeMatch(of: /([0-9A-F]{2}:){5}[0-9A-F]{2}/), id)
        XCTAssertEqual(txt["sf"], "1", "unpaired")
        XCTAssertEqual(txt["ci"], "2", "a bridge")
        XCTAssertEqual(txt["ff"], "0")
        XCTAssertEqual(txt["pv"], "1.1")
        XCTAssertEqual(txt["s#"], "1")
        XCTAssertEqual(txt["md"], "HomeMQTT My Home")
        let cn = try XCTUnwrap(Int(txt["c#"]?.stringValue ?? ""))
        let status = try await runChecked(
            "ip", rig.ns.exec + [try builtProduct("homemqtt"), "homekit", "status", "--config", rig.config],
            timeout: 30)
        let shown = try JSONValue(parsing: Array(status.standardOutput.utf8))
        XCTAssertEqual(shown["id"]?.stringValue, id)
        XCTAssertEqual(shown["c#"]?.intValue, cn)
        // `sh`, computed here as HAP-python does: base64 of SHA-512(setup id + id)'s first 4 bytes.
        let setupID = try XCTUnwrap(shown["setup-id"]?.stringValue)
        let sh = try await Self.setupHash(setupID, id)
        XCTAssertEqual(txt["sh"]?.stringValue, sh)

        // aiohomekit finds the bridge by its pairing id over mDNS alone and pairs with it: `sf`
        // falls to 0, announced at once.
        let seen = rig.events.count
        let pair = try await runChecked(
            "ip",
            rig.ns.exec + [
                HAPPeer.python.path, Self.aiohomekitPair, "--id", id, "--pin", Self.code,
            ], timeout: 60)
        let paired = try JSONValue(parsing: Array(pair.standardOutput.utf8))
        XCTAssertEqual(paired["id"]?.stringValue?.uppercased(), id)
        XCTAssertEqual(paired["address"], "127.0.0.1")
        XCTAssertEqual(paired["port"]?.intValue, port)
        XCTAssertEqual(paired["status-flags"], 1, "found unpaired")
        XCTAssertEqual(paired["paired"], true)
        try await rig.event("sf 0 after pairing", from: seen) {
            $0["event"] == "updated" && $0["name"]?.stringValue == Self.name && $0["txt"]?["sf"] == "0"
        }

        // Stopped: the goodbye, and the browser drops the bridge at once (its TTLs are minutes).
        let beforeStop = rig.events.count
        let exit = await gateway.terminate()
        XCTAssertEqual(exit, 0)
        try await rig.event("the bridge removed", from: beforeStop, timeout: 5) {
            $0["event"] == "removed" && $0["name"]?.stringValue == Self.name
        }

        // An accessory added while it was down: announced again, same id, still paired, c# risen.
        try FileManager.default.copyItem(
            atPath: HAPPeer.repositoryRoot.appendingPathComponent("Config/accessories/kitchen-outlet.yml").path,
            toPath: rig.directory.file("accessories/kitchen-outlet.yml"))
        let beforeRestart = rig.events.count
        gateway = try rig.startGateway()
        let (again, _) = try await rig.event("the bridge announced again", from: beforeRestart) {
            $0["event"] == "added" && $0["name"]?.stringValue == Self.name
        }
        XCTAssertEqual(again["txt"]?["id"]?.stringValue, id)
        XCTAssertEqual(again["txt"]?["sf"], "0")
        XCTAssertGreaterThan(Int(again["txt"]?["c#"]?.stringValue ?? "") ?? 0, cn)
        _ = gateway
    }

    /// The garage door opener served standalone is announced on its own: its name, its port,
    /// its own id, `ci` 4 (garage door opener), `sh` of its own setup id; the bridge beside it
    /// keeps `ci` 2.
    func testAStandaloneAccessoryIsAnnouncedWithItsCategory() async throws {
        let port = 40_112
        let rig = try await makeRig(port: port)
        let garage = rig.directory.file("accessories/garage.yml")
        let text = try String(contentsOfFile: garage, encoding: .utf8)
        try ("homekit: standalone\n" + text).write(toFile: garage, atomically: true, encoding: .utf8)
        try await rig.startWatcher()
        _ = try rig.startGateway()
        let name = "Garage Door Opener._hap._tcp.local."
        let (alone, _) = try await rig.event("the garage announced") {
            $0["event"] == "added" && $0["name"]?.stringValue == name
        }
        let (bridge, _) = try await rig.event("the bridge announced") {
            $0["event"] == "added" && $0["name"]?.stringValue == Self.name
        }
        XCTAssertEqual(bridge["txt"]?["ci"], "2")
        let txt = try XCTUnwrap(alone["txt"])
        XCTAssertEqual(txt["ci"], "4", "a garage door opener")
        XCTAssertEqual(txt["md"], "Garage Door Opener")
        XCTAssertEqual(txt["sf"], "1", "unpaired")
        XCTAssertNotEqual(txt["id"], bridge["txt"]?["id"])
        let status = try await runChecked(
            "ip",
            rig.ns.exec + [
                try builtProduct("homemqtt"), "homekit", "status", "--accessory", "sim:garage", "--config", rig.config,
            ], timeout: 30)
        let shown = try JSONValue(parsing: Array(status.standardOutput.utf8))
        XCTAssertEqual(alone["port"], shown["port"])
        XCTAssertNotEqual(alone["port"]?.intValue, port)
        XCTAssertEqual(txt["id"], shown["id"])
        let setupID = try XCTUnwrap(shown["setup-id"]?.stringValue)
        let id = try XCTUnwrap(txt["id"]?.stringValue)
        // `sh` as HAP-python computes it, from the accessory's own setup id.
        let sh = try await Self.setupHash(setupID, id)
        XCTAssertEqual(txt["sh"]?.stringValue, sh)
    }

    /// A Thread accessory (`homekit: thread`, issue 42) is announced as `_hap._udp` with the TXT
    /// keys of `_hap._tcp`, on IPv6 addresses only (HAP over Thread is IPv6), at the UDP port its
    /// status gives; python-zeroconf resolves it as aiohomekit's Thread discovery does, and the
    /// goodbye on stop removes it.
    func testAThreadAccessoryIsAnnouncedAsHAPOverUDPOnIPv6() async throws {
        let port = 40_113
        let rig = try await makeRig(port: port)
        let garage = rig.directory.file("accessories/garage.yml")
        let text = try String(contentsOfFile: garage, encoding: .utf8)
        try ("homekit: thread\n" + text).write(toFile: garage, atomically: true, encoding: .utf8)
        try await rig.startWatcher(["--type", "_hap._udp.local."])
        let gateway = try rig.startGateway()
        let name = "Garage Door Opener._hap._udp.local."
        let (alone, _) = try await rig.event("the Thread garage announced as _hap._udp") {
            $0["event"] == "added" && $0["name"]?.stringValue == name
        }
        let txt = try XCTUnwrap(alone["txt"])
        XCTAssertEqual(txt["ci"], "4", "a garage door opener")
        XCTAssertEqual(txt["md"], "Garage Door Opener")
        XCTAssertEqual(txt["sf"], "1", "unpaired")
        XCTAssertEqual(txt["pv"], "1.1")
        XCTAssertEqual(txt["s#"], "1")
        XCTAssertEqual(txt["ff"], "0")
        XCTAssertNotNil(Int(txt["c#"]?.stringValue ?? ""), "\(txt)")
        let addresses = try XCTUnwrap(alone["addresses"]?.arrayValue?.compactMap(\.stringValue))
        XCTAssertFalse(addresses.isEmpty, "\(alone)")
        XCTAssertTrue(addresses.allSatisfy { $0.contains(":") }, "IPv6 only: \(addresses)")
        let status = try await runChecked(
            "ip",
            rig.ns.exec + [
                try builtProduct("homemqtt"), "homekit", "status", "--accessory", "sim:garage", "--config", rig.config,
            ], timeout: 30)
        let shown = try JSONValue(parsing: Array(status.standardOutput.utf8))
        XCTAssertEqual(alone["port"], shown["port"])
        XCTAssertEqual(txt["id"], shown["id"])
        let setupID = try XCTUnwrap(shown["setup-id"]?.stringValue)
        let id = try XCTUnwrap(txt["id"]?.stringValue)
        let sh = try await Self.setupHash(setupID, id)
        XCTAssertEqual(txt["sh"]?.stringValue, sh)

        // Stopped: the goodbye removes it at once.
        let beforeStop = rig.events.count
        let exit = await gateway.terminate()
        XCTAssertEqual(exit, 0)
        try await rig.event("the Thread garage removed", from: beforeStop, timeout: 5) {
            $0["event"] == "removed" && $0["name"]?.stringValue == name
        }
    }

    func testAnotherResponderHoldingTheNameMakesItRenameItself() async throws {
        let port = 40_111
        let rig = try await makeRig(port: port)
        try await rig.startWatcher(["--hold", "HomeMQTT My Home", "--hold-port", "9"])
        try await rig.event("zeroconf holding the name") { $0["event"] == "held" }
        let gateway = try rig.startGateway()
        let (renamed, _) = try await rig.event("the bridge under another name") {
            $0["event"] == "added" && $0["name"]?.stringValue == "HomeMQTT My Home (2)._hap._tcp.local."
        }
        XCTAssertEqual(renamed["port"]?.intValue, port)
        XCTAssertEqual(renamed["txt"]?["ci"], "2")
        // The holder keeps its own, unchanged.
        let (held, _) = try await rig.event("the holder's own") {
            $0["event"] == "added" && $0["name"]?.stringValue == Self.name
        }
        XCTAssertEqual(held["port"]?.intValue, 9)
        try await waitUntil("the rename in the log", timeout: 10) {
            gateway.standardError.contains("advertising as 'HomeMQTT My Home (2)'")
        }
    }
}
