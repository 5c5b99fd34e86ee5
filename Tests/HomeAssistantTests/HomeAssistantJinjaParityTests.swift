import Foundation
import HomeModel
import TestSupport
import XCTest

@testable import HomeAssistant
@testable import HomeAssistantTestSupport

/// The hand-written evaluator (`HATemplate`, which GatewayTests and the discovery tests render
/// with) held to the real Jinja2 with Home Assistant's filters (`HAJinja`) on the forms it
/// follows; HomeAssistantCommandsTests holds it to Jinja2 on every command template as well.
final class HomeAssistantJinjaParityTests: XCTestCase {
    /// Value templates, as Home Assistant renders a state payload (`value`, `value_json`).
    static let values: [(String, String)] = [
        ("{{ {'0': 'open', '1': 'it\\'s'}[value] | default('None') }}", "0"),
        ("{{ {'0': 'open', '1': 'it\\'s'}[value] | default('None') }}", "1"),
        ("{{ {'0': 'open', '1': 'it\\'s'}[value] | default('None') }}", "7"),
        ("{{ value | float | round(0) | int }}", "49.6"),
        ("{{ value | float | round(0) | int }}", "20.0"),
        ("{{ value | float | round(0) | int }}", "20.5"),
        ("{{ [value | int, 10] | max }}", "3"),
        ("{{ [value | int, 10] | max }}", "55"),
        ("{{ ((value | float - 0) / 25) | round(0) | int }}", "75.0"),
        ("{{ value | int }}", "abc"),
        (
            "{{ 'off' if value_json['heater-cooler']['active'] == 0 else {'2': 'cool'}"
                + "[value_json['heater-cooler']['target-heater-cooler-state'] | string] | default('None') }}",
            #"{"heater-cooler":{"active":1,"target-heater-cooler-state":2}}"#
        ),
        ("{{ value_json['a']['b'] }}", #"{"a":{"b":21.5}}"#),
        (HomeAssistantJinjaParityTests.colorMode, #"{"light":{"$color-mode":"color-temperature"}}"#),
        (HomeAssistantJinjaParityTests.colorMode, #"{"light":{"$color-mode":"hue-saturation"}}"#),
        (HomeAssistantJinjaParityTests.colorMode, #"{"light":{"hue":2}}"#),
        (HomeAssistantJinjaParityTests.colorMode, #"{"fan":{"active":1}}"#),
    ]

    /// A light's colour mode, as the light's config reads it.
    static let colorMode = HomeAssistantTemplate.colorMode(service: "light", field: "$color-mode")

    /// Command templates with the variables Home Assistant passes.
    static let commands: [(String, [String: HATemplate.Value])] = [
        ("{{ value | int * 25 + 0 }}", ["value": .int(3)]),
        ("{{ hue | round(0) }}", ["hue": .float(27.5)]),
        ("{{ hue | round(0) }}", ["hue": .float(28.5)]),
        ("{{ sat | round(1) }}", ["sat": .float(27.46)]),
        (#"{"a":{"b":{{ '1' if value | int > 0 else '0' }}}}"#, ["value": .int(0)]),
        ("{{ [[value | float, 4.5] | max, 32] | min | round(0) }}", ["value": .float(13.5)]),
        (
            "{{ ((([[(((value | float - 4.5) / 1) | round(0)), 0] | max, 27] | min) * 1 + 4.5) | round(1)) }}",
            ["value": .float(13)]
        ),
        ("{{ [value | float | round(1), 359] | min }}", ["value": .float(359.6)]),
    ]

    func testTheEvaluatorRendersAsJinja2() async throws {
        let jobs =
            Self.values.map { HAJinja.Job(template: $0.0, payload: $0.1) }
            + Self.commands.map { HAJinja.Job(template: $0.0, variables: $0.1) }
        let jinja = try await HAJinja.render(jobs)
        let own =
            try Self.values.map { try HATemplate.render($0.0, value: $0.1) }
            + Self.commands.map { try HATemplate.render($0.0, variables: $0.1) }
        for (index, job) in jobs.enumerated() {
            XCTAssertEqual(own[index], jinja[index], "\(job.template) with \(job.payload ?? "\(job.variables)")")
        }
        XCTAssertEqual(jinja[2], "None", "a missing key is undefined, and default replaces it")
        XCTAssertNil(jinja[9], "float of a word raises: Home Assistant takes nothing")
        XCTAssertEqual(jinja[12...15], ["color_temp", "hs", "", ""], "a light's colour mode, empty without one")
    }

    /// Where they differ, knowingly: a key of an undefined value raises a Jinja2 TemplateError,
    /// and Home Assistant then takes the payload itself as the state (it logs "Error parsing
    /// value"); the evaluator gives nil, as for any other error.
    func testAnUndefinedKeyGivesThePayloadInHomeAssistant() async throws {
        let template = "{{ value_json['x']['y'] }}"
        let jinja = try await HAJinja.render([.init(template: template, payload: "{}")])
        XCTAssertEqual(jinja, ["{}"])
        XCTAssertNil(try HATemplate.render(template, value: "{}"))
    }
}
