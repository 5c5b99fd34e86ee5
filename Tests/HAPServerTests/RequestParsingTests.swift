import HomeModel
import XCTest

@testable import HAPServer

/// What a controller sends, read strictly: HTTP requests, id lists, values.
final class RequestParsingTests: XCTestCase {
    func parse(_ text: String) throws(HTTPRequestError) -> HAPRequest? {
        var parser = HTTPRequestParser()
        parser.feed(Array(text.utf8))
        return try parser.next()
    }

    func testARequestSplitAnywhereIsReadWhole() throws {
        let text = "PUT /characteristics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
        let bytes = Array(text.utf8)
        for cut in 0...bytes.count {
            var parser = HTTPRequestParser()
            parser.feed(bytes[..<cut])
            if cut < bytes.count { XCTAssertNil(try parser.next(), "cut at \(cut)") }
            parser.feed(bytes[cut...])
            let request = try XCTUnwrap(try parser.next())
            XCTAssertEqual(request.method, "PUT")
            XCTAssertEqual(request.path, "/characteristics")
            XCTAssertEqual(request.body, Array("hello".utf8))
        }
    }

    func testTheQueryIsSplit() throws {
        let request = try XCTUnwrap(try parse("GET /characteristics?id=1.2,3.4&meta=1 HTTP/1.1\r\n\r\n"))
        XCTAssertEqual(request.path, "/characteristics")
        XCTAssertEqual(request.queryValue("id"), "1.2,3.4")
        XCTAssertEqual(request.queryValue("meta"), "1")
        XCTAssertEqual(
            HAPServerConnection.parseIDs("1.2,3.4"),
            [HAPCharacteristicID(aid: 1, iid: 2), HAPCharacteristicID(aid: 3, iid: 4)])
        for bad in ["", "1", "1.", ".2", "1.2,", "1.2.3", "a.b", "0.1", "-1.2"] {
            XCTAssertNil(HAPServerConnection.parseIDs(bad), bad)
        }
    }

    func testMalformedRequestsAreErrors() {
        let bad = [
            "GARBAGE\r\n\r\n", "GET\r\n\r\n", "get /x HTTP/1.1\r\n\r\n", "GET x HTTP/1.1\r\n\r\n",
            "GET /x SPDY/3\r\n\r\n", "GET /x HTTP/1.1\r\nNoColon\r\n\r\n", "GET /x HTTP/1.1\r\n: v\r\n\r\n",
            "PUT /x HTTP/1.1\r\nContent-Length: -1\r\n\r\n", "PUT /x HTTP/1.1\r\nContent-Length: 1x\r\n\r\n",
            "PUT /x HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n",
            "PUT /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
        ]
        for text in bad {
            XCTAssertThrowsError(try parse(text), text.debugDescription)
        }
        var parser = HTTPRequestParser()
        parser.feed([UInt8](repeating: 65, count: HTTPRequestParser.maxHeaderBytes + 1))
        XCTAssertThrowsError(try parser.next())
        var binary = HTTPRequestParser()
        binary.feed([0xFF, 0xFE, 0x20, 0x2F, 0x20] + Array("HTTP/1.1\r\n\r\n".utf8))
        XCTAssertThrowsError(try binary.next())
    }

    func testResponsesHaveAReasonPhraseAndALength() {
        XCTAssertEqual(
            String(decoding: HAPResponse.noContent.encoded(), as: UTF8.self),
            "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n")
        XCTAssertEqual(
            String(decoding: HAPResponse.status(400, .insufficientPrivileges).encoded(), as: UTF8.self),
            "HTTP/1.1 400 Bad Request\r\nContent-Type: application/hap+json\r\nContent-Length: 17\r\n\r\n"
                + "{\"status\":-70401}")
        XCTAssertTrue(
            String(decoding: HAPResponse.json(200, []).encoded(event: true), as: UTF8.self).hasPrefix(
                "EVENT/1.0 200 OK\r\n"))
    }

    func testValuesAreCheckedAgainstTheFormatAndRange() {
        let brightness = HAPCharacteristic(
            iid: 1, type: "8", format: .int, permissions: [.read, .write], minValue: 0, maxValue: 100)
        XCTAssertEqual(ValueCheck.check(.int(40), for: brightness), .success(.int(40)))
        XCTAssertEqual(ValueCheck.check(.double(40), for: brightness), .success(.int(40)))
        XCTAssertEqual(ValueCheck.check(.int(101), for: brightness), .failure(.invalidValue))
        XCTAssertEqual(ValueCheck.check(.double(4.5), for: brightness), .failure(.invalidValue))
        XCTAssertEqual(ValueCheck.check(.string("40"), for: brightness), .failure(.invalidValue))
        let on = HAPCharacteristic(iid: 1, type: "25", format: .bool, permissions: [.write])
        XCTAssertEqual(ValueCheck.check(.int(1), for: on), .success(.bool(true)))
        XCTAssertEqual(ValueCheck.check(.bool(false), for: on), .success(.bool(false)))
        XCTAssertEqual(ValueCheck.check(.int(2), for: on), .failure(.invalidValue))
        let state = HAPCharacteristic(
            iid: 1, type: "1E", format: .uint8, permissions: [.write], minValue: 0, maxValue: 3, validValues: [0, 1])
        XCTAssertEqual(ValueCheck.check(.int(2), for: state), .failure(.invalidValue))
        XCTAssertEqual(ValueCheck.check(.int(-1), for: state), .failure(.invalidValue))
        let name = HAPCharacteristic(iid: 1, type: "23", format: .string, permissions: [.write], maxLength: 3)
        XCTAssertEqual(ValueCheck.check(.string("abcd"), for: name), .failure(.invalidValue))
        let temperature = HAPCharacteristic(iid: 1, type: "11", format: .float, permissions: [.write], maxValue: 100)
        XCTAssertEqual(ValueCheck.check(.int(20), for: temperature), .success(.double(20)))
        XCTAssertEqual(ValueCheck.check(.double(100.5), for: temperature), .failure(.invalidValue))
    }
}
