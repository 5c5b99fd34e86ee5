import Foundation
import Gateway
import HomeModel
import ServiceLifecycle
import Synchronization
import XCTest

/// Several homes' gateways over one source: notifications stay on while any of them wants them.
final class SharedSourceTests: XCTestCase {
    /// A source that records the notification calls it gets.
    final class Recorder: AccessorySource {
        let calls = Mutex<[(Bool, [CharacteristicAddress])]>([])
        var sourceName: String { "recorder" }
        func accessories() async -> [Accessory] { [] }
        func events() -> EventStream<SourceEvent> { EventHub<SourceEvent>().subscribe() }
        func read(_ address: CharacteristicAddress) async throws(AccessoryError) -> CharacteristicValue { .bool(true) }
        func write(_ address: CharacteristicAddress, value: CharacteristicValue) async throws(AccessoryError) {}
        func identify(accessoryID: String) async throws(AccessoryError) {}
        func run() async throws {}
        func setNotifications(enabled: Bool, for addresses: [CharacteristicAddress]) async -> [CharacteristicAddress:
            AccessoryError]
        {
            calls.withLock { $0.append((enabled, addresses)) }
            return [:]
        }
    }

    func testNotificationsGoOffOnlyWhenNoGatewayWantsThem() async {
        let recorder = Recorder()
        let shared = SharedSource(recorder)
        let (first, cabin) = (shared.lease(0), shared.lease(1))
        let door = CharacteristicAddress(accessoryID: "sim:garage", iid: 10)
        let light = CharacteristicAddress(accessoryID: "sim:lamp", iid: 9)

        _ = await first.setNotifications(enabled: true, for: [door, light])
        _ = await cabin.setNotifications(enabled: true, for: [door]) // already on: not asked again
        _ = await first.setNotifications(enabled: false, for: [door]) // the cabin still wants it
        _ = await first.setNotifications(enabled: false, for: [door]) // twice changes nothing
        _ = await cabin.setNotifications(enabled: false, for: [door, light]) // the light is not the cabin's
        let calls = recorder.calls.withLock { $0 }
        XCTAssertEqual(calls.map(\.0), [true, false])
        XCTAssertEqual(calls.map { Set($0.1) }, [[door, light], [door]])
    }
}
