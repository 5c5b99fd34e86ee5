public import Foundation

/// ISO 8601 timestamps in UTC, `2026-11-28T13:17:23Z` or with milliseconds
/// `2026-11-28T13:17:23.120Z`, written by arithmetic alone.
///
/// Why not Foundation's `ISO8601DateFormatter` or `Date.ISO8601FormatStyle`: on Linux both go
/// through ICU's calendar and date formatter, whose first use maps several megabytes of ICU's
/// code and data into the process (issue 44: a tenth of a 1,000-accessory gateway's peak) for a
/// format that never depends on a locale. The output is the format style's, character for
/// character (`UTCTimestampTests` holds it to Foundation's on random dates): the time is cut,
/// not rounded, to the millisecond, and to the second when milliseconds are left out.
public enum UTCTimestamp {
    /// `date` as `yyyy-MM-ddTHH:mm:ssZ`, or `yyyy-MM-ddTHH:mm:ss.SSSZ` with `milliseconds`.
    public static func string(_ date: Date, milliseconds: Bool = false) -> String {
        // The whole seconds first, then the fraction cut to milliseconds: the fraction of
        // 219390101366.714 is 0.71398…, which is 713 ms, where `t * 1000` would round up to 714.
        let time = date.timeIntervalSince1970
        let whole = time.rounded(.down)
        // Far beyond the years a gateway lives (2^52 s), no fraction is left and Int64 would trap.
        guard whole.magnitude < 4.5e15 else {
            return milliseconds ? "0000-01-01T00:00:00.000Z" : "0000-01-01T00:00:00Z"
        }
        let seconds = Int64(whole)
        let millis = min(999, Int64(((time - whole) * 1000).rounded(.down)))
        let (days, secondOfDay) = floorDivide(seconds, 86_400)
        let (year, month, day) = civil(days: days)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(24)
        append(year, digits: 4, to: &bytes)
        bytes.append(UInt8(ascii: "-"))
        append(month, digits: 2, to: &bytes)
        bytes.append(UInt8(ascii: "-"))
        append(day, digits: 2, to: &bytes)
        bytes.append(UInt8(ascii: "T"))
        append(secondOfDay / 3600, digits: 2, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
        append(secondOfDay / 60 % 60, digits: 2, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
        append(secondOfDay % 60, digits: 2, to: &bytes)
        if milliseconds {
            bytes.append(UInt8(ascii: "."))
            append(millis, digits: 3, to: &bytes)
        }
        bytes.append(UInt8(ascii: "Z"))
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Quotient and remainder rounded toward minus infinity: a time before 1970 still has a
    /// time of day from 0 up.
    private static func floorDivide(_ value: Int64, _ divisor: Int64) -> (Int64, Int64) {
        let quotient = value / divisor - (value % divisor < 0 ? 1 : 0)
        return (quotient, value - quotient * divisor)
    }

    /// The proleptic Gregorian date of a day counted from 1970-01-01 (Howard Hinnant's
    /// `civil_from_days`, which counts in eras of 400 years so that leap years need no table).
    private static func civil(days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// `value` in decimal, zero-padded to `digits`; a negative year keeps its sign.
    private static func append(_ value: Int64, digits: Int, to bytes: inout [UInt8]) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        let text = Array(String(value.magnitude).utf8)
        bytes.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: max(0, digits - text.count)))
        bytes.append(contentsOf: text)
    }
}
