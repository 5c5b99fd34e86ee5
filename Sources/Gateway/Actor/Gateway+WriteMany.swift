import Foundation
import HomeModel
import MQTT

/// Writes of several characteristics of one accessory at once (an accessory's `$set`): each
/// checked as a `set` is and written through its accessory's worker; one answer holds an entry
/// for each.
struct WriteMany: Sendable {
    /// Where one characteristic's answer goes in the whole.
    struct Part: Sendable {
        var token: Int
        var service: String
        var characteristic: String
    }

    /// A write in flight: its characteristics' answers, gathered until the last one.
    struct Pending: Sendable {
        var id: JSONValue
        var topic: String
        var reply: Gateway.Reply?
        var remaining: Int
        var results: [String: [String: JSONValue]] = [:]
    }

    private var pending: [Int: Pending] = [:]
    private var next = 0

    /// A new write of `count` parts; its token.
    mutating func begin(id: JSONValue, topic: String, reply: Gateway.Reply?, count: Int) -> Int {
        next += 1
        pending[next] = Pending(id: id, topic: topic, reply: reply, remaining: count)
        return next
    }

    /// Files one part's answer; returns the whole write when it was the last.
    mutating func file(_ part: Part, _ entry: [String: JSONValue]) -> Pending? {
        guard var write = pending[part.token] else { return nil }
        write.results[part.service, default: [:]][part.characteristic] = .object(entry)
        write.remaining -= 1
        guard write.remaining == 0 else {
            pending[part.token] = write
            return nil
        }
        pending[part.token] = nil
        return write
    }
}

extension Gateway {
    /// Writes `writes` to the accessory, answered as one on `resultTopic` (and the reply's
    /// topic) once every part has its answer.
    func write(_ writes: [CharacteristicWrite], accessoryID: String, id: JSONValue, resultTopic: String, reply: Reply?)
    {
        let token = writeMany.begin(id: id, topic: resultTopic, reply: reply, count: writes.count)
        for write in writes {
            let part = WriteMany.Part(token: token, service: write.service, characteristic: write.characteristic)
            guard let node = write.node, case .success(let value) = write.value else {
                if case .failure(let failure) = write.value { record(part, .failure(failure)) }
                continue
            }
            dispatch(
                Job(
                    kind: .set(value), op: "set", id: id, node: node, accessoryID: accessoryID,
                    resultTopic: resultTopic, reply: nil, part: part))
        }
    }

    /// A value for `node` from JSON, by the same rules as a JSON `set`.
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

    /// One characteristic's answer; the last one sends the whole.
    func record(_ part: WriteMany.Part, _ outcome: Result<CharacteristicValue?, GatewayFailure>) {
        let entry: JSONValue =
            switch outcome {
            case .success(let value): Payloads.result(id: .null, op: "set", value: value)
            case .failure(let failure): Payloads.error(id: .null, op: "set", failure)
            }
        var fields = entry.objectValue ?? [:]
        fields["id"] = nil
        fields["op"] = nil
        guard let set = writeMany.file(part, fields) else { return }
        let allOK = set.results.values.allSatisfy { $0.values.allSatisfy { $0["status"] == "ok" } }
        if !allOK { activity.failed() }
        answer(
            set.topic,
            json: .object([
                "id": set.id, "op": "set", "status": allOK ? "ok" : "error",
                "results": .object(set.results.mapValues { .object($0) }),
            ]), reply: set.reply)
    }
}
