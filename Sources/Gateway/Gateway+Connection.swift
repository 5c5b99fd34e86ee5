import Foundation
import HomeModel
import MQTT

/// The broker connection as the gateway sees it (a reconnect republishes everything), and the
/// health report.
extension Gateway {
    func handle(connection state: MQTTConnectionState) {
        switch state {
        case .connected:
            if !wasConnected {
                logger.info("reconnected to the broker; republishing")
                activity.reconnected()
                enqueue(.all)
                notifyObservers(.connection(true))
            }
            wasConnected = true
        case .disconnected(nil):
            // Our own clean disconnect at shutdown: nothing was lost.
            wasConnected = false
        case .reconnecting(let error), .disconnected(let error):
            if wasConnected {
                logger.warning("lost the broker", metadata: ["error": "\(error.map { "\($0)" } ?? "none")"])
                notifyObservers(.connection(false))
            }
            wasConnected = false
        default:
            break
        }
    }

    func health() async -> JSONValue {
        let uptime = ContinuousClock.now - startedAt
        return .object([
            "uptime": .double(Double(uptime.components.seconds) + Double(uptime.components.attoseconds) / 1e18),
            "broker": .object([
                "url": .string(config.brokerDisplay),
                "state": .string("\(mqtt.connectionState)"),
            ]),
            "sources": .array([.object(["name": .string(source.sourceName)])]),
            "counts": .object([
                "rooms": .int(Int64(tree.rooms.count)),
                "accessories": .int(Int64(tree.accessories.count)),
                "characteristics": .int(Int64(tree.characteristicCount)),
                "retained-topics": .int(Int64(retainedCount)),
                "sets": .int(Int64(counters.sets)),
                "gets": .int(Int64(counters.gets)),
                "errors": .int(Int64(counters.errors)),
            ]),
        ])
    }
}
