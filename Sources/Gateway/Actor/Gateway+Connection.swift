import Foundation
import HomeModel
import MQTT

/// The broker connection as the gateway sees it (a reconnect republishes everything), and the
/// health report.
extension Gateway {
    /// The first connection of the run: nothing to republish yet.
    func connectedFirst() { _ = connection.connected() }

    func handle(connection state: MQTTConnectionState) {
        switch state {
        case .connected:
            if connection.connected() {
                logger.info("reconnected to the broker; republishing")
                activity.reconnected()
                enqueue(.all)
                notifyObservers(.connection(true))
            }
        case .disconnected(nil):
            // Our own clean disconnect at shutdown: nothing was lost.
            _ = connection.lost()
        case .reconnecting(let error), .disconnected(let error):
            if connection.lost() {
                logger.warning("lost the broker", metadata: ["error": "\(error.map { "\($0)" } ?? "none")"])
                notifyObservers(.connection(false))
                noteLoss(error)
            }
        default:
            break
        }
    }

    /// An MQTT 3.1.1 broker cannot tell its maximum packet size, and closes the connection of a
    /// client that sends a larger packet: without `broker.max-packet-size` the gateway then
    /// reconnects, republishes the same packet and loses the connection again. The third
    /// loss within a minute says so, once, with the setting that ends it.
    func noteLoss(_ error: MQTTError?) {
        guard error?.code == .connectionLost, mqtt.protocolVersion == .v311,
            mqtt.brokerLimits.maximumPacketSize == nil
        else { return }
        guard connection.countLoss() == 3 else { return }
        BrokerReports.repeatedLosses(config: config, logger: logger)
    }

    func health() async -> JSONValue {
        let uptime = ContinuousClock.now - parts.startedAt
        let requests = activity.requestCounts
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
                "sets": .int(Int64(requests.sets)),
                "gets": .int(Int64(requests.gets)),
                "errors": .int(Int64(requests.errors)),
                // Never sent (a topic or packet the broker would not take, or a failure), and
                // refused by the broker after sending.
                "publishes-not-sent": .int(Int64(outbox.failedPublishes)),
                "publishes-refused": .int(Int64(mqtt.refusedPublishCount)),
            ]),
        ])
    }
}
