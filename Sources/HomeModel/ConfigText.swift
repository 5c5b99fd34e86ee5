import Foundation

/// The bytes of a config or accessory file as text, and in words what keeps them from being
/// YAML text: the gateway's config (`ConfigFile`) and the simulator's accessory files say the
/// same thing for the same file, with where in it, instead of Foundation's "the file isn't in
/// the correct format" or a YAML parser's complaint that quotes the offending line raw.
public enum ConfigText {
    /// Why the file cannot be read, in the words the config errors use.
    public enum ReadProblem: Error, Sendable, Equatable {
        case notFound
        case permissionDenied
        case isDirectory
        case other(String)

        public var words: String {
            switch self {
            case .notFound: "no such file"
            case .permissionDenied: "permission denied"
            case .isDirectory: "is a directory, not a file"
            case .other(let reason): "cannot read the file: \(reason)"
            }
        }
    }

    /// The file's bytes, or why they cannot be had.
    public static func read(_ path: String) throws(ReadProblem) -> [UInt8] {
        var info = stat()
        guard stat(path, &info) == 0 else { throw problem(errno) }
        if info.st_mode & mode_t(S_IFMT) == mode_t(S_IFDIR) { throw .isDirectory }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw problem(errno) }
        defer { close(fd) }
        // Into a buffer of the size `stat` gave and one byte more, to see the end in one read,
        // instead of a zeroed 64 KB chunk for each accessory file of a kilobyte; a file that
        // grew meanwhile (or a /proc file, of size 0) is read on in 4 KB steps or more.
        var bytes = [UInt8](repeating: 0, count: max(Int(info.st_size), 0) + 1)
        var count = 0
        while true {
            if count == bytes.count { bytes += repeatElement(0, count: max(bytes.count, 4096)) }
            let n = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + count, $0.count - count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw problem(errno)
            }
            if n == 0 { break }
            count += n
        }
        bytes.removeLast(bytes.count - count)
        return bytes
    }

    /// The problem `errno` names, in words.
    public static func problem(_ number: Int32) -> ReadProblem {
        switch number {
        case ENOENT, ENOTDIR: .notFound
        case EACCES, EPERM: .permissionDenied
        case EISDIR: .isDirectory
        default: .other(String(cString: strerror(number)).lowercased())
        }
    }

    /// Why the bytes are not text a YAML (or JSON) parser takes, or nil: the first byte that is
    /// not UTF-8, or the first control character YAML forbids (every C0 character but tab and
    /// the line breaks, DEL, C1 but NEL) — a binary file, or text in another encoding. Said
    /// with its line and column (1-based, in characters) and the character as `U+00XX`, never
    /// the raw byte, which would reach a terminal as it is.
    public static func problem(in bytes: [UInt8]) -> String? {
        // Tab, the line breaks and printable ASCII need no decoding, and are most files whole.
        let isPlain = bytes.withUnsafeBufferPointer { buffer in
            buffer.allSatisfy { ($0 >= 0x20 && $0 < 0x7F) || $0 == 0x0A || $0 == 0x09 || $0 == 0x0D }
        }
        if isPlain { return nil }
        var iterator = bytes.makeIterator()
        var parser = Unicode.UTF8.ForwardParser()
        var offset = 0
        var line = 1
        var column = 1
        while true {
            switch parser.parseScalar(from: &iterator) {
            case .emptyInput:
                return nil
            case .error:
                let byte = String(bytes[offset], radix: 16, uppercase: true)
                return
                    "is not UTF-8 text: byte 0x\(byte.count == 1 ? "0" : "")\(byte) at line \(line), column \(column)"
            case .valid(let encoded):
                let scalar = Unicode.UTF8.decode(encoded)
                offset += encoded.count
                let value = scalar.value
                if (value < 0x20 && value != 0x09 && value != 0x0A && value != 0x0D) || value == 0x7F
                    || (value >= 0x80 && value <= 0x9F && value != 0x85)
                {
                    let hex = String(value, radix: 16, uppercase: true)
                    return "holds the control character U+\(String(repeating: "0", count: 4 - hex.count))\(hex) at "
                        + "line \(line), column \(column): not YAML text (a binary file?)"
                }
                if value == 0x0A {
                    line += 1
                    column = 1
                } else if value != 0x0D {
                    column += 1
                }
            }
        }
    }

    /// The bytes as a `String`, or why they are not text (`problem(in:)`).
    public static func text(_ bytes: [UInt8]) -> Result<String, TextProblem> {
        if let problem = problem(in: bytes) { return .failure(TextProblem(message: problem)) }
        return .success(String(decoding: bytes, as: UTF8.self))
    }

    public struct TextProblem: Error, Sendable, Equatable {
        public var message: String
    }
}
