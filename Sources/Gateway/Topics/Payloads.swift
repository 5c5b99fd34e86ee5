public import HomeModel

// What the gateway publishes and answers: its JSON documents, `GatewayFailure` (a failed request's
// code, message and HAP status), and the JSON text writer that streams the large documents.

/// The JSON documents the gateway publishes. Kept apart from the gateway's state handling so
/// the contract can be read in one place.
enum Payloads {
    static func info(_ node: TopicTree.AccessoryNode) -> JSONValue {
        let accessory = node.accessory
        let inScope = Dictionary(node.services.map { ($0.iid, $0) }, uniquingKeysWith: { a, _ in a })
        let services: [JSONValue] = accessory.services.sorted { $0.iid < $1.iid }.map { service in
            var object: [String: JSONValue] = [
                "iid": .uint(service.iid),
                "type": .string(service.type),
                "type-name": .string(TopicTree.typeName(service: service)),
                "user-interactive": .bool(service.isUserInteractive),
                "primary": .bool(service.isPrimary),
                "hidden": .bool(service.isHidden),
            ]
            if let name = service.name { object["name"] = .string(name) }
            if let scoped = inScope[service.iid] {
                object["topic"] = .string(scoped.topic)
                object["display-name"] = .string(scoped.displayName)
            }
            if !service.linkedServices.isEmpty { object["linked"] = .array(service.linkedServices.map { .uint($0) }) }
            return .object(object)
        }
        var object: [String: JSONValue] = [
            "identifier": .string(accessory.id),
            "name": .string(node.displayName),
            "accessory-name": .string(accessory.name),
            "manufacturer": .string(accessory.manufacturer),
            "model": .string(accessory.model),
            "serial": .string(accessory.serialNumber),
            "firmware": .string(accessory.firmwareRevision),
            "category": .int(Int64(accessory.category)),
            "category-name": .string(Catalog.categories[accessory.category] ?? "other"),
            "bridged": .bool(accessory.isBridged),
            "room": .string(node.room.name),
            "topic": .string(node.topic),
            "services": .array(services),
        ]
        if let bridge = accessory.bridgeID { object["bridge"] = .string(bridge) }
        return .object(object)
    }

    /// `$availability`: `online` while the accessory is reachable, else `offline`.
    static func availability(_ node: TopicTree.AccessoryNode) -> [UInt8] {
        Array((node.accessory.isReachable ? "online" : "offline").utf8)
    }

    static func meta(_ node: TopicTree.CharacteristicNode) -> JSONValue {
        var meta = ValueCodec.metaJSON(
            type: node.characteristic.type, typeName: node.typeName, metadata: node.characteristic.metadata)
        if case .object(var object) = meta {
            if let name = node.characteristic.name { object["description"] = .string(name) }
            if node.isReadOnlyScope { object["read-only-scope"] = .bool(true) }
            meta = .object(object)
        }
        return meta
    }

    /// The suffixes that make a characteristic's topics from its base `topic`, listed once in
    /// the tree instead of five times per characteristic, which would make a large home's
    /// document several times larger.
    static let characteristicSuffixes: [(String, String)] = [
        ("get", "/get"), ("meta", "/meta"), ("result", "/result"), ("set", "/set"), ("state", "/state"),
    ]

    /// The whole scoped tree as JSON. Written straight to text, keys in sorted order as
    /// `JSONValue.encoded()` writes them, never built as a `JSONValue` first: for a large home
    /// that would be the largest thing the gateway holds.
    static func treeText(_ tree: TopicTree, home: Home) -> String {
        String(decoding: treeBytes(tree, home: home), as: UTF8.self)
    }

    /// `treeText` as the bytes the gateway publishes: written straight to bytes, so the
    /// document, a large home's biggest payload, exists once, not as text and a copy.
    static func treeBytes(_ tree: TopicTree, home: Home) -> [UInt8] {
        // Written twice, first only counting, so that the buffer is allocated once at its exact
        // size: a guessed capacity that falls short doubles it.
        var counter = JSONTextWriter(countOnly: true)
        writeTree(&counter, tree, home: home)
        var w = JSONTextWriter(countOnly: false)
        w.out.reserveCapacity(counter.length)
        writeTree(&w, tree, home: home)
        return w.out
    }

    static func writeTree(_ w: inout JSONTextWriter, _ tree: TopicTree, home: Home) {
        w.open()
        w.key("base"); w.string(tree.base)
        w.key("home"); w.string(home.name)
        w.key("rooms"); w.openArray()
        for room in tree.rooms {
            w.element(); w.open()
            w.key("accessories"); w.openArray()
            for node in room.accessoryIDs.compactMap({ tree.accessory(id: $0) }) {
                w.element()
                writeAccessory(&w, node)
            }
            w.closeArray()
            writeRoomFields(&w, room, home: home)
            w.close()
        }
        w.closeArray()
        writeSuffixes(&w)
        w.close()
    }

    /// An accessory's entry in the tree (and in a page of it: `TreePublication`).
    /// An accessory's entry in the tree: all its services, or (a paged tree's accessory too
    /// large for one page) those in `services`, marked `continued` after its first part.
    static func writeAccessory(
        _ w: inout JSONTextWriter, _ node: TopicTree.AccessoryNode, services: Range<Int>? = nil
    ) {
        w.open()
        w.key("availability"); w.string(node.topic + "/$availability")
        w.key("category"); w.string(Catalog.categories[node.accessory.category] ?? "other")
        if let services, services.lowerBound > 0 { w.key("continued"); w.bool(true) }
        w.key("id"); w.string(node.id)
        w.key("info"); w.string(node.topic + "/$info")
        w.key("manufacturer"); w.string(node.accessory.manufacturer)
        w.key("model"); w.string(node.accessory.model)
        w.key("name"); w.string(node.displayName)
        w.key("reachable"); w.bool(node.accessory.isReachable)
        w.key("services"); w.openArray()
        for service in node.services[services ?? node.services.indices] {
            w.element(); w.open()
            w.key("characteristics"); w.openArray()
            for c in service.characteristics {
                let permissions = c.characteristic.metadata.permissions
                w.element(); w.open()
                w.key("format"); w.string(c.characteristic.metadata.format.rawValue)
                w.key("notifies"); w.bool(permissions.contains(.notify))
                w.key("readable"); w.bool(permissions.contains(.read))
                w.key("topic"); w.string(c.topic)
                w.key("type"); w.string(c.characteristic.type)
                w.key("type-name"); w.string(c.typeName)
                w.key("writable"); w.bool(permissions.contains(.write) && !c.isReadOnlyScope)
                w.close()
            }
            w.closeArray()
            w.key("name"); w.string(service.displayName)
            if PrimaryControl.characteristic(in: service) != nil {
                w.key("toggle"); w.string(service.topic + "/$toggle")
            }
            w.key("topic"); w.string(service.topic)
            w.key("type"); w.string(service.service.type)
            w.key("type-name"); w.string(service.typeName)
            w.close()
        }
        w.closeArray()
        w.key("topic"); w.string(node.topic)
        w.close()
    }

    /// A room's keys after its `accessories`.
    static func writeRoomFields(_ w: inout JSONTextWriter, _ room: TopicTree.RoomNode, home: Home) {
        w.key("default"); w.bool(room.room.id == home.roomForEntireHome.id)
        w.key("id"); w.string(room.room.id)
        w.key("name"); w.string(room.room.name)
        w.key("topic"); w.string(room.topic)
    }

    static func writeSuffixes(_ w: inout JSONTextWriter) {
        w.key("suffixes"); w.open()
        for (name, suffix) in characteristicSuffixes {
            w.key(name); w.string(suffix)
        }
        w.close()
    }

    static func tree(_ tree: TopicTree, home: Home) -> JSONValue {
        // Parsing our own output cannot fail; the fallback only keeps this total.
        (try? JSONValue(parsing: treeText(tree, home: home))) ?? .object([:])
    }
}

/// Why a request failed: our machine code, a message, and HAP's status where one applies.
public struct GatewayFailure: Error, Sendable, Hashable, CustomStringConvertible {
    public var code: ErrorCode
    public var message: String
    public var hapStatus: Int?

    public init(code: ErrorCode, message: String, hapStatus: Int? = nil) {
        self.code = code
        self.message = message
        self.hapStatus = hapStatus
    }

    public init(_ error: ModelError) {
        let invalid = AccessoryError.Status.invalidValue.rawValue
        let hap: Int? =
            switch error.code {
            case .readOnly: AccessoryError.Status.readOnly.rawValue
            case .outOfRange, .notAValidValue, .invalidType, .tooLong, .notAStep: invalid
            default: nil
            }
        self.init(code: error.code, message: error.message, hapStatus: hap)
    }

    public init(_ error: AccessoryError) {
        self.init(code: error.code, message: error.message, hapStatus: error.status.rawValue)
    }

    public var description: String { "\(code): \(message)" }
}

/// Appends JSON text (UTF-8) with commas where they belong; keys are written in the order given.
/// With `countOnly`, nothing is written and `length` counts the bytes that would be.
struct JSONTextWriter {
    var out: [UInt8] = []
    let countOnly: Bool
    private(set) var length = 0
    /// Per open container: whether it has an element yet.
    private var hasElement: [Bool] = []

    init(countOnly: Bool) { self.countOnly = countOnly }

    private mutating func put(_ byte: UInt8) {
        if countOnly { length += 1 } else { out.append(byte) }
    }

    private mutating func separate() {
        if let last = hasElement.last {
            if last { put(UInt8(ascii: ",")) }
            hasElement[hasElement.count - 1] = true
        }
    }

    mutating func open() { put(UInt8(ascii: "{")); hasElement.append(false) }
    mutating func close() { put(UInt8(ascii: "}")); hasElement.removeLast() }
    mutating func openArray() { put(UInt8(ascii: "[")); hasElement.append(false) }
    mutating func closeArray() { put(UInt8(ascii: "]")); hasElement.removeLast() }
    /// Before each array element.
    mutating func element() { separate() }

    mutating func key(_ key: String) {
        separate()
        string(key)
        put(UInt8(ascii: ":"))
    }

    mutating func string(_ value: String) {
        if countOnly {
            length += JSONValue.escapedLength(value)
        } else {
            JSONValue.appendString(value, to: &out)
        }
    }

    mutating func bool(_ value: Bool) {
        if countOnly {
            length += value ? 4 : 5
        } else {
            out.append(contentsOf: value ? Self.trueBytes : Self.falseBytes)
        }
    }

    mutating func int(_ value: Int) {
        let text = String(value)
        if countOnly { length += text.utf8.count } else { out.append(contentsOf: text.utf8) }
    }

    /// JSON text written before (an accessory's entry, made once and placed on a page).
    mutating func raw(_ bytes: [UInt8]) {
        if countOnly { length += bytes.count } else { out.append(contentsOf: bytes) }
    }

    private static let trueBytes = Array("true".utf8)
    private static let falseBytes = Array("false".utf8)
}
