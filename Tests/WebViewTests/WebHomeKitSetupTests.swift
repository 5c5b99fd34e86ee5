import Foundation
import Gateway
import HomeModel
import TestSupport
import XCTest

@testable import WebView

/// The HomeKit bridge's setup in the web view: the code and URI as JSON and the QR code as an
/// SVG image, which zbarimg reads as the URI; an administrator's only, as the code pairs a
/// controller with every accessory of the bridge. HomeKitBinaryTests keeps it through the
/// binary with a running bridge.
final class WebHomeKitSetupTests: XCTestCase {
    static let setup = HomeKitSetup(code: "031-45-154", uri: "X-HM://0023ISYWYHMQT")
    static let (alice, bob, gus) = ("alice-token-0123456789", "bob-token-0123456789", "gus-token-0123456789")

    static var yaml: String {
        func user(_ name: String, _ token: String, _ role: String) -> String {
            """
                - name: \(name)
                  token-sha256: \(AccessConfig.hex(AccessConfig.sha256(token)))
                  roles: { "*": \(role) }

            """
        }
        return "access:\n  users:\n" + user("alice", alice, "administrator") + user("bob", bob, "member")
            + user("gus", gus, "guest")
    }

    func testAnAdministratorGetsTheCodeAndAQRCodeThatReadsAsTheURI() async throws {
        let (setup, alice) = (Self.setup, Self.alice)
        try await WebRig.run(yaml: Self.yaml, homeKitSetup: { setup }) { web in
            let bearer = ["Authorization": "Bearer \(alice)"]
            let json = try await web.get("/api/homekit/setup", headers: bearer)
            XCTAssertEqual(json.status, 200, json.body)
            XCTAssertEqual(json.json?["code"], .string(setup.code))
            XCTAssertEqual(json.json?["uri"], .string(setup.uri))
            XCTAssertEqual(json.header("Cache-Control"), "no-store")

            let image = try await web.get("/api/homekit/setup.svg", headers: bearer)
            XCTAssertEqual(image.status, 200, image.body)
            XCTAssertEqual(image.header("Content-Type"), "image/svg+xml")
            XCTAssertEqual(image.header("Cache-Control"), "no-store")
            XCTAssertEqual(image.header("Content-Security-Policy"), "default-src 'none'; style-src 'unsafe-inline'")
            XCTAssertFalse(image.body.lowercased().contains("script"), image.body)
            let read = try await QRReader.decode(try QRReader.modules(svg: image.body))
            XCTAssertEqual(read, [setup.uri])
        }
    }

    func testAMemberAGuestAndNoTokenAreRefusedTheCode() async throws {
        let (setup, bob, gus) = (Self.setup, Self.bob, Self.gus)
        try await WebRig.run(yaml: Self.yaml, homeKitSetup: { setup }) { web in
            for path in ["/api/homekit/setup", "/api/homekit/setup.svg"] {
                let anonymous = try await web.get(path)
                XCTAssertEqual(anonymous.status, 401, "\(path): \(anonymous.body)")
                for (name, token) in [("bob", bob), ("gus", gus)] {
                    let answer = try await web.get(path, headers: ["Authorization": "Bearer \(token)"])
                    XCTAssertEqual(answer.status, 403, "\(name) \(path): \(answer.body)")
                    XCTAssertEqual(answer.json?["code"], .string("insufficient-privileges"), answer.body)
                    XCTAssertFalse(answer.body.contains(setup.code), answer.body)
                    XCTAssertFalse(answer.body.contains(setup.uri), answer.body)
                    XCTAssertFalse(answer.body.contains("<svg"), answer.body)
                }
            }
            // Nor does the home document or the session carry it.
            let home = try await web.get("/api/home", headers: ["Authorization": "Bearer \(gus)"])
            XCTAssertEqual(home.status, 200)
            XCTAssertFalse(home.body.contains(setup.code))
            XCTAssertFalse(home.body.contains("X-HM://"))
        }
    }

    func testWithoutARunningBridgeTheRouteSaysSo() async throws {
        let alice = Self.alice
        try await WebRig.run(yaml: Self.yaml) { web in
            for path in ["/api/homekit/setup", "/api/homekit/setup.svg"] {
                let answer = try await web.get(path, headers: ["Authorization": "Bearer \(alice)"])
                XCTAssertEqual(answer.status, 404, answer.body)
                XCTAssertEqual(answer.json?["code"], .string("unavailable"), answer.body)
                XCTAssertTrue(answer.body.contains("homekit.enabled"), answer.body)
            }
        }
    }
}
