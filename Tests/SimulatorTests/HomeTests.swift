import Foundation
import HomeModel
import Logging
import ServiceLifecycle
import Testing
@testable import Simulator

let bridgeYAML = """
    name: Test Bridge
    manufacturer: Lumen Lighting B.V.
    bridged:
      - name: Porch Light
        room: Porch
        services:
          - type: lightbulb
            characteristics: { power-state: false }
      - name: Cellar Sensor
        room: Cellar
        services:
          - type: temperature-sensor
    """

@Suite struct AccessControlTests {
    @Test func errorsForReadOnlyWriteOnlyUnknownAndInvalid() async throws {
        let (home, dir) = try makeHome(garageYAML, stem: "garage")
        _ = dir
        let a = try #require(await home.accessory(named: "Garage Door Opener"))
        let current = try #require(a.address(service: "garage-door-opener", characteristic: "current-door-state"))
        let target = try #require(a.address(service: "garage-door-opener", characteristic: "target-door-state"))
        let identify = try #require(a.address(service: "accessory-information", characteristic: "identify"))

        do {
            try await home.write(current, value: .uint(0))
            Issue.record("a read-only write succeeded")
        } catch {
            #expect(error.status == .readOnly)
        }
        do {
            _ = try await home.read(identify)
            Issue.record("reading identify succeeded")
        } catch {
            #expect(error.status == .writeOnly)
        }
        do {
            _ = try await home.read(CharacteristicAddress(accessoryID: a.id, iid: 999))
            Issue.record("reading a missing iid succeeded")
        } catch {
            #expect(error.status == .doesNotExist)
        }
        do {
            try await home.write(CharacteristicAddress(accessoryID: "sim:nope", iid: 1), value: .bool(true))
            Issue.record("writing a missing accessory succeeded")
        } catch {
            #expect(error.status == .doesNotExist)
        }
        do {
            try await home.write(target, value: .uint(7))
            Issue.record("an invalid valid-value was accepted")
        } catch {
            #expect(error.status == .invalidValue)
            #expect(error.message.contains("target-door-state"))
        }
        do {
            try await home.write(target, value: .string("open"))
            Issue.record("a string was accepted for uint8")
        } catch {
            #expect(error.status == .invalidValue)
        }
        #expect(try await home.read(target) == .uint(1))

        try await home.write(identify, value: .bool(true))
        try await home.identify(accessoryID: a.id)
        #expect(await home.identifyRequests() == [a.id, a.id])
    }

    @Test func notificationsNeedTheNotifyPermissionAndAnExistingAddress() async throws {
        let (home, dir) = try makeHome(garageYAML, stem: "garage")
        _ = dir
        let a = try #require(await home.accessory(named: "Garage Door Opener"))
        let target = try #require(a.address(service: "garage-door-opener", characteristic: "target-door-state"))
        let manufacturer = try #require(a.address(service: "accessory-information", characteristic: "manufacturer"))
        let missing = CharacteristicAddress(accessoryID: a.id, iid: 4242)
        let failures = await home.setNotifications(enabled: true, for: [target, manufacturer, missing])
        #expect(failures[manufacturer]?.status == .notificationNotSupported)
        #expect(failures[missing]?.status == .doesNotExist)
        #expect(failures[target] == nil)
        #expect(await home.notificationsEnabled() == [target])
        _ = await home.setNotifications(enabled: false, for: [target])
        #expect(await home.notificationsEnabled().isEmpty)
    }

    /// A change after a controller read the accessories and before it subscribed sends no
    /// event; the subscription reports it, once, and a value that did not change is not
    /// reported again.
    @Test func aChangeBeforeTheSubscriptionIsReportedWhenItIsMade() async throws {
        let (home, dir) = try makeHome(garageYAML, stem: "garage")
        _ = dir
        let a = try #require(await home.accessory(named: "Garage Door Opener"))
        let brightness = try #require(a.address(service: "lightbulb", characteristic: "brightness"))
        let hue = try #require(a.address(service: "lightbulb", characteristic: "hue"))
        let log = EventLog(home)
        _ = await home.accessories()
        try await home.setValue(brightness, .int(35))
        #expect(await log.drain().isEmpty)
        _ = await home.setNotifications(enabled: true, for: [brightness, hue])
        #expect(await log.drain() == [.valueUpdated(brightness, .int(35))])
        _ = await home.setNotifications(enabled: true, for: [brightness, hue])
        #expect(await log.drain().isEmpty, "reported once")

        // Off, changed, on again: reported again.
        _ = await home.setNotifications(enabled: false, for: [brightness])
        try await home.setValue(brightness, .int(36))
        #expect(await log.drain().isEmpty)
        _ = await home.setNotifications(enabled: true, for: [brightness])
        #expect(await log.drain() == [.valueUpdated(brightness, .int(36))])
    }

    @Test func unreachableAccessoriesFailAndStaySilentUntilBack() async throws {
        let (home, dir) = try makeHome(garageYAML, stem: "garage")
        _ = dir
        let a = try #require(await home.accessory(named: "Garage Door Opener"))
        let target = try #require(a.address(service: "garage-door-opener", characteristic: "target-door-state"))
        let current = try #require(a.address(service: "garage-door-opener", characteristic: "current-door-state"))
        _ = await home.setNotifications(enabled: true, for: [target, current])
        let log = EventLog(home)
        try await home.write(target, value: .uint(0))
        _ = await log.drain()

        #expect(await home.setReachable(a.id, false))
        for attempt in 0..<2 {
            do {
                if attempt == 0 {
                    _ = try await home.read(current)
                } else {
                    try await home.write(target, value: .uint(1))
                }
                Issue.record("an unreachable accessory answered")
            } catch {
                #expect(error.status == .communicationFailure)
                #expect(error.message == "Garage Door Opener is unreachable")
            }
        }
        // The door keeps moving, but nobody hears about it.
        await home.advance(by: 12)
        #expect(await log.drain() == [.reachabilityChanged(id: a.id, isReachable: false)])
        #expect(await home.accessories().first { $0.id == a.id }?.isReachable == false)

        #expect(await home.setReachable(a.id, true))
        #expect(try await home.read(current) == .uint(0))
        #expect(await log.drain() == [.reachabilityChanged(id: a.id, isReachable: true)])
        // Setting the same state again reports nothing.
        await home.setReachable(a.id, true)
        #expect(await log.drain().isEmpty)
    }
}

@Suite struct BridgeAndStructureTests {
    @Test func bridgedAccessoriesHaveStableIdsAndFollowTheBridge() async throws {
        let (home, dir) = try makeHome(bridgeYAML, stem: "bridge")
        _ = dir
        let all = await home.accessories()
        #expect(all.map(\.id) == ["sim:bridge", "sim:bridge:2", "sim:bridge:3"])
        #expect(all.map(\.aid) == [1, 2, 3])
        #expect(all.map(\.bridgeID) == [nil, "sim:bridge", "sim:bridge"])
        #expect(all.map(\.suggestedRoom) == [nil, "Porch", "Cellar"])
        #expect(all[0].category == Catalog.category(named: "bridge"))
        #expect(all[1].category == Catalog.category(named: "lightbulb"))
        #expect(all[2].category == Catalog.category(named: "sensor"))

        let log = EventLog(home)
        await home.setReachable("sim:bridge", false)
        #expect(
            Set(await log.drain()) == Set(all.map { SourceEvent.reachabilityChanged(id: $0.id, isReachable: false) }))
        let light = try #require(all[1].address(service: "lightbulb", characteristic: "on"))
        await #expect(throws: AccessoryError.self) { try await home.read(light) }
        await home.setReachable("sim:bridge", true)
        #expect(try await home.read(light) == .bool(false))
    }

    @Test func addRemoveRenameAreReported() async throws {
        let (home, dir) = try makeHome(bridgeYAML, stem: "bridge")
        _ = dir
        let log = EventLog(home)
        let lamp = Accessory(
            id: "sim:extra", name: "Extra Lamp",
            services: [
                AccessoryService(
                    iid: 1, type: StandardUUID.accessoryInformation,
                    characteristics: [
                        Characteristic(
                            iid: 2, type: StandardUUID.name, value: .string("Extra Lamp"),
                            metadata: CharacteristicMetadata(format: .string, permissions: [.read]))
                    ])
            ]
        )
        await home.add(lamp)
        #expect(await home.rename(accessoryID: "sim:extra", to: "Reading Lamp"))
        #expect(await home.remove(accessoryID: "sim:extra"))
        #expect(await home.remove(accessoryID: "sim:extra") == false)
        var renamed = lamp
        renamed.name = "Reading Lamp"
        renamed.services[0].characteristics[0].value = .string("Reading Lamp")
        #expect(
            await log.drain() == [
                .accessoryAdded(lamp), .accessoryChanged(renamed), .accessoryRemoved(id: "sim:extra"),
            ])

        // Removing a bridge takes its bridged accessories along.
        #expect(await home.remove(accessoryID: "sim:bridge"))
        #expect(
            await log.drain() == [
                .accessoryRemoved(id: "sim:bridge"), .accessoryRemoved(id: "sim:bridge:2"),
                .accessoryRemoved(id: "sim:bridge:3"),
            ])
        #expect(await home.accessories().isEmpty)
    }

    @Test func addedAccessoriesGetBehaviours() async throws {
        let home = SimulatedHome(accessories: [], clock: .manual)
        let lockType = try #require(Catalog.serviceType(named: "lock-mechanism"))
        let current = try #require(Catalog.characteristicType(named: "lock-current-state"))
        let target = try #require(Catalog.characteristicType(named: "lock-target-state"))
        let lock = Accessory(
            id: "sim:lock", name: "Lock",
            services: [
                AccessoryService(
                    iid: 1, type: lockType.uuid,
                    characteristics: [
                        Characteristic(iid: 2, type: current.uuid, value: .uint(1), metadata: current.metadata),
                        Characteristic(iid: 3, type: target.uuid, value: .uint(1), metadata: target.metadata),
                    ])
            ])
        await home.add(lock)
        try await home.write(CharacteristicAddress(accessoryID: "sim:lock", iid: 3), value: .uint(0))
        await home.advance(by: ServiceBehaviour.defaultLockDelay)
        #expect(try await home.read(CharacteristicAddress(accessoryID: "sim:lock", iid: 2)) == .uint(0))
    }

    @Test func deviceSideChangesAreValidatedAndReported() async throws {
        let (home, dir) = try makeHome(bridgeYAML, stem: "bridge")
        _ = dir
        let light = try #require(
            await home.accessory(named: "Porch Light")?.address(service: "lightbulb", characteristic: "on"))
        _ = await home.setNotifications(enabled: true, for: [light])
        let log = EventLog(home)
        try await home.setValue(light, .bool(true))
        #expect(await log.values(for: light) == [.bool(true)])
        await #expect(throws: AccessoryError.self) { try await home.setValue(light, .string("x")) }
    }

    @Test(.timeLimit(.minutes(1))) func runDrivesBehavioursInRealTimeUntilCancelled() async throws {
        let (home, dir) = try makeHome(
            """
            name: Quick Lock
            services:
              - type: lock-mechanism
                behaviour: { delay: 0.05 }
                characteristics:
                  current-lock-mechanism-state: secured
                  target-lock-mechanism-state: secured
            """)
        _ = dir
        // The manual home above is for loading; a system-clock home runs in real time.
        let accessories = await home.accessories()
        let lock = try #require(accessories.first)
        let live = SimulatedHome(
            accessories: accessories,
            behaviours: [
                ServiceBehaviour(accessoryID: lock.id, serviceIID: lock.services[1].iid, kind: .lock(delay: 0.05))
            ], clock: .system(tick: .milliseconds(10)))
        let target = try #require(lock.address(service: "lock-mechanism", characteristic: "lock-target-state"))
        let current = try #require(lock.address(service: "lock-mechanism", characteristic: "lock-current-state"))
        _ = await live.setNotifications(enabled: true, for: [current])
        var iterator = live.events().makeAsyncIterator()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await live.run() }
            try await live.write(target, value: .uint(0))
            // The written value first (reported to its writer), then the lock's own move.
            #expect(await iterator.next() == .valueUpdated(target, .uint(0)))
            #expect(await iterator.next() == .valueUpdated(current, .uint(0)))
            group.cancelAll()
            try await group.waitForAll()
        }
        // run() finished the streams when it stopped.
        #expect(await iterator.next() == nil)
    }

    @Test(.timeLimit(.minutes(1))) func runStopsOnGracefulShutdown() async throws {
        let home = SimulatedHome(accessories: [], clock: .manual)
        let group = ServiceGroup(
            configuration: .init(services: [home], gracefulShutdownSignals: [], logger: .init(label: "test")))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
    }
}
