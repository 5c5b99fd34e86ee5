import Foundation
import Testing
import TestSupport
import Yams

@testable import HomeModel

/// The shortcuts of reading accessory and config files say what the longer ways say: the strict
/// reader's whitespace is Foundation's `.whitespaces`, its duplicate and unknown keys are found
/// in small and large mappings alike, and a file's bytes are all there whatever its `stat` size.
@Suite struct ReadingFastPathTests {
    typealias Reader = StrictReader<Yams.Node, TestFailure>

    struct TestFailure: Error, Equatable {
        var code: ErrorCode
        var keyPath: String?
        var message: String
    }

    static func reader(_ yaml: String) throws -> Reader {
        try Reader(try Yams.Node.compose(yaml: yaml)) { TestFailure(code: $0, keyPath: $1, message: $2) }
    }

    @Test(arguments: [
        "", " ", "\t", "lamp", " lamp ", "\tlamp\t", "a b", "\u{A0}lamp\u{A0}", "\u{2003}x\u{3000}", "\u{200B}x",
        "\nlamp\n", "\r", " \u{85} ", "\u{1680}", "x\u{202F}", "  ",
    ])
    func whitespaceIsFoundations(text: String) {
        #expect(
            String(Whitespace.trimmed(text)) == text.trimmingCharacters(in: .whitespaces),
            "\(text.unicodeScalars.map(\.value))")
        #expect(Whitespace.isBlank(text) == text.trimmingCharacters(in: .whitespaces).isEmpty)
    }

    /// Every scalar of the BMP: whitespace exactly when Foundation's set says so.
    @Test func everyBMPScalar() {
        for value in UInt32(0)...0xFFFF {
            guard let scalar = Unicode.Scalar(value) else { continue }
            #expect(Whitespace.contains(scalar) == CharacterSet.whitespaces.contains(scalar), "U+\(value)")
        }
    }

    @Test func numbersAndFlagsAreTrimmed() throws {
        let map = try Self.reader("a: ' 5 '\nb: \"\\tyes\\u00A0\"\nc: '  '\nd: ' x'")
        #expect(try map.double("a") == 5)
        #expect(try map.bool("b") == true)
        #expect(throws: TestFailure.self) { try map.requiredString("c") }
        #expect(try map.requiredString("d") == " x")
    }

    /// A key given again is found whichever earlier key it repeats, in a mapping searched key
    /// by key (16 keys or fewer) and in one that uses a set.
    @Test(arguments: [3, 15, 16, 17, 40])
    func duplicateKeysAreFoundAtAnySize(count: Int) throws {
        let keys = (0..<count).map { "key\($0)" }
        let unique = keys.map { "\($0): 1" }.joined(separator: "\n")
        #expect((try Self.reader(unique)).entries.count == count)
        for repeated in Set([0, count / 2, count - 1]) {
            // The repeat is the last of `count + 1` keys.
            let twice = unique + "\nkey\(repeated): 2"
            #expect(
                throws: TestFailure(
                    code: .duplicateKey, keyPath: "key\(repeated)", message: "'key\(repeated)' appears twice")
            ) {
                _ = try Self.reader(twice)
            }
        }
    }

    @Test func unreadKeysAreNamedInDocumentOrder() throws {
        let map = try Self.reader("name: Lamp\ncolour: red\nroom: Hall\nsize: 3")
        _ = try map.string("name")
        _ = try map.string("room")
        _ = try map.string("absent")
        #expect(
            throws: TestFailure(
                code: .unknownKey, keyPath: "colour", message: "unknown key; allowed here: name, room, absent")
        ) { try map.finish() }
        _ = try map.string("colour")
        _ = try map.int("size")
        try map.finish()
    }

    /// A file whose `stat` size is 0 but that holds more (`/proc`): the buffer grows; and
    /// exactly the bytes of a file of each size, empty to larger than the old 64 KB chunk.
    @Test func filesAreReadWhole() throws {
        let status = try ConfigText.read("/proc/self/status")
        #expect(String(decoding: status, as: UTF8.self).contains("VmRSS:"))
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("read-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        for size in [0, 1, 4095, 4096, 4097, 70_000] {
            let bytes = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
            let path = directory.appendingPathComponent("\(size)").path
            #expect(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
            #expect(try ConfigText.read(path) == bytes, "size \(size)")
        }
    }

    /// Plain ASCII text passes without decoding; everything else is still looked at.
    @Test func textProblemsAreStillFound() {
        #expect(ConfigText.problem(in: Array("name: Lamp\r\n\tx: 1\n".utf8)) == nil)
        #expect(ConfigText.problem(in: Array("name: Küche\n".utf8)) == nil)
        #expect(
            ConfigText.problem(in: [0x61, 0x0A, 0x62, 0x7F])
                == "holds the control character U+007F at line 2, column 2: not YAML text (a binary file?)")
        #expect(ConfigText.problem(in: [0x61, 0xE9]) == "is not UTF-8 text: byte 0xE9 at line 1, column 2")
        #expect(
            ConfigText.problem(in: Array("a\u{85}b\u{9B}".utf8))
                == "holds the control character U+009B at line 1, column 4: not YAML text (a binary file?)")
    }

    /// A stream's text appends (short literals whole, a long one through the generic path) and
    /// byte appends write the same bytes in the same 16-byte chunks, the last one shorter.
    @Test func streamedTextIsWrittenInWholeChunks() throws {
        let directory = try TemporaryDirectory()
        let probe = CrashSwitch(crashAt: nil)
        let long = String(repeating: "0123456789", count: 5)
        let url = directory.url.appendingPathComponent("stream.json")
        try AtomicFileWriter(chunkSize: 16, hook: probe.hook).write(to: url) {
            (stream: inout AtomicFileWriter.Stream) throws(ModelError) in
            try stream.append("[".utf8)
            try stream.appendJSONString("a \"quoted\" name")
            try stream.append(",".utf8)
            try stream.append(long.utf8)
            try stream.append(Array(",7]".utf8))
        }
        let expected = "[\"a \\\"quoted\\\" name\"," + long + ",7]"
        #expect(String(decoding: try Data(contentsOf: url), as: UTF8.self) == expected)
        let writes = probe.steps.compactMap { step -> Int? in
            guard case .write(_, let count) = step else { return nil }
            return count
        }
        #expect(writes == Array(repeating: 16, count: expected.utf8.count / 16) + [expected.utf8.count % 16])
    }
}
