import HomeMQTTApp
import XCTest
@testable import Gateway
import HomeModel

final class SlugTests: XCTestCase {
    func testSlugsAreLowercaseFoldedAndDashed() {
        XCTAssertEqual(Slug.make("Living Room"), "living-room")
        XCTAssertEqual(Slug.make("Café Ü-Bahn"), "cafe-u-bahn")
        XCTAssertEqual(Slug.make("  Kilgo's  Garage!! "), "kilgo-s-garage")
        XCTAssertEqual(Slug.make("a/b+c#d$e"), "a-b-c-d-e")
        XCTAssertEqual(Slug.make("***"), "unnamed")
        XCTAssertEqual(Slug.make("", fallback: "room"), "room")
    }

    func testSlugsNeverContainTopicSpecials() {
        for name in ["$gateway", "+", "#", "a/b", "x$y", "😀 lamp", "\u{0}\n\t"] {
            let slug = Slug.make(name)
            XCTAssertFalse(slug.contains { "$+#/".contains($0) }, slug)
            XCTAssertTrue(slug.allSatisfy { $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "-") }, slug)
            XCTAssertFalse(slug.hasPrefix("-") || slug.hasSuffix("-"), slug)
        }
    }

    func testCollisionsGetStableSuffixes() {
        XCTAssertEqual(Slug.unique(["Lamp", "lamp", "LAMP"]), ["lamp", "lamp-2", "lamp-3"])
        // A real name `lamp-2` keeps its slug; the duplicate skips it.
        XCTAssertEqual(Slug.unique(["Lamp", "Lamp", "Lamp 2"]), ["lamp", "lamp-3", "lamp-2"])
    }

    /// ASCII names are slugged by their bytes: the same slugs as by their scalars, for every
    /// ASCII byte between two letters and for names of every kind.
    func testASCIISlugsAreTheScalarPathsSlugs() {
        var names = (UInt8(0)...0x7F).map { "a" + String(UnicodeScalar($0)) + "B" }
        names += ["", "-", "  Kilgo's  Garage!! ", "Lamp 2", "ZZ top", "9to5", "a--b", "[x]", "Hue/Sat"]
        for name in names {
            XCTAssertEqual(Slug.ascii(name, fallback: "f"), Slug.scalars(name, fallback: "f"), name.debugDescription)
        }
    }

    /// Sixteen names or fewer with no two alike are their own slugs without hashing; more, or
    /// with two alike, go the long way, with the same rules.
    func testUniqueSlugsAtEverySize() {
        for count in [1, 16, 17, 30] {
            let names = (1...count).map { "Lamp \($0)" }
            XCTAssertEqual(Slug.unique(names), names.map { Slug.make($0) })
            XCTAssertEqual(Slug.unique(names + ["lamp 1"]).last, "lamp-1-2")
        }
    }

    func testTopicFilterMatching() {
        XCTAssertTrue(TopicMatch.matches(filter: "home/garage/#", topic: "home/garage/door/x/set"))
        XCTAssertTrue(TopicMatch.matches(filter: "home/+/door/#", topic: "home/garage/door/x"))
        XCTAssertFalse(TopicMatch.matches(filter: "home/+/door", topic: "home/garage/door/x"))
        XCTAssertFalse(TopicMatch.matches(filter: "home/kitchen/#", topic: "home/garage/door"))
        XCTAssertTrue(TopicMatch.matches(filter: "home/#", topic: "home"))
    }
}

final class TopicTreeTests: XCTestCase {
    static func characteristic(_ iid: UInt64, _ name: String, _ value: CharacteristicValue? = nil) -> Characteristic {
        let type = Catalog.characteristicType(named: name)!
        return Characteristic(iid: iid, type: type.uuid, value: value, metadata: type.metadata)
    }

    static func lamp(id: String, name: String, manufacturer: String = "Acme", room: String? = nil) -> Accessory {
        let info = AccessoryService(
            iid: 1, type: Catalog.serviceType(named: "accessory-information")!.uuid,
            characteristics: [
                characteristic(2, "name", .string(name)), characteristic(3, "identify"),
            ])
        let bulb = AccessoryService(
            iid: 10, type: Catalog.serviceType(named: "lightbulb")!.uuid,
            characteristics: [
                characteristic(11, "power-state", .bool(false)), characteristic(12, "brightness", .int(50)),
            ])
        return Accessory(
            id: id, name: name, manufacturer: manufacturer, category: 5, services: [info, bulb], suggestedRoom: room)
    }

    func home(_ accessories: [Accessory]) async throws -> Home {
        let db = HomeDatabase.inMemory()
        try await db.adopt(accessories)
        return await db.home
    }

    func testTopicsFollowRoomsAndCollidingNamesGetSuffixesByID() async throws {
        let list = [
            Self.lamp(id: "b", name: "Lamp", room: "Living Room"),
            Self.lamp(id: "a", name: "Lamp", room: "Living Room"),
            Self.lamp(id: "c", name: "Desk Lamp"),
        ]
        let tree = TopicTree(
            base: "home", accessories: list, home: try await home(list), scope: try ScopeFilter(ScopeConfig()))
        XCTAssertEqual(tree.accessory(id: "a")?.topic, "home/living-room/lamp")
        XCTAssertEqual(tree.accessory(id: "b")?.topic, "home/living-room/lamp-2")
        XCTAssertEqual(tree.accessory(id: "c")?.topic, "home/default-room/desk-lamp")
        let brightness = tree.characteristic(topic: "home/living-room/lamp/lightbulb/brightness")
        XCTAssertEqual(brightness?.address, CharacteristicAddress(accessoryID: "a", iid: 12))
        // The accessory-information service is not user-interactive: no topics by default.
        XCTAssertNil(tree.characteristic(CharacteristicAddress(accessoryID: "a", iid: 2)))
    }

    /// Lamps of one model share what their characteristics are; each keeps the value it was
    /// described with, its own address and its own topic.
    func testLampsOfOneModelKeepTheirOwnValuesAndTopics() async throws {
        var dim = Self.lamp(id: "a", name: "Hall Lamp")
        dim.services[1].characteristics[1].value = .int(10)
        let list = [dim, Self.lamp(id: "b", name: "Desk Lamp")]
        let tree = TopicTree(
            base: "home", accessories: list, home: try await home(list), scope: try ScopeFilter(ScopeConfig()))
        let a = try XCTUnwrap(tree.characteristic(CharacteristicAddress(accessoryID: "a", iid: 12)))
        let b = try XCTUnwrap(tree.characteristic(CharacteristicAddress(accessoryID: "b", iid: 12)))
        // The described value is the service's (the accessory's description), not the node's.
        func service(_ id: String) throws -> TopicTree.ServiceNode {
            try XCTUnwrap(
                tree.accessory(id: id)?.services.first { $0.characteristics.contains { $0.address.iid == 12 } })
        }
        XCTAssertEqual(try service("a").describedValue(of: a), .int(10))
        XCTAssertEqual(try service("b").describedValue(of: b), .int(50))
        var described = list[0].services[1].characteristics[1]
        described.value = nil
        XCTAssertEqual(a.characteristic, described)
        XCTAssertEqual(b.characteristic, described)
        XCTAssertEqual([a.typeName, b.typeName], ["brightness", "brightness"])
        XCTAssertEqual(a.topic, "home/default-room/hall-lamp/lightbulb/brightness")
        XCTAssertEqual(b.topic, "home/default-room/desk-lamp/lightbulb/brightness")
        XCTAssertEqual(a.address.accessoryID, "a")
    }

    /// The look-up of each value on the published tree (`Publication.characteristic`) keeps
    /// the last accessory's place for the values of it that follow; every tree published since,
    /// with the accessory elsewhere or gone, is looked up anew.
    func testValuesAreLookedUpOnEachTreePublished() async throws {
        let a = Self.lamp(id: "a", name: "Hall Lamp")
        let b = Self.lamp(id: "b", name: "Desk Lamp")
        let home = try await home([a, b])
        let scope = try ScopeFilter(ScopeConfig())
        func tree(_ list: [Accessory]) -> TopicTree {
            TopicTree(base: "home", accessories: list, home: home, scope: scope)
        }
        let brightnessA = CharacteristicAddress(accessoryID: "a", iid: 12)
        let powerA = CharacteristicAddress(accessoryID: "a", iid: 11)
        let brightnessB = CharacteristicAddress(accessoryID: "b", iid: 12)
        var publication = Publication(backlog: 1, base: "home")
        XCTAssertNil(publication.characteristic(brightnessA), "nothing published yet")

        publication.published(tree([a, b]))
        XCTAssertEqual(
            publication.characteristic(brightnessA)?.topic, "home/default-room/hall-lamp/lightbulb/brightness")
        XCTAssertEqual(publication.characteristic(powerA)?.topic, "home/default-room/hall-lamp/lightbulb/power-state")
        XCTAssertNil(publication.characteristic(CharacteristicAddress(accessoryID: "a", iid: 99)))
        XCTAssertEqual(
            publication.characteristic(brightnessB)?.topic, "home/default-room/desk-lamp/lightbulb/brightness")

        // Each lamp alone: at the tree's first place, where the other was.
        publication.published(tree([a]))
        XCTAssertNil(publication.characteristic(brightnessB))
        XCTAssertEqual(
            publication.characteristic(brightnessA)?.topic, "home/default-room/hall-lamp/lightbulb/brightness")
        publication.published(tree([b]))
        XCTAssertNil(publication.characteristic(brightnessA))
        XCTAssertEqual(
            publication.characteristic(brightnessB)?.topic, "home/default-room/desk-lamp/lightbulb/brightness")
        publication.published(tree([a, b]))
        XCTAssertEqual(
            publication.characteristic(brightnessB)?.topic, "home/default-room/desk-lamp/lightbulb/brightness")
        XCTAssertEqual(publication.characteristic(powerA)?.topic, "home/default-room/hall-lamp/lightbulb/power-state")
    }

    func testTreeDocumentIsCanonicalJSONWithEveryTopic() async throws {
        let list = [
            Self.lamp(id: "a", name: "Lamp \"Quoted\" \\ Ünïcode\n", room: "Living Room"),
            Self.lamp(id: "b", name: "Desk Lamp"),
        ]
        let home = try await home(list)
        let tree = TopicTree(base: "home", accessories: list, home: home, scope: try ScopeFilter(ScopeConfig()))
        let text = GatewayDocuments.treeText(tree, home: home)
        // Written straight to text, it is exactly what JSONValue would write: valid JSON, keys sorted.
        let parsed = try JSONValue(parsing: text)
        XCTAssertEqual(parsed.encoded(), text)
        let rooms = try XCTUnwrap(parsed["rooms"]?.arrayValue)
        let accessories = rooms.flatMap { $0["accessories"]?.arrayValue ?? [] }
        XCTAssertEqual(Set(accessories.compactMap { $0["id"]?.stringValue }), ["a", "b"])
        let lamp = try XCTUnwrap(accessories.first { $0["id"] == .string("a") })
        XCTAssertEqual(lamp["name"], .string("Lamp \"Quoted\" \\ Ünïcode\n"))
        let bulb = try XCTUnwrap(lamp["services"]?[0])
        XCTAssertEqual(bulb["toggle"], .string("home/living-room/lamp-quoted-unicode/lightbulb/$toggle"))
        let brightness = try XCTUnwrap(
            bulb["characteristics"]?.arrayValue?.first { $0["type-name"] == .string("brightness") })
        XCTAssertEqual(brightness["topic"], .string("home/living-room/lamp-quoted-unicode/lightbulb/brightness"))
        XCTAssertEqual(brightness["writable"], .bool(true))
        XCTAssertEqual(parsed["suffixes"]?["state"], .string("/state"))
        XCTAssertEqual(parsed["suffixes"]?["set"], .string("/set"))
    }

    func testScopeCriteria() async throws {
        let list = [
            Self.lamp(id: "a", name: "Lamp", manufacturer: "Acme", room: "Kitchen"),
            Self.lamp(id: "b", name: "Other", manufacturer: "Globex", room: "Bedroom"),
        ]
        let home = try await home(list)
        func ids(_ scope: ScopeConfig) throws -> [String] {
            TopicTree(base: "home", accessories: list, home: home, scope: try ScopeFilter(scope)).accessories.map(\.id)
                .sorted()
        }
        var scope = ScopeConfig()
        scope.manufacturers = ScopeList(allow: ["Acme"])
        XCTAssertEqual(try ids(scope), ["a"])
        scope = ScopeConfig()
        scope.rooms = ScopeList(deny: ["kitchen"])
        XCTAssertEqual(try ids(scope), ["b"])
        scope = ScopeConfig()
        scope.accessories = ScopeList(deny: ["Other"])
        XCTAssertEqual(try ids(scope), ["a"])

        scope = ScopeConfig()
        scope.characteristicTypes = ScopeList(deny: ["brightness"])
        var tree = TopicTree(base: "home", accessories: list, home: home, scope: try ScopeFilter(scope))
        XCTAssertNil(tree.characteristic(CharacteristicAddress(accessoryID: "a", iid: 12)))
        XCTAssertNotNil(tree.characteristic(CharacteristicAddress(accessoryID: "a", iid: 11)))

        scope = ScopeConfig()
        scope.userInteractiveOnly = false
        tree = TopicTree(base: "home", accessories: list, home: home, scope: try ScopeFilter(scope))
        XCTAssertEqual(
            tree.characteristic(CharacteristicAddress(accessoryID: "a", iid: 2))?.topic,
            "home/kitchen/lamp/accessory-information/name")

        scope = ScopeConfig()
        scope.readOnly = ["home/kitchen/#", "Other"]
        tree = TopicTree(base: "home", accessories: list, home: home, scope: try ScopeFilter(scope))
        XCTAssertEqual(tree.characteristic(CharacteristicAddress(accessoryID: "a", iid: 11))?.isReadOnlyScope, true)
        XCTAssertEqual(tree.characteristic(CharacteristicAddress(accessoryID: "b", iid: 11))?.isReadOnlyScope, true)

        scope = ScopeConfig()
        scope.serviceTypes = ScopeList(allow: ["no-such-service"])
        XCTAssertThrowsError(try ScopeFilter(scope, file: "gw.yml")) { error in
            XCTAssertEqual((error as? ConfigError)?.key, "scope.service-types.allow")
        }
    }
}

final class ConfigTests: XCTestCase {
    func testFullConfigParses() throws {
        let config = try HomeMQTTApp.parseConfig(
            """
            broker:
              url: mqtt://user:secret@broker.local:1884
              client-id: gw1
              protocol: 3.1.1
              qos: 0
            base-topic: house/main
            poll-interval: 5
            scope:
              services: all
              manufacturers: { deny: [Globex] }
              read-only: [home/garage/#]
            sources:
              - type: simulator
                directory: sim
            """, file: "/etc/homemqtt/gateway.yml")
        XCTAssertEqual(config.mqtt.host, "broker.local")
        XCTAssertEqual(config.mqtt.port, 1884)
        XCTAssertEqual(config.mqtt.username, "user")
        XCTAssertEqual(config.mqtt.password, "secret")
        XCTAssertEqual(config.mqtt.clientID, "gw1")
        XCTAssertEqual(config.qos, .atMostOnce)
        XCTAssertEqual(config.baseTopic, "house/main")
        XCTAssertFalse(config.scope.userInteractiveOnly)
        XCTAssertEqual(config.sources, [.simulator(directory: "/etc/homemqtt/sim")])
        XCTAssertFalse(config.brokerDisplay.contains("secret"))
    }

    /// The config's scope says `user-interactive-only` as `scope/get` and `scope/set` do;
    /// `services: user-interactive|all`, its older name, is still read, and not with it.
    func testScopeUserInteractiveOnlyAndItsOlderName() throws {
        for (text, only) in [
            ("user-interactive-only: false", false), ("user-interactive-only: true", true),
            ("services: all", false), ("services: user-interactive", true), ("rooms: { deny: [Office] }", true),
        ] {
            let config = try HomeMQTTApp.parseConfig("scope:\n  \(text)\n", file: "gw.yml")
            XCTAssertEqual(config.scope.userInteractiveOnly, only, text)
        }
        for (text, key, words) in [
            ("user-interactive-only: false\n  services: all", "scope.services", "older name of user-interactive-only"),
            ("user-interactive-only: all", "scope.user-interactive-only", "true or false"),
            ("services: some", "scope.services", "user-interactive-only: true|false"),
        ] {
            XCTAssertThrowsError(try HomeMQTTApp.parseConfig("scope:\n  \(text)\n", file: "gw.yml"), text) { error in
                let error = error as? ConfigError
                XCTAssertEqual(error?.key, key, text)
                XCTAssertTrue(error?.description.contains(words) ?? false, "\(String(describing: error))")
            }
        }
    }

    func testEnvironmentSuppliesCredentials() throws {
        let config = try HomeMQTTApp.parseConfig(
            "base-topic: home\n", file: "g.yml",
            environment: ["HOMEMQTT_MQTT_PASSWORD": "pw", "HOMEMQTT_MQTT_USERNAME": "me"])
        XCTAssertEqual(config.mqtt.username, "me")
        XCTAssertEqual(config.mqtt.password, "pw")
    }

    func testErrorsNameFileAndKey() {
        let cases: [(String, String?)] = [
            ("brokr:\n  url: x\n", "brokr"),
            ("broker:\n  url: ftp://x\n", "broker.url"),
            ("broker:\n  qos: 3\n", "broker.qos"),
            ("poll-interval: soon\n", "poll-interval"),
            ("base-topic: home/#\n", "base-topic"),
            ("scope:\n  services: some\n", "scope.services"),
            ("scope:\n  rooms: { alow: [x] }\n", "scope.rooms.alow"),
            ("sources:\n  - type: zigbee\n", "sources[0].type"),
            ("sources: []\n", "sources"),
            ("key: [unclosed\n", nil),
        ]
        for (text, key) in cases {
            XCTAssertThrowsError(try HomeMQTTApp.parseConfig(text, file: "gw.yml"), text) { error in
                guard let error = error as? ConfigError else { return XCTFail("\(error)") }
                XCTAssertEqual(error.file, "gw.yml")
                XCTAssertEqual(error.key, key, text)
                XCTAssertTrue(error.description.hasPrefix("gw.yml"), error.description)
            }
        }
    }
}

/// Every event the gateway publishes is in the README's table, by the name it goes out with.
final class GatewayEventDocumentationTests: XCTestCase {
    func testTheREADMEListsEveryGatewayEvent() throws {
        let readme = try String(contentsOf: repositoryRoot.appendingPathComponent("README.md"), encoding: .utf8)
        for event in GatewayEvent.allCases {
            XCTAssertTrue(readme.contains("`\(event.rawValue)`"), "README does not list the \(event.rawValue) event")
        }
    }
}

final class CharacteristicTopicTests: XCTestCase {
    /// `topic(_:)` is the topic and the suffix, whatever the service topic is made of: a small
    /// one, a long one, one of another script (a base topic is the user's own).
    func testTheStateTopicIsTheTopicAndTheSuffix() {
        let services = ["h/r/a/s", "home/living-room/reading-lamp-with-a-long-name/lightbulb", "家/居間/ランプ/灯"]
        for serviceTopic in services {
            for slug in ["on", "brightness", "color-temperature-2"] {
                let node = TopicTree.CharacteristicNode(
                    address: CharacteristicAddress(accessoryID: "a", iid: 9), serviceTopic: serviceTopic, slug: slug,
                    typeName: slug,
                    characteristic: Characteristic(
                        iid: 9, type: StandardUUID.longForm("25"), value: nil,
                        metadata: CharacteristicMetadata(format: .bool, permissions: [.read])),
                    isReadOnlyScope: false)
                XCTAssertEqual(node.topic, serviceTopic + "/" + slug)
                XCTAssertEqual(node.topic("/state"), serviceTopic + "/" + slug + "/state")
                XCTAssertEqual(node.topic("/state").utf8.count, node.topic.utf8.count + 6)
            }
        }
    }
}

/// The tree lists services and characteristics by iid, whatever order the source gave them in,
/// and leaves out what the scope does not admit; in order and all admitted, the source's arrays
/// are taken as they are.
final class TreeOrderTests: XCTestCase {
    func lamp(services: [AccessoryService]) -> Accessory {
        Accessory(id: "sim:lamp", name: "Lamp", manufacturer: "Acme", category: 5, services: services)
    }

    func bulb(_ iid: UInt64, _ characteristics: [Characteristic]) -> AccessoryService {
        AccessoryService(
            iid: iid, type: Catalog.serviceType(named: "lightbulb")!.uuid, characteristics: characteristics)
    }

    func home(_ accessory: Accessory) async throws -> Home {
        let db = HomeDatabase.inMemory()
        try await db.adopt([accessory])
        return await db.home
    }

    func iids(_ tree: TopicTree) -> [[UInt64]] {
        tree.accessories[0].services.map { [$0.iid] + $0.characteristics.map(\.characteristic.iid) }
    }

    func testServicesAndCharacteristicsAreByIIDWhateverTheSourcesOrder() async throws {
        let c = TopicTreeTests.characteristic
        let orders: [[AccessoryService]] = [
            [
                bulb(10, [c(11, "power-state", .bool(false)), c(12, "brightness", .int(50))]),
                bulb(20, [c(21, "power-state", .bool(true)), c(22, "hue", .float(3))]),
            ],
            [
                bulb(20, [c(22, "hue", .float(3)), c(21, "power-state", .bool(true))]),
                bulb(10, [c(12, "brightness", .int(50)), c(11, "power-state", .bool(false))]),
            ],
        ]
        for services in orders {
            let accessory = lamp(services: services)
            let home = try await home(accessory)
            let tree = TopicTree(
                base: "home", accessories: [accessory], home: home, scope: try ScopeFilter(ScopeConfig()))
            XCTAssertEqual(iids(tree), [[10, 11, 12], [20, 21, 22]])
            XCTAssertEqual(tree.characteristicCount, 4)
        }
        // First and last in order, the middle not: the whole order is checked, not its ends.
        let accessory = lamp(services: [
            bulb(10, [c(11, "power-state", .bool(false)), c(13, "hue", .float(3)), c(12, "brightness", .int(50))])
        ])
        let tree = TopicTree(
            base: "home", accessories: [accessory], home: try await home(accessory),
            scope: try ScopeFilter(ScopeConfig()))
        XCTAssertEqual(iids(tree), [[10, 11, 12, 13]])
    }

    func testWhatTheScopeLeavesOutIsNotInTheTree() async throws {
        let c = TopicTreeTests.characteristic
        var scope = ScopeConfig()
        scope.characteristicTypes = ScopeList(deny: ["brightness"])
        for services in [
            [bulb(10, [c(11, "power-state", .bool(false)), c(12, "brightness", .int(50)), c(13, "hue", .float(3))])],
            [bulb(10, [c(13, "hue", .float(3)), c(12, "brightness", .int(50)), c(11, "power-state", .bool(false))])],
        ] {
            let accessory = lamp(services: services)
            let home = try await home(accessory)
            let tree = TopicTree(base: "home", accessories: [accessory], home: home, scope: try ScopeFilter(scope))
            XCTAssertEqual(iids(tree), [[10, 11, 13]])
        }
    }
}
