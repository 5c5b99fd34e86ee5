import Foundation

/// Turns names into topic segments of `[a-z0-9-]`.
public enum Slug {
    /// Lowercased, accents folded, every run of other characters becomes one `-`, no `-` at
    /// either end. A name with nothing left gives `fallback`.
    public static func make(_ name: String, fallback: String = "unnamed") -> String {
        // Folding only changes what is not ASCII, and it is dear (a locale, a new string), so
        // ASCII names, most of them, skip it: every characteristic of the tree gets a slug.
        let folded =
            name.utf8.allSatisfy({ $0 < 0x80 })
            ? name
            : name.folding(
                options: [.diacriticInsensitive, .caseInsensitive, .widthInsensitive],
                locale: Locale(identifier: "en_US_POSIX"))
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

    /// Gives each of `names` (in their given, stable order) a slug unique among them:
    /// the second `lamp` becomes `lamp-2`, and so on, skipping slugs already taken.
    public static func unique(_ names: [String], fallback: String = "unnamed") -> [String] {
        var taken = Set<String>()
        var counters: [String: Int] = [:]
        var result: [String] = []
        result.reserveCapacity(names.count)
        // Plain slugs first claim their own names, so that `lamp-2` as a real name keeps it.
        let bases = names.map { make($0, fallback: fallback) }
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
