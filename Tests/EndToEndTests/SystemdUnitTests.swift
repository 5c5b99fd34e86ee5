import HomeMQTTApp
import Foundation
import Gateway
import TestSupport
import XCTest

/// `Examples/homemqtt.service` as installed: the paths it gives resolve where the sandbox lets
/// the gateway write, systemd accepts the unit, and the binary works under its sandboxing.
final class SystemdUnitTests: XCTestCase {
    static let unitPath = repositoryRoot.appendingPathComponent("Examples/homemqtt.service").path

    /// The `[Service]` settings of the unit (the last of a repeated key wins, as in systemd).
    struct Unit {
        var service: [String: String] = [:]

        init(path: String) throws {
            var section = ""
            for raw in try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n") {
                let line = raw.trimmingCharacters(in: .whitespaces)
                if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
                if line.hasPrefix("[") { section = line; continue }
                guard section == "[Service]", let equals = line.firstIndex(of: "=") else { continue }
                service[String(line[..<equals])] = String(line[line.index(after: equals)...])
            }
        }

        /// ExecStart's words (the unit quotes nothing).
        var execStart: [String] { (service["ExecStart"] ?? "").split(separator: " ").map(String.init) }

        /// The value after `--config` on ExecStart.
        var configPath: String? {
            guard let index = execStart.firstIndex(of: "--config"), index + 1 < execStart.count else { return nil }
            return execStart[index + 1]
        }

        /// `$STATE_DIRECTORY` as systemd sets it: `/var/lib/<entry>` per `StateDirectory=` entry, joined by ':'.
        var stateDirectoryEnvironment: String {
            (service["StateDirectory"] ?? "").split(separator: " ").map { "/var/lib/\($0)" }.joined(separator: ":")
        }
    }

    /// The shipped config at the unit's config path, with `$STATE_DIRECTORY` as systemd sets it:
    /// the state goes to /var/lib/homemqtt, the one directory ProtectSystem=strict leaves
    /// writable, and not to the config's `../.homemqtt` (/etc/.homemqtt, read-only there).
    func testInstalledStateDirectoryResolvesUnderVarLib() throws {
        let unit = try Unit(path: Self.unitPath)
        XCTAssertEqual(unit.service["ProtectSystem"], "strict")
        let stateName = try XCTUnwrap(unit.service["StateDirectory"])
        XCTAssertEqual(unit.service["StateDirectoryMode"], "0700", "the state directory is the service's alone")
        // Set, and above systemd's default 1024: room for the web view's connections beside the
        // descriptors the broker, HAP and the state files need.
        let descriptors = try XCTUnwrap(unit.service["LimitNOFILE"].flatMap { Int($0) })
        XCTAssertGreaterThan(descriptors, 1024, "LimitNOFILE")
        XCTAssertEqual(unit.execStart.first, "/usr/local/bin/homemqtt")
        XCTAssertEqual(unit.execStart.dropFirst().first, "run")
        let configPath = try XCTUnwrap(unit.configPath)
        XCTAssertEqual(configPath, "/etc/homemqtt/gateway.yml")

        let shipped = try String(
            contentsOf: repositoryRoot.appendingPathComponent("Config/gateway.yml"), encoding: .utf8)
        let withoutSystemd = try HomeMQTTApp.parseConfig(shipped, file: configPath, environment: [:])
        XCTAssertEqual(
            withoutSystemd.stateDirectory, "/etc/homemqtt/../.homemqtt",
            "what the config alone gives: read-only under the unit")

        let installed = try HomeMQTTApp.parseConfig(
            shipped, file: configPath, environment: ["STATE_DIRECTORY": unit.stateDirectoryEnvironment])
        XCTAssertEqual(installed.stateDirectory, "/var/lib/\(stateName)")
        XCTAssertEqual(installed.stateDirectorySource, .environment)
        // Everything else the config names is read beside it, in what the install copies there.
        XCTAssertEqual(installed.sources, [.simulator(directory: "/etc/homemqtt/accessories")])
        XCTAssertTrue(
            FileManager.default.fileExists(atPath: repositoryRoot.appendingPathComponent("Config/accessories").path))
    }

    /// `systemd-analyze verify` on the unit, with ExecStart's binary at the built one (the
    /// unit's /usr/local/bin/homemqtt is not installed here, and verify insists it exist).
    /// Scripts/bootstrap.sh installs systemd-analyze.
    func testSystemdAnalyzeVerifyAcceptsTheUnit() async throws {
        let directory = try TemporaryDirectory(prefix: "homemqtt-unit")
        let unitText = try String(contentsOfFile: Self.unitPath, encoding: .utf8)
        XCTAssertTrue(unitText.contains("ExecStart=/usr/local/bin/homemqtt "))
        let copy = directory.file("homemqtt.service")
        try unitText.replacingOccurrences(
            of: "ExecStart=/usr/local/bin/homemqtt ", with: "ExecStart=\(BinaryEndToEndTests.binary) "
        )
        .write(toFile: copy, atomically: true, encoding: .utf8)
        let result = try await runProcess("systemd-analyze", ["verify", "--man=no", copy], timeout: 30)
        XCTAssertEqual(result.status, 0, result.standardError)
        XCTAssertEqual(result.standardError, "", "no warnings either")
    }

    /// The binary as the unit runs it: the config and its accessory files in a read-only
    /// /etc/homemqtt (a bind mount in a mount namespace of its own, read-only even for root, as
    /// ProtectSystem=strict makes it), `$STATE_DIRECTORY` at /var/lib/homemqtt made 0700 as
    /// systemd makes it. The gateway comes online and keeps its home there, 0600.
    func testTheBinaryRunsWithTheUnitsPathsAndReadOnlyConfig() async throws {
        let unit = try Unit(path: Self.unitPath)
        let root = try TemporaryDirectory(prefix: "homemqtt-sandbox")
        let etc = root.file("etc")
        let configDirectory = etc + "/homemqtt"
        let state = root.file("var/lib/\(try XCTUnwrap(unit.service["StateDirectory"]))")
        let fm = FileManager.default
        try fm.createDirectory(atPath: configDirectory, withIntermediateDirectories: true)
        try fm.copyItem(
            atPath: repositoryRoot.appendingPathComponent("Config/gateway.yml").path,
            toPath: configDirectory + "/gateway.yml")
        try fm.copyItem(
            atPath: repositoryRoot.appendingPathComponent("Config/accessories").path,
            toPath: configDirectory + "/accessories")
        try fm.createDirectory(atPath: state, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let broker = try await MosquittoBroker.start()
        addTeardownBlock { await broker.stop() }
        let status = try await MQTTTestSubscriber.start(
            broker: broker, filter: "home/$gateway/status", clientID: "sandbox-watch")
        addTeardownBlock { await status.stop() }

        let script = """
            mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" || exit 97
            touch "$1/probe" 2>/dev/null && exit 98
            exec "$2" run --config "$3"
            """
        TestCensus.record(.binary)
        let gateway = try ChildProcess(
            "unshare",
            ["--mount", "sh", "-c", script, "sh", etc, BinaryEndToEndTests.binary, configDirectory + "/gateway.yml"],
            environment: ["STATE_DIRECTORY": state, "HOMEMQTT_BROKER_URL": "mqtt://127.0.0.1:\(broker.port)"])
        addTeardownBlock { await gateway.terminate(grace: 2) }
        do {
            try await status.waitForMessage("online", timeout: 20) { $0.string == "online" }
        } catch {
            XCTFail(
                "not online under the sandbox (exit \(gateway.exitStatus.map(String.init) ?? "none")): \(gateway.standardError)"
            )
            throw error
        }
        gateway.signal(SIGTERM)
        let exit = try await gateway.waitForExit(timeout: 10)
        XCTAssertEqual(exit, 0, gateway.standardError)
        XCTAssertTrue(gateway.standardError.contains("state-directory=\(state)"), gateway.standardError)
        let home = state + "/home.json"
        XCTAssertTrue(fm.fileExists(atPath: home), "no home database in \(state): \(root.entries())")
        let mode = (try fm.attributesOfItem(atPath: home)[.posixPermissions] as? NSNumber)?.intValue
        XCTAssertEqual(mode, 0o600, "home.json mode \(String(mode ?? 0, radix: 8))")
        let directoryMode = (try fm.attributesOfItem(atPath: state)[.posixPermissions] as? NSNumber)?.intValue
        XCTAssertEqual(directoryMode, 0o700)
        XCTAssertFalse(fm.fileExists(atPath: etc + "/.homemqtt"), "wrote beside the config")
        print(
            "figure: under a read-only /etc the gateway came online and kept its home in \(state) (0\(String(mode ?? 0, radix: 8)))"
        )
    }
}
