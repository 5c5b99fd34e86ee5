import Foundation
import HomeMQTTApp
import HomeModel
import Testing

// Gateway testably too: the tests make topic-tree nodes by their memberwise initialiser.
@testable import Gateway
@testable import Homie

/// The Homie mapping of characteristics, value by value, where the end-to-end test meets only
/// the simulated home's: formats, enums, empty strings, events and read-only scope.
@Suite struct HomieDevicesTests {
    static func node(
        _ format: CharacteristicFormat, permissions: CharacteristicPermissions = [.read, .write, .notify],
        min: Double? = nil, max: Double? = nil, step: Double? = nil, values: [Int64: String] = [:],
        unit: String? = nil, type: String = "00000008-0000-1000-8000-0026BB765291", readOnly: Bool = false
    ) -> TopicTree.CharacteristicNode {
        let metadata = CharacteristicMetadata(
            format: format, unit: unit, minValue: min, maxValue: max, minStep: step, validValues: values,
            permissions: permissions)
        return TopicTree.CharacteristicNode(
            address: CharacteristicAddress(accessoryID: "a", iid: 9), serviceTopic: "home/r/a/s", slug: "c",
            typeName: "c", characteristic: Characteristic(iid: 9, type: type, value: nil, metadata: metadata),
            isReadOnlyScope: readOnly)
    }

    static func property(_ node: TopicTree.CharacteristicNode) -> ([String: JSONValue], HomieDevices.Property) {
        let (description, isEnum) = HomieDevices.property(node)
        return (description, HomieDevices.Property(node: node, topic: "t", isRetained: !node.isEvent, isEnum: isEnum))
    }

    @Test func numbersHaveTheirRangeAndStepAndUnits() {
        let (percent, _) = Self.property(Self.node(.int, min: 0, max: 100, step: 1, unit: "percentage"))
        #expect(percent["datatype"] == "integer")
        #expect(percent["format"] == "0:100")
        #expect(percent["unit"] == "%")
        let (temperature, _) = Self.property(Self.node(.float, min: 10, max: 38, step: 0.1, unit: "celsius"))
        #expect(temperature["datatype"] == "float")
        #expect(temperature["format"] == "10:38:0.1")
        #expect(temperature["unit"] == "°C")
        let (open, _) = Self.property(Self.node(.float, min: -5))
        #expect(open["format"] == "-5:")
        let (unbounded, _) = Self.property(Self.node(.uint32))
        #expect(unbounded["format"] == nil)
    }

    @Test func namedValuesAreAnEnumPublishedAndSetByName() {
        let (door, property) = Self.property(
            Self.node(.uint8, permissions: [.read, .notify], values: [0: "open", 1: "closed", 4: "stopped"]))
        #expect(door["datatype"] == "enum")
        #expect(door["format"] == "open,closed,stopped")
        #expect(door["settable"] == false)
        #expect(HomieDevices.payload(.uint(1), property) == Array("closed".utf8))
    }

    @Test func emptyStringsAreTheByteZeroBothWays() {
        let (name, property) = Self.property(Self.node(.string))
        #expect(name["datatype"] == "string")
        #expect(HomieDevices.payload(.string(""), property) == [0])
        #expect(HomieDevices.payload(.string("Lamp"), property) == Array("Lamp".utf8))
        #expect(HomieDevices.setPayload([0]) == [])
        #expect(HomieDevices.setPayload(Array("x".utf8)) == Array("x".utf8))
    }

    @Test func booleansFloatsAndNonFiniteValues() {
        let (_, on) = Self.property(Self.node(.bool))
        #expect(HomieDevices.payload(.bool(true), on) == Array("true".utf8))
        #expect(HomieDevices.payload(.int(0), on) == Array("false".utf8))
        let (_, level) = Self.property(Self.node(.float))
        #expect(HomieDevices.payload(.float(21.5), level) == Array("21.5".utf8))
        #expect(HomieDevices.payload(.float(.nan), level) == Array("0".utf8), "NaN is no Homie float")
    }

    @Test func pressesAndWriteOnlyAreMomentaryAndScopeDecidesSettable() {
        let (press, pressProperty) = Self.property(
            Self.node(
                .uint8, permissions: [.read, .notify], values: [0: "single-press"],
                type: StandardUUID.programmableSwitchEvent))
        #expect(press["retained"] == false)
        #expect(!pressProperty.isRetained)
        let (identify, _) = Self.property(Self.node(.bool, permissions: [.write]))
        #expect(identify["retained"] == false)
        #expect(identify["settable"] == true)
        let (locked, _) = Self.property(Self.node(.int, readOnly: true))
        #expect(locked["settable"] == false)
        let (vendor, _) = Self.property(Self.node(.float, type: "E863F10D-079E-48FF-8F27-9C2605A29F52"))
        #expect(vendor["unit"] == "W")
    }

    @Test func configuredIDsMustBeHomieIDs() {
        #expect(HomieConfig.isID("homemqtt-2"))
        #expect(!HomieConfig.isID("HomeMQTT"))
        #expect(!HomieConfig.isID("a/b"))
        #expect(!HomieConfig.isID(""))
    }
}

/// `homie:` in the config file: read strictly, each bad value named by its key.
@Suite struct HomieConfigTests {
    @Test func theSectionIsReadAndBadValuesNameTheirKey() throws {
        let config = try HomeMQTTApp.parseConfig(
            "homie:\n  enabled: true\n  domain: openhab\n  device-id: attic-gateway\n", file: "g.yml")
        #expect(config[HomieConfig.self].enabled)
        #expect(config[HomieConfig.self].domain == "openhab")
        #expect(HomieOutput.rootID(config[HomieConfig.self], clientID: "ignored") == "attic-gateway")
        let defaults = try HomeMQTTApp.parseConfig("base-topic: home\n", file: "g.yml")
        #expect(HomieOutput.rootID(defaults[HomieConfig.self], clientID: "Home MQTT") == "home-mqtt")
        for (yaml, key) in [
            ("homie:\n  domain: homie/5\n", "homie.domain"), ("homie:\n  device-id: Gateway\n", "homie.device-id"),
            ("homie:\n  enabled: maybe\n", "homie.enabled"), ("homie:\n  qos: 2\n", "homie.qos"),
        ] {
            #expect(throws: ConfigError.self, "\(yaml)") { try HomeMQTTApp.parseConfig(yaml, file: "g.yml") }
            do {
                _ = try HomeMQTTApp.parseConfig(yaml, file: "g.yml")
            } catch {
                #expect(error.key == key, "\(yaml): \(error)")
            }
        }
    }
}
