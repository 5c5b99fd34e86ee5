import Foundation
import HomeModel
import TestSupport
import XCTest

@testable import HomeAssistantTestSupport

/// Home Assistant's own rendering of templates: the real Jinja2 with Home Assistant's filters
/// (`jinja/ha_render.py`, from the venv Scripts/bootstrap.sh makes), a whole batch in one
/// Python process. A command template renders as MqttCommandTemplate does (`value` and the
/// caller's variables); what Jinja raises on is nil, as Home Assistant then sends nothing.
enum HAJinja {
    static let script = repositoryRoot.appendingPathComponent("Tests/HomeAssistantTests/jinja/ha_render.py")

    /// A command template with its variables, or a value template with the payload it reads.
    struct Job {
        var template: String
        var variables: [String: HATemplate.Value] = [:]
        var payload: String? = nil

        var json: String {
            let template = JSONValue.string(template).encoded()
            guard let payload else {
                return "{\"template\":\(template),\"variables\":\(HAJinja.json(.dict(variables)))}"
            }
            return "{\"template\":\(template),\"payload\":\(JSONValue.string(payload).encoded())}"
        }
    }

    /// Each job's payload (a value template's state), or nil where Home Assistant raises and
    /// sends (or takes) nothing.
    static func render(_ jobs: [Job]) async throws -> [String?] {
        try await renderLogged(jobs).map(\.text)
    }

    /// Each job's payload, and the lines Home Assistant's log would have from rendering it
    /// (an undefined value rendered, iterated or tested: a warning; a key of one: an error).
    static func renderLogged(_ jobs: [Job]) async throws -> [(text: String?, log: [String])] {
        if let reason = HAPPeer.unavailableReason {
            if HAPPeer.isRequired { throw ProcessError("\(reason) (CI=true: Jinja2 must render the templates)") }
            throw XCTSkip(reason)
        }
        let directory = try TemporaryDirectory(prefix: "ha-jinja")
        let input = directory.file("jobs.json")
        let text = "[" + jobs.map(\.json).joined(separator: ",") + "]"
        try text.write(toFile: input, atomically: true, encoding: .utf8)
        let result = try await runProcess(HAPPeer.python.path, [script.path, input], timeout: 120)
        if result.status != 0, result.standardError.contains("No module named 'jinja2'"), !HAPPeer.isRequired {
            throw XCTSkip("Jinja2 missing from the venv: run Scripts/bootstrap.sh")
        }
        guard result.status == 0, case .array(let answers) = try JSONValue(parsing: result.standardOutput),
            answers.count == jobs.count
        else { throw ProcessError("ha_render.py exited \(result.status): \(result.standardError)") }
        return answers.map { answer in
            (answer["ok"]?.stringValue, answer["log"]?.arrayValue?.compactMap(\.stringValue) ?? [])
        }
    }

    /// A variable as JSON, so Python gets the type Home Assistant passes: 21.0 stays a float.
    static func json(_ value: HATemplate.Value) -> String {
        switch value {
        case .undefined, .none: "null"
        case .bool(let b): b ? "true" : "false"
        case .int(let i): String(i)
        case .float(let d): "\(d)"
        case .string(let s): JSONValue.string(s).encoded()
        case .list(let l): "[" + l.map(json).joined(separator: ",") + "]"
        case .dict(let d):
            "{"
                + d.sorted { $0.key < $1.key }.map { "\(JSONValue.string($0.key).encoded()):\(json($0.value))" }
                .joined(separator: ",") + "}"
        }
    }
}
