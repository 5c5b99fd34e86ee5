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
                "\(badKey): colour: unknown key; allowed here: broker, base-topic, state-directory, poll-interval, request-timeout, scope, sources, homeassistant, homie, accessory-state, web, access, log-level"
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
