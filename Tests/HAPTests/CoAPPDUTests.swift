import HomeModel
import Testing

@testable import HAP

/// The PDU codec of HAP over CoAP (issue 42) against aiohomekit's own vectors
/// (`tests/test_controller_coap_pdu.py`, `tests/test_controller_coap.py`) and every framing error.
@Suite struct CoAPPDUTests {
    @Test func requestsAreAiohomekitsBytes() throws {
        #expect(
            try CoAPRequestPDU.read(iid: 0x2022, tid: 0x10).encoded() == [0x00, 0x03, 0x10, 0x22, 0x20, 0x00, 0x00])
        #expect(
            try CoAPRequestPDU(.characteristicWrite, tid: 0x20, iid: 0x1234, body: [1, 2, 3, 4]).encoded()
                == [0x00, 0x02, 0x20, 0x34, 0x12, 0x04, 0x00, 1, 2, 3, 4])
        let two = try CoAPRequestPDU.encode([
            CoAPRequestPDU(.characteristicWrite, tid: 0, iid: 0x12, body: [0x88, 0x88]),
            CoAPRequestPDU(.characteristicWrite, tid: 1, iid: 0x13, body: [0x99, 0x99, 0x99, 0x99]),
        ])
        #expect(two == [0, 2, 0, 0x12, 0, 2, 0, 0x88, 0x88] + [0, 2, 1, 0x13, 0, 4, 0, 0x99, 0x99, 0x99, 0x99])
        #expect(try CoAPRequestPDU.attributeDatabase(tid: 7).encoded() == [0, 0x09, 7, 0, 0, 0, 0])
        #expect(try CoAPRequestPDU.subscribe(iid: 51, tid: 1).encoded() == [0, 0x0B, 1, 51, 0, 0, 0])
        #expect(try CoAPRequestPDU.unsubscribe(iid: 51, tid: 2).encoded() == [0, 0x0C, 2, 51, 0, 0, 0])
        #expect(try CoAPRequestPDU.executeWrite(iid: 9, tid: 3).encoded() == [0, 0x05, 3, 9, 0, 0, 0])
        // A timed write: value then TTL (100 ms units).
        #expect(
            try CoAPRequestPDU.timedWrite(iid: 9, tid: 4, value: [1], ttl: 50).encoded()
                == [0, 0x04, 4, 9, 0, 6, 0, 0x01, 1, 1, 0x08, 1, 50])
        #expect(
            try CoAPRequestPDU.write(iid: 9, tid: 5, value: [7], returnResponse: true).encoded()
                == [0, 0x02, 5, 9, 0, 6, 0, 0x01, 1, 7, 0x09, 1, 1])
    }

    /// aiohomekit's write bodies for the Nanoleaf bulb: On, Brightness 100, Hue 360, Saturation 100.
    @Test func writeBodiesAreAiohomekits() throws {
        func body(_ v: CharacteristicValue, _ f: CharacteristicFormat) throws -> [UInt8] {
            HAPBLEBody(value: try HAPBLEValue.encode(v, format: f)).encoded()
        }
        #expect(try body(.bool(true), .bool) == [0x01, 0x01, 0x01])
        #expect(try body(.int(100), .int) == [0x01, 0x04, 0x64, 0, 0, 0])
        #expect(try body(.float(360), .float) == [0x01, 0x04, 0, 0, 0xB4, 0x43])
        #expect(try body(.float(100), .float) == [0x01, 0x04, 0, 0, 0xC8, 0x42])
    }

    @Test func responsesDecodeAsAiohomekitReadsThem() throws {
        #expect(try CoAPResponsePDU.decodeAll([0x02, 0x40, 0, 0, 0]) == [CoAPResponsePDU(tid: 0x40)])
        let one = try CoAPResponsePDU.decodeAll([0x02, 0x50, 0, 6, 0, 1, 1, 1, 2, 1, 0])
        #expect(one == [CoAPResponsePDU(tid: 0x50, body: [1, 1, 1, 2, 1, 0])])
        let reqs = [CoAPRequestPDU.read(iid: 1, tid: 0x30), .read(iid: 2, tid: 0x31)]
        let two = try CoAPResponsePDU.decode([2, 0x30, 0, 2, 0, 1, 0] + [2, 0x31, 0, 2, 0, 2, 0], answering: reqs)
        #expect(two.map(\.body) == [[1, 0], [2, 0]])
        // A failed PDU among good ones is that PDU's status, the others stand.
        let mixed = try CoAPResponsePDU.decodeAll([2, 0x50, 0, 0, 0] + [2, 0x51, 6, 0, 0] + [2, 0x52, 0, 2, 0, 5, 0])
        #expect(mixed.map(\.status) == [.success, .invalidRequest, .success])
        #expect(mixed[2].body == [5, 0])
        #expect(try CoAPResponsePDU.decodeAll([]) == [])
        // A read's answer: the value parameter of the body.
        #expect(try CoAPResponsePDU(tid: 1, body: [0x01, 0x04, 0, 0, 0xB4, 0x43]).value() == [0, 0, 0xB4, 0x43])
        #expect(try CoAPResponsePDU(tid: 1).value() == nil)
    }

    @Test func everyFramingErrorIsNamed() throws {
        #expect(throws: CoAPCodecError.truncatedHeader(offset: 0, needed: 5, remaining: 4)) {
            try CoAPResponsePDU.decodeAll([2, 1, 0, 0])
        }
        #expect(throws: CoAPCodecError.truncatedHeader(offset: 5, needed: 5, remaining: 2)) {
            try CoAPResponsePDU.decodeAll([2, 1, 0, 0, 0, 2, 2])
        }
        #expect(throws: CoAPCodecError.bodyPastEnd(offset: 0, length: 0x0102, remaining: 3)) {
            try CoAPResponsePDU.decodeAll([2, 1, 0, 0x02, 0x01, 9, 9, 9])
        }
        // aiohomekit's bad control bytes: 0x08 and 0xCC lack the response bit or set bit 2-3.
        #expect(throws: CoAPCodecError.badControl(offset: 5, control: 0x08)) {
            try CoAPResponsePDU.decodeAll([2, 0x50, 0, 0, 0] + [0x08, 0x51, 0, 0, 0])
        }
        #expect(throws: CoAPCodecError.badControl(offset: 0, control: 0xCC)) {
            try CoAPResponsePDU.decodeAll([0xCC, 0x99, 0, 0, 0])
        }
        #expect(throws: CoAPCodecError.unknownStatus(tid: 0x99, status: 7)) {
            try CoAPResponsePDU.decodeAll([2, 0x99, 7, 0, 0])
        }
        let reqs = [CoAPRequestPDU.read(iid: 1, tid: 0x40), .read(iid: 2, tid: 0x41), .read(iid: 3, tid: 0x42)]
        #expect(throws: CoAPCodecError.tidMismatch(index: 1, expected: 0x41, got: 0x99)) {
            try CoAPResponsePDU.decode(
                [2, 0x40, 0, 2, 0, 3, 0] + [2, 0x99, 0, 2, 0, 4, 0] + [2, 0x42, 0, 0, 0], answering: reqs)
        }
        #expect(throws: CoAPCodecError.responseCount(expected: 3, got: 1)) {
            try CoAPResponsePDU.decode([2, 0x40, 0, 0, 0], answering: reqs)
        }
        let oversized = [UInt8](repeating: 0, count: 65_536)
        #expect(throws: CoAPCodecError.bodyTooLong(length: 65_536)) {
            try CoAPRequestPDU(.characteristicWrite, tid: 1, iid: 1, body: oversized).encoded()
        }
        #expect(throws: CoAPCodecError.bodyTooLong(length: 65_536)) {
            try CoAPResponsePDU(tid: 1, body: oversized).encoded()
        }
        // The largest body that fits is written whole.
        #expect(
            try CoAPRequestPDU(.characteristicWrite, tid: 1, iid: 1, body: Array(oversized.dropLast())).encoded().count
                == 65_542)
        // Requests, as an accessory reads them.
        #expect(throws: CoAPCodecError.truncatedHeader(offset: 0, needed: 7, remaining: 6)) {
            try CoAPRequestPDU.decodeAll([0, 3, 1, 1, 0, 0])
        }
        #expect(throws: CoAPCodecError.badControl(offset: 0, control: 2)) {
            try CoAPRequestPDU.decodeAll([2, 3, 1, 1, 0, 0, 0])
        }
        #expect(throws: CoAPCodecError.unknownOpcode(offset: 0, opcode: 0x7F)) {
            try CoAPRequestPDU.decodeAll([0, 0x7F, 1, 1, 0, 0, 0])
        }
        #expect(throws: CoAPCodecError.bodyPastEnd(offset: 7, length: 4, remaining: 1)) {
            try CoAPRequestPDU.decodeAll([0, 3, 1, 1, 0, 0, 0] + [0, 2, 2, 1, 0, 4, 0, 1])
        }
        #expect(throws: CoAPCodecError.bodyPastEnd(offset: 0, length: 3, remaining: 0)) {
            try CoAPEventPDU.decodeAll([0, 51, 0, 3, 0])
        }
        // A bad body TLV: an item claiming more than remains, a TTL of two bytes.
        #expect(throws: CoAPCodecError.self) { try HAPBLEBody.decode([0x01, 0x05, 1]) }
        #expect(throws: CoAPCodecError.self) { try HAPBLEBody.decode([0x01]) }
        #expect(throws: CoAPCodecError.self) { try HAPBLEBody.decode([0x08, 0x02, 1, 1]) }
    }

    @Test func requestsResponsesAndEventsRoundTrip() throws {
        let requests: [CoAPRequestPDU] = [
            .read(iid: 51, tid: 0), .write(iid: 52, tid: 1, value: [100, 0, 0, 0]),
            .timedWrite(iid: 0xFA52, tid: 2, value: Array(repeating: 7, count: 300), ttl: 20),
            .executeWrite(iid: 0xFA52, tid: 3), .attributeDatabase(tid: 4), .subscribe(iid: 51, tid: 5),
            .unsubscribe(iid: 51, tid: 6), CoAPRequestPDU(.characteristicSignatureRead, tid: 255, iid: 65_535),
        ]
        #expect(try CoAPRequestPDU.decodeAll(CoAPRequestPDU.encode(requests)) == requests)
        // A 300-byte value crosses a TLV fragment and comes back whole.
        let timed = try HAPBLEBody.decode(requests[2].body)
        #expect(timed.value?.count == 300)
        #expect(timed.ttl == 20)
        let responses = CoAPPDUStatus.allCases.enumerated().map { i, s in
            CoAPResponsePDU(tid: UInt8(i), status: s, body: s == .success ? [1, 1, 1] : [])
        }
        #expect(try CoAPResponsePDU.decodeAll(CoAPResponsePDU.encode(responses)) == responses)
        let events = [CoAPEventPDU(iid: 51, body: [1, 1, 1]), CoAPEventPDU(iid: 52, body: [])]
        #expect(try CoAPEventPDU.decodeAll(events.flatMap { try $0.encoded() }) == events)
    }

    @Test func valuesRoundTripByFormat() throws {
        let cases: [(CharacteristicValue, CharacteristicFormat, [UInt8])] = [
            (.bool(true), .bool, [1]), (.bool(false), .bool, [0]), (.uint(200), .uint8, [200]),
            (.uint(0xBEEF), .uint16, [0xEF, 0xBE]), (.uint(0xDEAD_BEEF), .uint32, [0xEF, 0xBE, 0xAD, 0xDE]),
            (.uint(UInt64.max), .uint64, [UInt8](repeating: 0xFF, count: 8)),
            (.int(-2), .int, [0xFE, 0xFF, 0xFF, 0xFF]),
            (.float(0.5), .float, [0, 0, 0, 0x3F]), (.string("Küche"), .string, Array("Küche".utf8)),
            (.data([1, 2, 3]), .data, [1, 2, 3]), (.data([6, 1, 2]), .tlv8, [6, 1, 2]),
        ]
        for (value, format, bytes) in cases {
            #expect(try HAPBLEValue.encode(value, format: format) == bytes, "\(format)")
            #expect(try HAPBLEValue.decode(bytes, format: format) == value, "\(format)")
        }
        // Out of range or of the wrong kind: an error, never wrapped or cut.
        #expect(throws: CoAPCodecError.self) { try HAPBLEValue.encode(.uint(256), format: .uint8) }
        #expect(throws: CoAPCodecError.self) { try HAPBLEValue.encode(.int(-1), format: .uint16) }
        #expect(throws: CoAPCodecError.self) { try HAPBLEValue.encode(.int(1 << 40), format: .int) }
        #expect(throws: CoAPCodecError.self) { try HAPBLEValue.encode(.string("1"), format: .float) }
        #expect(throws: CoAPCodecError.self) { try HAPBLEValue.encode(.float(.nan), format: .float) }
        #expect(throws: CoAPCodecError.self) { try HAPBLEValue.decode([1, 2], format: .uint32) }
        #expect(throws: CoAPCodecError.self) { try HAPBLEValue.decode([0xFF, 0xFE], format: .string) }
        #expect(throws: CoAPCodecError.self) { try HAPBLEValue.decode([], format: .bool) }
    }

    /// 1,000 random byte strings through every decoder: each answers or throws, none crashes.
    @Test func randomBytesNeverCrash() throws {
        var rng = SplitMix(seed: 42)
        var decoded = 0
        for round in 0..<1000 {
            let count = Int(rng.next() % 64) + (round % 10 == 0 ? Int(rng.next() % 2000) : 0)
            var bytes = (0..<count).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            // Half start like a real answer, so the decoders get past the first check.
            if round % 2 == 0, !bytes.isEmpty { bytes[0] = round % 4 == 0 ? 0x02 : 0x18 }
            if (try? CoAPResponsePDU.decodeAll(bytes)) != nil { decoded += 1 }
            _ = try? CoAPRequestPDU.decodeAll(bytes)
            _ = try? CoAPEventPDU.decodeAll(bytes)
            _ = try? HAPBLEBody.decode(bytes)
            if let db = try? ThreadAttributeDatabase.decode(bytes) {
                var problems: [String] = []
                _ = try? db.accessories(idPrefix: "x", problems: &problems) { _, _ in bytes }
            }
            for f in CharacteristicFormat.allCases { _ = try? HAPBLEValue.decode(bytes, format: f) }
        }
        // Some of them decode: the loop reached past the first checks.
        #expect(decoded > 0)
    }
}

/// A small deterministic generator, so a failure repeats.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
