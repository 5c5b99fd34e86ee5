import Foundation
import WebView
import XCTest

/// DNS rebinding: which `Host` names are loopback (the routes' refusals of the others, through
/// the binary, are in EndToEndTests' `WebHostTests`).
final class WebHostTests: XCTestCase {
    func testLoopbackIsTheLiteralNamesAndAddresses() {
        for host in ["localhost", "LOCALHOST", "127.0.0.1", "127.1.2.3", "127.255.255.255", "::1", "0:0:0:0:0:0:0:1"] {
            XCTAssertTrue(WebConfig.isLoopback(host), host)
        }
        for host in [
            "127.evil.example", "127.0.0.1.evil.example", "localhost.evil", "localhost.", "128.0.0.1", "0.0.0.0",
            "::", "::2", "::ffff:8.8.8.8", "1.127.0.0", "127.0.0.256", "evil.example", "",
        ] {
            XCTAssertFalse(WebConfig.isLoopback(host), host)
        }
    }
}
