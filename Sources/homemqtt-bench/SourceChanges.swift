import Foundation
import HomeModel
import Simulator

/// Changes pushed into the gateway child's simulator from the device side, for scenario 7's
/// notification row: each line the bench writes to the child's stdin is a number N, and the
/// child makes the next N changes, one after another (each a `state` the gateway publishes).
/// The k-th change of the child's life sets notifying characteristic k mod T of the home's
/// lightbulbs to round k ÷ T + 1's value: a value that differs from the one before it, so that
/// every change is one notification.
enum SourceChanges {
    static func follow(_ source: SimulatedHome) async throws {
        let lightbulb = Catalog.serviceType(named: "lightbulb")?.uuid
        var targets: [(CharacteristicAddress, CharacteristicMetadata)] = []
        for accessory in await source.accessories() {
            for service in accessory.services where service.type == lightbulb {
                for c in service.characteristics where c.metadata.permissions.contains(.notify) {
                    targets.append((CharacteristicAddress(accessoryID: accessory.id, iid: c.iid), c.metadata))
                }
            }
        }
        guard !targets.isEmpty else { throw BenchError("the home has no notifying lightbulb characteristic") }
        var made = 0
        for await line in stdinLines() {
            guard let count = Int(line.trimmingCharacters(in: .whitespaces)), count >= 0 else { continue }
            for _ in 0..<count {
                let (address, metadata) = targets[made % targets.count]
                try await source.setValue(
                    address, HomeGenerator.value(for: metadata, round: made / targets.count + 1))
                made += 1
            }
        }
    }

    /// The lines of stdin until its end, read on a thread of its own: a blocking read must not
    /// hold one of the cooperative pool's few threads.
    static func stdinLines() -> AsyncStream<String> {
        AsyncStream { continuation in
            let reader = Thread {
                while let line = readLine() { continuation.yield(line) }
                continuation.finish()
            }
            reader.start()
        }
    }
}
