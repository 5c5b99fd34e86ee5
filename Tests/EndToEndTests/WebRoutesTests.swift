import Foundation
import HomeModel
import TestSupport
import WebTestSupport
import XCTest

/// The web view through the real binary on a real broker: a `Host` name of another site refused,
/// and the stop with the gateway (SIGTERM, exit 0). What each route serves and refuses, the
/// token and `/healthz` are tested in process (WebViewTests' `WebRoutesInProcessTests`).
final class WebRoutesTests: XCTestCase {
    let light = "home/garage/garage-door-opener/garage-light"

    /// Without a token the web view answers only to loopback names, and never to a page of
    /// another site: any web page the user visits could otherwise reach 127.0.0.1.
    func testOtherSitesAndForeignHostNamesAreRefused() async throws {
        let web = try await WebGateway.start()
        addTeardownBlock { await web.stopAll() }
        let body = #"{"topic": "\#(light)/$toggle", "payload": ""}"#
        let crossSite = try await HTTP.request(
            "POST", web.url + "/api/request", headers: ["Origin": "https://evil.example"], body: body)
        XCTAssertEqual(crossSite.status, 403)
        XCTAssertEqual(crossSite.json?["code"], "forbidden-origin")
        let rebound = try await HTTP.request(
            "POST", web.url + "/api/request", headers: ["Host": "evil.example:\(web.port)"], body: body)
        XCTAssertEqual(rebound.status, 403)
        let sameSite = try await HTTP.request(
            "POST", web.url + "/api/request", headers: ["Origin": web.url], body: body)
        XCTAssertEqual(sameSite.json?.value(at: "answer", "status"), "ok", sameSite.body)
    }

    /// The web view is a service of the gateway's group: SIGTERM stops both, with exit 0.
    func testStopsWithTheGateway() async throws {
        let web = try await WebGateway.start()
        addTeardownBlock { await web.broker.stop() }
        let page = try await PageClient.connect("ws://127.0.0.1:\(web.port)/ws")
        let start = ContinuousClock.now
        let status = await web.stop()
        XCTAssertEqual(status, 0, web.log)
        XCTAssertLessThan(ContinuousClock.now - start, .seconds(5), "stopping took too long with a page open")
        try await waitUntil("the page's socket to close") { page.ending.withLock { $0 } != nil }
        let after = try? await HTTP.get(web.url + "/healthz")
        XCTAssertNil(after, "still answering after the gateway stopped")
    }
}
