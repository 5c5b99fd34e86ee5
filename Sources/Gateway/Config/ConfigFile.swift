import Foundation
import Yams

/// Reading a config file, with a plain message for each way it can fail: `run`, `check-config`
/// and every other command say the same words for the same file.
enum ConfigFile {
    /// The file's text. Errors name the file and say what is wrong with it in words (`no such
    /// file`, `permission denied`, `is a directory, not a config file`, `the file is empty`).
    static func read(_ file: String) throws(ConfigError) -> String {
        func failure(_ code: ConfigError.Code, _ message: String) -> ConfigError {
            ConfigError(file: file, key: nil, message: message, code: code)
        }
        func fromErrno(_ number: Int32) -> ConfigError {
            switch number {
            case ENOENT, ENOTDIR: return failure(.notFound, "no such file")
            case EACCES, EPERM: return failure(.permissionDenied, "permission denied")
            case EISDIR: return failure(.isDirectory, "is a directory, not a config file")
            default:
                return failure(.unreadable, "cannot read the file: \(String(cString: strerror(number)).lowercased())")
            }
        }
        var info = stat()
        guard stat(file, &info) == 0 else { throw fromErrno(errno) }
        if info.st_mode & mode_t(S_IFMT) == mode_t(S_IFDIR) { throw fromErrno(EISDIR) }
        let fd = open(file, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw fromErrno(errno) }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let n = chunk.withUnsafeMutableBytes { posixRead(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw fromErrno(errno)
            }
            if n == 0 { break }
            bytes += chunk[0..<n]
        }
        // Only white space is no config at all: `/dev/null`, or a file emptied by accident.
        // A file of comments only is a config that keeps every default, and is accepted.
        if bytes.allSatisfy({ [0x20, 0x09, 0x0A, 0x0D].contains($0) }) {
            throw failure(.empty, "the file is empty")
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw failure(.unreadable, "is not UTF-8 text")
        }
        return text
    }

    /// A YAML syntax error as one line, without the snippet of the file Yams quotes (which may
    /// hold a password).
    static func yamlProblem(_ error: any Error) -> String {
        guard let error = error as? YamlError else {
            return "not valid YAML: \(oneLine("\(error)"))"
        }
        switch error {
        case let .scanner(context, problem, mark, _), let .parser(context, problem, mark, _),
            let .composer(context, problem, mark, _):
            var message = "not valid YAML at line \(mark.line), column \(mark.column): \(problem)"
            if let context { message += " (\(context.text) at line \(context.mark.line))" }
            return message
        case let .reader(problem, _, _, _):
            return "not valid YAML: \(problem)"
        default:
            return "not valid YAML: \(oneLine(error.description))"
        }
    }

    static func oneLine(_ text: String) -> String {
        text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            .joined(separator: " ")
    }
}

// File scope: inside ConfigFile, `read` names its own member.
private func posixRead(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    read(fd, buffer, count)
}
