import Foundation
import HomeModel
import Simulator
import TestSupport
import XCTest

@testable import Gateway
@testable import HomeAssistant
@testable import HomeAssistantTestSupport

/// What Home Assistant sends on a command topic (`HACommands`), and what the gateway's `set` answers to it.
extension HomeAssistantCommandsTests {
    static func isCommand(_ option: String) -> Bool { HACommands.isCommand(option) }

    /// The values a command sets, as the gateway's `set` (or `$set`) takes it: accepted whole
    /// (`refusal`), then each field of `service` (of a `$set` document) or the one
    /// characteristic, parsed by the gateway's own `parseSet` against `node(slug)`.
    static func accepted(
        _ payload: String, topic: String, service: String, tree: TopicTree,
        node: (String) throws -> TopicTree.CharacteristicNode
    ) throws -> [String: CharacteristicValue] {
        XCTAssertNil(refusal(payload, topic: topic, tree: tree), payload)
        var fields: [String: String] = [:]
        if topic.hasSuffix("/$set") {
            let document = try JSONValue(parsing: Array(payload.utf8))
            for (key, value) in document[service]?.objectValue ?? [:] { fields[key] = value.encoded() }
        } else {
            fields[try XCTUnwrap(tree.characteristic(topic: String(topic.dropLast("/set".count)))).slug] = payload
        }
        var values: [String: CharacteristicValue] = [:]
        for (slug, text) in fields {
            guard case .success(let (value, _)) = Gateway.parseSet(Array(text.utf8), node: try node(slug)) else {
                XCTFail("\(slug) refused \(text)")
                continue
            }
            values[slug] = value
        }
        return values
    }

    /// Why the gateway refuses `payload` on `topic`, or nil when it answers `ok`.
    static func refusal(_ payload: String, topic: String, tree: TopicTree) -> String? {
        if topic.hasSuffix("/$set") {
            let path = String(topic.dropLast("/$set".count))
            guard let accessory = tree.accessories.first(where: { $0.topic == path }) else { return "no accessory" }
            guard case .object(let document)? = try? JSONValue(parsing: Array(payload.utf8)), !document.isEmpty else {
                return "not a $set document"
            }
            for (serviceKey, fields) in document {
                guard let service = try? accessory.service(named: serviceKey), let values = fields.objectValue else {
                    return "no service \(serviceKey)"
                }
                for (key, raw) in values {
                    guard let node = service.characteristics.first(where: { $0.slug == key }) else {
                        return "no characteristic \(key)"
                    }
                    let text = raw.stringValue ?? raw.encoded()
                    if case .failure(let failure) = Gateway.parseSet(Array(text.utf8), node: node) {
                        return "\(key): \(failure.message)"
                    }
                }
            }
            return nil
        }
        guard topic.hasSuffix("/set"), let node = tree.characteristic(topic: String(topic.dropLast("/set".count)))
        else { return "not a set topic" }
        if case .failure(let failure) = Gateway.parseSet(Array(payload.utf8), node: node) { return failure.message }
        return nil
    }

    typealias Variables = HACommands.Variables

    static func commands(platform: String, option: String, _ c: Config) throws -> [Variables] {
        try HACommands.commands(platform: platform, option: option, c)
    }
}
