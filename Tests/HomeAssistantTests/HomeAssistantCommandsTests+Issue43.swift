import Foundation
import HomeModel
import TestSupport
import XCTest

@testable import Gateway
@testable import HomeAssistant
@testable import HomeAssistantTestSupport

/// What a real Home Assistant 2026.2.3 found (issue 43), rendered by Jinja2 as Home Assistant does.
final class HomeAssistantIssue43Tests: XCTestCase {
    typealias Config = [String: JSONValue]

    static func configs() throws -> (TopicTree, [String: Config]) {
        let tree = TopicTree(
            base: "home", accessories: try HomeAssistantCommandsTests.issue43Devices(), home: Home(),
            scope: try ScopeFilter(ScopeConfig()))
        var main: [String: Config] = [:]
        for document in HomeAssistantDiscovery.configs(
            tree: tree, prefix: "homeassistant", gatewayStatusTopic: "home/$gateway/status",
            options: .init(accessoryTopics: false)
        ).values {
            let device = try XCTUnwrap(document["device"]?["name"]?.stringValue)
            let all = (document["components"]?.objectValue?.values ?? [:].values).compactMap(\.objectValue)
            main[device] = all.first { $0["name"] == .null }
        }
        return (tree, main)
    }

    func render(_ template: JSONValue?, _ values: [HATemplate.Value]) async throws -> [String?] {
        let template = try XCTUnwrap(template?.stringValue)
        return try await HAJinja.render(values.map { .init(template: template, variables: ["value": $0]) })
    }

    /// What Home Assistant sends for `values` through `template`.
    func expect(
        _ template: JSONValue?, _ values: [HATemplate.Value], _ expected: [String?], line: UInt = #line
    ) async throws {
        let sent = try await render(template, values)
        XCTAssertEqual(sent, expected, line: line)
    }

    /// 4.5…32 in steps of 1: Home Assistant offers 4.5…31.5, and what it sends goes to the nearest
    /// grid point (13.5 stays 13.5, where the old template sent 14; 4.5 stays, where it sent 4).
    func testASetPointOnAFractionalGridIsSentOnTheGrid() async throws {
        let (tree, main) = try Self.configs()
        let one = try XCTUnwrap(main["Thermostat Step One"])
        XCTAssertEqual(one["min_temp"]?.doubleValue, 4.5)
        XCTAssertEqual(one["max_temp"]?.doubleValue, 31.5)
        XCTAssertEqual(one["temp_step"]?.doubleValue, 1)
        try await expect(
            one["temperature_command_template"], [.float(13.5), .float(4.5), .float(31.5), .float(32)],
            ["13.5", "4.5", "31.5", "31.5"])
        // Python rounds half to even: 13 is 8.5 steps from 4.5, so 12.5.
        try await expect(one["temperature_command_template"], [.float(13), .float(5.1)], ["12.5", "5.5"])
        // What the old template sent, the gateway refuses, as Home Assistant showed.
        let topic = try XCTUnwrap(one["temperature_command_topic"]?.stringValue)
        XCTAssertEqual(
            HomeAssistantCommandsTests.refusal("14", topic: topic, tree: tree),
            "target-temperature must be in steps of 1 from 4.5, got 14")
        XCTAssertEqual(
            HomeAssistantCommandsTests.refusal("4", topic: topic, tree: tree),
            "target-temperature must be 4.5…32, got 4")
        XCTAssertNil(HomeAssistantCommandsTests.refusal("13.5", topic: topic, tree: tree))

        let two = try XCTUnwrap(main["Thermostat Step Two"]), five = try XCTUnwrap(main["Thermostat Step Five"])
        XCTAssertEqual(two["max_temp"]?.doubleValue, 30.5)
        try await expect(two["temperature_command_template"], [.float(13), .float(32)], ["12.5", "30.5"])
        XCTAssertEqual(five["max_temp"]?.doubleValue, 29.5)
        try await expect(five["temperature_command_template"], [.float(21), .float(5)], ["19.5", "4.5"])
        let ten = try XCTUnwrap(main["Thermostat From Ten"])
        XCTAssertEqual(ten["min_temp"]?.doubleValue, 10)
        XCTAssertEqual(ten["max_temp"]?.doubleValue, 30)
        try await expect(
            ten["temperature_command_template"], [.float(10), .float(22.4), .float(32)], ["10", "20", "30"])
    }

    /// A Hunter SIMPLEconnect fan light, brightness in steps of 10: Home Assistant's 1…100 goes to
    /// the nearest step, and a brightness (which lights it) is never 0.
    func testABrightnessInStepsOfTenIsSentOnItsSteps() async throws {
        let (tree, main) = try Self.configs()
        let light = try XCTUnwrap(main["Hunter SIMPLEconnect"])
        XCTAssertEqual(light["brightness_scale"], 100)
        let sent = try await render(light["brightness_command_template"], [.int(1), .int(33), .int(75), .int(100)])
        XCTAssertEqual(sent, ["10", "30", "80", "100"])
        let topic = try XCTUnwrap(light["brightness_command_topic"]?.stringValue)
        XCTAssertEqual(
            HomeAssistantCommandsTests.refusal("33", topic: topic, tree: tree),
            "brightness must be in steps of 10 from 0, got 33")
        for payload in sent {
            XCTAssertNil(HomeAssistantCommandsTests.refusal(payload ?? "", topic: topic, tree: tree))
        }
    }

    /// Home Assistant shows `<device> <entity>`: an entity's name does not begin with the words
    /// its device's name ends with ("Garden Valve Valve type" was shown).
    func testEntityNamesDoNotRepeatTheDevicesLastWord() throws {
        let rows = try HomeAssistantCommandsTests.table(try HomeAssistantCommandsTests.issue43Devices())
            .filter { $0.hasPrefix("Garden Valve |") || $0.hasPrefix("Mood Light |") }
        XCTAssertEqual(
            rows,
            [
                "Garden Valve | (main) | valve | ",
                "Garden Valve | Type | sensor | options generic-valve/irrigation/shower-head/water-faucet",
                "Mood Light | (main) | light | ",
                "Mood Light | Effect flag | switch | ",
                "Mood Light | Effect mode | number | 0…100 step 1",
            ])
    }
}
