import HomeModel
import Testing

@testable import Simulator

/// The simulator finds the accessory of a change by comparing with the last one's id
/// (`SimulatedHome.recent`), and takes which of its characteristics notify once per run of its
/// changes: a change of the notifications or of the accessory list in the middle of a run is
/// seen by the next change.
@Suite struct RunOfChangesTests {
    private func values(_ log: EventLog) async -> [CharacteristicAddress: [CharacteristicValue]] {
        var out: [CharacteristicAddress: [CharacteristicValue]] = [:]
        for case .valueUpdated(let address, let value) in await log.drain() { out[address, default: []].append(value) }
        return out
    }

    @Test func notificationsAndAccessoriesChangedWithinARunAreSeenByItsNextChange() async throws {
        let (home, dir) = try makeHome(bridgeYAML, stem: "bridge")
        _ = dir
        let porch = try #require(await home.accessory(named: "Porch Light"))
        let cellar = try #require(await home.accessory(named: "Cellar Sensor"))
        let power = try #require(porch.address(service: "lightbulb", characteristic: "power-state"))
        let temperature = try #require(
            cellar.address(service: "temperature-sensor", characteristic: "current-temperature"))
        _ = await home.setNotifications(enabled: true, for: [power])
        let log = EventLog(home)

        // Runs of one accessory and then the other: only the one that notifies is reported.
        try await home.setValue(power, .bool(true))
        try await home.setValue(temperature, .float(20))
        try await home.setValue(power, .bool(false))
        #expect(await values(log) == [power: [.bool(true), .bool(false)]])

        // Its notifications turned off between two changes of one run.
        try await home.setValue(power, .bool(true))
        _ = await home.setNotifications(enabled: false, for: [power])
        try await home.setValue(power, .bool(false))
        _ = await home.setNotifications(enabled: true, for: [temperature])
        try await home.setValue(temperature, .float(21))
        #expect(await values(log) == [power: [.bool(true)], temperature: [.float(21)]])

        // The accessory before it removed: it is found at its new place.
        try await home.setValue(temperature, .float(22))
        #expect(await home.remove(accessoryID: porch.id))
        try await home.setValue(temperature, .float(23))
        #expect(await values(log) == [temperature: [.float(22), .float(23)]])
        #expect(await home.value(temperature) == .float(23))
        await #expect(throws: AccessoryError.self) { try await home.setValue(power, .bool(true)) }
    }
}
