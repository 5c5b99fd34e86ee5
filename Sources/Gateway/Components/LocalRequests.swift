import HomeModel

/// In-process requests (`Gateway.request(topic:payload:)`) waiting for their answer, by number.
/// Each is answered once: by the output that took it, by its deadline (the watchdog), or at
/// `stop`; whichever comes second finds it gone.
struct LocalRequests {
    /// One request: its payload, for the `id` of an error answered here; the answer if it came
    /// before the caller began to wait, or the caller.
    struct Waiting {
        var payload: [UInt8]
        var answer: JSONValue?
        var continuation: CheckedContinuation<JSONValue, Never>?
    }

    /// How long an in-process request waits at most: longer than any worker's deadline, so a
    /// request to an accessory is answered by its own `timeout` first.
    static func timeout(_ config: GatewayConfig) -> Double { config.requestTimeout + 2 }

    private(set) var waiting: [Int: Waiting] = [:]
    private var next = 0

    /// A new request's number.
    mutating func add(payload: [UInt8]) -> Int {
        next += 1
        waiting[next] = Waiting(payload: payload)
        return next
    }

    /// The answer that came before the caller began to wait, taken.
    mutating func takeEarlyAnswer(_ number: Int) -> JSONValue? {
        guard let answer = waiting[number]?.answer else { return nil }
        waiting[number] = nil
        return answer
    }

    mutating func wait(_ number: Int, _ continuation: CheckedContinuation<JSONValue, Never>) {
        waiting[number]?.continuation = continuation
    }

    /// Whether `number` still waits for its answer.
    func isUnanswered(_ number: Int) -> Bool {
        guard let request = waiting[number] else { return false }
        return request.answer == nil
    }

    /// Gives `number` its answer: the caller waiting for it is returned, to be resumed; else
    /// the answer is kept for it. Nil as well when it was answered already.
    mutating func answer(_ number: Int, _ json: JSONValue) -> CheckedContinuation<JSONValue, Never>? {
        guard var request = waiting[number], request.answer == nil else { return nil }
        guard let continuation = request.continuation else {
            request.answer = json
            waiting[number] = request
            return nil
        }
        waiting[number] = nil
        return continuation
    }

    /// An error answer to request `number`, with the `id` its payload names; nil when it is
    /// gone.
    func error(_ number: Int, _ code: ErrorCode, _ text: String) -> JSONValue? {
        waiting[number].map { Self.error(code, text, id: $0.payload) }
    }

    /// `{"id", "status": "error", "code", "message"}`: what an in-process caller gets when the
    /// core answers it itself.
    static func error(_ code: ErrorCode, _ text: String, id payload: [UInt8]) -> JSONValue {
        .object([
            "id": Gateway.requestID(payload), "status": "error", "code": .string(code.rawValue),
            "message": .string(text),
        ])
    }
}
