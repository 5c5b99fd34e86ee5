import Gateway
import HomeModel
import Simulator
import XCTest

/// Two sources seen as one: accessories merged, every operation routed to its owner.
final class CompositeSourceTests: XCTestCase {
    /// The merged events end when the composite's run does, and a stream taken after that ends at once.
    func testEventsEndWithTheRun() async throws {
        let only = SimulatedHome(accessories: [TopicTreeTests.lamp(id: "one:lamp", name: "Lamp One")], clock: .manual)
        let composite = CompositeSource([only])
        let events = composite.events()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await composite.run() }
            group.cancelAll()
        }
        for await event in events { XCTFail("no event was made: \(event)") }
        for await event in composite.events() { XCTFail("a stream after the run ends at once: \(event)") }
    }

    func testAccessoriesMergeAndOperationsReachTheirOwnSource() async throws {
        let first = SimulatedHome(accessories: [TopicTreeTests.lamp(id: "one:lamp", name: "Lamp One")], clock: .manual)
        let second = SimulatedHome(accessories: [TopicTreeTests.lamp(id: "two:lamp", name: "Lamp Two")], clock: .manual)
        let both = CompositeSource([first, second])
        XCTAssertEqual(both.sourceName, "simulator+simulator")
        let ids = await both.accessories().map(\.id).sorted()
        XCTAssertEqual(ids, ["one:lamp", "two:lamp"])

        // The composite forwards its sources' events from its run(), as a service of the group.
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await both.run() }
            let power = CharacteristicAddress(accessoryID: "two:lamp", iid: 11)
            var events = both.events().makeAsyncIterator()
            let failures = await both.setNotifications(
                enabled: true, for: [power, CharacteristicAddress(accessoryID: "nowhere", iid: 1)])
            XCTAssertEqual(Array(failures.keys), [CharacteristicAddress(accessoryID: "nowhere", iid: 1)])
            try await both.write(power, value: .bool(true))
            let secondValue = await second.value(power)
            let firstValue = await first.value(CharacteristicAddress(accessoryID: "one:lamp", iid: 11))
            XCTAssertEqual(secondValue, .bool(true))
            XCTAssertEqual(firstValue, .bool(false))
            let event = await events.next()
            XCTAssertEqual(event, .valueUpdated(power, .bool(true)))
            let read = try await both.read(power)
            XCTAssertEqual(read, .bool(true))

            do {
                try await both.write(CharacteristicAddress(accessoryID: "nowhere", iid: 1), value: .bool(true))
                XCTFail("an unknown accessory is refused")
            } catch {
                XCTAssertEqual((error as? AccessoryError)?.status, .doesNotExist)
            }
            group.cancelAll()
        }
    }
}
