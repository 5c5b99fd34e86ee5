import Foundation

/// Turns names into topic segments of `[a-z0-9-]`.
public enum Slug {
    /// Lowercased, accents folded, every run of other characters becomes one `-`, no `-` at
    /// either end. A name with nothing left gives `fallback`.
    public static func make(_ name: String, fallback: String = "unnamed") -> String {
        // Folding only changes what is not ASCII, and it is dear (a locale, a new string), so
        // ASCII names, most of them, skip it and are slugged byte by byte: every
        // characteristic of the tree gets a slug.
        if name.utf8.allSatisfy({ $0 < 0x80 }) { return ascii(name, fallback: fallback) }
        let folded = name.folding(
            options: [.diacriticInsensitive, .caseInsensitive, .widthInsensitive],
            locale: Locale(identifier: "en_US_POSIX"))
        return scalars(folded, fallback: fallback)
    }

    /// `make` of a folded name, by its Unicode scalars.
    static func scalars(_ folded: String, fallback: String) -> String {
        var out = ""
        var pendingDash = false
        for scalar in folded.unicodeScalars {
            let isAllowed = (scalar >= "a" && scalar <= "z") || (scalar >= "0" && scalar <= "9")
            if isAllowed {
                if pendingDash && !out.isEmpty { out.append("-") }
                pendingDash = false
                out.unicodeScalars.append(scalar)
            } else if scalar >= "A" && scalar <= "Z" {
                if pendingDash && !out.isEmpty { out.append("-") }
                pendingDash = false
                out.unicodeScalars.append(Unicode.Scalar(scalar.value + 32)!)
            } else {
                pendingDash = true
            }
        }
        return out.isEmpty ? fallback : out
    }

    /// `make` of an ASCII name: the same rules on its bytes.
    static func ascii(_ name: String, fallback: String) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(name.utf8.count)
        var pendingDash = false
        for byte in name.utf8 {
            let lowered = byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte + 32 : byte
            if (lowered >= UInt8(ascii: "a") && lowered <= UInt8(ascii: "z"))
                || (lowered >= UInt8(ascii: "0") && lowered <= UInt8(ascii: "9"))
            {
                if pendingDash && !out.isEmpty { out.append(UInt8(ascii: "-")) }
                pendingDash = false
                out.append(lowered)
            } else {
                pendingDash = true
            }
        }
        return out.isEmpty ? fallback : String(decoding: out, as: UTF8.self)
    }

    /// Gives each of `names` (in their given, stable order) a slug unique among them:
    /// the second `lamp` becomes `lamp-2`, and so on, skipping slugs already taken.
    public static func unique(_ names: [String], fallback: String = "unnamed") -> [String] {
        var taken = Set<String>()
        var counters: [String: Int] = [:]
        var result: [String] = []
        result.reserveCapacity(names.count)
        // Plain slugs first claim their own names, so that `lamp-2` as a real name keeps it.
        let bases = names.map { make($0, fallback: fallback) }
        // Most often (a service's characteristics, an accessory's services) no two are alike:
        // then the slugs are the bases, found without hashing any.
        if bases.count <= 16,
            !bases.indices.contains(where: { i in bases[..<i].contains(bases[i]) })
        {
            return bases
        }
        var firstOwner: [String: Int] = [:]
        for (index, base) in bases.enumerated() where firstOwner[base] == nil {
            firstOwner[base] = index
            taken.insert(base)
        }
        for (index, base) in bases.enumerated() {
            if firstOwner[base] == index {
                result.append(base)
                continue
            }
            var n = counters[base, default: 1]
            var candidate: String
            repeat {
                n += 1
                candidate = "\(base)-\(n)"
            } while taken.contains(candidate)
            counters[base] = n
            taken.insert(candidate)
            result.append(candidate)
        }
        return result
    }
}
