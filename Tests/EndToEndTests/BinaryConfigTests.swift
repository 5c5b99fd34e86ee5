import Foundation
import TestSupport
import XCTest

/// The real `homemqtt` binary on configs that are wrong: every command says it the same way —
/// one plain line on stderr naming the file (and the key), nothing on stdout, exit code 2.
final class BinaryConfigTests: XCTestCase {
    var binary: String { BinaryEndToEndTests.binary }

    func homemqtt(_ arguments: [String], environment: [String: String]? = nil) async throws -> ProcessResult {
        try await runProcess(binary, arguments, timeout: 20, environment: environment)
    }

    func assertConfigFailure(
        _ result: ProcessResult, _ expected: String, _ what: String, file: StaticString = #filePath, line: UInt = #line
    ) {
        XCTAssertEqual(result.status, 2, "\(what): \(result.standardError)", file: file, line: line)
        XCTAssertEqual(result.standardOutput, "", what, file: file, line: line)
        XCTAssertEqual(result.standardError, "homemqtt: \(expected)\n", what, file: file, line: line)
    }

    func testUnusableConfigFilesArePlainOneLineErrorsWithExitCode2() async throws {
        let directory = try TemporaryDirectory(prefix: "homemqtt-badconfig")
        let badKey = directory.file("gateway.yml")
        try "base-topic: home\ncolour: red\n".write(toFile: badKey, atomically: true, encoding: .utf8)
        let blank = directory.file("blank.yml")
        try "\n  \n".write(toFile: blank, atomically: true, encoding: .utf8)
        let missing = directory.file("missing.yml")
        let cases: [(path: String, expected: String)] = [
            ("/dev/null", "/dev/null: the file is empty"),
            (blank, "\(blank): the file is empty"),
            (directory.path, "\(directory.path): is a directory, not a config file"),
            (missing, "\(missing): no such file"),
            (
                badKey,
                "\(badKey): colour: unknown key; allowed here: broker, base-topic, state-directory, poll-interval, request-timeout, health-interval, last-seen-interval, tree-page-size, scope, sources, accessory-state, homeassistant, homie, web, access, homekit, log-level"
            ),
        ]
        for (path, expected) in cases {
            // check-config and run: the same line, the same code (run stops before any broker).
            for command in ["check-config", "run"] {
                let result = try await homemqtt([command, "--config", path])
                assertConfigFailure(result, expected, "\(command) --config \(path)")
            }
        }
        // The other commands load the config the same way.
        for command in [["tree"], ["topics"], ["pairings"], ["room", "add", "Attic"]] {
            let result = try await homemqtt(command + ["--config", "/dev/null"])
            assertConfigFailure(result, "/dev/null: the file is empty", command.joined(separator: " "))
        }
    }

    /// A file the user may not read. Root reads any file, so as root the binary runs as
    /// `nobody` (util-linux `setpriv`); as anyone else the file's mode is enough.
    func testUnreadableConfigIsPermissionDenied() async throws {
        let directory = try TemporaryDirectory(prefix: "homemqtt-badconfig")
        chmod(directory.path, 0o755)
        let path = directory.file("gateway.yml")
        try "base-topic: home\n".write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, geteuid() == 0 ? 0o600 : 0)
        // A copy nobody can run: the build directory may sit under a home only root may enter.
        let runnable = directory.file("homemqtt")
        try FileManager.default.copyItem(atPath: binary, toPath: runnable)
        chmod(runnable, 0o755)
        for command in ["check-config", "run"] {
            let arguments = [command, "--config", path]
            let result =
                geteuid() == 0
                ? try await runProcess(
                    "setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", runnable] + arguments)
                : try await homemqtt(arguments)
            assertConfigFailure(result, "\(path): permission denied", command)
        }
    }

    /// A YAML syntax error is one line too, with its position, and without the line of the
    /// file that Yams would quote (it may hold a password).
    func testYAMLSyntaxErrorIsOneLineWithItsPosition() async throws {
        let directory = try TemporaryDirectory(prefix: "homemqtt-badconfig")
        let path = directory.file("gateway.yml")
        try "broker:\n  url: mqtt://homemqtt:S3cretPW@127.0.0.1:1883\n  client-id: [unclosed\n".write(
            toFile: path, atomically: true, encoding: .utf8)
        let result = try await homemqtt(["check-config", "--config", path])
        XCTAssertEqual(result.status, 2, result.standardError)
        XCTAssertEqual(result.standardError.filter { $0 == "\n" }.count, 1, result.standardError)
        XCTAssertTrue(
            result.standardError.hasPrefix("homemqtt: \(path): not valid YAML at line "), result.standardError)
        XCTAssertFalse(result.standardError.contains("S3cretPW"), result.standardError)
    }
}

extension BinaryConfigTests {
    /// Through the binary, from the file and from the environment: the password is masked.
    func testBrokerPasswordIsMaskedInTheError() async throws {
        let directory = try TemporaryDirectory(prefix: "homemqtt-badconfig")
        let path = directory.file("gateway.yml")
        let url = "mqtt://homemqtt:S3cretPW@127.0.0.1:99999"
        try "broker:\n  url: \(url)\n".write(toFile: path, atomically: true, encoding: .utf8)
        for command in ["check-config", "run"] {
            let result = try await homemqtt([command, "--config", path])
            assertConfigFailure(
                result, "\(path): broker.url: port 99999 in 'mqtt://homemqtt:***@127.0.0.1:99999' is out of range",
                command)
        }
        try "base-topic: home\n".write(toFile: path, atomically: true, encoding: .utf8)
        let fromEnvironment = try await homemqtt(
            ["check-config", "--config", path], environment: ["HOMEMQTT_BROKER_URL": url])
        assertConfigFailure(
            fromEnvironment,
            "\(path): HOMEMQTT_BROKER_URL: port 99999 in 'mqtt://homemqtt:***@127.0.0.1:99999' is out of range",
            "environment")
    }
}

extension BinaryConfigTests {
    /// What Foundation used to word ("The file doesn't exist", "isn't in the correct format"):
    /// a simulator directory that is not there, and bytes that are not YAML text in the config
    /// or in an accessory file. Each is one line naming the file (and the key), with exit 2,
    /// and no byte of the file reaches the terminal raw.
    /// `run` logs its start before the accessory files load (they load as a service of the
    /// group): the error is its last line, with the same exit code.
    func assertFails(
        _ command: String, _ config: String, _ expected: String, file: StaticString = #filePath, line: UInt = #line
    ) async throws {
        let result = try await homemqtt([command, "--config", config])
        guard command == "run" else {
            assertConfigFailure(result, expected, command, file: file, line: line)
            return
        }
        XCTAssertEqual(result.status, 2, result.standardError, file: file, line: line)
        let last = result.standardError.split(separator: "\n").last.map(String.init)
        XCTAssertEqual(last, "homemqtt: \(expected)", result.standardError, file: file, line: line)
    }

    func testMissingDirectoryAndGarbageBytesNameTheFileAndKey() async throws {
        let directory = try TemporaryDirectory(prefix: "homemqtt-badconfig")
        let config = directory.file("gateway.yml")
        let missing = directory.file("no-such-accessories")
        try "sources:\n  - type: simulator\n    directory: \(missing)\n".write(
            toFile: config, atomically: true, encoding: .utf8)
        for command in ["check-config", "run", "tree"] {
            try await assertFails(command, config, "\(config): sources[0].directory: \(missing): no such directory")
        }

        // A config of garbage: latin-1 text, then a binary (an ELF header with its NUL).
        try Data(Array("base-topic: caf".utf8) + [0xE9, 0x0A]).write(to: URL(fileURLWithPath: config))
        assertConfigFailure(
            try await homemqtt(["check-config", "--config", config]),
            "\(config): is not UTF-8 text: byte 0xE9 at line 1, column 16", "latin-1 config")
        try Data([0x7F, 0x45, 0x4C, 0x46, 0x02, 0x01, 0x01, 0x00, 0x1B, 0x5D]).write(to: URL(fileURLWithPath: config))
        for command in ["check-config", "run"] {
            assertConfigFailure(
                try await homemqtt([command, "--config", config]),
                "\(config): holds the control character U+007F at line 1, column 1: not YAML text (a binary file?)",
                command)
        }

        // An accessory file with a NUL and an escape sequence in a name, and one in latin-1.
        let accessories = directory.file("accessories")
        try FileManager.default.createDirectory(atPath: accessories, withIntermediateDirectories: true)
        try "sources:\n  - type: simulator\n    directory: accessories\n".write(
            toFile: config, atomically: true, encoding: .utf8)
        let lamp = accessories + "/lamp.yml"
        try Data(Array("name: Lamp\nservices: []\nmodel: \u{1B}]0;pwned\u{7}x\u{0}y\n".utf8)).write(
            to: URL(fileURLWithPath: lamp))
        for command in ["check-config", "run"] {
            try await assertFails(
                command, config,
                "\(lamp): holds the control character U+001B at line 3, column 8: not YAML text (a binary file?)")
        }
        try Data(Array("name: Caf".utf8) + [0xE9] + Array("\nservices: []\n".utf8)).write(
            to: URL(fileURLWithPath: lamp))
        assertConfigFailure(
            try await homemqtt(["check-config", "--config", config]),
            "\(lamp): is not UTF-8 text: byte 0xE9 at line 1, column 10", "latin-1 accessory file")
    }
}

/// A scope entry that matches nothing is reported, naming its key; the quoted form works.
final class ScopeWarningTests: XCTestCase {
    func testAnEntrySplitAtItsCommaIsReportedAndTheQuotedFormDenies() async throws {
        let dir = try TemporaryDirectory(prefix: "homemqtt-scope-warn")
        let accessories = repositoryRoot.appendingPathComponent("Config/accessories").path
        func check(_ scope: String) async throws -> ProcessResult {
            let config = dir.file("gateway.yml")
            try """
            state-directory: state
            sources: [{ type: simulator, directory: "\(accessories)" }]
            scope:
            \(scope)
            """.write(toFile: config, atomically: true, encoding: .utf8)
            return try await runProcess(BinaryEndToEndTests.binary, ["check-config", "--config", config])
        }
        let split = try await check("  manufacturers: { deny: [Kilgo Devices, Inc.] }\n  rooms: { deny: [Attic] }")
        XCTAssertEqual(split.status, 0, split.standardError)
        XCTAssertTrue(
            split.standardError.contains(
                "scope.manufacturers.deny: 'Kilgo Devices' matches no accessory's manufacturer"), split.standardError)
        XCTAssertTrue(split.standardError.contains("scope.manufacturers.deny: 'Inc.' matches no"), split.standardError)
        XCTAssertTrue(split.standardError.contains("scope.rooms.deny: 'Attic' matches no room"), split.standardError)
        XCTAssertTrue(split.standardOutput.contains("13 accessories"), split.standardOutput)

        let quoted = try await check(
            "  manufacturers: { deny: [\"Kilgo Devices, Inc.\"] }\n  rooms: { deny: [Garage] }")
        XCTAssertEqual(quoted.status, 0, quoted.standardError)
        XCTAssertFalse(quoted.standardError.contains("matches no"), quoted.standardError)
        XCTAssertTrue(quoted.standardOutput.contains("12 accessories"), quoted.standardOutput)
    }
}
