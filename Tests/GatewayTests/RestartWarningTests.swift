import Foundation
import Gateway
import HomeModel
import MQTT
import TestSupport
import XCTest

/// A gateway restarted on a broker where no other client published finds only its own retained
/// topics under its base: no warning says another client's are there, whatever the size of the
/// home (issue 43, item 11: a home of more than a thousand topics warned at every start, naming
/// nothing). A real other client's topic there is still warned about, and named.
final class RestartWarningTests: RigTestCase {
    static let warning = "retained topics of another client"

    /// The shipped simulated home and `copies` more climate sensors (a dozen retained topics
    /// each), so that the gateway publishes well over a thousand retained topics.
    static func largeHome(copies: Int = 100) throws -> TemporaryDirectory {
        let directory = try TemporaryDirectory(prefix: "homemqtt-large-home")
        let accessories = directory.url.appendingPathComponent("accessories")
        try FileManager.default.copyItem(at: Rig.shippedAccessories, to: accessories)
        for copy in 1...copies { try addSensor(copy, to: accessories) }
        return directory
    }

    /// A copy of the shipped climate sensor, named `Bedroom Climate Sensor <copy>`: its topic is
    /// `home/bedroom/bedroom-climate-sensor-<copy>`.
    static func addSensor(_ copy: Int, to accessories: URL) throws {
        let shipped = try String(
            contentsOf: Rig.shippedAccessories.appendingPathComponent("bedroom-climate.yml"), encoding: .utf8)
        let text = shipped.replacingOccurrences(
            of: "name: Bedroom Climate Sensor\n", with: "name: Bedroom Climate Sensor \(copy)\n"
        )
        .replacingOccurrences(of: "serial: SL-TH2-1170\n", with: "serial: SL-TH2-1170-\(copy)\n")
        XCTAssertNotEqual(text, shipped, "the shipped climate sensor's name or serial changed")
        try text.write(to: accessories.appendingPathComponent("climate-\(copy).yml"), atomically: true, encoding: .utf8)
    }

    /// The lines of `log` that warn of another client's topics.
    static func warnings(_ log: String) -> [Substring] {
        log.split(separator: "\n").filter { $0.contains(warning) }
    }

    /// A large home started where the shipped one ran, then restarted with its state directory
    /// kept, and with it lost (the record read from the broker's tree): no warning any time.
    /// Then a topic of another client where a new accessory's `$info` goes: one warning,
    /// counting one topic and naming it.
    func testARestartOfALargeHomeWarnsOfNoOtherClient() async throws {
        await onEveryRig(configure: NeighbourTests.session(clean: false)) { gw in
            // A home of its own on each rig: an accessory joins it below.
            let home = try Self.largeHome()
            let accessories = home.url.appendingPathComponent("accessories")
            let stopped = await gw.stopGateway()
            XCTAssertNil(stopped)
            // The rig's own state directory stays locked by its home database: the large home
            // has another one (its record written at its first start, as its tree grew).
            let state = try TemporaryDirectory(prefix: "homemqtt-restart-state")
            func restart(_ state: TemporaryDirectory) async throws -> String {
                let next = try await gw.another(
                    clientID: "gateway-under-test", state: state, accessories: accessories,
                    configure: NeighbourTests.session(clean: false))
                // `online` is out, and the line saying so follows it: the look at the broker,
                // and any warning of it, came before.
                try? await waitUntil("the gateway's online line") { next.log.text.contains("gateway online") }
                let log = next.log.text
                let nextStopped = await next.stop()
                XCTAssertNil(nextStopped)
                XCTAssertTrue(log.contains("gateway online"), log)
                return log
            }

            let firstLog = try await restart(state)
            XCTAssertEqual(Self.warnings(firstLog), [], "the first start of the large home")
            let held = try await gw.retained("home/#")
            XCTAssertGreaterThan(held.count, 1_100, "the home is not large enough to show the bug")

            // Kept: the state directory's record says every topic is this gateway's.
            let keptLog = try await restart(state)
            XCTAssertTrue(keptLog.contains("record=kept"), keptLog)
            XCTAssertEqual(Self.warnings(keptLog), [], "a restart with the record kept")

            // Lost: the broker's retained tree says so.
            let lostLog = try await restart(try TemporaryDirectory(prefix: "homemqtt-lost-state"))
            XCTAssertTrue(lostLog.contains("from the broker's tree"), lostLog)
            XCTAssertEqual(Self.warnings(lostLog), [], "a restart with the record lost")

            // Another client's `$info` where an accessory added meanwhile publishes its own.
            let info = "home/bedroom/bedroom-climate-sensor-500/$info"
            try await gw.publish(info, "not the gateway's", retain: true)
            try Self.addSensor(500, to: accessories)
            let grownLog = try await restart(state)
            XCTAssertTrue(grownLog.contains("record=kept"), grownLog)
            let warned = Self.warnings(grownLog)
            XCTAssertEqual(warned.count, 1, grownLog)
            XCTAssertTrue(warned.first?.contains("count=1 ") == true, grownLog)
            XCTAssertTrue(warned.first?.hasSuffix("topics=\(info)") == true, grownLog)
            let after = try await gw.retained("home/#")
            XCTAssertNotEqual(after[info], "not the gateway's", "the gateway's own $info did not replace it")
        }
    }
}
