import Foundation

/// The checks of numbers: integers against their format's range, and any number against the
/// characteristic's bounds, valid values and step.
extension ValueCodec {
    static func validateInteger(
        _ value: CharacteristicValue, metadata: CharacteristicMetadata, label: @autoclosure () -> String
    )
        throws(ModelError) -> CharacteristicValue
    {
        // Held as sign + magnitude so every uint64 and int64 compares exactly.
        let negative: Bool
        let magnitude: UInt64
        switch value {
        case .int(let i):
            negative = i < 0
            magnitude = i.magnitude
        case .uint(let u):
            negative = false
            magnitude = u
        case .float(let d):
            guard d.isFinite, d.rounded() == d else {
                throw ModelError(code: .invalidType, message: "\(label()) must be an integer, got \(describe(value))")
            }
            negative = d < 0
            guard let m = UInt64(exactly: d.magnitude) else {
                throw ModelError(
                    code: .outOfRange, message: "\(label()) must be \(boundsText(metadata)), got \(describe(value))")
            }
            magnitude = m
        default:
            throw ModelError(
                code: .invalidType, message: "\(label()) must be \(kindWanted(metadata)), got \(describe(value))")
        }
        let shown = negative ? "-\(magnitude)" : "\(magnitude)"
        let (low, high): (Int64, UInt64) =
            switch metadata.format {
            case .uint8: (0, UInt64(UInt8.max))
            case .uint16: (0, UInt64(UInt16.max))
            case .uint32: (0, UInt64(UInt32.max))
            case .int: (Int64(Int32.min), UInt64(Int32.max))
            default: (0, UInt64.max)
            }
        let fits = negative ? (low < 0 && magnitude <= low.magnitude) : magnitude <= high
        guard fits else {
            throw ModelError(code: .outOfRange, message: "\(label()) must be \(boundsText(metadata)), got \(shown)")
        }
        let result: CharacteristicValue =
            metadata.format == .int
            ? .int(negative ? -Int64(magnitude) : Int64(magnitude))
            : .uint(magnitude)
        let exact: Int64? = negative ? -Int64(magnitude) : Int64(exactly: magnitude)
        if !metadata.validValues.isEmpty {
            guard let key = exact, metadata.validValues[key] != nil else {
                throw ModelError(
                    code: .notAValidValue,
                    message: "\(label()) must be one of \(validValuesList(metadata)), got \(shown)"
                )
            }
        }
        let d = negative ? -Double(magnitude) : Double(magnitude)
        try checkNumber(d, metadata: metadata, label: label(), shown: shown)
        return result
    }

    static func boundsText(_ metadata: CharacteristicMetadata) -> String {
        var low = metadata.minValue
        var high = metadata.maxValue
        if let bounds = metadata.format.integerBounds {
            low = max(low ?? bounds.lowerBound, bounds.lowerBound)
            high = min(high ?? bounds.upperBound, bounds.upperBound)
        }
        switch (low, high) {
        case let (l?, h?): return "\(format(l))…\(format(h))"
        case let (l?, nil): return "at least \(format(l))"
        case let (nil, h?): return "at most \(format(h))"
        case (nil, nil): return "a number"
        }
    }

    static func checkNumber(
        _ d: Double, metadata: CharacteristicMetadata, label: @autoclosure () -> String, shown: String? = nil
    )
        throws(ModelError)
    {
        let shown = shown ?? format(d)
        if let low = metadata.minValue, d < low {
            throw ModelError(code: .outOfRange, message: "\(label()) must be \(boundsText(metadata)), got \(shown)")
        }
        if let high = metadata.maxValue, d > high {
            throw ModelError(code: .outOfRange, message: "\(label()) must be \(boundsText(metadata)), got \(shown)")
        }
        if metadata.format == .float, !metadata.validValues.isEmpty {
            guard let key = Int64(exactly: d), metadata.validValues[key] != nil else {
                throw ModelError(
                    code: .notAValidValue,
                    message: "\(label()) must be one of \(validValuesList(metadata)), got \(shown)"
                )
            }
        }
        if let step = metadata.minStep, step > 0 {
            let base = metadata.minValue ?? 0
            let steps = (d - base) / step
            // Float tolerance: 21.5 from -273.1 in steps of 0.1 is 2946.0000000000005 steps.
            if abs(steps - steps.rounded()) > max(1e-6, abs(steps) * 1e-9) {
                let from = metadata.minValue.map { " from \(format($0))" } ?? ""
                throw ModelError(
                    code: .notAStep, message: "\(label()) must be in steps of \(format(step))\(from), got \(shown)")
            }
        }
    }
}
