// Words of names, for Home Assistant's entity names: compared word by word, ignoring case
// and punctuation.

extension HomeAssistantComponents {
    /// The lowercased words of a name (letters and digits).
    static func words(_ name: String) -> [String] {
        // An ASCII name (most are) by its bytes, in one pass over the string's own storage:
        // `Character.isLetter` and `lowercased()` look up Unicode properties for every
        // character, a sixth of Home Assistant's discovery at start-up (perf). For ASCII the two
        // agree: letters are A–Z and a–z, numbers 0–9. At the first other byte, by characters.
        let ascii = name.utf8.withContiguousStorageIfAvailable { bytes -> [String]? in
            var words: [String] = []
            var lowered: [UInt8] = []
            for byte in bytes {
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                    lowered.append(byte)
                case UInt8(ascii: "A")...UInt8(ascii: "Z"):
                    lowered.append(byte + 0x20)
                case 0x80...:
                    return nil
                default:
                    guard !lowered.isEmpty else { continue }
                    words.append(String(decoding: lowered, as: UTF8.self))
                    lowered.removeAll(keepingCapacity: true)
                }
            }
            if !lowered.isEmpty { words.append(String(decoding: lowered, as: UTF8.self)) }
            return words
        }
        return (ascii ?? nil) ?? wordsOfAnyText(name)
    }

    /// `words(_:)` by characters, for any text.
    static func wordsOfAnyText(_ name: String) -> [String] {
        name.lowercased().split { !$0.isLetter && !$0.isNumber }.map(String.init)
    }

    /// A kebab-case type name as words, the first capitalised: `air-purifier` → `Air purifier`.
    static func humanize(_ kebab: String) -> String {
        let words = kebab.split(separator: "-").joined(separator: " ")
        guard let first = words.first else { return kebab }
        return first.uppercased() + words.dropFirst()
    }
}
