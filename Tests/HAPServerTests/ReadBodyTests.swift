import HomeModel
import XCTest

@testable import HAPServer

/// A values-only read's body is written straight as bytes (`plainRows`); a controller must get
/// exactly what the `JSONValue` document of the same rows encodes to, failed reads included.
final class ReadBodyTests: XCTestCase {
    func document(
        _ ids: [HAPCharacteristicID], _ values: [HAPCharacteristicID: JSONValue],
        _ statuses: [HAPCharacteristicID: HAPStatus]?
    ) -> String {
        var seen: Set<HAPCharacteristicID> = []
        let rows: [JSONValue] = ids.filter { seen.insert($0).inserted }.map { id in
            var row: [String: JSONValue] = ["aid": .int(Int64(id.aid)), "iid": .int(Int64(id.iid))]
            if let value = values[id] { row["value"] = value }
            if let statuses { row["status"] = .int(Int64(statuses[id]?.rawValue ?? 0)) }
            return .object(row)
        }
        return JSONValue.object(["characteristics": .array(rows)]).encoded()
    }

    func testPlainRowsAreTheDocumentsBytes() {
        let a = HAPCharacteristicID(aid: 1, iid: 10)
        let b = HAPCharacteristicID(aid: 150, iid: 12_345)
        let c = HAPCharacteristicID(aid: 2, iid: 9)
        let values: [HAPCharacteristicID: JSONValue] = [
            a: .int(42), b: .string("a \"quoted\" name/é"), c: .double(21.5),
        ]
        let cases: [([HAPCharacteristicID], [HAPCharacteristicID: JSONValue], [HAPCharacteristicID: HAPStatus]?)] = [
            ([a], values, nil),
            ([a, b, c, a], values, nil),
            ([b, c], [b: .bool(true), c: .null], nil),
            ([a, c], [a: .int(-3)], [c: .doesNotExist]),
            ([c, b, a], [:], [a: .writeOnly, b: .timedOut, c: .communicationFailure]),
        ]
        for (ids, values, statuses) in cases {
            let written = String(
                decoding: HAPServerConnection.plainRows(ids, values: values, statuses: statuses), as: UTF8.self)
            XCTAssertEqual(written, document(ids, values, statuses))
        }
        XCTAssertEqual(
            String(decoding: HAPServerConnection.plainRows([a], values: values, statuses: nil), as: UTF8.self),
            #"{"characteristics":[{"aid":1,"iid":10,"value":42}]}"#)
    }
}
