import XCTest

@testable import HAPServer

final class SetupCodeTests: XCTestCase {
    func testTheForbiddenCodesAreRefused() {
        for digit in 0...9 {
            let d = String(digit)
            let code = "\(d)\(d)\(d)-\(d)\(d)-\(d)\(d)\(d)"
            XCTAssertNil(HAPSetupCode(code), code)
            XCTAssertNil(HAPSetupCode(code.replacingOccurrences(of: "-", with: "")), code)
        }
        XCTAssertNil(HAPSetupCode("123-45-678"))
        XCTAssertNil(HAPSetupCode("876-54-321"))
        XCTAssertEqual(HAPSetupCode.forbidden.count, 12)
    }

    func testTheShapeIsChecked() {
        XCTAssertEqual(HAPSetupCode("031-45-154")?.revealed, "031-45-154")
        XCTAssertEqual(HAPSetupCode("03145154")?.revealed, "031-45-154")
        for bad in ["031-45-15", "0314-5-154", "03-145-154", "031 45 154", "03a-45-154", "", "٠٣١-٤٥-١٥٤"] {
            XCTAssertNil(HAPSetupCode(bad), bad)
        }
    }

    func testRandomNeverYieldsAForbiddenCode() {
        // Draws that make every forbidden code come first: each is skipped.
        var draws: [UInt32] = [0, 11_111_111, 12_345_678, 87_654_321, 99_999_999, 31_415_926]
        XCTAssertEqual(HAPSetupCode.first { draws.removeFirst() }.revealed, "314-15-926")
        XCTAssertTrue(draws.isEmpty)
        // And over many draws of the system's generator, none is forbidden.
        for _ in 0..<5000 {
            let code = HAPSetupCode.random().revealed
            XCTAssertFalse(HAPSetupCode.forbidden.contains(code))
            XCTAssertNotNil(HAPSetupCode(code))
        }
    }

    func testTheCodeIsNeverPrintedByInterpolation() {
        let code = HAPSetupCode("031-45-154")!
        XCTAssertEqual("\(code)", "***-**-***")
        XCTAssertFalse(String(reflecting: code).contains("031"))
    }
}
