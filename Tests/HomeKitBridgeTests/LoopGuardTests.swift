import Foundation
import Gateway
import HAP
import HomeKitBridge
import HomeKitBridgeTestSupport
import HomeMQTTApp
import HomeModel
import Simulator
import TestSupport
import XCTest

/// No accessory comes back to a gateway it passed through (`GatewayRoute`): two gateways in one
/// process, each a HAP controller beside its simulated home and a HomeKit bridge, on memory
/// brokers of their own. B pairs with A's bridge, then A with B's. They are two gateways (two
/// state directories, two gateway ids): the per-process list of own bridges is per gateway, so
/// the route is what answers here, as it does across processes and machines.
final class LoopGuardTests: XCTestCase {
    /// A simulated home of the shipped accessory files named.
    static func home(_ files: [String], in directory: TemporaryDirectory, standalone: Bool = false) throws
        -> SimulatedHome
    {
        let shipped = BridgedGateway.repositoryRoot.appendingPathComponent("Config/accessories")
        let copy = directory.url.appendingPathComponent("accessories")
        try FileManager.default.createDirectory(at: copy, withIntermediateDirectories: true)
        for file in files {
            let text = try String(contentsOf: shipped.appendingPathComponent(file), encoding: .utf8)
            try ((standalone ? "homekit: standalone\n" : "") + text).write(
                to: copy.appendingPathComponent(file), atomically: true, encoding: .utf8)
        }
        return try SimulatedHome.load(directory: copy, clock: .manual)
    }

    static func pair(_ gw: BridgedGateway, with port: Int) async -> GatewayOutcome {
        await gw.gateway.perform(.manage(HAPPair(host: "127.0.0.1", port: port, code: BridgedGateway.code, name: nil)))
    }

    static func names(_ gw: BridgedGateway) async -> [String] {
        await gw.gateway.tree.accessories.map(\.displayName).sorted()
    }

    static func gatewayID(_ gw: BridgedGateway) throws -> String {
        try GatewayIdentity.load(stateDirectory: gw.stateDirectory)
    }

    /// B's bridge serves A's switch back to A beside B's own outlet: A keeps the outlet and
    /// leaves the switch out (it has its own), says so in the answer and logs why, once.
    func testAnAccessoryThatCameBackIsLeftOutAndTheRestKept() async throws {
        let aState = try TemporaryDirectory(prefix: "loop-a")
        let bState = try TemporaryDirectory(prefix: "loop-b")
        let aHome = try Self.home(["office-switch.yml"], in: aState)
        let bHome = try Self.home(["kitchen-outlet.yml"], in: bState)
        try await BridgedGateway.run(state: aState, home: aHome, hap: true) { a in
            try await BridgedGateway.run(state: bState, home: bHome, hap: true) { b in
                let idA = try Self.gatewayID(a)
                let idB = try Self.gatewayID(b)
                XCTAssertNotEqual(idA, idB)
                // B pairs with A's bridge and sees A's switch, its route naming A.
                let toA = await Self.pair(b, with: a.port)
                XCTAssertNil(toA.failure, "\(toA)")
                try await waitUntil("B to see A's switch", timeout: 20) {
                    await Self.names(b).contains("Office Fan Switch")
                }
                let treeB = await b.gateway.tree
                let switchAtB = try XCTUnwrap(treeB.accessories.first { $0.displayName == "Office Fan Switch" })
                XCTAssertEqual(GatewayRoute.route(of: switchAtB.accessory), [idA])

                // A pairs with B's bridge: the outlet comes, the switch does not come back.
                let toB = await Self.pair(a, with: b.port)
                guard case .data(let answer) = try toB.get() else { return XCTFail("\(toB)") }
                let leftOut = try XCTUnwrap(answer["left-out"]?.arrayValue, answer.encoded())
                XCTAssertEqual(leftOut.map { $0["name"] }, ["Office Fan Switch"])
                XCTAssertEqual(leftOut.first?["route"], .array([.string(idA), .string(idB)]))
                let served = answer["accessories"]?.arrayValue?.compactMap { $0["name"]?.stringValue } ?? []
                XCTAssertTrue(served.contains("Coffee Maker Outlet"), answer.encoded())
                XCTAssertFalse(served.contains("Office Fan Switch"), answer.encoded())
                try await waitUntil("A to see B's outlet", timeout: 20) {
                    await Self.names(a).contains("Coffee Maker Outlet")
                }
                let names = await Self.names(a)
                XCTAssertEqual(names.filter { $0 == "Office Fan Switch" }.count, 1, "\(names)")
                XCTAssertEqual(names.filter { $0 == "Coffee Maker Outlet" }.count, 1, "\(names)")
                let why = a.logs.lines.filter { $0.contains("came through this gateway already") }
                XCTAssertEqual(why.count, 1, "\(why)")
                XCTAssertTrue(why.first?.contains("Office Fan Switch") ?? false, "\(why)")

                // The pairings listing counts it too.
                guard case .data(let listing) = try await a.gateway.perform(.manage(HAPPairings())).get() else {
                    return XCTFail("no listing")
                }
                XCTAssertEqual(
                    listing["pairings"]?.arrayValue?.first?["left-out"]?.arrayValue?.count, 1, listing.encoded())
            }
        }
    }

    /// B's bridge serves nothing but A's switch (B's own accessory is served alone, outside its
    /// bridge): A refuses the pairing as it refuses its own bridge, and keeps no pairing.
    func testABridgeOfNothingButTheGatewaysOwnAccessoriesIsRefused() async throws {
        let aState = try TemporaryDirectory(prefix: "loop-a")
        let bState = try TemporaryDirectory(prefix: "loop-b")
        let aHome = try Self.home(["office-switch.yml"], in: aState)
        let bHome = try Self.home(["kitchen-outlet.yml"], in: bState, standalone: true)
        try await BridgedGateway.run(state: aState, home: aHome, hap: true) { a in
            try await BridgedGateway.run(state: bState, home: bHome, hap: true) { b in
                let toA = await Self.pair(b, with: a.port)
                XCTAssertNil(toA.failure, "\(toA)")
                try await waitUntil("B's bridge to serve A's switch", timeout: 20) {
                    await b.bridge.status().accessories >= 2
                }
                let toB = await Self.pair(a, with: b.port)
                let failure = try XCTUnwrap(toB.failure, "\(toB)")
                XCTAssertTrue(
                    failure.message.contains("that bridge only serves this gateway's own accessories"), failure.message)
                let store = HAPPairingStore(directory: URL(fileURLWithPath: a.stateDirectory + "/pairings"))
                XCTAssertEqual(try store.all().count, 0)
                let status = await b.bridge.status()
                XCTAssertEqual(status.isPaired, false, "A's pairing was not taken back from B's bridge")
                let names = await Self.names(a)
                XCTAssertEqual(names, ["Office Fan Switch"])
            }
        }
    }
}
