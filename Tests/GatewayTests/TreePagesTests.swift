import Foundation
import Gateway
import HomeModel
import MQTT
import TestSupport
import XCTest

/// `tree-page-size`: a tree larger than it is published in pages whatever the broker takes (the
/// memory broker and mosquitto here state no limit), a small home's stays whole, and the `tree`
/// request still answers the whole tree when it fits an answer.
final class TreePagesTests: RigTestCase {
    private static func json(_ text: String?) -> JSONValue? { text.flatMap { try? JSONValue(parsing: Array($0.utf8)) } }

    func testASmallHomesTreeStaysWhole() async {
        await onEveryRig { gw in
            let retained = try await gw.retained("home/$gateway/tree/#")
            let tree = try XCTUnwrap(Self.json(retained["home/$gateway/tree"]))
            XCTAssertNil(tree["paged"])
            XCTAssertNotNil(tree["rooms"]?.arrayValue)
            XCTAssertEqual(retained.count, 1, "no pages: \(retained.keys.sorted())")
            XCTAssertLessThan(retained["home/$gateway/tree"]?.utf8.count ?? .max, GatewayConfig().treePageSize)
        }
    }

    func testALargeTreeIsPagedWhateverTheBrokerTakes() async {
        let size = GatewayConfig.smallestTreePage
        await onEveryRig(configure: { $0.treePageSize = size }) { gw in
            let count = await gw.gateway.tree.accessories.count + 60
            for index in 1...60 {
                await gw.home.add(TopicTreeTests.lamp(id: "sim:lamp-\(index)", name: "Lamp \(index)", room: "Hall"))
            }
            try await waitUntil("the index lists every accessory", timeout: 20, pollInterval: 0.1) {
                Self.json(try await gw.retained("home/$gateway/tree")["home/$gateway/tree"])?["accessories"]
                    == .int(Int64(count))
            }
            let retained = try await gw.retained("home/$gateway/tree/#")
            let index = try XCTUnwrap(Self.json(retained["home/$gateway/tree"]))
            XCTAssertEqual(index["paged"], true)
            let pages = (index["pages"]?.arrayValue ?? []).compactMap(\.stringValue)
            XCTAssertGreaterThanOrEqual(pages.count, 3)
            XCTAssertEqual(Set(pages), Set(retained.keys).subtracting(["home/$gateway/tree"]), "exactly the pages")
            // Each page fits the size; together they hold every accessory.
            var ids = Set<String>()
            for topic in pages {
                let text = try XCTUnwrap(retained[topic])
                XCTAssertLessThanOrEqual(text.utf8.count, size, topic)
                for room in Self.json(text)?["rooms"]?.arrayValue ?? [] {
                    for accessory in room["accessories"]?.arrayValue ?? [] {
                        if let id = accessory["id"]?.stringValue { ids.insert(id) }
                    }
                }
            }
            let tree = await gw.gateway.tree
            XCTAssertEqual(ids, Set(tree.accessories.map(\.id)))

            // An answer is not retained: the whole tree, as the broker takes it.
            let answer = try await gw.request(
                "home/$gateway/request/tree", "{}", answer: "home/$gateway/response/tree")
            XCTAssertNil(answer["data"]?["paged"])
            let rooms = answer["data"]?["rooms"]?.arrayValue ?? []
            XCTAssertEqual(rooms.reduce(0) { $0 + ($1["accessories"]?.arrayValue?.count ?? 0) }, count)
        }
    }

    func testBadSizesAreErrorsNamingTheFileAndKey() {
        for (value, accepted) in [("0", true), ("16384", true), ("1048576", true), ("1000", false), ("1.5", false)] {
            do {
                let config = try GatewayConfig.parse("tree-page-size: \(value)\n", file: "gateway.yml")
                XCTAssertTrue(accepted, value)
                XCTAssertEqual(config.treePageSize, Int(value))
            } catch {
                XCTAssertFalse(accepted, "\(value): \(error)")
                XCTAssertTrue(error.description.hasPrefix("gateway.yml: tree-page-size: "), error.description)
            }
        }
        XCTAssertEqual(GatewayConfig().treePageSize, 256 * 1024, "256 KB by default")
    }
}
