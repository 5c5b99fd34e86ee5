import Foundation
import HomeModel
import MQTT

/// The broker connection as the gateway sees it (a reconnect republishes everything).
extension Gateway {
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
                if connection.isRepeatedLossOverPacketSize(error, mqtt: mqtt) {
                    BrokerReports.repeatedLosses(config: config, logger: logger)
                }
            }
        default:
            break
        }
    }
}
