import Foundation
import HAP
import HAPServer
import HAPServerTestSupport
import HomeModel
import Logging
import Simulator
import Synchronization
import TestSupport

/// An accessory file of Config/accessories as a `HAPAccessoryDatabase`: the tree the simulator
/// builds from it (aid 1), values kept here. A write is stored and told to the CoAP accessory
/// with the writer's session as its cause, as a gateway reports a change it made; `set` is a
/// change from inside (no cause). `stalled` makes reads and writes wait until cancelled.
final class FileAccessoryDatabase: HAPAccessoryDatabase {
    let model: HomeModel.Accessory
    private struct State {
        var values: [Int: JSONValue] = [:]
        var accessory: HAPCoAPAccessory?
        var stalled = false
    }
    private let state = Mutex(State())

    init(file: String) throws {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Config/accessories/\(file)")
        let config = try AccessoryFileLoader.parse(
            yaml: String(contentsOf: url, encoding: .utf8), file: url.path,
            stem: url.deletingPathExtension().lastPathComponent)
        model = config.accessories[0]
        var values: [Int: JSONValue] = [:]
        for c in model.services.flatMap(\.characteristics) {
            if let v = c.value { values[Int(c.iid)] = HAPAccessoryJSON.json(for: v, format: c.metadata.format) }
        }
        state.withLock { $0.values = values }
    }

    func attach(_ accessory: HAPCoAPAccessory) { state.withLock { $0.accessory = accessory } }

    /// The model's characteristic of `type` (long form) in the service of `service` type.
    func iid(_ service: String, _ type: String) -> UInt16 {
        let s = model.services.first { $0.type == StandardUUID.longForm(service) }!
        return UInt16(s.characteristics.first { $0.type == StandardUUID.longForm(type) }!.iid)
    }

    func value(_ iid: UInt16) -> JSONValue? { state.withLock { $0.values[Int(iid)] } }

    var stalled: Bool {
        get { state.withLock { $0.stalled } }
        set { state.withLock { $0.stalled = newValue } }
    }

    /// Waits until cancelled when stalled; true when it did.
    private func stallIfAsked() async -> Bool {
        guard stalled else { return false }
        while !Task.isCancelled { try? await Task.sleep(for: .seconds(3600)) }
        return true
    }

    /// A change from the accessory's side: every subscribed session hears of it.
    @discardableResult
    func set(_ iid: UInt16, _ value: JSONValue) async -> Int {
        let accessory = state.withLock { s in
            s.values[Int(iid)] = value
            return s.accessory
        }
        return await accessory?.notify([
            HAPValueChange(id: HAPServer.HAPCharacteristicID(aid: 1, iid: Int(iid)), value: value)
        ])
            ?? 0
    }

    static func permissions(_ p: CharacteristicPermissions) -> HAPPermissions {
        let pairs: [(CharacteristicPermissions, HAPPermissions)] = [
            (.read, .read), (.write, .write), (.notify, .events), (.additionalAuthorization, .additionalAuthorization),
            (.timedWrite, .timedWrite), (.hidden, .hidden), (.writeResponse, .writeResponse),
        ]
        return HAPPermissions(pairs.filter { p.contains($0.0) }.map(\.1))
    }

    func accessories() async -> [HAPAccessory] {
        let values = state.withLock { $0.values }
        let services = model.services.map { s in
            HAPService(
                iid: Int(s.iid), type: s.type, isPrimary: s.isPrimary, isHidden: s.isHidden,
                linked: s.linkedServices.map { Int($0) },
                characteristics: s.characteristics.map { c in
                    let m = c.metadata
                    return HAPCharacteristic(
                        iid: Int(c.iid), type: c.type, format: HAPFormat(rawValue: m.format.rawValue)!,
                        permissions: Self.permissions(m.permissions), unit: m.unit, minValue: m.minValue,
                        maxValue: m.maxValue, minStep: m.minStep, maxLength: m.maxLength,
                        validValues: m.validValues.isEmpty ? nil : m.validValues.keys.sorted().map { Int($0) },
                        description: c.name, value: values[Int(c.iid)])
                })
        }
        return [HAPAccessory(aid: 1, services: services)]
    }

    func read(_ ids: [HAPServer.HAPCharacteristicID], context: HAPRequestContext) async
        -> [HAPServer.HAPCharacteristicID: Result<JSONValue, HAPStatus>]
    {
        if await stallIfAsked() { return [:] }
        let values = state.withLock { $0.values }
        var out: [HAPServer.HAPCharacteristicID: Result<JSONValue, HAPStatus>] = [:]
        for id in ids { out[id] = values[id.iid].map { .success($0) } ?? .failure(.doesNotExist) }
        return out
    }

    func write(_ writes: [HAPWrite], context: HAPRequestContext) async
        -> [HAPServer.HAPCharacteristicID: Result<JSONValue?, HAPStatus>]
    {
        if await stallIfAsked() { return [:] }
        let accessory = state.withLock { s in
            for w in writes { s.values[w.id.iid] = w.value }
            return s.accessory
        }
        await accessory?.notify(writes.map { HAPValueChange(id: $0.id, value: $0.value) }, cause: context.session)
        var out: [HAPServer.HAPCharacteristicID: Result<JSONValue?, HAPStatus>] = [:]
        for w in writes { out[w.id] = .success(nil) }
        return out
    }

    func identify() async {}
}

/// A `HAPCoAPAccessory` serving garage.yml (a garage door opener and its light) over a
/// `CoAPMemoryLink`, with a fresh state directory.
struct CoAPPeers {
    static let code = HAPSetupCode("314-15-926")!
    let link = CoAPMemoryLink()
    let database: FileAccessoryDatabase
    let accessory: HAPCoAPAccessory
    let directory: TemporaryDirectory

    init(
        file: String = "garage.yml", configure: (inout HAPCoAPAccessory.Configuration) -> Void = { _ in }
    ) async throws {
        database = try FileAccessoryDatabase(file: file)
        directory = try TemporaryDirectory(prefix: "hap-coap")
        var logger = Logger(label: "hap-coap-test")
        logger.logLevel = ProcessInfo.processInfo.environment["HAP_SERVER_TEST_LOG"] == nil ? .warning : .trace
        var configuration = HAPCoAPAccessory.Configuration(
            stateDirectory: URL(fileURLWithPath: directory.path), setupCode: Self.code)
        // The database's deadline passes at once while it is stalled and never otherwise: the
        // order is the test's, not the machine's.
        configuration.databaseDeadline = { [database] _ in
            if database.stalled { return }
            while !Task.isCancelled { try await Task.sleep(for: .seconds(3600)) }
        }
        configure(&configuration)
        accessory = try HAPCoAPAccessory(
            configuration: configuration, database: database, events: link, logger: logger)
        database.attach(accessory)
        link.attach(accessory)
        try await accessory.databaseChanged()
    }

    /// Pair-setup from `peer`, with `code`.
    func pair(from peer: String = "controller-a", code: String = Self.code.revealed) async throws -> HAPPairing {
        try await HAPCoAPController.pair(
            exchange: link.exchange(from: peer), host: "fd00::1", port: 5683, setupCode: code)
    }

    /// A controller at `peer` with `pairing`, its events routed to it.
    func controller(_ pairing: HAPPairing, at peer: String = "controller-a") -> HAPCoAPController {
        let c = HAPCoAPController(
            pairing: pairing, exchange: link.exchange(from: peer), logger: Logger(label: "hap-coap-controller"))
        link.register(c, at: peer)
        return c
    }
}
