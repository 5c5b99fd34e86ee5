import Foundation
import TestSupport
import XCTest

/// What the `homemqtt` binary says about a bad `web:` section (the section itself is read in
/// WebViewTests' `WebConfigTests`).
final class WebConfigBinaryTests: XCTestCase {
    /// `homemqtt run` and `check-config` refuse a token-less web view off loopback with exit 2,
    /// naming the file and key, before anything starts.
    func testBinaryRefusesTokenlessNetworkListenWithExit2() async throws {
        let directory = try TemporaryDirectory(prefix: "homemqtt-web-config")
        let config = directory.file("gateway.yml")
        try """
        sources:
          - type: simulator
            directory: \(repositoryRoot.appendingPathComponent("Config/accessories").path)
        web:
          enabled: true
          listen: 0.0.0.0:8080
        """.write(toFile: config, atomically: true, encoding: .utf8)
        for command in ["run", "check-config"] {
            let result = try await runProcess(homemqttBinary, [command, "--config", config], timeout: 20)
            XCTAssertEqual(result.status, 2, "\(command): \(result.standardError)")
            XCTAssertTrue(
                result.standardError.contains("\(config): web.token: required"), "\(command): \(result.standardError)")
        }
    }
}
