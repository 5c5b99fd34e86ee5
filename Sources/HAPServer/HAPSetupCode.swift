/// An accessory's setup code, `XXX-XX-XXX`.
///
/// Its `description` is redacted, so interpolating one into a log line never prints it; the
/// digits are read only through `revealed` (for the QR code and the user's own display).
/// The spec forbids codes that are one digit repeated and the two runs `123-45-678` and
/// `876-54-321`: `init?` refuses them and `random()` never yields them.
public struct HAPSetupCode: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The code as `XXX-XX-XXX`.
    public let revealed: String

    public static let forbidden: Set<String> =
        Set(
            (0...9).map { d in
                let c = Character(String(d)); return "\(c)\(c)\(c)-\(c)\(c)-\(c)\(c)\(c)"
            }
        )
        .union(["123-45-678", "876-54-321"])

    /// `XXX-XX-XXX` or eight digits; nil for anything else or a forbidden code.
    public init?(_ text: String) {
        let digits = text.filter { $0 != "-" }
        guard digits.count == 8, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        if text.contains("-") {
            guard text.count == 10, Array(text)[3] == "-", Array(text)[6] == "-" else { return nil }
        }
        let d = Array(digits)
        let formatted = String(d[0..<3]) + "-" + String(d[3..<5]) + "-" + String(d[5..<8])
        guard !Self.forbidden.contains(formatted) else { return nil }
        revealed = formatted
    }

    /// A random code, never a forbidden one.
    public static func random() -> HAPSetupCode {
        var generator = SystemRandomNumberGenerator()
        return random(using: &generator)
    }

    public static func random<G: RandomNumberGenerator>(using generator: inout G) -> HAPSetupCode {
        first { UInt32.random(in: 0..<100_000_000, using: &generator) }
    }

    /// The first draw (0…99 999 999) that makes an allowed code.
    static func first(of draw: () -> UInt32) -> HAPSetupCode {
        while true {
            let text = String(draw() % 100_000_000)
            if let code = HAPSetupCode(String(repeating: "0", count: 8 - text.count) + text) { return code }
        }
    }

    public var description: String { "***-**-***" }
    public var debugDescription: String { "HAPSetupCode(***-**-***)" }
}
