public import Gateway
public import HomeModel

/// Request topics made into commands, and their outcomes into the answers the README's topic
/// contract gives: `result` (`{"id","op","status","value"}`), `$result` (with `results` for a
/// `$set`), `response/<op>` (`{"id","status","data"}`), once each, and to whoever waits
/// (`Reply`: an MQTT 5 Response Topic, or a caller in this process).
extension Gateway {
    func write(_ node: TopicTree.CharacteristicNode, _ message: IncomingMessage) {
        let resultTopic = node.topic + "/result"
        let id = Self.requestID(message.payload)
        if refuseRetained(message, resultTopic: resultTopic, op: "set", id: id) { return }
        switch Self.parseSet(message.payload, node: node) {
        case .success(let (value, id)):
            submit(.write(node.address, value), answering: message, on: resultTopic, op: "set", id: id)
        case .failure(let failure):
            refuse(resultTopic, op: "set", id: id, failure, reply: message.reply)
        }
    }

    func read(_ node: TopicTree.CharacteristicNode, _ message: IncomingMessage) {
        submit(.read(node.address), answering: message, on: node.topic + "/result", op: "get")
    }

    /// Submits `command`, asked by `message`, and publishes its outcome on `topic` (and to the
    /// message's `Reply`). A retained request is refused there instead: it would run again at
    /// every reconnect. For an output in another module that serves requests of its own.
    public func submit(
        _ command: GatewayCommand, answering message: IncomingMessage, on topic: String, op: String,
        id: JSONValue? = nil
    ) {
        let id = id ?? Self.requestID(message.payload)
        if refuseRetained(message, resultTopic: topic, op: op, id: id) { return }
        let reply = message.reply
        submit(command, label: topic) { gateway, outcome in
            gateway.answer(topic, json: Answers.answer(id: id, op: op, outcome), reply: reply)
        }
    }

    /// A request refused before it became a command: counted, and answered on `topic`.
    func refuse(_ topic: String, op: String, id: JSONValue, _ failure: GatewayFailure, reply: Reply?) {
        activity.answered(topic, op: op, Result<Void, GatewayFailure>.failure(failure))
        activity.failed()
        answer(topic, json: Answers.error(id: id, op: op, failure), reply: reply)
    }
}

extension Gateway {
    /// A value for `node` from JSON, by the same rules as a JSON `set` (a `$set`'s entries).
    static func checkedValue(_ raw: JSONValue, _ node: TopicTree.CharacteristicNode) -> Result<
        CharacteristicValue, GatewayFailure
    > {
        if node.isReadOnlyScope {
            return .failure(
                GatewayFailure(code: .readOnlyScope, message: "\(node.typeName) is read-only by the gateway's scope"))
        }
        do throws(ModelError) {
            let metadata = ValueCodec.withStandardBounds(node.characteristic.metadata, type: node.characteristic.type)
            try ValueCodec.checkWritable(metadata, label: node.typeName)
            return .success(try ValueCodec.parse(json: raw, metadata: metadata, label: node.typeName))
        } catch {
            return .failure(GatewayFailure(error))
        }
    }
}
