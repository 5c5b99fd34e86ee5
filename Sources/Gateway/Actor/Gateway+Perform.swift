import HomeModel
import MQTT

/// Each command performed: checked, handed to the accessory's worker (or the request loop), and
/// answered once on its topic and to whoever waits (`Reply`). The MQTT front end
/// (`Gateway+Messages`), outputs and in-process callers (`perform(_:)`) all come here.
extension Gateway {
    /// Performs `command`, asked by `message` (its payload, its retain flag, who waits).
    func perform(_ command: GatewayCommand, _ message: IncomingMessage) {
        switch command {
        case .set(let node, _): write(node, message)
        case .get(let node): read(node, message)
        case .toggle(let accessory, let service): toggle(accessory: accessory, service: service, message: message)
        case .identify(let accessory): identify(accessory, message)
        case .writeMany(let accessory, let writes): writeMany(accessory, writes, message)
        case .manage(let op, _): manage(op: op, message)
        }
    }

    private func write(_ node: TopicTree.CharacteristicNode, _ message: IncomingMessage) {
        let resultTopic = node.topic + "/result"
        let id = Self.requestID(message.payload)
        if refuseRetained(message, resultTopic: resultTopic, op: "set", id: id) { return }
        switch Self.parseSet(message.payload, node: node) {
        case .success(let (value, id)):
            dispatch(
                Job(
                    kind: .set(value), op: "set", id: id, node: node, accessoryID: node.address.accessoryID,
                    resultTopic: resultTopic, reply: Reply(message)))
        case .failure(let failure):
            sendResult(resultTopic, op: "set", id: id, .failure(failure), reply: Reply(message))
        }
    }

    private func read(_ node: TopicTree.CharacteristicNode, _ message: IncomingMessage) {
        let resultTopic = node.topic + "/result"
        let id = Self.requestID(message.payload)
        if refuseRetained(message, resultTopic: resultTopic, op: "get", id: id) { return }
        dispatch(
            Job(
                kind: .get, op: "get", id: id, node: node, accessoryID: node.address.accessoryID,
                resultTopic: resultTopic, reply: Reply(message)))
    }

    private func identify(_ accessory: TopicTree.AccessoryNode, _ message: IncomingMessage) {
        let resultTopic = accessory.topic + "/$result"
        let id = Self.requestID(message.payload)
        if refuseRetained(message, resultTopic: resultTopic, op: "identify", id: id) { return }
        dispatch(
            Job(
                kind: .identify, op: "identify", id: id, node: nil, accessoryID: accessory.id,
                resultTopic: resultTopic, reply: Reply(message)))
    }

    private func writeMany(
        _ accessory: TopicTree.AccessoryNode, _ writes: [CharacteristicWrite], _ message: IncomingMessage
    ) {
        let resultTopic = accessory.topic + "/$result"
        let id = Self.requestID(message.payload)
        if refuseRetained(message, resultTopic: resultTopic, op: "set", id: id) { return }
        guard !writes.isEmpty else {
            sendResult(
                resultTopic, op: "set", id: id,
                .failure(GatewayFailure(code: .empty, message: "the $set names no characteristic")),
                reply: Reply(message))
            return
        }
        write(writes, accessoryID: accessory.id, id: id, resultTopic: resultTopic, reply: Reply(message))
    }

    private func toggle(accessory: TopicTree.AccessoryNode, service: TopicTree.ServiceNode, message: IncomingMessage) {
        let resultTopic = service.topic + "/$result"
        let id = Self.requestID(message.payload)
        if refuseRetained(message, resultTopic: resultTopic, op: "toggle", id: id) { return }
        guard let node = PrimaryControl.characteristic(in: service) else {
            sendResult(
                resultTopic, op: "toggle", id: id,
                .failure(
                    GatewayFailure(
                        code: .notToggleable,
                        message: "a \(service.typeName) service has no primary control in scope to toggle")),
                reply: Reply(message))
            return
        }
        if node.isReadOnlyScope {
            sendResult(
                resultTopic, op: "toggle", id: id,
                .failure(
                    GatewayFailure(
                        code: .readOnlyScope,
                        message: "\(node.typeName) of this accessory is read-only by the gateway's scope configuration")
                ), reply: Reply(message))
            return
        }
        guard let value = PrimaryControl.flipped(node, current: currentValue(node.address)) else {
            sendResult(
                resultTopic, op: "toggle", id: id,
                .failure(GatewayFailure(code: .notToggleable, message: "no value to flip to")), reply: Reply(message))
            return
        }
        dispatch(
            Job(
                kind: .set(value), op: "toggle", id: id, node: node, accessoryID: accessory.id,
                resultTopic: resultTopic,
                reply: Reply(message)))
    }
}
