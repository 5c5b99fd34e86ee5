import Foundation
import Gateway
import TestSupport
import XCTest

/// Loading a config file: what each unusable file is called, in words and in a code.
final class GatewayConfigLoadTests: XCTestCase {
    func loadError(_ path: String) -> ConfigError? {
        do {
            _ = try GatewayConfig.load(file: path, environment: [:])
            return nil
        } catch {
            return error
        }
    }

    func testUnusableFilesAreNamedInPlainWords() throws {
        let directory = try TemporaryDirectory(prefix: "homemqtt-config")
        let blank = directory.file("blank.yml")
        try " \n\t\n".write(toFile: blank, atomically: true, encoding: .utf8)
        let latin1 = directory.file("latin1.yml")
        try Data([0x62, 0x61, 0x73, 0x65, 0x2D, 0x74, 0x6F, 0x70, 0x69, 0x63, 0x3A, 0x20, 0xE9, 0x0A]).write(to: URL(fileURLWithPath: latin1))
        let cases: [(String, ConfigError.Code, String)] = [
            ("/dev/null", .empty, "/dev/null: the file is empty"),
            (blank, .empty, "\(blank): the file is empty"),
            (directory.path, .isDirectory, "\(directory.path): is a directory, not a config file"),
            (directory.file("missing.yml"), .notFound, "\(directory.file("missing.yml")): no such file"),
            (directory.file("missing/gateway.yml"), .notFound, "\(directory.file("missing/gateway.yml")): no such file"),
            (latin1, .unreadable, "\(latin1): is not UTF-8 text"),
        ]
        for (path, code, text) in cases {
            let error = try XCTUnwrap(loadError(path), path)
            XCTAssertEqual(error.code, code, path)
            XCTAssertEqual(error.file, path)
            XCTAssertNil(error.key)
            XCTAssertEqual(error.description, text)
        }
    }

    /// Comments only is a config that keeps every default, not an empty file.
    func testCommentsOnlyKeepsTheDefaults() throws {
        let directory = try TemporaryDirectory(prefix: "homemqtt-config")
        let path = directory.file("gateway.yml")
        try "# everything as it comes\n".write(toFile: path, atomically: true, encoding: .utf8)
        let config = try GatewayConfig.load(file: path, environment: [:])
        XCTAssertEqual(config.baseTopic, "home")
    }

    func testKeyProblemsHaveCodes() throws {
        func code(_ text: String) -> ConfigError.Code? {
            do { _ = try GatewayConfig.parse(text, file: "gw.yml"); return nil } catch { return error.code }
        }
        XCTAssertEqual(code("colour: red\n"), .unknownKey)
        XCTAssertEqual(code("poll-interval: soon\n"), .invalidValue)
        XCTAssertEqual(code("key: [unclosed\n"), .invalidYAML)
    }

    func testYAMLSyntaxErrorIsOneLine() {
        XCTAssertThrowsError(try GatewayConfig.parse("base-topic: home\nkey: [unclosed\n", file: "gw.yml")) { error in
            let description = "\(error)"
            XCTAssertFalse(description.contains("\n"), description)
            XCTAssertTrue(description.hasPrefix("gw.yml: not valid YAML at line "), description)
        }
    }
}
