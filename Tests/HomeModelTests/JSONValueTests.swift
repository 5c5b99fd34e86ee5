import Foundation
import Testing
@testable import HomeModel

@Suite struct JSONValueTests {
    @Test(arguments: [
        ("true", JSONValue.bool(true)), ("false", .bool(false)), ("null", .null),
        ("1", .int(1)), ("-0", .int(0)), ("1.0", .double(1.0)), ("1e2", .double(100)), ("-2.5E-1", .double(-0.25)),
        ("9223372036854775807", .int(Int64.max)), ("9223372036854775808", .uint(9_223_372_036_854_775_808)),
        ("18446744073709551616", .double(18_446_744_073_709_551_616.0)),
        (#""a\/b\n\u00e9\ud83d\ude00""#, .string("a/b\né😀")),
        (#" [1, "x", {"k": [true]}] "#, .array([.int(1), .string("x"), .object(["k": .array([.bool(true)])])])),
        ("{}", .object([:])), ("[]", .array([])),
    ])
    func parses(text: String, expected: JSONValue) throws {
        #expect(try JSONValue(parsing: Array(text.utf8)) == expected)
    }

    @Test(arguments: [
        "", " ", "tru", "01", "1.", ".5", "-", "1e", "[1,]", "{\"a\" 1}", "{\"a\":1,}", "\"abc",
        "\"\\x\"", "\"\u{01}\"", "[1] 2", "{1: 2}", "\"\\ud800\"", "NaN", "1e999",
    ])
    func rejects(text: String) {
        #expect(throws: ModelError.self) { try JSONValue(parsing: Array(text.utf8)) }
        do {
            _ = try JSONValue(parsing: Array(text.utf8))
        } catch {
            #expect(error.code.rawValue == "invalid-json")
        }
    }

    @Test func rejectsInvalidUTF8() {
        #expect(throws: ModelError(code: .invalidJSON, message: "invalid JSON at byte 4: string is not valid UTF-8")) {
            try JSONValue(parsing: [0x22, 0xFF, 0xFE, 0x22])
        }
    }

    @Test func deepNestingIsAnErrorNotACrash() {
        let text = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        #expect(throws: ModelError.self) { try JSONValue(parsing: Array(text.utf8)) }
    }

    /// The streaming writer's bytes, their counted length and `encoded()` agree, escapes and all.
    @Test(arguments: [
        "plain/topic", "q\"b\\s", "n\nr\rt\tb\u{08}f\u{0C}", "\u{01}\u{1F}x", "Küche 🏠", "",
        "del\u{7F}", "csi\u{9B}2J\u{80}\u{9F}", "20 °C ©\u{A0}", "\u{C2}\u{9B}",
    ])
    func streamedStringsMatchEncoded(text: String) throws {
        var bytes: [UInt8] = []
        JSONValue.appendString(text, to: &bytes)
        #expect(String(decoding: bytes, as: UTF8.self) == JSONValue.string(text).encoded())
        #expect(JSONValue.escapedLength(text) == bytes.count)
        #expect(try JSONValue(parsing: bytes) == .string(text))
    }

    /// DEL and C1 controls (a terminal's CSI is U+009B) are escaped like C0; the Latin-1 letters
    /// beside them in UTF-8 (`°`, `©`, no-break space) are not.
    @Test func deleteAndC1ControlsAreEscaped() {
        #expect(JSONValue.string("a\u{7F}\u{9B}31m°").encoded() == #""a\u007f\u009b31m°""#)
    }

    @Test func encodesWithSortedKeysAndUnescapedSlashes() throws {
        let value: JSONValue = ["b": 1, "a": ["x/y", 2.5, true, .null], "c": "q\"\\\n\u{01}"]
        #expect(value.encoded() == #"{"a":["x/y",2.5,true,null],"b":1,"c":"q\"\\\n\u0001"}"#)
        #expect(
            value.encoded(pretty: true) == """
                {
                  "a": [
                    "x/y",
                    2.5,
                    true,
                    null
                  ],
                  "b": 1,
                  "c": "q\\"\\\\\\n\\u0001"
                }
                """)
        #expect(try JSONValue(parsing: Array(value.encoded().utf8)) == value)
        #expect(try JSONValue(parsing: Array(value.encoded(pretty: true).utf8)) == value)
        #expect(JSONValue.double(.infinity).encoded() == "null")
        #expect(JSONValue.uint(UInt64.max).encoded() == "18446744073709551615")
    }

    @Test func codableKeepsBoolsIntegersAndDoublesApart() throws {
        let data = Data(#"{"b":true,"i":1,"d":1.5,"n":null,"s":"x","a":[false,2]}"#.utf8)
        let value = try JSONDecoder().decode(JSONValue.self, from: data)
        #expect(value == ["b": true, "i": 1, "d": 1.5, "n": .null, "s": "x", "a": [false, 2]])
        let again = try JSONDecoder().decode(JSONValue.self, from: try JSONEncoder().encode(value))
        #expect(again == value)
    }

    @Test func accessors() throws {
        let value = try JSONValue(parsing: #"{"s":"x","n":3,"d":2.0,"b":false,"a":[1]}"#)
        #expect(value["s"]?.stringValue == "x")
        #expect(value["n"]?.intValue == 3)
        #expect(value["d"]?.int64Value == 2)
        #expect(value["d"]?.doubleValue == 2.0)
        #expect(value["b"]?.boolValue == false)
        #expect(value["a"]?[0] == .int(1))
        #expect(value["missing"] == nil)
        #expect(value["n"]?.stringValue == nil)
        #expect(value["s"]?.boolValue == nil)
    }
}
