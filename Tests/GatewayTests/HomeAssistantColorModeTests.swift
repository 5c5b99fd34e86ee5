import Foundation
import Gateway
import HomeModel
import MQTT
import TestSupport
import XCTest

@testable import HomeAssistantTestSupport
@testable import TopicAPI

/// Issue 43, item 3: a light with colour temperature and hue/saturation (a Nanoleaf A19) set to
/// 2700 K showed `color_mode: hs` and red in Home Assistant, which read the mode from whichever
/// of its two states came last, and `$state` (its hue/saturation's) comes with every change. Now
/// the gateway says the mode in `$state` (`$color-mode`) and the light's config reads it. What
/// Home Assistant shows is rendered from the retained topics, as it reads them at its start,
/// through the config's templates. On every enabled rig (`Rig.enabled`).
final class HomeAssistantColorModeTests: RigTestCase {
    static func bulb(temperature: Int, hue: Int, saturation: Int) -> String {
        """
        name: Colour Bulb
        manufacturer: Nanoleaf
        model: NL45
        room: Office
        services:
          - type: lightbulb
            characteristics:
              power-state: true
              brightness: 80
              color-temperature: { value: \(temperature), min: 140, max: 500 }
              hue: \(hue)
              saturation: \(saturation)
        """
    }

    /// What Home Assistant shows of the bulb: its colour mode, colour temperature (mireds) and
    /// hue/saturation, read from the retained config and states.
    struct Shown: Equatable {
        var mode: String?
        var mireds: Int?
        var hs: String?
    }

    func shown(_ gw: RiggedGateway) async throws -> Shown {
        let configs = try await gw.retained("homeassistant/device/+/config")
        let document = try JSONValue(parsing: try XCTUnwrap(configs.values.first { $0.contains("\"Colour Bulb\"") }))
        let light = try XCTUnwrap(
            document["components"]?.objectValue?.values.first { $0["platform"] == "light" }?.objectValue)
        func option(_ key: String) throws -> String { try XCTUnwrap(light[key]?.stringValue, key) }
        let stateTopic = try option("color_mode_state_topic")
        XCTAssertEqual(try option("hs_state_topic"), stateTopic)
        let temperatureTopic = try option("color_temp_state_topic")
        let retained = try await gw.retained(stateTopic)
        let state = try XCTUnwrap(retained[stateTopic], "the bulb's $state")
        let temperature = try await gw.retained(temperatureTopic)[temperatureTopic]
        return Shown(
            mode: try HATemplate.render(try option("color_mode_value_template"), value: state),
            mireds: temperature.flatMap { Int($0) },
            hs: try HATemplate.render(try option("hs_value_template"), value: state))
    }

    /// Waits for the `$state` whose bulb fields satisfy `predicate` (the one after a change).
    func state(
        _ gw: RiggedGateway, _ topic: String, _ expected: [String: Double]
    ) async throws {
        try await gw.next(topic + "/$state", timeout: 5) { text in
            guard let document = try? JSONValue(parsing: Array(text.utf8)),
                let fields = document["lightbulb"]?.objectValue
            else { return false }
            return expected.allSatisfy { fields[$0.key]?.doubleValue == $0.value }
        }
    }

    func testTheColourModeShownIsTheOneLastChanged() async throws {
        let accessories = try TemporaryDirectory(prefix: "homemqtt-colour")
        // Red: a colour, no white.
        try Self.bulb(temperature: 200, hue: 0, saturation: 100)
            .write(toFile: accessories.file("bulb.yml"), atomically: true, encoding: .utf8)
        await onEveryRig(accessories: accessories.url) { gw in
            let id = try await gw.accessoryID(named: "Colour Bulb")
            let accessory = await gw.gateway.tree.accessory(id: id)
            let node = try XCTUnwrap(accessory)
            let service = try XCTUnwrap(node.services.first { $0.typeName == "lightbulb" })
            func characteristic(_ type: String) throws -> TopicTree.CharacteristicNode {
                try XCTUnwrap(service.characteristics.first { $0.typeName == type }, type)
            }
            let temperature = try characteristic("color-temperature"), hue = try characteristic("hue")
            let saturation = try characteristic("saturation")
            // A first start knows no change: a colour that is no white is shown as a colour.
            var now = try await shown(gw)
            XCTAssertEqual(now.mode, "hs")
            XCTAssertEqual(now.mireds, 200)

            // Home Assistant's `color_temp_kelvin: 2700`, sent as mireds to the characteristic's
            // `set`: shown as that colour temperature, though hue and saturation still say red.
            gw.seen.clear()
            try await gw.publish(temperature.topic + "/set", "370")
            try await state(gw, node.topic, ["color-temperature": 370])
            now = try await shown(gw)
            XCTAssertEqual(now, Shown(mode: "color_temp", mireds: 370, hs: "0.0,100.0"))

            // Home Assistant's hs colour, through `$set` as its config's template sends it.
            let configs = try await gw.retained("homeassistant/device/+/config")
            let light = try XCTUnwrap(
                try JSONValue(parsing: try XCTUnwrap(configs.values.first { $0.contains("\"Colour Bulb\"") }))[
                    "components"]?.objectValue?.values.first { $0["platform"] == "light" })
            let command = try XCTUnwrap(
                try HATemplate.render(
                    try XCTUnwrap(light["hs_command_template"]?.stringValue),
                    variables: ["hue": .float(120), "sat": .float(50)]))
            gw.seen.clear()
            try await gw.publish(try XCTUnwrap(light["hs_command_topic"]?.stringValue), command)
            try await state(gw, node.topic, ["hue": 120, "saturation": 50])
            now = try await shown(gw)
            XCTAssertEqual(now, Shown(mode: "hs", mireds: 370, hs: "120.0,50.0"))

            // The bulb itself goes to 4000 K (250 mireds) and then reports the hue and saturation
            // of that white, as real bulbs do: still its colour temperature, not a colour.
            gw.seen.clear()
            try await gw.home.setValue(temperature.address, .int(250))
            try await state(gw, node.topic, ["color-temperature": 250])
            now = try await shown(gw)
            XCTAssertEqual(now.mode, "color_temp")
            let white = ColorModes.hueSaturation(mireds: 250)
            let whiteHue = Int(white.hue.rounded()), whiteSaturation = Int(white.saturation.rounded())
            gw.seen.clear()
            try await gw.home.setValue(hue.address, .float(Double(whiteHue)))
            try await gw.home.setValue(saturation.address, .float(Double(whiteSaturation)))
            try await state(gw, node.topic, ["hue": Double(whiteHue), "saturation": Double(whiteSaturation)])
            now = try await shown(gw)
            XCTAssertEqual(now, Shown(mode: "color_temp", mireds: 250, hs: "\(whiteHue).0,\(whiteSaturation).0"))

            // Another client's `set` of the hue alone: a colour.
            gw.seen.clear()
            try await gw.publish(hue.topic + "/set", "300")
            try await state(gw, node.topic, ["hue": 300])
            now = try await shown(gw)
            XCTAssertEqual(now.mode, "hs")

            // A colour temperature last, then a restart of the gateway on a bulb that kept its
            // values: the mode last in effect, though the hue and saturation are a colour's.
            gw.seen.clear()
            try await gw.publish(temperature.topic + "/set", "454")
            try await state(gw, node.topic, ["color-temperature": 454])
            let before = try await shown(gw)
            XCTAssertEqual(before, Shown(mode: "color_temp", mireds: 454, hs: "300.0,\(whiteSaturation).0"))
            let stopped = await gw.stopGateway()
            XCTAssertNil(stopped)
            let kept = try TemporaryDirectory(prefix: "homemqtt-colour-kept")
            try Self.bulb(temperature: 454, hue: 300, saturation: whiteSaturation)
                .write(toFile: kept.file("bulb.yml"), atomically: true, encoding: .utf8)
            // Its state directory as it left it (a copy: the rig's database keeps the directory's lock).
            let state = try TemporaryDirectory(prefix: "homemqtt-colour-state")
            try FileManager.default.removeItem(atPath: state.path)
            try FileManager.default.copyItem(atPath: gw.state.path, toPath: state.path)
            let again = try await gw.another(clientID: "gateway-again", state: state, accessories: kept.url)
            let after = try await shown(gw)
            let stoppedAgain = await again.stop()
            XCTAssertNil(stoppedAgain)
            XCTAssertEqual(after, before, "after a restart, what was shown before it")
        }
    }
}

/// The white a colour temperature is, as Home Assistant works it out: a bulb's hue and saturation
/// that match it are the temperature's own, not a colour.
final class ColorModesTests: XCTestCase {
    /// Home Assistant's `color_temperature_to_hs(1_000_000 / mireds)` (homeassistant/util/color.py),
    /// run in Python.
    func testAColourTemperaturesColourIsHomeAssistants() {
        for (mireds, hue, saturation) in [
            (140.0, 235.056, 6.535), (200, 27.001, 19.243), (250, 26.812, 34.87), (370, 28.389, 65.637),
            (500, 30.601, 94.547),
        ] {
            let white = ColorModes.hueSaturation(mireds: mireds)
            XCTAssertEqual(white.hue, hue, accuracy: 0.001, "\(mireds)")
            XCTAssertEqual(white.saturation, saturation, accuracy: 0.001, "\(mireds)")
        }
    }

    func testAWhiteIsWithinTenPointsOfSaturationOfTheTemperatures() {
        XCTAssertTrue(ColorModes.isWhite((370, 28, 66)), "2700 K rounded to whole numbers")
        XCTAssertTrue(ColorModes.isWhite((370, 32, 60)), "2700 K by another formula")
        XCTAssertFalse(ColorModes.isWhite((370, 28, 55)), "a paler orange")
        XCTAssertFalse(ColorModes.isWhite((370, 0, 100)), "red")
        XCTAssertTrue(ColorModes.isWhite((140, 200, 2)), "near white: any hue")
        XCTAssertFalse(ColorModes.isWhite((140, 120, 50)), "green")
    }
}
