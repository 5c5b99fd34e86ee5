import Foundation
import TestSupport
import Testing
@testable import HomeModel

private func meta(
    _ format: CharacteristicFormat, min: Double? = nil, max: Double? = nil, step: Double? = nil,
    values: [Int64: String] = [:], maxLength: Int? = nil, maxDataLength: Int? = nil,
    permissions: CharacteristicPermissions = [.read, .write, .notify]
) -> CharacteristicMetadata {
    CharacteristicMetadata(
        format: format, minValue: min, maxValue: max, minStep: step, validValues: values,
        maxLength: maxLength, maxDataLength: maxDataLength, permissions: permissions)
}

private func catalog(_ name: String) -> CharacteristicMetadata {
    Catalog.characteristicType(named: name)!.metadata
}

/// The code of the error a parse throws, or nil if it succeeds.
private func code(_ body: () throws(ModelError) -> CharacteristicValue) -> String? {
    do { _ = try body(); return nil } catch { return error.code.rawValue }
}

@Suite struct ValueCodecTests {
    // MARK: Text payloads, accepted

    @Test(arguments: [
        (CharacteristicFormat.bool, "true", CharacteristicValue.bool(true)), (.bool, " On\n", .bool(true)),
        (.bool, "YES", .bool(true)),
        (.bool, "1", .bool(true)), (.bool, "false", .bool(false)), (.bool, "off", .bool(false)),
        (.bool, "No", .bool(false)), (.bool, "0", .bool(false)),
        (.uint8, "0", .uint(0)), (.uint8, "255", .uint(255)), (.uint8, "10.0", .uint(10)), (.uint8, "1e2", .uint(100)),
        (.uint16, "65535", .uint(65535)), (.uint32, "4294967295", .uint(4_294_967_295)),
        (.uint64, "18446744073709551615", .uint(UInt64.max)), (.uint64, "0", .uint(0)),
        (.int, "-2147483648", .int(-2_147_483_648)), (.int, "2147483647", .int(2_147_483_647)), (.int, "+5", .int(5)),
        (.float, "21.5", .float(21.5)), (.float, "-3", .float(-3)), (.float, "1e-4", .float(0.0001)),
        (.string, "hello world", .string("hello world")), (.string, "", .string("")),
        (.string, " padded ", .string(" padded ")),
        (.tlv8, "AQID", .data([1, 2, 3])), (.data, " AAE= ", .data([0, 1])),
    ])
    func acceptsText(format: CharacteristicFormat, text: String, expected: CharacteristicValue) throws {
        #expect(try ValueCodec.parse(text: text, metadata: meta(format), label: "x") == expected)
    }

    // MARK: Text payloads, refused — every code

    @Test(arguments: [
        (CharacteristicFormat.bool, "maybe", "invalid-type"), (.bool, "2", "invalid-type"), (.bool, "  ", "empty"),
        (.uint8, "256", "out-of-range"), (.uint8, "-1", "out-of-range"), (.uint8, "1.5", "invalid-type"),
        (.uint8, "abc", "invalid-type"),
        (.uint8, "", "empty"), (.uint8, "0x10", "invalid-type"), (.uint8, "nan", "invalid-type"),
        (.uint16, "65536", "out-of-range"), (.uint32, "4294967296", "out-of-range"),
        (.uint64, "18446744073709551616", "out-of-range"), (.uint64, "-1", "out-of-range"),
        (.int, "2147483648", "out-of-range"), (.int, "-2147483649", "out-of-range"), (.int, "true", "invalid-type"),
        (.float, "nan", "invalid-type"), (.float, "inf", "invalid-type"), (.float, "1e999", "invalid-type"),
        (.float, "twelve", "invalid-type"),
        (.float, "", "empty"),
        (.tlv8, "not base64!", "invalid-type"), (.tlv8, "", "empty"), (.data, "A", "invalid-type"),
    ])
    func refusesText(format: CharacteristicFormat, text: String, expectedCode: String) {
        #expect(
            code { () throws(ModelError) in try ValueCodec.parse(text: text, metadata: meta(format), label: "x") }
                == expectedCode)
    }

    @Test func metadataLimits() {
        let percent = meta(.uint8, min: 0, max: 100, step: 1)
        #expect(
            code { () throws(ModelError) in try ValueCodec.parse(text: "101", metadata: percent, label: "x") }
                == "out-of-range")
        let half = meta(.float, min: 10, max: 38, step: 0.5)
        #expect(
            code { () throws(ModelError) in try ValueCodec.parse(text: "10.25", metadata: half, label: "x") }
                == "not-a-step")
        #expect(
            code { () throws(ModelError) in try ValueCodec.parse(text: "9.5", metadata: half, label: "x") }
                == "out-of-range")
        #expect(
            code { () throws(ModelError) in
                try ValueCodec.parse(text: "abcd", metadata: meta(.string, maxLength: 3), label: "x")
            } == "too-long")
        #expect(
            code { () throws(ModelError) in
                try ValueCodec.parse(text: String(repeating: "é", count: 65), metadata: meta(.string), label: "x")
            } == "too-long")
        #expect(
            code { () throws(ModelError) in
                try ValueCodec.parse(text: String(repeating: "é", count: 64), metadata: meta(.string), label: "x")
            } == nil)
        #expect(
            code { () throws(ModelError) in
                try ValueCodec.parse(text: "AQID", metadata: meta(.data, maxDataLength: 2), label: "x")
            } == "too-long")
        let steps = meta(.int, min: 1, step: 2)
        #expect(code { () throws(ModelError) in try ValueCodec.parse(text: "5", metadata: steps, label: "x") } == nil)
        #expect(
            code { () throws(ModelError) in try ValueCodec.parse(text: "4", metadata: steps, label: "x") }
                == "not-a-step")
    }

    // MARK: Messages that say what is allowed

    @Test func messagesNameWhatIsAllowed() {
        #expect(throws: ModelError(code: .outOfRange, message: "brightness must be 0…100, got 140")) {
            try ValueCodec.parse(text: "140", metadata: catalog("brightness"), label: "brightness")
        }
        #expect(
            throws: ModelError(
                code: .notAValidValue, message: "target-door-state must be one of open (0), closed (1), got 'ajar'")
        ) {
            try ValueCodec.parse(text: "ajar", metadata: catalog("target-door-state"), label: "target-door-state")
        }
        #expect(
            throws: ModelError(
                code: .notAValidValue, message: "target-door-state must be one of open (0), closed (1), got 2")
        ) {
            try ValueCodec.parse(text: "2", metadata: catalog("target-door-state"), label: "target-door-state")
        }
        #expect(
            throws: ModelError(
                code: .notAStep, message: "target-temperature must be in steps of 0.1 from 10, got 21.55")
        ) {
            try ValueCodec.parse(text: "21.55", metadata: catalog("target-temperature"), label: "target-temperature")
        }
        #expect(throws: ModelError(code: .tooLong, message: "name must be at most 64 characters, got 65")) {
            try ValueCodec.parse(text: String(repeating: "n", count: 65), metadata: catalog("name"), label: "name")
        }
        #expect(
            throws: ModelError(code: .readOnly, message: "current-temperature is read-only (permissions: read, notify)")
        ) {
            try ValueCodec.checkWritable(catalog("current-temperature"), label: "current-temperature")
        }
        #expect(
            throws: ModelError(
                code: .invalidType, message: "power-state must be true or false (or 1/0, on/off, yes/no), got 'maybe'")
        ) {
            try ValueCodec.parse(text: "maybe", metadata: catalog("power-state"), label: "power-state")
        }
    }

    @Test func validValueNamesAndNumbers() throws {
        let door = catalog("target-door-state")
        #expect(try ValueCodec.parse(text: "open", metadata: door, label: "d") == .uint(0))
        #expect(try ValueCodec.parse(text: " Closed ", metadata: door, label: "d") == .uint(1))
        #expect(try ValueCodec.parse(text: "1", metadata: door, label: "d") == .uint(1))
        #expect(try ValueCodec.parse(json: "closed", metadata: door, label: "d") == .uint(1))
        #expect(try ValueCodec.parse(json: 0, metadata: door, label: "d") == .uint(0))
        // A name of another characteristic's value is not a value here.
        #expect(
            code { () throws(ModelError) in try ValueCodec.parse(text: "heat", metadata: door, label: "d") }
                == "not-a-valid-value")
        // RotationDirection is a signed valid-values characteristic.
        #expect(
            try ValueCodec.parse(text: "counter-clockwise", metadata: catalog("rotation-direction"), label: "r")
                == .int(1))
        // PictureMode allows 0…13 but only lists 0…7.
        #expect(
            code { () throws(ModelError) in
                try ValueCodec.parse(text: "10", metadata: catalog("picture-mode"), label: "p")
            } == "not-a-valid-value")
    }

    @Test func floatStepsTolerateRounding() throws {
        // 21.5 is 2946.0000000000005 steps of 0.1 from -273.1.
        #expect(
            try ValueCodec.parse(text: "21.5", metadata: catalog("current-temperature"), label: "t") == .float(21.5))
        #expect(try ValueCodec.parse(text: "21.3", metadata: catalog("target-temperature"), label: "t") == .float(21.3))
        #expect(try ValueCodec.parse(text: "0.3", metadata: catalog("heating-threshold"), label: "t") == .float(0.3))
    }

    // MARK: JSON values

    @Test(arguments: [
        (CharacteristicFormat.bool, JSONValue.bool(true), CharacteristicValue.bool(true)),
        (.bool, .int(0), .bool(false)), (.bool, .string("on"), .bool(true)),
        (.uint8, .int(7), .uint(7)), (.uint8, .double(7.0), .uint(7)), (.uint8, .string("7"), .uint(7)),
        (.uint64, .uint(UInt64.max), .uint(UInt64.max)), (.int, .int(-4), .int(-4)),
        (.float, .int(20), .float(20)), (.float, .double(20.5), .float(20.5)), (.float, .string("20.5"), .float(20.5)),
        (.string, .string("x"), .string("x")), (.data, .string("AQID"), .data([1, 2, 3])),
    ])
    func acceptsJSON(format: CharacteristicFormat, json: JSONValue, expected: CharacteristicValue) throws {
        #expect(try ValueCodec.parse(json: json, metadata: meta(format), label: "x") == expected)
    }

    @Test(arguments: [
        (CharacteristicFormat.bool, JSONValue.int(2), "invalid-type"), (.bool, .null, "empty"),
        (.bool, .array([]), "invalid-type"),
        (.uint8, .bool(true), "invalid-type"), (.uint8, .double(2.5), "invalid-type"),
        (.uint8, .int(-1), "out-of-range"),
        (.uint16, .int(70000), "out-of-range"), (.uint32, .int(-5), "out-of-range"),
        (.int, .uint(UInt64.max), "out-of-range"),
        (.float, .bool(false), "invalid-type"), (.float, .object([:]), "invalid-type"),
        (.string, .int(5), "invalid-type"), (.string, .null, "empty"), (.tlv8, .int(5), "invalid-type"),
        (.data, .string("%%%"), "invalid-type"),
    ])
    func refusesJSON(format: CharacteristicFormat, json: JSONValue, expectedCode: String) {
        #expect(
            code { () throws(ModelError) in try ValueCodec.parse(json: json, metadata: meta(format), label: "x") }
                == expectedCode)
    }

    // MARK: Validate normalizes

    @Test func validateNormalizesToTheFormatsCase() throws {
        #expect(try ValueCodec.validate(.int(1), metadata: meta(.bool), label: "x") == .bool(true))
        #expect(try ValueCodec.validate(.float(50), metadata: meta(.uint8), label: "x") == .uint(50))
        #expect(try ValueCodec.validate(.uint(5), metadata: meta(.int), label: "x") == .int(5))
        #expect(try ValueCodec.validate(.int(5), metadata: meta(.float), label: "x") == .float(5))
        #expect(
            code { () throws(ModelError) in try ValueCodec.validate(.string("5"), metadata: meta(.uint8), label: "x") }
                == "invalid-type")
        #expect(
            code { () throws(ModelError) in try ValueCodec.validate(.data([1]), metadata: meta(.string), label: "x") }
                == "invalid-type")
        #expect(
            code { () throws(ModelError) in try ValueCodec.validate(.string("AQ=="), metadata: meta(.tlv8), label: "x")
            } == "invalid-type")
        #expect(
            code { () throws(ModelError) in try ValueCodec.validate(.float(.nan), metadata: meta(.float), label: "x") }
                == "invalid-type")
    }

    @Test func checkWritable() throws {
        try ValueCodec.checkWritable(catalog("target-door-state"), label: "t")
        #expect(throws: ModelError.self) { try ValueCodec.checkWritable(catalog("current-door-state"), label: "c") }
    }

    // MARK: Output

    @Test func stateText() {
        #expect(ValueCodec.text(.bool(true), format: .bool) == "true")
        #expect(ValueCodec.text(.bool(false), format: .bool) == "false")
        #expect(ValueCodec.text(.uint(1), format: .uint8) == "1")
        #expect(ValueCodec.text(.int(-90), format: .int) == "-90")
        #expect(ValueCodec.text(.float(21.5), format: .float) == "21.5")
        #expect(ValueCodec.text(.float(20), format: .float) == "20.0")
        #expect(ValueCodec.text(.float(0.1 + 0.2), format: .float) == "0.30000000000000004")
        #expect(ValueCodec.text(.string("Garage"), format: .string) == "Garage")
        #expect(ValueCodec.text(.data([1, 2, 3]), format: .tlv8) == "AQID")
    }

    @Test(arguments: [
        (CharacteristicFormat.bool, CharacteristicValue.bool(true)), (.uint8, .uint(200)), (.uint16, .uint(60000)),
        (.uint32, .uint(4_000_000_000)), (.uint64, .uint(UInt64.max)), (.int, .int(-12)), (.float, .float(21.5)),
        (.float, .float(1e-7)), (.float, .float(20)), (.string, .string("Kilgo Garage")), (.tlv8, .data([0, 255, 7])),
        (.data, .data([9])),
    ])
    func textRoundTrips(format: CharacteristicFormat, value: CharacteristicValue) throws {
        let text = ValueCodec.text(value, format: format)
        #expect(try ValueCodec.parse(text: text, metadata: meta(format), label: "x") == value)
        #expect(try ValueCodec.parse(json: ValueCodec.json(value), metadata: meta(format), label: "x") == value)
    }

    /// Issue 26: a float32 reading reaches the broker at its characteristic's precision.
    @Test func stateTextAtTheCharacteristicsPrecision() {
        let noisy = Double(Float(120.6)) // 120.5999984741211
        #expect(ValueCodec.text(.float(noisy), format: .float) == "120.5999984741211")
        #expect(ValueCodec.text(.float(noisy), metadata: meta(.float)) == "120.6", "a float32's 7 digits")
        #expect(ValueCodec.text(.float(noisy), metadata: meta(.float, step: 0.1)) == "120.6")
        #expect(
            ValueCodec.text(.float(noisy), metadata: meta(.float, step: 1)) == "121.0", "an integral float keeps .0")
        #expect(ValueCodec.text(.float(0.1 + 0.2), metadata: meta(.float, step: 0.1)) == "0.3")
        #expect(ValueCodec.text(.float(21.55), metadata: meta(.float, min: 0, step: 0.5)) == "21.5")
        #expect(ValueCodec.text(.float(22.2), metadata: meta(.float, min: 7.2, max: 33.3, step: 0.1)) == "22.2")
        #expect(ValueCodec.text(.float(1e-7), metadata: meta(.float)) == "1e-07")
        #expect(ValueCodec.text(.uint(7), metadata: meta(.uint8, step: 5)) == "7", "integers as they are")
        #expect(ValueCodec.decimals(0.1) == 1 && ValueCodec.decimals(0.25) == 2 && ValueCodec.decimals(25) == 0)
    }

    /// A characteristic whose accessory gives no bounds takes the standard type's.
    @Test func setsAreCheckedAgainstTheStandardBounds() throws {
        let type = try #require(Catalog.characteristicType(named: "color-temperature"))
        var bare = type.metadata
        bare.minValue = nil
        bare.maxValue = nil
        let checked = ValueCodec.withStandardBounds(bare, type: type.uuid)
        #expect(checked.minValue == type.metadata.minValue && checked.maxValue == type.metadata.maxValue)
        #expect(throws: ModelError.self) { try ValueCodec.parse(text: "575", metadata: checked, label: "c") }
        var own = type.metadata
        own.maxValue = 400
        #expect(ValueCodec.withStandardBounds(own, type: type.uuid).maxValue == 400, "the accessory's own bounds stay")
    }

    @Test func jsonOfValues() {
        #expect(ValueCodec.json(.uint(5)) == .int(5))
        #expect(ValueCodec.json(.uint(UInt64.max)) == .uint(UInt64.max))
        #expect(ValueCodec.json(.float(2)) == .double(2))
        #expect(ValueCodec.json(.data([1, 2, 3])) == .string("AQID"))
        #expect(ValueCodec.json(.bool(false)) == .bool(false))
    }

    @Test func metaDocument() throws {
        let brightness = try #require(Catalog.characteristicType(named: "brightness"))
        let m = ValueCodec.metaJSON(type: brightness.uuid, typeName: brightness.name, metadata: brightness.metadata)
        #expect(
            m == [
                "uuid": "00000008-0000-1000-8000-0026BB765291", "type": "brightness", "format": "int",
                "unit": "percentage",
                "min": 0, "max": 100, "step": 1, "permissions": ["read", "write", "notify"],
            ])
        let door = try #require(Catalog.characteristicType(named: "target-door-state"))
        let d = ValueCodec.metaJSON(type: door.uuid, typeName: door.name, metadata: door.metadata)
        #expect(d["valid-values"] == [["value": 0, "name": "open"], ["value": 1, "name": "closed"]])
        let name = try #require(Catalog.characteristicType(named: "name"))
        #expect(ValueCodec.metaJSON(type: name.uuid, typeName: name.name, metadata: name.metadata)["max-length"] == 64)
        let temp = try #require(Catalog.characteristicType(named: "target-temperature"))
        #expect(
            ValueCodec.metaJSON(type: temp.uuid, typeName: temp.name, metadata: temp.metadata)["step"] == .double(0.1))
    }
}

/// Metadata is a value even though its fields live in a shared box.
@Suite struct MetadataValueTests {
    @Test func copiesAreIndependentAndCompareByValue() throws {
        let catalog = try #require(Catalog.characteristicType(uuid: "8")).metadata
        var narrowed = catalog
        narrowed.maxValue = 50
        narrowed.validValues = [1: "one"]
        #expect(catalog.maxValue == 100)
        #expect(catalog.validValues.isEmpty)
        #expect(narrowed.maxValue == 50)
        #expect(narrowed != catalog)

        var rebuilt = CharacteristicMetadata(
            format: catalog.format, unit: catalog.unit, minValue: catalog.minValue, maxValue: catalog.maxValue,
            minStep: catalog.minStep, validValues: catalog.validValues, maxLength: catalog.maxLength,
            maxDataLength: catalog.maxDataLength, permissions: catalog.permissions)
        #expect(rebuilt == catalog)
        #expect(Set([rebuilt, catalog, narrowed]).count == 2)
        rebuilt.permissions.remove(.write)
        #expect(rebuilt != catalog)
        #expect(catalog.permissions.contains(.write))
    }
}

/// The rounding of every float value change is done without printf, and must give what
/// printing with printf and reading the text back gives (what it did before, and what a
/// subscriber's earlier `state` texts were made by).
@Suite struct ValueRoundingTests {
    static func printed(_ d: Double, step: Double?, base: Double?) -> Double {
        guard let step, step > 0 else { return Double(String(format: "%.7g", d)) ?? d }
        let origin = base ?? 0
        let snapped = origin + ((d - origin) / step).rounded() * step
        let places = ValueCodec.decimals(step) + ValueCodec.decimals(origin)
        return Double(String(format: "%.*f", places, snapped)) ?? snapped
    }

    @Test func withoutAStepSevenSignificantDigitsAsPrintfGives() {
        var numbers = SeededGenerator(state: 25)
        var checked = 0
        for _ in 0..<200_000 {
            // Magnitudes from 1e-12 to 1e12, both signs; float32 values as HAP sends them.
            let magnitude = pow(10, numbers.unit() * 24 - 12)
            var d = (numbers.next() & 1 == 0 ? 1 : -1) * magnitude
            if numbers.next() & 1 == 0 { d = Double(Float(d)) }
            #expect(ValueCodec.rounded(d, step: nil) == Self.printed(d, step: nil, base: nil), "\(d)")
            if let exponent = ValueCodec.decimalExponent(d), ValueCodec.rounded(d, places: 6 - exponent) != nil {
                checked += 1
            }
        }
        for d in [0.0, -0.0, 1, 10, 100, 1e7, 9_999_999.5, 0.1, 0.099999999999999992, 1e-5, 120.5999984741211] {
            #expect(ValueCodec.rounded(d, step: nil) == Self.printed(d, step: nil, base: nil), "\(d)")
        }
        // All but those below 1e-9 (an eighth of the sample) and the rare halfway point
        // without printf.
        #expect(checked > 170_000, "\(checked) of 200000 rounded without printf")
    }

    @Test func onAStepTheGridAsPrintfGives() {
        var numbers = SeededGenerator(state: 11)
        let grids: [(Double, Double?)] = [
            (0.1, nil), (0.5, 10), (0.01, nil), (1, nil), (0.25, -40), (5, 0), (0.001, 0.5), (0.1, 0.05), (100, nil),
        ]
        for (step, base) in grids {
            for _ in 0..<20_000 {
                let d = (numbers.unit() - 0.5) * 2 * pow(10, numbers.unit() * 8 - 2)
                let value = numbers.next() & 1 == 0 ? Double(Float(d)) : d
                #expect(
                    ValueCodec.rounded(value, step: step, base: base) == Self.printed(value, step: step, base: base),
                    "\(value) step \(step) base \(String(describing: base))")
            }
        }
    }
}

/// `textsDiffer` says two values' `state` texts differ only where they do: the gateway then
/// publishes a change without making the previous value's text to compare.
@Suite struct TextsDifferTests {
    static let values: [CharacteristicValue] = [
        .bool(true), .bool(false), .int(0), .int(1), .int(2), .int(-1), .uint(0), .uint(1), .uint(7),
        .float(0), .float(1), .float(1.04), .float(1.06), .float(2.5), .string(""), .string("1"),
        .string("true"), .string("a"), .data([]), .data([1]), .data([1, 2]),
    ]

    @Test(arguments: CharacteristicFormat.allCases)
    func whereItSaysSoTheTextsDiffer(format: CharacteristicFormat) {
        // A step makes floats that differ meet in one text (1.04 and 1.06 are both 1.0 at 0.1).
        for metadata in [meta(format), meta(format, step: 0.1)] {
            var said = 0
            for a in Self.values {
                for b in Self.values where ValueCodec.textsDiffer(a, b, format: format) {
                    said += 1
                    #expect(
                        ValueCodec.text(a, metadata: metadata) != ValueCodec.text(b, metadata: metadata),
                        "\(a) and \(b) as \(format)")
                }
            }
            // It says so for most pairs of one kind: the check is not vacuous.
            #expect(said >= 20, "\(format): \(said)")
        }
    }

    @Test func valuesOfOneTextAreNeverSaidToDiffer() {
        // An integer 1 and a flag, as a bool characteristic, are both `true`.
        #expect(!ValueCodec.textsDiffer(.int(1), .int(2), format: .bool))
        #expect(!ValueCodec.textsDiffer(.bool(true), .int(1), format: .uint8))
        #expect(!ValueCodec.textsDiffer(.float(1.04), .float(1.06), format: .float))
        #expect(!ValueCodec.textsDiffer(.int(3), .int(3), format: .int))
        #expect(ValueCodec.textsDiffer(.int(3), .int(4), format: .int))
    }
}
