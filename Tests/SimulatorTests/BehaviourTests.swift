import Foundation
import TestSupport
import HomeModel
import Testing
@testable import Simulator

let garageYAML = """
    name: Garage Door Opener
    manufacturer: Kilgo Devices, Inc.
    room: Garage
    services:
      - type: garage-door-opener
        name: Garage Door
        behaviour: { travel-time: 12 }
        characteristics:
          target-door-state: closed
          current-door-state: closed
      - type: lightbulb
        name: Garage Light
        characteristics:
          power-state: false
          brightness: 80
          hue: 0
          saturation: 0
        custom:
          - uuid: 7E536242-341C-4862-BE90-272CE15BD633
            name: Fade Rate
            format: float
            unit: seconds
            min: 0
            max: 10
            step: 0.5
            permissions: [read, write, notify]
            value: 1.0
    """

/// Door states as HAP numbers them.
enum Door {
    static let open = CharacteristicValue.uint(0), closed = CharacteristicValue.uint(1)
    static let opening = CharacteristicValue.uint(2), closing = CharacteristicValue.uint(3),
        stopped = CharacteristicValue.uint(4)
}

@Suite struct GarageDoorTests {
    struct Door_ {
        let home: SimulatedHome
        let dir: TemporaryDirectory
        let target: CharacteristicAddress
        let current: CharacteristicAddress
        let obstruction: CharacteristicAddress
        let id: String

        init() async throws {
            (home, dir) = try makeHome(garageYAML, stem: "garage")
            let accessory = try #require(await home.accessory(named: "Garage Door Opener"))
            id = accessory.id
            target = try #require(accessory.address(service: "garage-door-opener", characteristic: "target-door-state"))
            current = try #require(
                accessory.address(service: "garage-door-opener", characteristic: "current-door-state"))
            obstruction = try #require(
                accessory.address(service: "garage-door-opener", characteristic: "obstruction-detected"))
            _ = await home.setNotifications(enabled: true, for: [target, current, obstruction])
        }
    }

    @Test func opensOverTravelTimeAndCloses() async throws {
        let d = try await Door_()
        let log = EventLog(d.home)
        try await d.home.write(d.target, value: Door.open)
        #expect(try await d.home.read(d.current) == Door.opening)
        await d.home.advance(by: 11.9)
        #expect(try await d.home.read(d.current) == Door.opening)
        await d.home.advance(by: 0.1)
        #expect(try await d.home.read(d.current) == Door.open)
        #expect(await log.values(for: d.current) == [Door.opening, Door.open])

        try await d.home.write(d.target, value: Door.closed)
        #expect(try await d.home.read(d.current) == Door.closing)
        await d.home.advance(by: 12)
        #expect(try await d.home.read(d.current) == Door.closed)
        #expect(await log.values(for: d.current) == [Door.closing, Door.closed])
    }

    @Test func reversingHalfwayTakesOnlyTheWayBack() async throws {
        let d = try await Door_()
        try await d.home.write(d.target, value: Door.open)
        await d.home.advance(by: 3)
        try await d.home.write(d.target, value: Door.closed)
        #expect(try await d.home.read(d.current) == Door.closing)
        await d.home.advance(by: 2.9)
        #expect(try await d.home.read(d.current) == Door.closing)
        await d.home.advance(by: 0.1)
        #expect(try await d.home.read(d.current) == Door.closed)
    }

    @Test func obstructionStopsTheDoorUntilClearedAndANewTarget() async throws {
        let d = try await Door_()
        let log = EventLog(d.home)
        try await d.home.write(d.target, value: Door.open)
        await d.home.advance(by: 6)
        #expect(await d.home.triggerObstruction(d.id))
        #expect(try await d.home.read(d.obstruction) == .bool(true))
        #expect(try await d.home.read(d.current) == Door.stopped)
        await d.home.advance(by: 60)
        #expect(try await d.home.read(d.current) == Door.stopped)

        // While obstructed, a new target is stored but does not move the door.
        try await d.home.write(d.target, value: Door.closed)
        await d.home.advance(by: 60)
        #expect(try await d.home.read(d.current) == Door.stopped)

        #expect(await d.home.triggerObstruction(d.id, false))
        #expect(try await d.home.read(d.obstruction) == .bool(false))
        #expect(try await d.home.read(d.current) == Door.stopped)
        // Half-way: opening from here takes half the travel time.
        try await d.home.write(d.target, value: Door.open)
        #expect(try await d.home.read(d.current) == Door.opening)
        await d.home.advance(by: 5.9)
        #expect(try await d.home.read(d.current) == Door.opening)
        await d.home.advance(by: 0.1)
        #expect(try await d.home.read(d.current) == Door.open)

        let events = await log.drain()
        let obstructions = events.compactMap { e -> CharacteristicValue? in
            if case .valueUpdated(let a, let v) = e, a == d.obstruction { return v }
            return nil
        }
        #expect(obstructions == [.bool(true), .bool(false)])
    }

    @Test func obstructionOfAnAccessoryWithoutADoorIsRefused() async throws {
        let (home, _dir) = try makeHome(
            """
            name: Plain Switch
            services:
              - type: switch
            """)
        _ = _dir
        #expect(await home.triggerObstruction("sim:test") == false)
        #expect(await home.triggerObstruction("sim:nothing") == false)
    }
}

@Suite struct LockThermostatTests {
    @Test func lockSettlesAfterItsDelay() async throws {
        let (home, dir) = try makeHome(
            """
            name: Front Door Lock
            services:
              - type: lock-mechanism
                behaviour: { delay: 2 }
                characteristics:
                  current-lock-mechanism-state: secured
                  target-lock-mechanism-state: secured
            """)
        _ = dir
        let lock = try #require(await home.accessory(named: "Front Door Lock"))
        let target = try #require(
            lock.address(service: "lock-mechanism", characteristic: "target-lock-mechanism-state"))
        let current = try #require(
            lock.address(service: "lock-mechanism", characteristic: "current-lock-mechanism-state"))
        _ = await home.setNotifications(enabled: true, for: [current])
        let log = EventLog(home)
        try await home.write(target, value: .uint(0))
        await home.advance(by: 1.9)
        #expect(try await home.read(current) == .uint(1))
        await home.advance(by: 0.1)
        #expect(try await home.read(current) == .uint(0))
        #expect(await log.values(for: current) == [.uint(0)])
    }

    @Test func lockDefaultsToOneSecond() async throws {
        let (home, dir) = try makeHome(
            """
            name: Shed Lock
            services:
              - type: lock-mechanism
                characteristics:
                  current-lock-mechanism-state: unsecured
                  target-lock-mechanism-state: unsecured
            """)
        _ = dir
        let lock = try #require(await home.accessory(named: "Shed Lock"))
        let target = try #require(lock.address(service: "lock-mechanism", characteristic: "lock-target-state"))
        let current = try #require(lock.address(service: "lock-mechanism", characteristic: "lock-current-state"))
        try await home.write(target, value: .uint(1))
        await home.advance(by: 0.5)
        #expect(try await home.read(current) == .uint(0))
        await home.advance(by: 0.5)
        #expect(try await home.read(current) == .uint(1))
    }

    @Test func behaviourNoneOnlyStoresValues() async throws {
        let (home, dir) = try makeHome(
            """
            name: Dumb Lock
            services:
              - type: lock-mechanism
                behaviour: none
                characteristics:
                  current-lock-mechanism-state: secured
                  target-lock-mechanism-state: secured
            """)
        _ = dir
        let lock = try #require(await home.accessory(named: "Dumb Lock"))
        let target = try #require(lock.address(service: "lock-mechanism", characteristic: "lock-target-state"))
        let current = try #require(lock.address(service: "lock-mechanism", characteristic: "lock-current-state"))
        try await home.write(target, value: .uint(0))
        await home.advance(by: 600)
        #expect(try await home.read(target) == .uint(0))
        #expect(try await home.read(current) == .uint(1))
    }

    @Test func thermostatHeatsTowardTargetThenIdles() async throws {
        let (home, dir) = try makeHome(
            """
            name: Thermostat
            services:
              - type: thermostat
                behaviour: { step: 0.5, every: 10 }
                characteristics:
                  target-heating-cooling: heat
                  current-temperature: 19
                  target-temperature: 21
            """)
        _ = dir
        let t = try #require(await home.accessory(named: "Thermostat"))
        let current = try #require(t.address(service: "thermostat", characteristic: "current-temperature"))
        let state = try #require(t.address(service: "thermostat", characteristic: "current-heating-cooling"))
        let mode = try #require(t.address(service: "thermostat", characteristic: "target-heating-cooling"))
        let target = try #require(t.address(service: "thermostat", characteristic: "target-temperature"))
        _ = await home.setNotifications(enabled: true, for: [current])
        let log = EventLog(home)

        #expect(try await home.read(state) == .uint(1))
        await home.advance(by: 10)
        #expect(try await home.read(current) == .float(19.5))
        await home.advance(by: 30)
        #expect(try await home.read(current) == .float(21))
        #expect(try await home.read(state) == .uint(0))
        await home.advance(by: 100)
        #expect(try await home.read(current) == .float(21))
        #expect(await log.values(for: current) == [.float(19.5), .float(20), .float(20.5), .float(21)])

        // Heat-only mode does not cool.
        try await home.write(target, value: .float(20))
        await home.advance(by: 100)
        #expect(try await home.read(current) == .float(21))

        try await home.write(mode, value: .uint(2))
        #expect(try await home.read(state) == .uint(2))
        await home.advance(by: 20)
        #expect(try await home.read(current) == .float(20))
        #expect(try await home.read(state) == .uint(0))

        // Off: nothing moves.
        try await home.write(mode, value: .uint(0))
        try await home.write(target, value: .float(25))
        await home.advance(by: 300)
        #expect(try await home.read(current) == .float(20))
    }
}

@Suite struct LightSwitchOutletTests {
    @Test func lightbulbStoresAndNotifiesIncludingTheCustomFadeRate() async throws {
        let (home, dir) = try makeHome(garageYAML, stem: "garage")
        _ = dir
        let a = try #require(await home.accessory(named: "Garage Door Opener"))
        let fade = try #require(a.address(service: "lightbulb", characteristic: "7E536242-341C-4862-BE90-272CE15BD633"))
        var addresses: [CharacteristicAddress] = []
        for name in ["power-state", "brightness", "hue", "saturation"] {
            addresses.append(try #require(a.address(service: "lightbulb", characteristic: name)))
        }
        let failures = await home.setNotifications(enabled: true, for: addresses + [fade])
        #expect(failures.isEmpty)
        let log = EventLog(home)
        let written: [CharacteristicValue] = [.bool(true), .int(35), .float(200), .float(55)]
        for (address, value) in zip(addresses, written) {
            try await home.write(address, value: value)
        }
        try await home.write(fade, value: .float(2.5))
        await home.advance(by: 120)
        for (address, value) in zip(addresses, written) {
            #expect(try await home.read(address) == value)
        }
        #expect(try await home.read(fade) == .float(2.5))
        let events = await log.drain()
        #expect(events == zip(addresses + [fade], written + [.float(2.5)]).map { .valueUpdated($0, $1) })

        await #expect(throws: AccessoryError.self) { try await home.write(fade, value: .float(12)) }
        await #expect(throws: AccessoryError.self) { try await home.write(addresses[1], value: .int(101)) }
        #expect(try await home.read(fade) == .float(2.5))
    }

    @Test func outletInUseFollowsPowerAndSwitchStores() async throws {
        let (home, dir) = try makeHome(
            """
            name: Coffee Outlet
            services:
              - type: outlet
              - type: switch
                name: Extra Switch
            """)
        _ = dir
        let a = try #require(await home.accessory(named: "Coffee Outlet"))
        let on = try #require(a.address(service: "outlet", characteristic: "power-state"))
        let inUse = try #require(a.address(service: "outlet", characteristic: "outlet-in-use"))
        let switchOn = try #require(a.address(service: "switch", characteristic: "on"))
        _ = await home.setNotifications(enabled: true, for: [inUse])
        let log = EventLog(home)
        try await home.write(on, value: .bool(true))
        #expect(try await home.read(inUse) == .bool(true))
        try await home.write(on, value: .bool(false))
        #expect(try await home.read(inUse) == .bool(false))
        #expect(await log.values(for: inUse) == [.bool(true), .bool(false)])
        try await home.write(switchOn, value: .bool(true))
        #expect(try await home.read(switchOn) == .bool(true))
        #expect(try await home.read(inUse) == .bool(false))
    }
}

@Suite struct SensorTests {
    @Test func temperatureDriftsStepwiseAndBouncesInsideItsBounds() async throws {
        let (home, dir) = try makeHome(
            """
            name: Climate
            services:
              - type: temperature-sensor
                characteristics:
                  current-temperature: 20.5
                behaviour:
                  drift: { step: 0.5, every: 30, min: 20, max: 21.5 }
            """)
        _ = dir
        let a = try #require(await home.accessory(named: "Climate"))
        let temp = try #require(a.address(service: "temperature-sensor", characteristic: "current-temperature"))
        _ = await home.setNotifications(enabled: true, for: [temp])
        let log = EventLog(home)
        await home.advance(by: 29)
        #expect(try await home.read(temp) == .float(20.5))
        for _ in 0..<8 { await home.advance(by: 30) }
        #expect(await log.values(for: temp) == [21, 21.5, 21, 20.5, 20, 20.5, 21, 21.5].map { .float($0) })
        for _ in 0..<100 {
            await home.advance(by: 30)
            let v = try #require(try await home.read(temp).doubleValue)
            #expect(v >= 20 && v <= 21.5)
        }
    }

    @Test func motionFollowsARepeatingScript() async throws {
        let (home, dir) = try makeHome(
            """
            name: Motion
            services:
              - type: motion-sensor
                behaviour:
                  script:
                    - { after: 10, value: true }
                    - { after: 5, value: false }
                  repeat: true
              - type: contact-sensor
                behaviour:
                  script:
                    - { after: 7, value: contact-not-detected }
            """)
        _ = dir
        let a = try #require(await home.accessory(named: "Motion"))
        let motion = try #require(a.address(service: "motion-sensor", characteristic: "motion-detected"))
        let contact = try #require(a.address(service: "contact-sensor", characteristic: "contact-state"))
        _ = await home.setNotifications(enabled: true, for: [motion])
        let log = EventLog(home)
        await home.advance(by: 6.5)
        #expect(try await home.read(contact) == .uint(0))
        await home.advance(by: 0.5)
        #expect(try await home.read(contact) == .uint(1))
        await home.advance(by: 2)
        #expect(try await home.read(motion) == .bool(false))
        await home.advance(by: 1)
        #expect(try await home.read(motion) == .bool(true))
        await home.advance(by: 5)
        #expect(try await home.read(motion) == .bool(false))
        #expect(try await home.read(contact) == .uint(1))
        await home.advance(by: 30)
        #expect(await log.values(for: motion) == [true, false, true, false, true, false].map { .bool($0) })
        #expect(try await home.read(contact) == .uint(1))
    }

    @Test func driftedValuesAreReportedOnlyWithNotifications() async throws {
        let (home, dir) = try makeHome(
            """
            name: Humidity
            services:
              - type: humidity-sensor
                characteristics: { current-relative-humidity: 50 }
                behaviour: { drift: { step: 1, every: 10 } }
            """)
        _ = dir
        let a = try #require(await home.accessory(named: "Humidity"))
        let h = try #require(a.address(service: "humidity-sensor", characteristic: "current-relative-humidity"))
        let log = EventLog(home)
        await home.advance(by: 30)
        #expect(await log.drain().isEmpty)
        #expect(try await home.read(h) == .float(53))
        // A read reports what it learned (the source protocol's contract), then notifications
        // report each change.
        _ = await home.setNotifications(enabled: true, for: [h])
        await home.advance(by: 10)
        #expect(await log.values(for: h) == [.float(53), .float(54)])
        _ = await home.setNotifications(enabled: false, for: [h])
        await home.advance(by: 10)
        #expect(await log.drain().isEmpty)
    }
}
