import HomeModel
import XCTest

/// Text from the network never reaches a terminal raw (what a hostile peer's text looks like in
/// `homemqtt discover` and the gateway's log is in EndToEndTests' `PeerTextTests`).
final class PeerTextTests: XCTestCase {
    func testControlCharactersAreEscapedAndTheRestKept() {
        XCTAssertEqual("Lamp".escapingControlCharacters, "Lamp")
        XCTAssertEqual("Küche – Licht 💡".escapingControlCharacters, "Küche – Licht 💡")
        XCTAssertEqual("a\u{1B}[2Jb".escapingControlCharacters, #"a\u{1B}[2Jb"#)
        XCTAssertEqual("\u{0}\t\n\r\u{7F}".escapingControlCharacters, #"\u{00}\u{09}\u{0A}\u{0D}\u{7F}"#)
        XCTAssertEqual("x\u{9B}31my\u{85}".escapingControlCharacters, #"x\u{9B}31my\u{85}"#)
        XCTAssertEqual("C:\\path".escapingControlCharacters, "C:\\path")
    }
}
