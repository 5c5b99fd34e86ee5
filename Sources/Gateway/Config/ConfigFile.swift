import Foundation
import HomeModel
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
        let bytes: [UInt8]
        do {
            bytes = try ConfigText.read(file)
        } catch {
            switch error {
            case .notFound: throw failure(.notFound, error.words)
            case .permissionDenied: throw failure(.permissionDenied, error.words)
            case .isDirectory: throw failure(.isDirectory, "is a directory, not a config file")
            case .other: throw failure(.unreadable, error.words)
            }
        }
        // Only white space is no config at all: `/dev/null`, or a file emptied by accident.
        // A file of comments only is a config that keeps every default, and is accepted.
        if bytes.allSatisfy({ [0x20, 0x09, 0x0A, 0x0D].contains($0) }) {
            throw failure(.empty, "the file is empty")
        }
        // Bytes that are not UTF-8 or a control character (a binary file, another encoding):
        // said with where, before Yams would say it without (or quote the line raw).
        switch ConfigText.text(bytes) {
        case .success(let text): return text
        case .failure(let problem): throw failure(.unreadable, problem.message)
        }
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
