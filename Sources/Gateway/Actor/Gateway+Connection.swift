import Foundation
import HomeModel
import MQTT

/// The broker connection as the gateway sees it (a reconnect republishes everything).
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
                connection.failed(error.map { "\($0)" } ?? "the connection ended")
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
}
