import HomeMQTTApp
import Foundation
import Gateway
import HomeModel
import TestSupport
import WebView
import XCTest

/// DNS rebinding: a listen address that looks loopback but is a name needs a token, and the
/// binary's `check-config` says so (its exit status and standard error are the binary's own).
/// The routes' refusals of foreign `Host` names moved to WebViewTests' `WebHostServedTests`,
/// served in process on real sockets.
final class WebHostTests: XCTestCase {
    /// `web.listen: 127.attacker.example:8080` is a name, not loopback: it needs a token, and
    /// `check-config` says so naming the file and key.
    func testListenOnANameThatLooksLoopbackNeedsAToken() async throws {
        for listen in ["127.attacker.example:8080", "localhost.attacker.example:8080"] {
            XCTAssertThrowsError(
                try HomeMQTTApp.parseConfig("web:\n  enabled: true\n  listen: \(listen)\n", file: "/etc/g.yml")
            ) { error in
                XCTAssertEqual((error as? ConfigError)?.key, "web.token", listen)
            }
        }
        let directory = try TemporaryDirectory(prefix: "homemqtt-web-host")
        let config = directory.file("gateway.yml")
        try """
        sources:
          - type: simulator
            directory: \(repositoryRoot.appendingPathComponent("Config/accessories").path)
        web:
          enabled: true
          listen: 127.attacker.example:8080
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let result = try await runProcess(homemqttBinary, ["check-config", "--config", config], timeout: 20)
        XCTAssertEqual(result.status, 2, result.standardError)
        XCTAssertTrue(result.standardError.contains("\(config): web.token: required"), result.standardError)
        XCTAssertTrue(result.standardError.contains("127.attacker.example:8080"), result.standardError)
    }
}
