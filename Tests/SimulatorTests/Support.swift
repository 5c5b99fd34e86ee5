import Foundation
import HomeModel
import TestSupport
@testable import Simulator

enum Paths {
    static let repo = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let fixtures = repo.appendingPathComponent("Tests/Fixtures/hap-fixtures")
    static let config = repo.appendingPathComponent("Config/accessories")
}

/// Reads a home's events in order. `drain()` returns everything emitted up to now, by
/// emitting a marker and reading until it arrives, so "no event" can be asserted without waiting.
final class EventLog {
    private var iterator: EventStream<SourceEvent>.AsyncIterator
    private let home: SimulatedHome

    init(_ home: SimulatedHome) {
        self.home = home
        iterator = home.events().makeAsyncIterator()
    }

    func drain() async -> [SourceEvent] {
        let marker = "marker-\(UUID().uuidString)"
        await home.emit(.accessoryRemoved(id: marker))
        var events: [SourceEvent] = []
        while let event = await iterator.next() {
            if event == .accessoryRemoved(id: marker) { break }
            events.append(event)
        }
        return events
    }

    /// Values reported for one address, in order, since the last drain.
    func values(for address: CharacteristicAddress) async -> [CharacteristicValue] {
        await drain().compactMap {
            if case .valueUpdated(let a, let v) = $0, a == address { return v }
            return nil
        }
    }
}

extension Accessory {
    /// The characteristic of a type in the first service of a type.
    func address(service: String, characteristic: String) -> CharacteristicAddress? {
        let serviceUUID = Catalog.serviceType(named: service)?.uuid ?? service.uppercased()
        let charUUID = Catalog.characteristicType(named: characteristic)?.uuid ?? characteristic.uppercased()
        guard let s = services.first(where: { $0.type == serviceUUID }),
            let c = s.characteristic(type: charUUID)
        else { return nil }
        return CharacteristicAddress(accessoryID: id, iid: c.iid)
    }
}

extension SimulatedHome {
    func accessory(named name: String) async -> Accessory? {
        await accessories().first { $0.name == name }
    }
}

/// Loads one YAML text as a home on the manual clock.
func makeHome(_ yaml: String, stem: String = "test", extra: [String: String] = [:]) throws -> (
    SimulatedHome, TemporaryDirectory
) {
    let dir = try TemporaryDirectory()
    var files = [try dir.write("\(stem).yml", yaml)]
    for (name, text) in extra.sorted(by: { $0.key < $1.key }) { files.append(try dir.write(name, text)) }
    return (try SimulatedHome.load(files: files, clock: .manual), dir)
}
