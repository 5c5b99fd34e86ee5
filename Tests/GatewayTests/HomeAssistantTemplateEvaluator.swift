import Foundation
import HomeModel

/// A small evaluator of the Jinja that the discovery configs' templates use, with Jinja's (and
/// so Python's) meaning: text with `{{ expression }}` blocks; literals (numbers, strings, lists,
/// dicts), the variables Home Assistant passes (`value`, `value_json`, `hue`, `sat`), subscripts,
/// the filters `int`, `float`, `round(n)`, `default(x)`, `string`, `max`, `min`, arithmetic,
/// comparisons and `a if c else b`. Anything else (statements, other filters or functions,
/// another variable) is an error, so a template the evaluator does not understand fails the
/// tests instead of being trusted.
enum HATemplate {
    struct Unsupported: Error, CustomStringConvertible {
        var template: String
        var why: String
        var description: String { "unsupported template (\(why)): \(template)" }
    }

    /// What Jinja raises while rendering (an undefined variable's key, a bad operand): Home
    /// Assistant logs it and drops the message.
    struct RenderError: Error {}

    indirect enum Value: Equatable {
        case undefined, none
        case bool(Bool)
        case int(Int64)
        case float(Double)
        case string(String)
        case list([Value])
        case dict([String: Value])

        init(_ json: JSONValue) {
            switch json {
            case .null: self = .none
            case .bool(let b): self = .bool(b)
            case .int(let i): self = .int(i)
            case .uint(let u): self = Int64(exactly: u).map(Value.int) ?? .float(Double(u))
            case .double(let d): self = .float(d)
            case .string(let s): self = .string(s)
            case .array(let a): self = .list(a.map(Value.init))
            case .object(let o): self = .dict(o.mapValues(Value.init))
            }
        }

        /// Python's `str()`.
        var text: String {
            switch self {
            case .undefined: ""
            case .none: "None"
            case .bool(let b): b ? "True" : "False"
            case .int(let i): String(i)
            case .float(let d):
                if d.isFinite, d == d.rounded(), abs(d) < 1e16 { "\(Int64(d)).0" } else { "\(d)" }
            case .string(let s): s
            case .list(let l): "[" + l.map(\.repr).joined(separator: ", ") + "]"
            case .dict(let d): "{" + d.map { "'\($0.key)': \($0.value.repr)" }.joined(separator: ", ") + "}"
            }
        }

        var repr: String {
            if case .string(let s) = self { return "'\(s)'" }
            return text
        }

        var number: Double? {
            switch self {
            case .int(let i): Double(i)
            case .float(let d): d
            case .bool(let b): b ? 1 : 0
            default: nil
            }
        }
    }

    // MARK: Parsing

    indirect enum Node {
        case literal(Value)
        case variable(String)
        case list([Node])
        case dict([(Node, Node)])
        case subscriptOf(Node, Node)
        case filter(Node, String, [Node])
        case binary(String, Node, Node)
        case negate(Node)
        case conditional(Node, condition: Node, otherwise: Node)
    }

    enum Part {
        case text(String)
        case expression(Node)
    }

    static let variables: Set<String> = ["value", "value_json", "hue", "sat"]
    static let filters: Set<String> = ["int", "float", "round", "default", "string", "max", "min"]

    static func parse(_ template: String) throws -> [Part] {
        var parts: [Part] = []
        var rest = Substring(template)
        while !rest.isEmpty {
            if rest.hasPrefix("{%") || rest.hasPrefix("{#") {
                throw Unsupported(template: template, why: "statements and comments")
            }
            guard let open = rest.range(of: "{{") else {
                parts.append(.text(String(rest)))
                break
            }
            if open.lowerBound > rest.startIndex { parts.append(.text(String(rest[..<open.lowerBound]))) }
            var parser = try Parser(tokens: tokenize(rest[open.upperBound...], template), template: template)
            let node = try parser.conditional()
            guard parser.take("}}") else { throw Unsupported(template: template, why: "expected }}") }
            parts.append(.expression(node))
            rest = rest[open.upperBound...].dropFirst(parser.consumedCharacters)
        }
        return parts
    }

    struct Token {
        var text: String
        var kind: Kind
        /// Characters from the start of the expression to the end of this token.
        var end: Int
        enum Kind { case number, string, name, symbol }
    }

    /// Tokens up to and including the first `}}` outside a string.
    static func tokenize(_ text: Substring, _ template: String) throws -> [Token] {
        let chars = Array(text)
        var tokens: [Token] = []
        var i = 0
        let symbols = [
            "}}", "==", "!=", ">=", "<=", "(", ")", "[", "]", "{", "}", ",", ":", "|", ".", "~", "+", "-",
            "*", "/", ">", "<",
        ]
        while i < chars.count {
            let c = chars[i]
            if c == " " {
                i += 1
                continue
            }
            if c.isNumber {
                var j = i
                while j < chars.count,
                    chars[j].isNumber || (chars[j] == "." && j + 1 < chars.count && chars[j + 1].isNumber)
                {
                    j += 1
                }
                tokens.append(Token(text: String(chars[i..<j]), kind: .number, end: j))
                i = j
                continue
            }
            if c == "'" || c == "\"" {
                var out = ""
                var j = i + 1
                var closed = false
                while j < chars.count {
                    if chars[j] == "\\", j + 1 < chars.count {
                        out.append(chars[j + 1])
                        j += 2
                        continue
                    }
                    if chars[j] == c {
                        closed = true
                        j += 1
                        break
                    }
                    out.append(chars[j])
                    j += 1
                }
                guard closed else { throw Unsupported(template: template, why: "unterminated string") }
                tokens.append(Token(text: out, kind: .string, end: j))
                i = j
                continue
            }
            if c.isLetter || c == "_" {
                var j = i
                while j < chars.count, chars[j].isLetter || chars[j].isNumber || chars[j] == "_" { j += 1 }
                tokens.append(Token(text: String(chars[i..<j]), kind: .name, end: j))
                i = j
                continue
            }
            guard
                let symbol = symbols.first(where: { s in Array(s) == Array(chars[i..<min(chars.count, i + s.count)]) })
            else { throw Unsupported(template: template, why: "unexpected '\(c)'") }
            i += symbol.count
            tokens.append(Token(text: symbol, kind: .symbol, end: i))
            if symbol == "}}" { return tokens }
        }
        throw Unsupported(template: template, why: "no closing }}")
    }

    struct Parser {
        var tokens: [Token]
        var index = 0
        let template: String

        init(tokens: [Token], template: String) {
            self.tokens = tokens
            self.template = template
        }

        var consumedCharacters: Int { index == 0 ? 0 : tokens[index - 1].end }

        func peek(_ symbol: String) -> Bool {
            index < tokens.count && tokens[index].text == symbol && tokens[index].kind != .string
        }

        mutating func take(_ symbol: String) -> Bool {
            guard peek(symbol) else { return false }
            index += 1
            return true
        }

        mutating func expect(_ symbol: String) throws {
            guard take(symbol) else { throw Unsupported(template: template, why: "expected '\(symbol)'") }
        }

        mutating func conditional() throws -> Node {
            let value = try comparison()
            guard take("if") else { return value }
            let condition = try comparison()
            try expect("else")
            return .conditional(value, condition: condition, otherwise: try conditional())
        }

        mutating func comparison() throws -> Node {
            var left = try concatenation()
            while let op = ["==", "!=", ">=", "<=", ">", "<"].first(where: { peek($0) }) {
                index += 1
                left = .binary(op, left, try concatenation())
            }
            return left
        }

        mutating func concatenation() throws -> Node {
            var left = try sum()
            while take("~") { left = .binary("~", left, try sum()) }
            return left
        }

        mutating func sum() throws -> Node {
            var left = try product()
            while let op = ["+", "-"].first(where: { peek($0) }) {
                index += 1
                left = .binary(op, left, try product())
            }
            return left
        }

        mutating func product() throws -> Node {
            var left = try unary()
            while let op = ["*", "/"].first(where: { peek($0) }) {
                index += 1
                left = .binary(op, left, try unary())
            }
            return left
        }

        mutating func unary() throws -> Node {
            if take("-") { return .negate(try unary()) }
            var node = try postfix()
            while take("|") {
                guard index < tokens.count, tokens[index].kind == .name, HATemplate.filters.contains(tokens[index].text)
                else { throw Unsupported(template: template, why: "unknown filter") }
                let name = tokens[index].text
                index += 1
                var arguments: [Node] = []
                if take("(") {
                    if !take(")") {
                        repeat { arguments.append(try conditional()) } while take(",")
                        try expect(")")
                    }
                }
                node = .filter(node, name, arguments)
            }
            return node
        }

        mutating func postfix() throws -> Node {
            var node = try primary()
            while true {
                if take("[") {
                    node = .subscriptOf(node, try conditional())
                    try expect("]")
                } else if take(".") {
                    guard index < tokens.count, tokens[index].kind == .name else {
                        throw Unsupported(template: template, why: "attribute")
                    }
                    node = .subscriptOf(node, .literal(.string(tokens[index].text)))
                    index += 1
                } else {
                    return node
                }
            }
        }

        mutating func primary() throws -> Node {
            guard index < tokens.count else { throw Unsupported(template: template, why: "unexpected end") }
            let token = tokens[index]
            index += 1
            switch token.kind {
            case .number:
                if let i = Int64(token.text) { return .literal(.int(i)) }
                return .literal(.float(Double(token.text) ?? 0))
            case .string:
                return .literal(.string(token.text))
            case .name:
                switch token.text {
                case "true", "True": return .literal(.bool(true))
                case "false", "False": return .literal(.bool(false))
                case "none", "None": return .literal(.none)
                default:
                    guard HATemplate.variables.contains(token.text) else {
                        throw Unsupported(template: template, why: "unknown name \(token.text)")
                    }
                    return .variable(token.text)
                }
            case .symbol:
                switch token.text {
                case "(":
                    let inner = try conditional()
                    try expect(")")
                    return inner
                case "[":
                    var items: [Node] = []
                    if !take("]") {
                        repeat { items.append(try conditional()) } while take(",")
                        try expect("]")
                    }
                    return .list(items)
                case "{":
                    var pairs: [(Node, Node)] = []
                    if !take("}") {
                        repeat {
                            let key = try conditional()
                            try expect(":")
                            pairs.append((key, try conditional()))
                        } while take(",")
                        try expect("}")
                    }
                    return .dict(pairs)
                default:
                    throw Unsupported(template: template, why: "unexpected '\(token.text)'")
                }
            }
        }
    }

    // MARK: Rendering

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
            case (.list(let l), .int(let i)): return l.indices.contains(Int(i)) ? l[Int(i)] : .undefined
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
