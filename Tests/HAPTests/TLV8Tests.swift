import XCTest
@testable import HAP

final class TLV8Tests: XCTestCase {
    func testRoundTripWithFragmentation() throws {
        let long = (0..<600).map { UInt8($0 % 251) }
        var t = TLV8()
        t.append(0x06, byte: 3)
        t.append(0x03, long)
        t.append(0x04, [])
        t.append(0x0A, Array(repeating: 7, count: 255))
        let bytes = t.encoded()
        // 600 bytes → fragments of 255, 255, 90.
        XCTAssertEqual(bytes[3], 0x03)
        XCTAssertEqual(bytes[4], 255)
        XCTAssertEqual(bytes[3 + 2 + 255], 0x03)
        XCTAssertEqual(bytes[3 + 2 + 255 + 1], 255)
        XCTAssertEqual(bytes[3 + 2 * (2 + 255) + 1], 90)
        let back = try TLV8.decode(bytes)
        XCTAssertEqual(back, t)
        XCTAssertEqual(back[0x03], long)
        XCTAssertEqual(back[0x04], [])
    }

    func testExactly255BytesFollowedBySameTypeStaysSeparate() throws {
        // A 255-byte value followed by an empty separator-less item of another type.
        var t = TLV8()
        t.append(0x01, Array(repeating: 1, count: 255))
        t.append(0x02, [9])
        XCTAssertEqual(try TLV8.decode(t.encoded()), t)
    }

    func testSeparatedRecords() throws {
        var t = TLV8()
        t.append(0x06, byte: 2)
        t.append(0x01, Array("A".utf8)); t.append(0x0B, byte: 1)
        t.appendSeparator()
        t.append(0x01, Array("B".utf8)); t.append(0x0B, byte: 0)
        let decoded = try TLV8.decode(t.encoded())
        let records = decoded.records()
        XCTAssertEqual(records.count, 2)
        XCTAssertEqual(records[0][0x01], Array("A".utf8))
        XCTAssertEqual(records[1][0x01], Array("B".utf8))
        XCTAssertEqual(records[1][0x0B], [0])
    }

    func testTruncatedInputIsBadTLV() {
        XCTAssertThrowsError(try TLV8.decode([0x06, 0x05, 1, 2])) {
            XCTAssertEqual(($0 as? HAPError)?.code.rawValue, "bad-tlv")
        }
        XCTAssertThrowsError(try TLV8.decode([0x06])) { XCTAssertEqual(($0 as? HAPError)?.code.rawValue, "bad-tlv") }
    }
}

final class SessionCipherTests: XCTestCase {
    func testFramesRoundTripAndSplitAt1024() throws {
        let secret = HAPCrypto.randomBytes(32)
        var controller = HAPSessionCipher(sharedSecret: secret, isController: true)
        var accessory = HAPSessionCipher(sharedSecret: secret, isController: false)
        let message = (0..<2500).map { UInt8($0 & 0xFF) }
        let wire = try controller.encrypt(message)
        XCTAssertEqual(wire.count, 2500 + 3 * (2 + 16))
        XCTAssertEqual(Int(wire[0]) | Int(wire[1]) << 8, 1024)
        // Delivered in awkward pieces, it still decrypts to the whole message.
        var got: [UInt8] = []
        var i = 0
        while i < wire.count {
            let n = min(333, wire.count - i)
            got += try accessory.decrypt(Array(wire[i..<i + n]))
            i += n
        }
        XCTAssertEqual(got, message)
        let reply = try accessory.encrypt(Array("HTTP/1.1 204 No Content\r\n\r\n".utf8))
        XCTAssertEqual(try controller.decrypt(reply), Array("HTTP/1.1 204 No Content\r\n\r\n".utf8))
    }

    func testOversizedAndTamperedFramesAreProtocolErrors() throws {
        let secret = HAPCrypto.randomBytes(32)
        var c = HAPSessionCipher(sharedSecret: secret)
        XCTAssertThrowsError(try c.decrypt([0x01, 0x04] + [UInt8](repeating: 0, count: 10))) {
            XCTAssertEqual(($0 as? HAPError)?.code.rawValue, "oversized-frame")
        }
        var sender = HAPSessionCipher(sharedSecret: secret, isController: false)
        var frame = try sender.encrypt([1, 2, 3])
        frame[3] ^= 0x40
        var receiver = HAPSessionCipher(sharedSecret: secret)
        XCTAssertThrowsError(try receiver.decrypt(frame)) {
            XCTAssertEqual(($0 as? HAPError)?.code.rawValue, "bad-frame")
        }
    }

    func testHTTPParserHandlesChunkedAndEvents() throws {
        var p = HTTPResponseParser()
        p.feed(
            Array(
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\nEVENT/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}HTTP/1.1 204 No Content\r\n\r\n"
                    .utf8))
        let a = try XCTUnwrap(try p.next())
        XCTAssertEqual(a.body, Array("abc".utf8))
        XCTAssertFalse(a.isEvent)
        let e = try XCTUnwrap(try p.next())
        XCTAssertTrue(e.isEvent)
        XCTAssertEqual(e.body, Array("{}".utf8))
        let n = try XCTUnwrap(try p.next())
        XCTAssertEqual(n.status, 204)
        XCTAssertNil(try p.next())
        var bad = HTTPResponseParser()
        bad.feed(Array("SPDY/9 200 OK\r\n\r\n".utf8))
        XCTAssertThrowsError(try bad.next()) { XCTAssertEqual(($0 as? HAPError)?.code.rawValue, "bad-http") }

        // Trailer lines after the last chunk are read past; the next message follows intact.
        var trailers = HTTPResponseParser()
        trailers.feed(
            Array(
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-T: 1\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n"
                    .utf8))
        XCTAssertEqual(try XCTUnwrap(try trailers.next()).body, Array("ok".utf8))
        XCTAssertEqual(try XCTUnwrap(try trailers.next()).status, 204)
        // A chunk size that does not match its data is an error, not a shifted parse.
        var shifted = HTTPResponseParser()
        shifted.feed(Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n0\r\n\r\n".utf8))
        XCTAssertThrowsError(try shifted.next()) { XCTAssertEqual(($0 as? HAPError)?.code.rawValue, "bad-http") }
    }
}
