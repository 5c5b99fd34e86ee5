import HomeModel
import MetricsTestKit
import Testing

@testable import Gateway

/// `homemqtt_source_events_total` on `/metrics`: each kind of event a source reports counted
/// under its own `kind` label (one counter property each since the kinds stopped being looked
/// up by name at every value).
@Suite struct SourceEventCountTests {
    @Test func eachKindOfSourceEventIsCountedUnderItsOwnLabel() throws {
        let metrics = TestMetrics()
        let activity = GatewayActivity(factory: metrics)
        let lamp = Accessory(
            id: "sim:lamp", name: "Lamp", manufacturer: "Acme", model: "L1", serialNumber: "1", firmwareRevision: "1.0",
            services: [], suggestedRoom: nil)
        let events: [(SourceEvent, times: Int)] = [
            (.valueUpdated(CharacteristicAddress(accessoryID: lamp.id, iid: 10), .int(1)), 5),
            (.reachabilityChanged(id: lamp.id, isReachable: false), 4),
            (.accessoryAdded(lamp), 3),
            (.accessoryChanged(lamp), 2),
            (.accessoryRemoved(id: lamp.id), 1),
        ]
        for (event, times) in events {
            for _ in 0..<times { activity.sourceEvent(event) }
        }
        for (kind, count) in [("value", 5), ("reachability", 4), ("added", 3), ("changed", 2), ("removed", 1)] {
            let counter = try metrics.expectCounter("homemqtt_source_events_total", [("kind", kind)])
            #expect(counter.totalValue == Int64(count), "kind \(kind)")
        }
    }
}
