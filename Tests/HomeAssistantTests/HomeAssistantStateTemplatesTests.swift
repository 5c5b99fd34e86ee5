import Foundation
import HomeModel
import TestSupport
import XCTest

@testable import Gateway
@testable import HomeAssistant
@testable import HomeAssistantTestSupport

/// Issue 43: an accessory's `$state` does not always hold every service's values (before the
/// first read of a HAP accessory, or while a service has none in scope), and a template that
/// reads a key of a missing section makes Home Assistant log an error ("Error parsing value")
/// and take the whole document as the state; one that renders a missing key logs a warning.
/// Every template of every home that reads `$state` is rendered by the real Jinja2, with Home
/// Assistant's logging undefined, over a document without the section and one with it empty:
/// nothing is logged, and the result is one Home Assistant ignores (empty) or shows as no value
/// (`None`).
final class HomeAssistantStateTemplatesTests: XCTestCase {
    func testStateTemplatesTakeADocumentWithoutTheirValuesQuietly() async throws {
        var jobs: [HAJinja.Job] = []
        var labels: [String] = []
        var keys: Set<String> = []
        for (home, accessories) in try HomeAssistantCommandsTests.homes() {
            let tree = TopicTree(
                base: "home", accessories: accessories, home: Home(), scope: try ScopeFilter(ScopeConfig()))
            // Per `$state` topic: no section at all, and every section empty.
            var documents: [String: [String]] = [:]
            for accessory in tree.accessories {
                let empty = JSONValue.object(
                    Dictionary(accessory.services.map { ($0.slug, JSONValue.object([:])) }) { a, _ in a })
                documents[accessory.topic + "/$state"] = ["{}", empty.encoded()]
            }
            let configs = HomeAssistantDiscovery.configs(
                tree: tree, prefix: "homeassistant", gatewayStatusTopic: "home/$gateway/status",
                options: .init(accessoryTopics: true))
            for document in configs.values {
                for component in document["components"]?.objectValue?.values ?? [:].values {
                    let config = try XCTUnwrap(component.objectValue)
                    for (key, value) in config where key.hasSuffix("_template") && !key.hasSuffix("command_template") {
                        guard let topic = Self.topic(reading: key, in: config), let payloads = documents[topic],
                            let template = value.stringValue
                        else { continue }
                        keys.insert(key)
                        for payload in payloads {
                            jobs.append(.init(template: template, payload: payload))
                            labels.append("\(home): \(config["unique_id"]?.stringValue ?? "?") \(key) over \(payload)")
                        }
                    }
                }
            }
        }
        // What the homes have that reads `$state`: a light's colour and its mode, a heater-cooler's.
        for key in [
            "hs_value_template", "color_mode_value_template", "mode_state_template", "temperature_state_template",
        ] {
            XCTAssert(keys.contains(key), "no \(key) reads $state in any home: \(keys.sorted())")
        }
        let rendered = try await HAJinja.renderLogged(jobs)
        for (label, result) in zip(labels, rendered) {
            XCTAssertEqual(result.log, [], label)
            XCTAssert(["", "None"].contains(result.text ?? "(raised)"), "\(label): \(result.text ?? "(raised)")")
        }
    }

    /// The topic a value template reads: `<x>_value_template` and `<x>_state_template` read
    /// `<x>_state_topic`, `<x>_template` reads `<x>_topic`, `value_template` reads `state_topic`.
    static func topic(reading key: String, in config: [String: JSONValue]) -> String? {
        if key == "value_template" { return config["state_topic"]?.stringValue }
        for suffix in ["_value_template", "_state_template"] where key.hasSuffix(suffix) {
            return config[String(key.dropLast(suffix.count)) + "_state_topic"]?.stringValue
        }
        return config[String(key.dropLast("_template".count)) + "_topic"]?.stringValue
    }
}
