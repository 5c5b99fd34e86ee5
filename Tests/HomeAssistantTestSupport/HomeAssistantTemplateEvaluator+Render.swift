import Foundation
import HomeModel

/// Rendering: the parsed template evaluated with Home Assistant's variables and its filters'
/// meaning.
extension HATemplate {
    /// Renders a state template for a payload as Home Assistant would (`value` is the payload
    /// text, `value_json` the payload as JSON where it is JSON); nil where Jinja would raise.
    static func render(_ template: String, value: String) throws -> String? {
        var variables: [String: Value] = ["value": .string(value)]
        if let json = try? JSONValue(parsing: Array(value.utf8)) { variables["value_json"] = Value(json) }
        return try render(template, variables: variables)
    }

    /// Renders a command template with Home Assistant's variables (`value` as the Python value
    /// Home Assistant passes: an int for a percentage, a string for a mode).
    static func render(_ template: String, variables: [String: Value]) throws -> String? {
        let parts = try parse(template)
        var out = ""
        for part in parts {
            switch part {
            case .text(let text): out += text
            case .expression(let node):
                guard let value = try? evaluate(node, variables) else { return nil }
                out += value.text
            }
        }
        return out
    }

    static func evaluate(_ node: Node, _ variables: [String: Value]) throws -> Value {
        switch node {
        case .literal(let value): return value
        case .variable(let name): return variables[name] ?? .undefined
        case .list(let items): return .list(try items.map { try evaluate($0, variables) })
        case .dict(let pairs):
            var out: [String: Value] = [:]
            for (key, value) in pairs {
                guard case .string(let k) = try evaluate(key, variables) else { throw RenderError() }
                out[k] = try evaluate(value, variables)
            }
            return .dict(out)
        case .subscriptOf(let base, let key):
            let container = try evaluate(base, variables)
            let index = try evaluate(key, variables)
            switch (container, index) {
            case (.dict(let d), .string(let k)): return d[k] ?? .undefined
            case (.dict, _): return .undefined
            case (.list(let l), .int(let i)):
                // Python's: a negative index counts from the end (`[-1]` is the last).
                let at = i < 0 ? l.count + Int(i) : Int(i)
                return l.indices.contains(at) ? l[at] : .undefined
            case (.undefined, _): throw RenderError()
            default: return .undefined
            }
        case .negate(let inner):
            switch try evaluate(inner, variables) {
            case .int(let i): return .int(-i)
            case .float(let d): return .float(-d)
            default: throw RenderError()
            }
        case .conditional(let value, let condition, let otherwise):
            return truthy(try evaluate(condition, variables))
                ? try evaluate(value, variables) : try evaluate(otherwise, variables)
        case .binary(let op, let left, let right):
            return try binary(op, try evaluate(left, variables), try evaluate(right, variables))
        case .filter(let input, let name, let arguments):
            let value = try evaluate(input, variables)
            let args = try arguments.map { try evaluate($0, variables) }
            return try filter(name, value, args)
        }
    }

    static func truthy(_ value: Value) -> Bool {
        switch value {
        case .undefined, .none: false
        case .bool(let b): b
        case .int(let i): i != 0
        case .float(let d): d != 0
        case .string(let s): !s.isEmpty
        case .list(let l): !l.isEmpty
        case .dict(let d): !d.isEmpty
        }
    }

    static func binary(_ op: String, _ a: Value, _ b: Value) throws -> Value {
        if op == "~" { return .string(a.text + b.text) }
        if op == "==" || op == "!=" {
            let equal: Bool
            if let x = a.number, let y = b.number, !isString(a), !isString(b) { equal = x == y } else { equal = a == b }
            return .bool(op == "==" ? equal : !equal)
        }
        guard let x = a.number, let y = b.number, !isString(a), !isString(b) else { throw RenderError() }
        switch op {
        case ">": return .bool(x > y)
        case "<": return .bool(x < y)
        case ">=": return .bool(x >= y)
        case "<=": return .bool(x <= y)
        case "/":
            guard y != 0 else { throw RenderError() }
            return .float(x / y)
        default:
            if case .int(let i) = a, case .int(let j) = b {
                switch op {
                case "+": return .int(i + j)
                case "-": return .int(i - j)
                default: return .int(i * j)
                }
            }
            switch op {
            case "+": return .float(x + y)
            case "-": return .float(x - y)
            default: return .float(x * y)
            }
        }
    }

    static func isString(_ value: Value) -> Bool {
        if case .string = value { return true }
        return false
    }

    static func filter(_ name: String, _ value: Value, _ args: [Value]) throws -> Value {
        switch name {
        case "int":
            // Home Assistant's int: int(value), else int(float(value)), else an error.
            switch value {
            case .int: return value
            case .float(let d):
                guard d.isFinite else { throw RenderError() }
                return .int(Int64(d.rounded(.towardZero)))
            case .bool(let b): return .int(b ? 1 : 0)
            case .string(let s):
                let t = s.trimmingCharacters(in: .whitespaces)
                if let i = Int64(t) { return .int(i) }
                if let d = Double(t), d.isFinite { return .int(Int64(d.rounded(.towardZero))) }
                throw RenderError()
            default: throw RenderError()
            }
        case "float":
            // Home Assistant's float: a number, or an error.
            switch value {
            case .int(let i): return .float(Double(i))
            case .float: return value
            case .string(let s):
                guard let d = Double(s.trimmingCharacters(in: .whitespaces)), d.isFinite else { throw RenderError() }
                return .float(d)
            default: throw RenderError()
            }
        case "round":
            // Home Assistant's round: Python's (half to even); an int at precision 0.
            guard let d = value.number, !isString(value) else { throw RenderError() }
            let places = args.first.flatMap { if case .int(let i) = $0 { Int(i) } else { nil } } ?? 0
            if places == 0 { return .int(Int64(d.rounded(.toNearestOrEven))) }
            let scale = pow(10, Double(places))
            return .float((d * scale).rounded(.toNearestOrEven) / scale)
        case "default":
            if case .undefined = value { return args.first ?? .string("") }
            return value
        case "string":
            return .string(value.text)
        case "max", "min":
            guard case .list(let items) = value, !items.isEmpty else { throw RenderError() }
            var best = items[0]
            for item in items.dropFirst() {
                guard let x = item.number, let y = best.number else { throw RenderError() }
                if name == "max" ? x > y : x < y { best = item }
            }
            return best
        default:
            throw RenderError()
        }
    }
}
