// A child process for the last-will tests: our MQTTClient with a will, connected, then either killed by the
// test (the broker must publish the will) or disconnecting cleanly (it must not).
//
// Usage: mqtt-will-probe HOST PORT CLIENT_ID WILL_TOPIC WILL_PAYLOAD WILL_QOS WILL_RETAIN(0|1) (wait|disconnect)
import Foundation
import MQTT

let arguments = CommandLine.arguments
guard arguments.count == 9, let port = Int(arguments[2]), let qosValue = Int(arguments[6]),
    let qos = MQTTQoS(rawValue: qosValue), ["wait", "disconnect"].contains(arguments[8])
else {
    FileHandle.standardError.write(
        Data("usage: mqtt-will-probe HOST PORT CLIENT_ID TOPIC PAYLOAD QOS RETAIN wait|disconnect\n".utf8))
    exit(2)
}
var configuration = MQTTConfiguration(host: arguments[1], port: port)
configuration.clientID = arguments[3]
configuration.keepAlive = 5
configuration.will = MQTTWill(
    topic: arguments[4], payload: Array(arguments[5].utf8), qos: qos, retain: arguments[7] == "1")
let client = MQTTClient(configuration: configuration)
do {
    try await client.connect()
} catch {
    FileHandle.standardError.write(Data("connect failed: \(error)\n".utf8))
    exit(1)
}
FileHandle.standardOutput.write(Data("connected\n".utf8))
if arguments[8] == "disconnect" {
    await client.disconnect()
    FileHandle.standardOutput.write(Data("disconnected\n".utf8))
    exit(0)
}
while true { try? await Task.sleep(for: .seconds(3600)) }
