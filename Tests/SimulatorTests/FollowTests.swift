import Foundation
import HomeModel
import TestSupport
import Testing
@testable import Simulator

// Every target/current pair of the catalog moves after an accepted write (issue 43): a blind,
// a valve and a security system that kept their current state looked unmoved in Home Assistant.

@Suite struct FollowTests {
    /// The one service's characteristic addresses of a single-accessory home, by name.
    struct One {
        let home: SimulatedHome
        let dir: TemporaryDirectory
        let accessory: Accessory
        let service: String

        init(_ yaml: String, name: String, service: String) async throws {
            (home, dir) = try makeHome(yaml)
            accessory = try #require(await home.accessory(named: name))
            self.service = service
        }

        func address(_ characteristic: String) throws -> CharacteristicAddress {
            try #require(accessory.address(service: service, characteristic: characteristic))
        }
    }

    @Test func blindTravelsToItsTargetOverItsTravelTime() async throws {
        let b = try await One(
            """
            name: Living Blind
            services:
              - type: window-covering
                behaviour: { travel-time: 20 }
                characteristics: { target-position: 0, current-position: 0, position-state: stopped }
            """, name: "Living Blind", service: "window-covering")
        let target = try b.address("target-position"), current = try b.address("current-position")
        let state = try b.address("position-state")
        _ = await b.home.setNotifications(enabled: true, for: [current, state])
        let log = EventLog(b.home)
        try await b.home.write(target, value: .uint(50))
        #expect(try await b.home.read(state) == .uint(1)) // increasing
        await b.home.advance(by: 9.9)
        #expect(try await b.home.read(current) == .uint(0))
        await b.home.advance(by: 0.1)
        #expect(try await b.home.read(current) == .uint(50))
        #expect(try await b.home.read(state) == .uint(2)) // stopped
        #expect(await log.values(for: current) == [.uint(50)])

        // Back down half-way: a new target turns it from where it has got to.
        try await b.home.write(target, value: .uint(0))
        #expect(try await b.home.read(state) == .uint(0)) // decreasing
        await b.home.advance(by: 5)
        try await b.home.write(target, value: .uint(100))
        #expect(try await b.home.read(current) == .uint(25))
        #expect(try await b.home.read(state) == .uint(1))
        await b.home.advance(by: 14.9)
        #expect(try await b.home.read(current) == .uint(25))
        await b.home.advance(by: 0.1)
        #expect(try await b.home.read(current) == .uint(100))
        #expect(try await b.home.read(state) == .uint(2))
    }

    @Test func blindTiltFollowsAndDoorAndWindowMoveByDefault() async throws {
        let b = try await One(
            """
            name: Slatted Blind
            services:
              - type: window-covering
                characteristics: { target-horizontal-tilt: 0, current-horizontal-tilt: 0 }
              - type: door
              - type: window
            """, name: "Slatted Blind", service: "window-covering")
        try await b.home.write(try b.address("target-horizontal-tilt"), value: .int(-45))
        #expect(try await b.home.read(try b.address("current-horizontal-tilt")) == .int(-45))
        for service in ["door", "window"] {
            let target = try #require(b.accessory.address(service: service, characteristic: "target-position"))
            let current = try #require(b.accessory.address(service: service, characteristic: "current-position"))
            try await b.home.write(target, value: .uint(100))
            await b.home.advance(by: 9.9) // the default travel time is 10 s
            #expect(try await b.home.read(current) == .uint(0))
            await b.home.advance(by: 0.1)
            #expect(try await b.home.read(current) == .uint(100))
        }
    }

    @Test func holdPositionStopsTheBlindWhereItIs() async throws {
        let b = try await One(
            """
            name: Held Blind
            services:
              - type: window-covering
                behaviour: { travel-time: 10 }
                characteristics: { hold-position: false }
            """, name: "Held Blind", service: "window-covering")
        try await b.home.write(try b.address("target-position"), value: .uint(100))
        await b.home.advance(by: 3)
        try await b.home.write(try b.address("hold-position"), value: .bool(true))
        #expect(try await b.home.read(try b.address("current-position")) == .uint(30))
        #expect(try await b.home.read(try b.address("target-position")) == .uint(30))
        #expect(try await b.home.read(try b.address("position-state")) == .uint(2))
        await b.home.advance(by: 10)
        #expect(try await b.home.read(try b.address("current-position")) == .uint(30))
    }

    @Test func valveInUseFollowsActive() async throws {
        let v = try await One(
            """
            name: Garden Valve
            services:
              - type: valve
                characteristics: { active: inactive, in-use: not-in-use }
            """, name: "Garden Valve", service: "valve")
        let active = try v.address("active"), inUse = try v.address("in-use")
        _ = await v.home.setNotifications(enabled: true, for: [inUse])
        let log = EventLog(v.home)
        try await v.home.write(active, value: .uint(1))
        await v.home.advance(by: 0.9)
        #expect(try await v.home.read(inUse) == .uint(0))
        await v.home.advance(by: 0.1) // the default delay is 1 s
        #expect(try await v.home.read(inUse) == .uint(1))
        try await v.home.write(active, value: .uint(0))
        await v.home.advance(by: 1)
        #expect(try await v.home.read(inUse) == .uint(0))
        #expect(await log.values(for: inUse) == [.uint(1), .uint(0)])
    }

    @Test func securitySystemArmsAfterItsDelay() async throws {
        let s = try await One(
            """
            name: House Alarm
            services:
              - type: security-system
                behaviour: { delay: 3 }
                characteristics: { target-security-system-state: disarm, current-security-system-state: disarmed }
            """, name: "House Alarm", service: "security-system")
        let target = try s.address("target-security-system-state")
        let current = try s.address("current-security-system-state")
        try await s.home.write(target, value: .uint(1)) // away
        await s.home.advance(by: 2.9)
        #expect(try await s.home.read(current) == .uint(3))
        await s.home.advance(by: 0.1)
        #expect(try await s.home.read(current) == .uint(1))
        try await s.home.write(target, value: .uint(3))
        await s.home.advance(by: 3)
        #expect(try await s.home.read(current) == .uint(3))
    }

    @Test func heaterCoolerFanAndPurifierShowWhatTheyDo() async throws {
        let (home, dir) = try makeHome(
            """
            name: Air Box
            services:
              - type: heater-cooler
                behaviour: { delay: 0 }
              - type: ventilation-fan
                behaviour: { delay: 0 }
                characteristics: { current-fan-state: inactive }
              - type: air-purifier
                behaviour: { delay: 0 }
            """)
        _ = dir
        let a = try #require(await home.accessory(named: "Air Box"))
        let hcActive = try #require(a.address(service: "heater-cooler", characteristic: "active"))
        let hcTarget = try #require(a.address(service: "heater-cooler", characteristic: "target-heater-cooler-state"))
        let hcCurrent = try #require(
            a.address(service: "heater-cooler", characteristic: "current-heater-cooler-state"))
        try await home.write(hcTarget, value: .uint(2)) // cool
        try await home.write(hcActive, value: .uint(1))
        #expect(try await home.read(hcCurrent) == .uint(3)) // cooling
        try await home.write(hcActive, value: .uint(0))
        #expect(try await home.read(hcCurrent) == .uint(0)) // inactive
        for (service, current) in [
            ("ventilation-fan", "current-fan-state"), ("air-purifier", "current-air-purifier-state"),
        ] {
            let active = try #require(a.address(service: service, characteristic: "active"))
            let state = try #require(a.address(service: service, characteristic: current))
            try await home.write(active, value: .uint(1))
            #expect(try await home.read(state) == .uint(2))
            try await home.write(active, value: .uint(0))
            #expect(try await home.read(state) == .uint(0))
        }
    }

    @Test func aSettlingDelayIsRefusedWhereNothingSettles() throws {
        #expect(throws: SimulatorError.self) {
            _ = try makeHome(
                """
                name: Plain Switch
                services:
                  - type: switch
                    behaviour: { travel-time: 3 }
                """)
        }
        #expect(throws: SimulatorError.self) {
            _ = try makeHome(
                """
                name: Bad Blind
                services:
                  - type: window-covering
                    behaviour: { delay: 3 }
                """)
        }
    }
}
