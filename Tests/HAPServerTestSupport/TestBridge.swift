public import HAPServer
public import HomeModel
import Foundation
import Synchronization

/// A bridge served from memory: aid 1 the bridge (Accessory Information, Protocol Information),
/// aid 2 a lamp (On, Brightness 0–100 %), aid 3 a temperature sensor that can be made
/// unreachable, aid 4 a lock whose target state takes timed writes only.
///
/// Writes are stored, reported on `writes` and notified to the server with the writing session
/// as their cause, as a gateway reports a change it made; `set` changes a value from the
/// accessory's side (no cause). `stall` makes reads and writes hang until cancelled.
public final class TestBridge: HAPAccessoryDatabase {
    public static let lampOn = HAPCharacteristicID(aid: 2, iid: 9)
    public static let brightness = HAPCharacteristicID(aid: 2, iid: 10)
    public static let temperature = HAPCharacteristicID(aid: 3, iid: 9)
    public static let lockCurrent = HAPCharacteristicID(aid: 4, iid: 9)
    public static let lockTarget = HAPCharacteristicID(aid: 4, iid: 10)
    public static let bridgeManufacturer = HAPCharacteristicID(aid: 1, iid: 3)
    public static let bridgeIdentify = HAPCharacteristicID(aid: 1, iid: 2)

    public struct Written: Sendable, Hashable {
        public var id: HAPCharacteristicID
        public var value: JSONValue
        public var session: HAPSessionID
    }

    private struct State {
        var values: [HAPCharacteristicID: JSONValue] = [
            TestBridge.lampOn: .bool(false), TestBridge.brightness: .int(50), TestBridge.temperature: .double(21.5),
            TestBridge.lockCurrent: .int(1), TestBridge.lockTarget: .int(1),
        ]
        var unreachable: Set<Int> = []
        var stalled = false
        var server: HAPAccessoryServer?
        var extraAccessories: [HAPAccessory] = []
    }

    private let state = Mutex(State())
    public let writes: AsyncStream<Written>
    private let written: AsyncStream<Written>.Continuation
    public let identifies: AsyncStream<Void>
    private let identified: AsyncStream<Void>.Continuation

    public init() {
        (writes, written) = AsyncStream.makeStream(of: Written.self)
        (identifies, identified) = AsyncStream.makeStream(of: Void.self)
    }

    /// The server whose sessions hear of changes.
    public func attach(_ server: HAPAccessoryServer) { state.withLock { $0.server = server } }

    /// A change from the accessory's side: every subscribed session hears of it.
    @discardableResult
    public func set(_ id: HAPCharacteristicID, _ value: JSONValue) -> Int {
        let server = state.withLock { s in
            s.values[id] = value
            return s.server
        }
        return server?.notify([HAPValueChange(id: id, value: value)]) ?? 0
    }

    public func value(_ id: HAPCharacteristicID) -> JSONValue? { state.withLock { $0.values[id] } }
    public func setUnreachable(_ aid: Int, _ unreachable: Bool = true) {
        state.withLock { if unreachable { $0.unreachable.insert(aid) } else { $0.unreachable.remove(aid) } }
    }
    public func setStalled(_ stalled: Bool) { state.withLock { $0.stalled = stalled } }
    /// Adds an accessory (a new aid) to the tree: its shape changes.
    public func add(_ accessory: HAPAccessory) { state.withLock { $0.extraAccessories.append(accessory) } }

    public static func information(name: String, model: String) -> HAPService {
        HAPService(
            iid: 1, type: "3E",
            characteristics: [
                HAPCharacteristic(iid: 2, type: "14", format: .bool, permissions: [.write]),
                HAPCharacteristic(iid: 3, type: "20", format: .string, permissions: [.read], value: "HomeMQTT"),
                HAPCharacteristic(iid: 4, type: "21", format: .string, permissions: [.read], value: .string(model)),
                HAPCharacteristic(iid: 5, type: "23", format: .string, permissions: [.read], value: .string(name)),
                HAPCharacteristic(iid: 6, type: "30", format: .string, permissions: [.read], value: "0001"),
                HAPCharacteristic(iid: 7, type: "52", format: .string, permissions: [.read], value: "1.0.0"),
            ])
    }

    public func accessories() async -> [HAPAccessory] {
        let (values, extra) = state.withLock { ($0.values, $0.extraAccessories) }
        var tree = [
            HAPAccessory(
                aid: 1,
                services: [
                    Self.information(name: "Test Bridge", model: "Bridge"),
                    HAPService(
                        iid: 8, type: "A2",
                        characteristics: [
                            HAPCharacteristic(iid: 9, type: "37", format: .string, permissions: [.read], value: "1.1.0")
                        ]),
                ]),
            HAPAccessory(
                aid: 2,
                services: [
                    Self.information(name: "Lamp", model: "Lamp"),
                    HAPService(
                        iid: 8, type: "43", isPrimary: true,
                        characteristics: [
                            HAPCharacteristic(
                                iid: 9, type: "25", format: .bool, permissions: [.read, .write, .events],
                                value: values[Self.lampOn]),
                            HAPCharacteristic(
                                iid: 10, type: "8", format: .int, permissions: [.read, .write, .events],
                                unit: "percentage", minValue: 0, maxValue: 100, minStep: 1,
                                value: values[Self.brightness]),
                        ]),
                ]),
            HAPAccessory(
                aid: 3,
                services: [
                    Self.information(name: "Sensor", model: "Sensor"),
                    HAPService(
                        iid: 8, type: "8A", isPrimary: true,
                        characteristics: [
                            HAPCharacteristic(
                                iid: 9, type: "11", format: .float, permissions: [.read, .events], unit: "celsius",
                                minValue: -270, maxValue: 100, minStep: 0.1, value: values[Self.temperature])
                        ]),
                ]),
            HAPAccessory(
                aid: 4,
                services: [
                    Self.information(name: "Lock", model: "Lock"),
                    HAPService(
                        iid: 8, type: "45", isPrimary: true,
                        characteristics: [
                            HAPCharacteristic(
                                iid: 9, type: "1D", format: .uint8, permissions: [.read, .events], minValue: 0,
                                maxValue: 3, minStep: 1, value: values[Self.lockCurrent]),
                            HAPCharacteristic(
                                iid: 10, type: "1E", format: .uint8,
                                permissions: [.read, .write, .events, .timedWrite],
                                minValue: 0, maxValue: 1, minStep: 1, validValues: [0, 1],
                                value: values[Self.lockTarget]),
                        ]),
                ]),
        ]
        tree += extra
        return tree
    }

    public func read(_ ids: [HAPCharacteristicID], context: HAPRequestContext) async
        -> [HAPCharacteristicID: Result<JSONValue, HAPStatus>]
    {
        await stallIfAsked()
        let (values, unreachable) = state.withLock { ($0.values, $0.unreachable) }
        var out: [HAPCharacteristicID: Result<JSONValue, HAPStatus>] = [:]
        for id in ids {
            if unreachable.contains(id.aid) {
                out[id] = .failure(.communicationFailure)
            } else if let value = values[id] {
                out[id] = .success(value)
            } else {
                // The information service's fixed strings.
                out[id] = .success(.string("HomeMQTT"))
            }
        }
        return out
    }

    public func write(_ writes: [HAPWrite], context: HAPRequestContext) async
        -> [HAPCharacteristicID: Result<JSONValue?, HAPStatus>]
    {
        await stallIfAsked()
        var out: [HAPCharacteristicID: Result<JSONValue?, HAPStatus>] = [:]
        var changes: [HAPValueChange] = []
        let server = state.withLock { s in
            for write in writes {
                if s.unreachable.contains(write.id.aid) {
                    out[write.id] = .failure(.communicationFailure)
                    continue
                }
                s.values[write.id] = write.value
                out[write.id] = .success(write.value)
                changes.append(HAPValueChange(id: write.id, value: write.value))
            }
            return s.server
        }
        for change in changes { written.yield(Written(id: change.id, value: change.value, session: context.session)) }
        server?.notify(changes, cause: context.session)
        return out
    }

    public func identify() async { identified.yield() }

    /// A stuck accessory: waits until the server gives up and cancels the call.
    private func stallIfAsked() async {
        guard state.withLock({ $0.stalled }) else { return }
        try? await Task.sleep(for: .seconds(3600))
    }
}

/// Runs a blocking call (a `RawHAPClient` waiting on its socket) on a thread of its own, off the
/// cooperative pool the server's connections run on.
public func blocking<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try work() }) }
    }
}
