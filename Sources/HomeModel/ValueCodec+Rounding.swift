import Foundation

/// A float value at its characteristic's precision: what every `state` text and `$state`
/// document is made of, so it runs on each value change.
extension ValueCodec {
    /// A float value at its characteristic's precision (see `text(_:metadata:)`); other values
    /// as they are.
    public static func rounded(_ value: CharacteristicValue, metadata: CharacteristicMetadata) -> CharacteristicValue {
        guard case .float(let d) = value, d.isFinite, metadata.format == .float else { return value }
        return .float(rounded(d, step: metadata.minStep, base: metadata.minValue))
    }

    /// `d` on the grid of `step` from `base`, printed with the step's decimals so that binary
    /// noise goes (0.1 × 3 is 0.30000000000000004); without a step, 7 significant digits.
    public static func rounded(_ d: Double, step: Double?, base: Double? = nil) -> Double {
        guard let step, step > 0, step.isFinite else {
            if let exponent = decimalExponent(d), let quick = rounded(d, places: 6 - exponent) { return quick }
            return Double(String(format: "%.7g", d)) ?? d
        }
        let origin = base ?? 0
        let snapped = origin + ((d - origin) / step).rounded() * step
        let places = decimals(step) + decimals(origin)
        if let quick = rounded(snapped, places: places) { return quick }
        return Double(String(format: "%.*f", places, snapped)) ?? snapped
    }

    /// `d` rounded to `places` decimals (negative: to tens, hundreds…), the same double as
    /// printing it so with printf and reading the text back, without either (every value change
    /// comes here). Reading the text gives the double nearest n × 10^-places; n / 10^places is
    /// that double, the division being correctly rounded and 10^places exact. Nil, for the
    /// caller to print, where this could pick another n than printf (which rounds the exact
    /// binary value): `d` scaled lies within a millionth of a halfway point, or is too large
    /// for its rounding error to stay below that.
    static func rounded(_ d: Double, places: Int) -> Double? {
        guard d.isFinite, places >= -15, places <= 15 else { return nil }
        let power = powersOfTen[abs(places)]
        let scaled = places >= 0 ? d * power : d / power
        guard abs(scaled) < 1e9 else { return nil }
        let fraction = abs(scaled - scaled.rounded(.towardZero))
        guard abs(fraction - 0.5) > 1e-6 else { return nil }
        let n = scaled.rounded()
        return places >= 0 ? n / power : n * power
    }

    /// 10^0 … 10^15, each exact in a Double.
    private static let powersOfTen: [Double] = (0...15).map { pow(10, Double($0)) }

    /// The power of ten of `d`'s leading digit (123.4 → 2, 0.05 → -2); nil for zero, a
    /// non-finite value, or one beyond the table.
    static func decimalExponent(_ d: Double) -> Int? {
        let magnitude = abs(d)
        guard magnitude.isFinite, magnitude > 0 else { return nil }
        var exponent = Int(log10(magnitude).rounded(.down))
        // log10 may be off by one ulp at a power of ten: checked against the exact table.
        guard exponent >= -14, exponent <= 14 else { return nil }
        if exponent >= 0 {
            if magnitude >= powersOfTen[exponent + 1] { exponent += 1 }
            if magnitude < powersOfTen[exponent] { exponent -= 1 }
        } else {
            if magnitude >= 1 / powersOfTen[-exponent - 1] { exponent += 1 }
            if magnitude < 1 / powersOfTen[-exponent] { exponent -= 1 }
        }
        return exponent
    }

    /// The decimals a number needs (0.1 → 1, 0.25 → 2, 5 → 0), at most 6.
    public static func decimals(_ d: Double) -> Int {
        for places in 0...6 {
            let scaled = d * pow(10, Double(places))
            if abs(scaled - scaled.rounded()) < 1e-6 * max(1, abs(scaled)) { return places }
        }
        return 6
    }
}
