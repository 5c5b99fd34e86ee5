internal import CQREncode

// The QR code of a text, encoded by libqrencode (Debian's libqrencode4): the only file that
// calls it. What is drawn from the matrix (SVG, terminal text) is in QRRendering.swift.

/// A QR code's modules: `size` × `size`, row by row, true for a dark module. No quiet zone: the
/// renderings add it.
public struct QRMatrix: Sendable, Equatable {
    /// How much of the code may be damaged and still read.
    public enum Correction: Sendable {
        /// About 7 %: the smallest code. What Homebridge prints (HAP-NodeJS's qrcode-terminal,
        /// whose default level is L) and what a setup URI on a screen needs.
        case low
        /// About 15 %.
        case medium

        var level: QRecLevel { self == .low ? QR_ECLEVEL_L : QR_ECLEVEL_M }
    }

    public let size: Int
    public let modules: [Bool]

    public init(size: Int, modules: [Bool]) {
        precondition(modules.count == size * size, "a QR matrix is size × size modules")
        self.size = size
        self.modules = modules
    }

    /// The smallest QR code of `text` at `correction` (version chosen by libqrencode), its modes
    /// mixed as the text allows (a setup URI is all in the alphanumeric set); nil when the text
    /// does not fit in a QR code (over ~2,900 bytes) or holds a NUL.
    public init?(encoding text: String, correction: Correction = .low) {
        guard !text.utf8.contains(0),
            let code = QRcode_encodeString(text, 0, correction.level, QR_MODE_8, 1)
        else { return nil }
        defer { QRcode_free(code) }
        let width = Int(code.pointee.width)
        let data = UnsafeBufferPointer(start: code.pointee.data, count: width * width)
        self.init(size: width, modules: data.map { $0 & 1 == 1 })
    }

    /// Whether the module at column `x`, row `y` is dark; outside the code (the quiet zone): false.
    public subscript(x: Int, y: Int) -> Bool {
        guard x >= 0, y >= 0, x < size, y < size else { return false }
        return modules[y * size + x]
    }
}
