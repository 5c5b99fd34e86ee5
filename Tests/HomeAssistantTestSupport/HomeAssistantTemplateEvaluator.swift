import Foundation
import HomeModel

/// A small evaluator of the Jinja that the discovery configs' templates use, with Jinja's (and
/// so Python's) meaning: text with `{{ expression }}` blocks; literals (numbers, strings, lists,
/// dicts), the variables Home Assistant passes (`value`, `value_json`, `hue`, `sat`, `this`), subscripts,
/// the filters `int`, `float`, `round(n)`, `default(x)`, `string`, `max`, `min`, arithmetic,
/// comparisons and `a if c else b`. Anything else (statements, other filters or functions,
/// another variable) is an error, so a template the evaluator does not understand fails the
/// tests instead of being trusted. HomeAssistantCommandsTests holds it to the real Jinja2 with
/// Home Assistant's filters (`HAJinja`): every command template renders the same in both.
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

    /// `this`: the entity's state object, of which the templates read `this.state`.
    static let variables: Set<String> = ["value", "value_json", "hue", "sat", "this"]
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
}
