import SetupQR
import TestSupport
import XCTest

/// The setup QR code read back by zbarimg, an independent reader: from the matrix, the SVG the
/// web view serves and the half blocks a terminal shows, each must read as exactly the URI.
final class SetupQRTests: XCTestCase {
    /// A setup URI of the bridge's form: `X-HM://`, nine base-36 digits, a four-character setup id.
    let uri = "X-HM://0023ISYWYHMQT"

    func testTheMatrixReadsAsTheURI() async throws {
        let matrix = try XCTUnwrap(QRMatrix(encoding: uri))
        // Version 1 (21 modules) holds 25 alphanumeric characters at level L: the URI's 20 fit.
        XCTAssertEqual(matrix.size, 21)
        let rows = (0..<matrix.size).map { y in (0..<matrix.size).map { x in matrix[x, y] } }
        let read = try await QRReader.decode(rows)
        XCTAssertEqual(read, [uri])
    }

    func testTheSVGReadsAsTheURIAndHasNoScript() async throws {
        let matrix = try XCTUnwrap(QRMatrix(encoding: uri))
        let svg = matrix.svg()
        XCTAssertTrue(svg.hasPrefix("<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 29 29\""), svg)
        XCTAssertFalse(svg.lowercased().contains("script"))
        XCTAssertFalse(svg.lowercased().contains(" on"), "no event handler attribute")
        let rows = try QRReader.modules(svg: svg)
        // The quiet zone of 4: the outer four rows and columns are white.
        XCTAssertEqual(rows.count, 29)
        XCTAssertFalse(rows.prefix(4).joined().contains(true))
        XCTAssertFalse(rows.suffix(4).joined().contains(true))
        XCTAssertFalse(rows.contains { $0.prefix(4).contains(true) || $0.suffix(4).contains(true) })
        let read = try await QRReader.decode(rows)
        XCTAssertEqual(read, [uri])
    }

    func testTheTerminalTextReadsAsTheURIInBothColourings() async throws {
        let matrix = try XCTUnwrap(QRMatrix(encoding: uri))
        let plain = matrix.terminalText(.plain)
        // 21 modules and a quiet zone of 2 each side: 25 columns, 13 lines of two rows.
        let lines = plain.split(separator: "\n", omittingEmptySubsequences: false)
        XCTAssertEqual(lines.count, 14, "13 lines, each ending in a newline")
        XCTAssertTrue(lines.dropLast().allSatisfy { $0.count == 25 }, plain)
        XCTAssertFalse(plain.contains("\u{1B}"), "no escape sequence in the plain text")
        // Plain: the light modules are drawn, so the quiet zone's first line is all full blocks.
        XCTAssertEqual(lines.first.map(String.init), String(repeating: "█", count: 25))
        let fromPlain = QRReader.modules(terminal: plain, darkDrawn: false)
        let readPlain = try await QRReader.decode(fromPlain)
        XCTAssertEqual(readPlain, [uri])

        let ansi = matrix.terminalText(.ansi)
        let ansiLines = ansi.split(separator: "\n")
        XCTAssertEqual(ansiLines.count, 13)
        XCTAssertTrue(
            ansiLines.allSatisfy { $0.hasPrefix("\u{1B}[30;107m") && $0.hasSuffix("\u{1B}[0m") },
            "every line black on white, and the colours reset at its end")
        let fromANSI = QRReader.modules(terminal: ansi, darkDrawn: true)
        XCTAssertEqual(fromANSI, fromPlain, "the same modules, drawn the other way round")
        let readANSI = try await QRReader.decode(fromANSI)
        XCTAssertEqual(readANSI, [uri])
    }

    func testALongerTextTakesALargerVersionAndStillReads() async throws {
        let text = "X-HM://" + String(repeating: "A1B2C3", count: 12)
        let matrix = try XCTUnwrap(QRMatrix(encoding: text))
        XCTAssertGreaterThan(matrix.size, 21)
        let rows = try QRReader.modules(svg: matrix.svg())
        let read = try await QRReader.decode(rows)
        XCTAssertEqual(read, [text])
    }

    func testATextThatFitsNoQRCodeIsRefused() {
        XCTAssertNil(QRMatrix(encoding: String(repeating: "ü", count: 2_000)))
        XCTAssertNil(QRMatrix(encoding: "a\u{0}b"))
    }
}
