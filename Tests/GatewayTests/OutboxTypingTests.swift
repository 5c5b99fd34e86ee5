import HomeModel
import XCTest

@testable import Gateway

/// The content type of a `state` follows its text: the quick path for common literals says
/// `application/json` exactly when the JSON parser would.
final class OutboxTypingTests: XCTestCase {
    func testTheQuickPathAgreesWithTheParser() {
        let texts = [
            "true", "false", "null", "0", "-0", "80", "-12", "21.5", "0.125", "123456789012345", "1234567890123456",
            "01", "1.", ".5", "-", "1e5", "1E400", "tru", "True", "Garage", "\"42\"", "[1]", " 1", "1 ", "", "0x10",
            "12.30", "-0.0", "999999999999999.9",
        ]
        for text in texts {
            let bytes = Array(text.utf8)
            let parsed = (try? JSONValue(parsing: bytes)) != nil
            if Outbox.isPlainJSONLiteral(bytes) { XCTAssertTrue(parsed, "quick path took '\(text)'") }
            XCTAssertEqual(Outbox.isJSONText(bytes), parsed, "'\(text)'")
        }
        // The three words by the quick path; their near misses of the same lengths not.
        for word in ["true", "false", "null"] { XCTAssertTrue(Outbox.isPlainJSONLiteral(Array(word.utf8)), word) }
        for word in ["True", "fals", "nulls", "truex", "nul"] {
            XCTAssertFalse(Outbox.isPlainJSONLiteral(Array(word.utf8)), word)
        }
        XCTAssertTrue(Outbox.isPlainJSONLiteral(Array("21.5".utf8)))
        XCTAssertFalse(Outbox.isPlainJSONLiteral(Array("1e5".utf8)))
    }
}
