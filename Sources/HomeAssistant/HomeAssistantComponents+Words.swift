// Words of names, for Home Assistant's entity names: compared word by word, ignoring case
// and punctuation.

extension HomeAssistantComponents {
    /// The lowercased words of a name (letters and digits).
    static func words(_ name: String) -> [String] {
        // An ASCII name (most are) by its bytes: `Character.isLetter` and `lowercased()` look up
        // Unicode properties for every character, a sixth of Home Assistant's discovery at
        // start-up (perf). For ASCII the two agree: letters are A–Z and a–z, numbers 0–9.
        guard name.utf8.allSatisfy({ $0 < 0x80 }) else { return wordsOfAnyText(name) }
        var words: [String] = []
        var word: [UInt8] = []
        for byte in name.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"): word.append(byte)
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): word.append(byte + 0x20)
            default:
                guard !word.isEmpty else { continue }
                words.append(String(decoding: word, as: UTF8.self))
                word.removeAll(keepingCapacity: true)
            }
        }
        if !word.isEmpty { words.append(String(decoding: word, as: UTF8.self)) }
        return words
    }

    /// `words(_:)` by characters, for any text.
    static func wordsOfAnyText(_ name: String) -> [String] {
        name.lowercased().split { !$0.isLetter && !$0.isNumber }.map(String.init)
    }

    static func humanize(_ kebab: String) -> String {
        let words = kebab.split(separator: "-").joined(separator: " ")
        guard let first = words.first else { return kebab }
        return first.uppercased() + words.dropFirst()
    }
}
