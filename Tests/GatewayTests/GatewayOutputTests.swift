import Foundation
import Gateway
import HomeModel
import MQTT
import TestSupport
import TopicAPI
import XCTest

/// The smallest output: one retained document per accessory, its number of services on
/// `<accessory>/$services`, written against `GatewayOutput`'s public hooks only (this file
/// imports Gateway without `@testable`). What the gateway does for every output — record,
/// publish, clear, republish, refuse as a request — it must do for this one.
final class ServiceCountOutput: GatewayOutput {
    var accessoryDocuments: [String] { ["$services"] }

    func publishDocuments(of node: TopicTree.AccessoryNode, _ gateway: isolated Gateway) -> [String] {
        let (topic, payload) = document(node)
        gateway.publishRetained(topic, payload)
        return [topic]
    }

    func republication(of node: TopicTree.AccessoryNode, _ gateway: isolated Gateway) -> [(String, [UInt8])] {
        [document(node)]
    }

    private func document(_ node: TopicTree.AccessoryNode) -> (String, [UInt8]) {
        (node.topic + "/$services", Array("\(node.services.count)".utf8))
    }
}

final class GatewayOutputTests: XCTestCase {
    let garage = "home/garage/garage-door-opener"

    func testAnOutputsDocumentsArePublishedRepublishedAndNeverTakenAsRequests() async throws {
        try await InProcessGateway.run(outputs: { _ in [ServiceCountOutput(), TopicRequests()] }) { gw in
            let retained = gw.broker.retainedText()
            let documents = retained.filter { $0.key.hasSuffix("/$services") }
            let accessories = retained.keys.filter { $0.hasSuffix("/$info") }
            XCTAssertEqual(documents.count, accessories.count, "one document per accessory")
            XCTAssertFalse(documents.isEmpty)
            let services = try XCTUnwrap(Int(try XCTUnwrap(documents["\(garage)/$services"])))
            XCTAssertGreaterThan(services, 0)
            // No other output's document, since only this one was given (and the topic dialect,
            // which publishes none: it answers requests).
            XCTAssertFalse(retained.keys.contains { $0.hasSuffix("/$state") })

            // Its level is the gateway's output, not a request, for an in-process caller too.
            let refused = await gw.gateway.request(topic: "\(garage)/$services", payload: Array("1".utf8))
            XCTAssertEqual(refused["code"], "unknown-topic")

            // After a reconnect it is published again with the rest.
            gw.transport.loseConnection()
            gw.seen.clear()
            gw.transport.connect()
            try await gw.next("\(garage)/$services") { $0 == "\(services)" }
            try await gw.next("home/$gateway/status") { $0 == "online" }
        }
    }

    func testAnOutputsDocumentIsClearedWhenItsAccessoryLeavesScope() async throws {
        try await InProcessGateway.run(outputs: { _ in [ServiceCountOutput(), TopicRequests()] }) { gw in
            XCTAssertNotNil(gw.broker.retainedText()["\(garage)/$services"])
            gw.seen.clear()
            let answer = try await gw.request(
                "home/$gateway/request/scope/set", #"{"scope": {"accessories": {"deny": ["Garage Door Opener"]}}}"#,
                answer: "home/$gateway/response/scope/set")
            XCTAssertEqual(answer["status"], "ok", "\(answer)")
            try await gw.next("\(garage)/$services") { $0.isEmpty }
            XCTAssertNil(gw.broker.retainedText()["\(garage)/$services"])
        }
    }
}
