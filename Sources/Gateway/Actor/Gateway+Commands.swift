public import HomeModel
import MQTT

// The gateway's requests, whoever asks: an MQTT message on a request topic, an output, a page of
// the web view. Each is taken as an `IncomingMessage` by `handle(_:)`
// (`Gateway+Messages`) and answered once, on its topic (`result`, `$result`,
// `response/<op>`) and to whoever waits for it (`Reply`): an MQTT 5 Response Topic, or a caller
// in this process awaiting `perform` or `request(topic:payload:)`.

/// What the gateway can be asked: the MQTT front end makes one of a request topic
/// (`Gateway+Messages`); an output or a view in this process asks it directly (`perform`).
public enum GatewayCommand: Sendable {
    /// A characteristic's `set`, the payload in the `set` topic's words (a value, or
    /// `{"value": …, "id": …}`).
    case set(TopicTree.CharacteristicNode, payload: [UInt8])
    /// A characteristic's `get`.
    case get(TopicTree.CharacteristicNode)
    /// A service's `$toggle`: its primary control flipped.
    case toggle(TopicTree.AccessoryNode, TopicTree.ServiceNode)
    /// An accessory's `$identify`.
    case identify(TopicTree.AccessoryNode)
    /// Several characteristics of one accessory written at once, answered as one on its
    /// `$result` with an entry each.
    case writeMany(TopicTree.AccessoryNode, [CharacteristicWrite])
    /// A gateway request, `$gateway/request/<op>`, with its JSON fields.
    case manage(op: String, payload: [UInt8])

    /// Where an MQTT client would send it, for the logs and the events page.
    func topic(base: String) -> String {
        switch self {
        case .set(let node, _): node.topic + "/set"
        case .get(let node): node.topic + "/get"
        case .toggle(_, let service): service.topic + "/$toggle"
        case .identify(let accessory): accessory.topic + "/$identify"
        case .writeMany(let accessory, _): accessory.topic + "/$set"
        case .manage(let op, _): "\(base)/$gateway/request/\(op)"
        }
    }

    var payload: [UInt8] {
        switch self {
        case .set(_, let payload), .manage(_, let payload): payload
        case .get, .toggle, .identify, .writeMany: []
        }
    }
}

/// One characteristic of a `writeMany`: the names its answer is filed under, and its node and
/// value as checked (or why not).
public struct CharacteristicWrite: Sendable {
    public var service: String
    public var characteristic: String
    public var node: TopicTree.CharacteristicNode?
    public var value: Result<CharacteristicValue, GatewayFailure>

    public init(
        service: String, characteristic: String, node: TopicTree.CharacteristicNode?,
        value: Result<CharacteristicValue, GatewayFailure>
    ) {
        (self.service, self.characteristic, self.node, self.value) = (service, characteristic, node, value)
    }
}

/// A request as the gateway takes it: its topic, payload and retain flag, and who waits for
/// its answer besides its topic.
public struct IncomingMessage: Sendable {
    public var topic: String
    public var payload: [UInt8]
    public var retain: Bool
    public var reply: Gateway.Reply?

    init(_ message: MQTTMessage) {
        (topic, payload, retain) = (message.topic, message.payload, message.retain)
        reply = message.properties.responseTopic.flatMap { topic in
            topic.isEmpty
                ? nil : Gateway.Reply(.mqtt(topic: topic, correlationData: message.properties.correlationData))
        }
    }

    init(topic: String, payload: [UInt8], reply: Gateway.Reply) {
        (self.topic, self.payload, retain, self.reply) = (topic, payload, false, reply)
    }
}

/// In-process requests waiting for their answer, by number.
struct LocalRequests {
    /// One request: its payload, for the `id` of an error answered here; the answer if it came
    /// before the caller began to wait, or the caller.
    struct Waiting {
        var payload: [UInt8]
        var answer: JSONValue?
        var continuation: CheckedContinuation<JSONValue, Never>?
    }

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
}

extension Gateway {
    /// Who waits for an answer besides its topic.
    public struct Reply: Sendable {
        enum Target: Sendable {
            /// An MQTT 5 request's Response Topic and Correlation Data.
            case mqtt(topic: String, correlationData: [UInt8]?)
            /// A caller in this process, by its number in `local`.
            case local(Int)
        }

        let target: Target

        init(_ target: Target) { self.target = target }

        /// The reply a request asked for.
        init?(_ message: IncomingMessage) {
            guard let reply = message.reply else { return nil }
            self = reply
        }
    }

    /// Performs `command` as its MQTT message would be, and returns the answer published on its
    /// topic.
    /// The nodes it names are looked up again in the current tree: a caller's may be from a
    /// tree that a scope change or a removal has replaced since.
    public func perform(_ command: GatewayCommand) async -> JSONValue {
        await local(payload: command.payload) { reply in
            let message = IncomingMessage(topic: command.topic(base: base), payload: command.payload, reply: reply)
            guard let current = current(command) else {
                refuseLocal(message, code: .unknownTopic, "'\(message.topic)' is no longer in the tree")
                return
            }
            perform(current, message)
        }
    }

    /// `command` with its nodes as the current tree has them; nil when one is gone.
    func current(_ command: GatewayCommand) -> GatewayCommand? {
        func accessory(_ node: TopicTree.AccessoryNode) -> TopicTree.AccessoryNode? { tree.accessory(id: node.id) }
        switch command {
        case .set(let node, let payload): return tree.characteristic(node.address).map { .set($0, payload: payload) }
        case .get(let node): return tree.characteristic(node.address).map { .get($0) }
        case .toggle(let node, let service):
            guard let found = accessory(node),
                let current = found.services.first(where: { $0.service.iid == service.service.iid })
            else { return nil }
            return .toggle(found, current)
        case .identify(let node): return accessory(node).map { .identify($0) }
        case .writeMany(let node, let writes):
            guard let found = accessory(node) else { return nil }
            var current: [CharacteristicWrite] = []
            for var write in writes {
                if let node = write.node {
                    guard node.address.accessoryID == found.id, let now = tree.characteristic(node.address) else {
                        return nil
                    }
                    write.node = now
                    if now.isReadOnlyScope, case .success = write.value {
                        write.value = .failure(
                            GatewayFailure(
                                code: .readOnlyScope, message: "\(now.typeName) is read-only by the gateway's scope"))
                    }
                }
                current.append(write)
            }
            return .writeMany(found, current)
        case .manage: return command
        }
    }

    /// Performs `command`, asked by `message`, for an output in another module that serves
    /// requests of its own: answered on the command's topic and to `message`'s `Reply`.
    public func perform(_ command: GatewayCommand, answering message: IncomingMessage) {
        guard let current = current(command) else {
            reportUnknown(message, "'\(message.topic)' is no longer in the tree")
            return
        }
        perform(current, message)
    }

    /// A request from inside the process on `topic` (`set`, `get`, `$toggle`, `$identify`,
    /// `$set`, `$gateway/request/<op>`), handled as an MQTT message there: the same validation,
    /// the same workers, the same answer on the same topics, returned here as well.
    public func request(topic: String, payload: [UInt8]) async -> JSONValue {
        await local(payload: payload) { reply in
            handle(IncomingMessage(topic: topic, payload: payload, reply: reply))
        }
    }

    /// Runs `body` with a reply to this caller, and waits for the answer.
    private func local(payload: [UInt8], _ body: (Reply) -> Void) async -> JSONValue {
        guard isStarted else {
            return .object(Self.localError(.unavailable, "the gateway is not online", id: payload))
        }
        let number = local.add(payload: payload)
        // Every request is answered by the path that takes it, or by its deadline; this is the
        // last resort for one that none answers, kept by the deadline watchdog.
        work.deadlines.startLocal(number, timeout: Self.localRequestTimeout(config))
        body(Reply(.local(number)))
        if let answer = local.takeEarlyAnswer(number) { return answer }
        return await withCheckedContinuation { continuation in local.wait(number, continuation) }
    }

    /// How long an in-process request waits at most: longer than any worker's deadline, so a
    /// request to an accessory is answered by its own `timeout` first.
    static func localRequestTimeout(_ config: GatewayConfig) -> Double { config.requestTimeout + 2 }

    /// The in-process requests past `localRequestTimeout`, from the deadline watchdog.
    func timeOutLocalRequests(_ numbers: [Int]) {
        let timeout = Self.localRequestTimeout(config)
        for number in numbers {
            guard let payload = local.waiting[number]?.payload else { continue }
            answerLocally(number, .object(Self.localError(.timeout, "no answer within \(timeout) s", id: payload)))
        }
    }

    /// At the end of `stop`: the watchdog has ended, so what is still waiting is answered here
    /// rather than never.
    func answerLocalRequestsAtStop() {
        for number in local.waiting.keys.sorted() {
            guard let payload = local.waiting[number]?.payload else { continue }
            answerLocally(number, .object(Self.localError(.unavailable, "the gateway stopped", id: payload)))
        }
    }

    func answerLocally(_ number: Int, _ json: JSONValue) {
        guard let request = local.waiting[number], request.answer == nil else { return }
        work.deadlines.finishLocal(number)
        local.answer(number, json)?.resume(returning: json)
    }

    /// An in-process request on a topic that takes none is answered here; an MQTT one has its
    /// `$gateway/error` (or nothing, for the gateway's own output).
    func refuseLocal(_ message: IncomingMessage, code: ErrorCode, _ text: String) {
        guard case .local(let number)? = message.reply?.target else { return }
        answerLocally(number, .object(Self.localError(code, text, id: message.payload)))
    }

    private static func localError(_ code: ErrorCode, _ text: String, id payload: [UInt8]) -> [String: JSONValue] {
        ["id": requestID(payload), "status": "error", "code": .string(code.rawValue), "message": .string(text)]
    }
}
