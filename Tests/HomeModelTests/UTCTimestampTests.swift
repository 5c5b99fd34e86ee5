import Foundation
import HomeModel
import TestSupport
import Testing

/// `UTCTimestamp` writes what Foundation's ISO 8601 format style writes, without ICU: the
/// health document's and `$last-seen`'s times must not change form when the formatter does.
@Suite struct UTCTimestampTests {
    static let withMilliseconds = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
    static let wholeSeconds = Date.ISO8601FormatStyle()

    @Test func knownTimes() {
        let cases: [(Double, String)] = [
            (0, "1970-01-01T00:00:00.000Z"), (0.9996, "1970-01-01T00:00:00.999Z"),
            (-0.5, "1969-12-31T23:59:59.500Z"), (-1.0004, "1969-12-31T23:59:58.999Z"),
            (951_782_400, "2000-02-29T00:00:00.000Z"), (1_764_333_443.1239, "2025-11-28T12:37:23.123Z"),
            (253_402_300_799.9999, "9999-12-31T23:59:59.999Z"),
        ]
        for (seconds, text) in cases {
            #expect(UTCTimestamp.string(Date(timeIntervalSince1970: seconds), milliseconds: true) == text)
        }
        #expect(UTCTimestamp.string(Date(timeIntervalSince1970: 1_764_333_443.9999)) == "2025-11-28T12:37:23Z")
    }

    /// Random times from 1601 to 9999, some on whole milliseconds, some between them, agree with
    /// Foundation's format styles in both forms. Seeded: the same 20,000 times in every run.
    @Test func agreesWithFoundationOnRandomTimes() {
        var generator = SeededGenerator(state: 0x2026_1128)
        for index in 0..<20_000 {
            var seconds = Double.random(in: -11_644_473_600...253_402_300_799, using: &generator)
            if index % 2 == 0 { seconds = (seconds * 1000).rounded(.down) / 1000 }
            let date = Date(timeIntervalSince1970: seconds)
            #expect(UTCTimestamp.string(date, milliseconds: true) == Self.withMilliseconds.format(date), "\(seconds)")
            #expect(UTCTimestamp.string(date) == Self.wholeSeconds.format(date), "\(seconds)")
        }
    }

    /// Now, as the health document and `$last-seen` use it.
    @Test func agreesWithFoundationNow() {
        let now = Date()
        #expect(UTCTimestamp.string(now, milliseconds: true) == Self.withMilliseconds.format(now))
    }
}
