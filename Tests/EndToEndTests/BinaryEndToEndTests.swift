import Foundation
import HomeModel
import MQTT
import TestSupport
import XCTest

/// The real `homemqtt` binary against a real mosquitto, with `mosquitto_pub`/`mosquitto_sub` as
/// the other clients: what a user does from the shell.
final class BinaryEndToEndTests: XCTestCase {
    let door = "home/garage/garage-door-opener/garage-door"

    static var binary: String { BinaryGateway.binary }

    /// The config the binary's tests start it on (`TestSupport`).
    typealias E2EConfig = TestSupport.E2EConfig

    func homemqtt(_ arguments: [String], _ setup: E2EConfig, timeout: Double = 20) async throws -> ProcessResult {
        try await Self.homemqtt(arguments, setup, timeout: timeout)
    }

    static func homemqtt(_ arguments: [String], _ setup: E2EConfig, timeout: Double = 20) async throws -> ProcessResult
    {
        try await runProcess(binary, arguments + ["--config", setup.configPath], timeout: timeout)
    }

    func startGateway(_ setup: E2EConfig, broker: MosquittoBroker) async throws -> ChildProcess {
        try await Self.startGateway(setup, broker: broker)
    }

    /// `homemqtt run` on `setup`, once it has published `online`.
    static func startGateway(_ setup: E2EConfig, broker: MosquittoBroker) async throws -> ChildProcess {
        try await BinaryGateway.start(setup, broker: broker)
    }

    /// A person starting the gateway, or reading the journal, sees each phase once, with its
    /// figures, and nothing per message at info.
    func testStartLogsEachPhaseOnceWithItsFiguresAndNothingPerMessage() async throws {
        let broker = try await MosquittoBroker.start()
        addTeardownBlock { await broker.stop() }
        let setup = try E2EConfig(brokerURL: "mqtt://homemqtt:S3cretPW@127.0.0.1:\(broker.port)", extra: "")
        var yaml = try String(contentsOfFile: setup.configPath, encoding: .utf8)
        yaml = yaml.replacingOccurrences(of: "log-level: warning", with: "log-level: info")
        try yaml.write(toFile: setup.configPath, atomically: true, encoding: .utf8)
        let gateway = try await startGateway(setup, broker: broker)
        addTeardownBlock { await gateway.terminate(grace: 2) }
        let afterStart = gateway.standardError
        for (phase, figures) in [
            ("homemqtt starting", ["config=", "state-directory="]),
            ("loading accessory files", ["directory="]),
            ("home loaded", ["accessories=13"]),
            ("connecting to the broker", ["broker=127.0.0.1:\(broker.port)", "client-id=homemqtt-e2e"]),
            ("publishing the tree", ["accessories="]),
            ("gateway online", ["retained-topics="]),
        ] {
            let lines = afterStart.split(separator: "\n").filter { $0.hasSuffix(phase) || $0.contains("] \(phase)") }
            XCTAssertEqual(lines.count, 1, "'\(phase)' logged \(lines.count) times:\n\(afterStart)")
            for figure in figures {
                XCTAssertTrue(lines.first?.contains(figure) ?? false, "'\(phase)' without \(figure): \(lines)")
            }
        }
        XCTAssertFalse(afterStart.contains("S3cretPW"), "the password in the log:\n\(afterStart)")
        // The figure it gives is what the broker holds.
        let online = afterStart.split(separator: "\n").first { $0.contains("gateway online") } ?? ""
        let logged =
            online.split(separator: " ").first { $0.hasPrefix("retained-topics=") }.map {
                Int($0.dropFirst("retained-topics=".count))
            } ?? nil
        let heldTopics = try await retained(broker)
        let held = heldTopics.count
        print(
            "figure: start-up log says retained-topics=\(logged ?? -1); the broker holds \(held) retained topics under home/"
        )
        XCTAssertEqual(logged, held)
        // Sets and gets: answered, and not one more line at info.
        for value in 1...20 {
            try await runChecked(
                "mosquitto_pub",
                [
                    "-p", "\(broker.port)", "-t", "home/garage/garage-door-opener/garage-light/brightness/set", "-m",
                    "\(value * 5)",
                ])
        }
        let light = try await MQTTTestSubscriber.start(
            broker: broker, filter: "home/garage/garage-door-opener/garage-light/brightness/state",
            clientID: "light-watch")
        try await light.waitForMessage("brightness 100", timeout: 10) { $0.string == "100" }
        await light.stop()
        XCTAssertEqual(gateway.standardError, afterStart, "logged per message")
    }

    func retained(_ broker: MosquittoBroker) async throws -> [String: String] {
        try await broker.retainedSnapshot("home/#")
    }

    func testBinaryIsBuilt() throws {
        XCTAssertTrue(FileManager.default.isExecutableFile(atPath: Self.binary), "no homemqtt at \(Self.binary)")
    }

    // MARK: - run, set through mosquitto_pub, SIGTERM and SIGKILL

    func testRunServesTheHomeThenStopsCleanlyAndDiesWithItsWill() async throws {
        let broker = try await MosquittoBroker.start()
        addTeardownBlock { await broker.stop() }
        let setup = try E2EConfig(brokerURL: broker.url)
        let gateway = try await startGateway(setup, broker: broker)
        addTeardownBlock { await gateway.terminate(grace: 2) }

        let before = try await retained(broker)
        XCTAssertEqual(before["home/$gateway/status"], "online")
        XCTAssertEqual(before["\(door)/current-door-state/state"], "1", "closed at start")

        // mosquitto_sub follows the door; mosquitto_pub opens it.
        let filter = "home/garage/garage-door-opener/#"
        let sub = try ChildProcess("mosquitto_sub", broker.clientArguments + ["-v", "-t", filter])
        addTeardownBlock { await sub.terminate(grace: 1) }
        try await broker.waitForSubscription(to: filter)
        try await runChecked(
            "mosquitto_pub",
            broker.clientArguments + ["-t", "\(door)/target-door-state/set", "-m", #"{"value": "open", "id": "e2e"}"#])
        try await waitUntil("the set answered on result", timeout: 10) {
            sub.standardOutput.split(separator: "\n").contains {
                $0.hasPrefix("\(door)/target-door-state/result ") && $0.contains(#""id":"e2e""#)
            }
        }
        let result = try XCTUnwrap(
            sub.standardOutput.split(separator: "\n").first { $0.hasPrefix("\(door)/target-door-state/result ") })
        let answer = try JSONValue(parsing: String(result.dropFirst("\(door)/target-door-state/result ".count)))
        XCTAssertEqual(answer["status"], .string("ok"), "\(answer)")
        XCTAssertEqual(answer["value"], .int(0))
        try await waitUntil("current-door-state 2 (opening)", timeout: 10) {
            sub.standardOutput.split(separator: "\n").contains { $0 == "\(door)/current-door-state/state 2" }
        }

        // SIGTERM: `offline` from the gateway itself, exit 0.
        gateway.signal(SIGTERM)
        let status = try await gateway.waitForExit(timeout: 15)
        XCTAssertEqual(status, 0, gateway.standardError)
        XCTAssertFalse(
            gateway.standardError.contains("lost the broker"), "its own disconnect is no loss: \(gateway.standardError)"
        )
        let afterTerm = try await retained(broker)
        XCTAssertEqual(afterTerm["home/$gateway/status"], "offline")

        // SIGKILL: the broker publishes the will.
        let again = try await startGateway(setup, broker: broker)
        let restarted = try await retained(broker)
        XCTAssertEqual(restarted["home/$gateway/status"], "online")
        let watcher = try await MQTTTestSubscriber.start(
            broker: broker, filter: "home/$gateway/status", clientID: "will-watcher")
        addTeardownBlock { await watcher.stop() }
        again.signal(SIGKILL)
        try await watcher.waitForMessage("the will", timeout: 10) { !$0.retain && $0.string == "offline" }
        let afterKill = try await retained(broker)
        XCTAssertEqual(afterKill["home/$gateway/status"], "offline")
    }

    // MARK: - check-config, tree, topics

    func testCheckConfigTreeAndTopics() async throws {
        let setup = try E2EConfig(brokerURL: "mqtt://127.0.0.1:1")
        let ok = try await homemqtt(["check-config"], setup)
        XCTAssertEqual(ok.status, 0, ok.standardError)
        XCTAssertTrue(ok.standardOutput.hasPrefix("ok"), ok.standardOutput)

        // A bad key in the config: the file and the key are named.
        let badConfig = try E2EConfig(brokerURL: "mqtt://127.0.0.1:1", extra: "colour: red")
        let refused = try await homemqtt(["check-config"], badConfig)
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue(refused.standardError.contains(badConfig.configPath), refused.standardError)
        XCTAssertTrue(refused.standardError.contains("colour"), refused.standardError)

        // A bad accessory file: the file and the key are named.
        let accessories = try TemporaryDirectory(prefix: "homemqtt-e2e-accessories")
        let garage = try String(
            contentsOf: repositoryRoot.appendingPathComponent("Config/accessories/garage.yml"), encoding: .utf8)
        try (garage + "\nwattage: 40\n").write(
            toFile: accessories.file("garage.yml"), atomically: true, encoding: .utf8)
        let badFiles = try E2EConfig(brokerURL: "mqtt://127.0.0.1:1")
        try String(contentsOfFile: badFiles.configPath, encoding: .utf8)
            .replacingOccurrences(
                of: repositoryRoot.appendingPathComponent("Config/accessories").path, with: accessories.path
            )
            .write(toFile: badFiles.configPath, atomically: true, encoding: .utf8)
        let badAccessory = try await homemqtt(["check-config"], badFiles)
        XCTAssertNotEqual(badAccessory.status, 0)
        XCTAssertTrue(badAccessory.standardError.contains("garage.yml"), badAccessory.standardError)
        XCTAssertTrue(badAccessory.standardError.contains("wattage"), badAccessory.standardError)

        // tree, by room and by category, and topics.
        let tree = try await homemqtt(["tree"], setup)
        XCTAssertEqual(tree.status, 0, tree.standardError)
        let lines = tree.standardOutput.split(separator: "\n").map(String.init)
        let garageLine = try XCTUnwrap(lines.firstIndex(of: "Garage"), tree.standardOutput)
        XCTAssertTrue(
            lines[garageLine + 1].contains("Garage Door Opener")
                && lines[garageLine + 1].contains("home/garage/garage-door-opener"), tree.standardOutput)
        XCTAssertTrue(lines.contains { $0.contains("target-door-state = 1") }, tree.standardOutput)

        let byCategory = try await homemqtt(["tree", "--by", "category"], setup)
        XCTAssertEqual(byCategory.status, 0, byCategory.standardError)
        let categoryLines = byCategory.standardOutput.split(separator: "\n").map(String.init)
        let doorHeader = try XCTUnwrap(
            categoryLines.firstIndex { !$0.hasPrefix(" ") && $0.contains("garage") }, byCategory.standardOutput)
        XCTAssertTrue(
            categoryLines[doorHeader + 1].contains("Garage Door Opener")
                && categoryLines[doorHeader + 1].contains(", Garage "), byCategory.standardOutput)
        XCTAssertNotEqual(byCategory.standardOutput, tree.standardOutput)

        let topics = try await homemqtt(["topics"], setup)
        XCTAssertEqual(topics.status, 0, topics.standardError)
        let topicLines = Set(topics.standardOutput.split(separator: "\n").map(String.init))
        XCTAssertTrue(topicLines.contains("pub \(door)/target-door-state/state"))
        XCTAssertTrue(topicLines.contains("sub \(door)/target-door-state/set"))
        XCTAssertFalse(
            topicLines.contains("sub \(door)/current-door-state/set"), "a read-only characteristic has no set")
        XCTAssertTrue(topicLines.contains("pub home/$gateway/status"))
    }

    // MARK: - The home commands, through the gateway and on the state directory

    func testHomeCommandsThroughTheGatewayAndOffline() async throws {
        let broker = try await MosquittoBroker.start()
        addTeardownBlock { await broker.stop() }
        let setup = try E2EConfig(brokerURL: broker.url)
        let gateway = try await startGateway(setup, broker: broker)
        addTeardownBlock { await gateway.terminate(grace: 2) }
        let events = try await MQTTTestSubscriber.start(
            broker: broker, filter: "home/$gateway/event", clientID: "events")
        addTeardownBlock { await events.stop() }

        // Gateway up: through MQTT, with its events and topics.
        let added = try await homemqtt(["room", "add", "Workshop"], setup)
        XCTAssertEqual(added.status, 0, added.standardError)
        XCTAssertEqual(try JSONValue(parsing: added.standardOutput)["name"], .string("Workshop"))
        try await events.waitForMessage("room-added") {
            $0.string.contains("room-added") && $0.string.contains("Workshop")
        }

        let moved = try await homemqtt(["accessory", "move", "Garage Door Opener", "Workshop"], setup)
        XCTAssertEqual(moved.status, 0, moved.standardError)
        try await events.waitForMessage("accessory-moved") { $0.string.contains("accessory-moved") }
        try await waitUntil("topics under home/workshop") {
            let now = try await retained(broker)
            return now["home/workshop/garage-door-opener/garage-door/target-door-state/state"] == "1"
                && !now.keys.contains { $0.hasPrefix("home/garage/garage-door-opener/") }
        }

        let identify = try await homemqtt(["accessory", "identify", "Garage Door Opener"], setup)
        XCTAssertEqual(identify.status, 0, identify.standardError)
        let health = try await homemqtt(["health"], setup)
        XCTAssertEqual(health.status, 0, health.standardError)
        XCTAssertEqual(try JSONValue(parsing: health.standardOutput)["broker"]?["state"], .string("connected"))
        let republish = try await homemqtt(["republish"], setup)
        XCTAssertEqual(republish.status, 0, republish.standardError)
        let scope = try await homemqtt(["scope", "get"], setup)
        XCTAssertEqual(scope.status, 0, scope.standardError)
        XCTAssertEqual(try JSONValue(parsing: scope.standardOutput)["user-interactive-only"], .bool(true))

        // An error answer: non-zero, with the code and the message.
        let duplicate = try await homemqtt(["room", "add", "workshop"], setup)
        XCTAssertEqual(duplicate.status, 1)
        XCTAssertTrue(
            duplicate.standardError.contains("duplicate-name") && duplicate.standardError.contains("Workshop"),
            duplicate.standardError)
        let unknown = try await homemqtt(["accessory", "rename", "No Such Lamp", "X"], setup)
        XCTAssertEqual(unknown.status, 1)
        XCTAssertTrue(unknown.standardError.contains("unknown-accessory"), unknown.standardError)

        // Gateway down: on the state directory.
        gateway.signal(SIGTERM)
        let exit = try await gateway.waitForExit(timeout: 15)
        XCTAssertEqual(exit, 0, gateway.standardError)
        let renamedRoom = try await homemqtt(["room", "rename", "Workshop", "Shed"], setup)
        XCTAssertEqual(renamedRoom.status, 0, renamedRoom.standardError)
        XCTAssertTrue(renamedRoom.standardError.contains("not running"), renamedRoom.standardError)
        XCTAssertEqual(try JSONValue(parsing: renamedRoom.standardOutput)["old-name"], .string("Workshop"))
        let renamed = try await homemqtt(["accessory", "rename", "home/shed/garage-door-opener", "Big Door"], setup)
        XCTAssertEqual(renamed.status, 0, renamed.standardError)
        let scopeFile = setup.directory.file("scope.json")
        try #"{"manufacturers": {"deny": ["Thermal Dynamics Co."]}}"#.write(
            toFile: scopeFile, atomically: true, encoding: .utf8)
        let scoped = try await homemqtt(["scope", "set", scopeFile], setup)
        XCTAssertEqual(scoped.status, 0, scoped.standardError)
        // Commands run side by side take turns on the database: none is lost.
        async let attic = Self.homemqtt(["room", "add", "Attic"], setup)
        async let cellar = Self.homemqtt(["room", "add", "Cellar"], setup)
        async let loft = Self.homemqtt(["room", "add", "Loft"], setup)
        for result in try await [attic, cellar, loft] {
            XCTAssertEqual(result.status, 0, result.standardError)
        }
        let rooms = try String(contentsOfFile: setup.statePath + "/" + HomeDatabase.fileName, encoding: .utf8)
        XCTAssertTrue(["Attic", "Cellar", "Loft", "Shed"].allSatisfy { rooms.contains("\"\($0)\"") }, rooms)
        let offlineError = try await homemqtt(["room", "remove", "Default Room"], setup)
        XCTAssertEqual(offlineError.status, 1)
        XCTAssertTrue(offlineError.standardError.contains("default-room"), offlineError.standardError)
        for needsGateway in [["accessory", "identify", "Big Door"], ["health"], ["republish"]] {
            let refused = try await homemqtt(needsGateway, setup)
            XCTAssertEqual(refused.status, 1, needsGateway.joined(separator: " "))
            XCTAssertTrue(refused.standardError.contains("needs the running gateway"), refused.standardError)
        }
        let before = try await retained(broker)
        XCTAssertNotNil(before["home/workshop/garage-door-opener/$info"], "the topics wait for the gateway")

        // The next run shows the changes and clears the old topics.
        let next = try await startGateway(setup, broker: broker)
        addTeardownBlock { await next.terminate(grace: 2) }
        try await waitUntil("the offline changes on the topics") {
            let now = try await retained(broker)
            return now["home/shed/big-door/garage-door/target-door-state/state"] != nil
                && !now.keys.contains { $0.hasPrefix("home/workshop/") }
        }
        let after = try await retained(broker)
        XCTAssertFalse(
            after.keys.contains { $0.contains("thermostat") }, "the scope set offline applies: \(after.keys.sorted())")
        let info = try JSONValue(parsing: XCTUnwrap(after["home/shed/big-door/$info"]))
        XCTAssertEqual(info["name"], .string("Big Door"))
        XCTAssertEqual(info["room"], .string("Shed"))
    }

    /// A gateway that holds the state directory but has not reached its broker: the command
    /// says so instead of writing beside it.
    func testOfflineCommandRefusesWhileAGatewayHoldsTheStateDirectory() async throws {
        let setup = try E2EConfig(brokerURL: "mqtt://127.0.0.1:\(try freePort())")
        TestCensus.record(.binary)
        let gateway = try ChildProcess(Self.binary, ["run", "--config", setup.configPath])
        addTeardownBlock { await gateway.terminate(grace: 2) }
        try await waitUntil("the gateway took the lock") {
            FileManager.default.fileExists(atPath: setup.statePath + "/home.json")
        }
        let refused = try await homemqtt(["room", "add", "Attic"], setup)
        XCTAssertEqual(refused.status, 1)
        XCTAssertTrue(
            refused.standardError.contains("locked") && refused.standardError.contains("another homemqtt process"),
            refused.standardError)
        XCTAssertTrue(gateway.isRunning, "the gateway keeps retrying its broker")
        let home = try String(contentsOfFile: setup.statePath + "/home.json", encoding: .utf8)
        XCTAssertFalse(home.contains("Attic"))
    }
}
