import Gateway
import HAPServer
import HomeModel

// The home as one HAP bridge, a pure function of the gateway's published tree, the front end's
// scope and the ids handed out: aid 1 the bridge itself, then each accessory in scope with its
// services and characteristics as the tree has them, under aids and iids that never move.

/// What a HAP address of the bridge stands for.
enum BridgeTarget: Sendable, Hashable {
    /// A characteristic of the gateway's tree, read and written through the gateway.
    case characteristic(CharacteristicAddress, CharacteristicFormat)
    /// A fixed value of an accessory information service (the bridge's or a bridged one's).
    case fixed(JSONValue)
    /// The Identify characteristic of a bridged accessory.
    case identify(accessoryID: String)
    /// The bridge's own Identify.
    case identifyBridge
}

struct BridgeTree: Sendable {
    /// In aid order, the bridge first; characteristic values are filled in when served.
    var accessories: [HAPAccessory] = []
    var targets: [HAPCharacteristicID: BridgeTarget] = [:]
    var addresses: [CharacteristicAddress: HAPCharacteristicID] = [:]
    /// The accessories in scope beyond HAP's limit, which the bridge leaves out.
    var leftOut: [String] = []
    /// This gateway's id, added to each accessory's route; nil: no route served.
    var gatewayID: String?

    /// What the bridge says of itself in its information service.
    struct Identity: Sendable {
        var name: String
        var serialNumber: String
        var firmware: String
    }

    static let bridgeAID = 1

    init() {}

    /// - Parameters:
    ///   - tree: the gateway's published tree (already within the gateway's scope).
    ///   - filter: the front end's own scope.
    ///   - ownPrefixes: accessory id prefixes of the gateway's own bridges (`hap:<pairing id>:`),
    ///     which are never bridged.
    ///   - gatewayID: this gateway's id (`GatewayIdentity`): each accessory is served with its
    ///     route (`GatewayRoute`), this id added; one whose route holds it already is left out.
    ///   - ids: the aids and iids handed out; new ones are added.
    ///   - standalone: the accessory served alone (aid 1, no bridge: its `ids` start at aid 1);
    ///     nil for the home's bridge, which leaves out every accessory served alone (HomeKit
    ///     would show it twice, once through each).
    init(
        tree: TopicTree, filter: ScopeFilter, ownPrefixes: [String], identity: Identity, ids: inout BridgeIDs,
        limit: Int = HomeKitConfig.maxAccessories, standalone: String? = nil, gatewayID: String? = nil
    ) {
        self.gatewayID = gatewayID
        if standalone == nil {
            accessories.append(Self.bridgeAccessory(identity))
            for (iid, value) in Self.bridgeFixedValues(identity) {
                targets[HAPCharacteristicID(aid: Self.bridgeAID, iid: iid)] = .fixed(value)
            }
            targets[HAPCharacteristicID(aid: Self.bridgeAID, iid: 2)] = .identifyBridge
        }
        var admitted: [(aid: Int, node: TopicTree.AccessoryNode)] = []
        for node in tree.accessories {
            if ownPrefixes.contains(where: { node.id.hasPrefix($0) }) { continue }
            if let gatewayID, GatewayRoute.route(of: node.accessory).contains(gatewayID) { continue }
            guard standalone.map({ node.id == $0 }) ?? !node.accessory.isHomeKitStandalone else { continue }
            guard filter.admits(accessory: node.accessory, displayName: node.displayName, room: node.room) else {
                continue
            }
            admitted.append((ids.aid(for: node.id), node))
        }
        admitted.sort { $0.aid < $1.aid }
        // The accessories known longest stay: a new one beyond the limit is the one left out.
        let room = standalone == nil ? max(0, limit - 1) : 1
        leftOut = admitted.dropFirst(room).map(\.node.id)
        for (aid, node) in admitted.prefix(room) {
            add(node, aid: aid, filter: filter, ids: &ids)
        }
    }

    private mutating func add(_ node: TopicTree.AccessoryNode, aid: Int, filter: ScopeFilter, ids: inout BridgeIDs) {
        var services = [information(of: node, aid: aid, ids: &ids)]
        // The tree's services by their iid in the source, for the links between them.
        var serviceIIDs: [UInt64: Int] = [:]
        let kept = node.services.filter { service in
            service.service.type != StandardUUID.accessoryInformation
                && service.service.type != StandardUUID.protocolInformation
                && !GatewayRoute.isRouteService(service.service.type) && filter.admits(service: service.service)
        }
        for service in kept {
            serviceIIDs[service.iid] = ids.iid("s\(service.iid):\(service.service.type)", of: node.id)
        }
        for service in kept {
            let serviceKey = "s\(service.iid):\(service.service.type)"
            var characteristics: [HAPCharacteristic] = []
            for c in service.characteristics where filter.admits(characteristic: c.characteristic) {
                let readOnly =
                    c.isReadOnlyScope
                    || filter.isReadOnly(accessory: node.accessory, displayName: node.displayName, topic: c.topic)
                guard let made = Self.characteristic(c.characteristic, readOnly: readOnly) else { continue }
                let iid = ids.iid("\(serviceKey)/c\(c.address.iid):\(c.characteristic.type)", of: node.id)
                var hap = made
                hap.iid = iid
                let id = HAPCharacteristicID(aid: aid, iid: iid)
                targets[id] = .characteristic(c.address, c.characteristic.metadata.format)
                addresses[c.address] = id
                characteristics.append(hap)
            }
            guard !characteristics.isEmpty else { continue }
            services.append(
                HAPService(
                    iid: serviceIIDs[service.iid] ?? 0, type: Self.hapType(service.service.type),
                    isPrimary: service.service.isPrimary, isHidden: service.service.isHidden,
                    linked: service.service.linkedServices.compactMap { serviceIIDs[$0] },
                    characteristics: characteristics))
        }
        // Nothing in scope beside its information: nothing to show in the Home app (it keeps its aid).
        guard services.count > 1 else {
            targets = targets.filter { $0.key.aid != aid }
            return
        }
        if let gatewayID { services.append(route(of: node, through: gatewayID, aid: aid, ids: &ids)) }
        accessories.append(HAPAccessory(aid: aid, services: services))
    }

    /// The hidden route service (`GatewayRoute`): the route the accessory came by, if it came
    /// from another HomeMQTT bridge, and this gateway. Read-only, a fixed value.
    private mutating func route(
        of node: TopicTree.AccessoryNode, through gatewayID: String, aid: Int, ids: inout BridgeIDs
    ) -> HAPService {
        let text = GatewayRoute.extended(GatewayRoute.route(of: node.accessory), by: gatewayID)
        let iid = ids.iid("route/c", of: node.id)
        targets[HAPCharacteristicID(aid: aid, iid: iid)] = .fixed(.string(text))
        let c = HAPCharacteristic(
            iid: iid, type: GatewayRoute.characteristicType, format: .string, permissions: [.read],
            maxLength: GatewayRoute.maxLength, description: "HomeMQTT route", value: .string(text))
        return HAPService(
            iid: ids.iid("route", of: node.id), type: GatewayRoute.serviceType, isHidden: true,
            characteristics: [c])
    }

    /// The accessory's information service as HAP asks for it (iid 1: Identify, Manufacturer,
    /// Model, Name, Serial Number, Firmware Revision), from what the source described; the
    /// name is the home's (renamed in the gateway, renamed here).
    private mutating func information(of node: TopicTree.AccessoryNode, aid: Int, ids: inout BridgeIDs) -> HAPService {
        let accessory = node.accessory
        let values: [(String, String)] = [
            ("20", accessory.manufacturer.isEmpty ? "Unknown" : accessory.manufacturer),
            ("21", accessory.model.isEmpty ? "Unknown" : accessory.model),
            ("23", node.displayName),
            ("30", accessory.serialNumber.isEmpty ? accessory.id : accessory.serialNumber),
            ("52", Self.isRevision(accessory.firmwareRevision) ? accessory.firmwareRevision : "1.0.0"),
        ]
        let key = BridgeIDs.informationKey
        let identify = ids.iid("\(key)/14", of: node.id)
        targets[HAPCharacteristicID(aid: aid, iid: identify)] = .identify(accessoryID: node.id)
        var characteristics = [HAPCharacteristic(iid: identify, type: "14", format: .bool, permissions: [.write])]
        for (type, value) in values {
            let iid = ids.iid("\(key)/\(type)", of: node.id)
            targets[HAPCharacteristicID(aid: aid, iid: iid)] = .fixed(.string(value))
            characteristics.append(
                HAPCharacteristic(iid: iid, type: type, format: .string, permissions: [.read], value: .string(value)))
        }
        return HAPService(iid: ids.iid(key, of: node.id), type: "3E", characteristics: characteristics)
    }

    /// HAP's firmware revision: `x[.y[.z]]`, digits.
    static func isRevision(_ text: String) -> Bool {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        return (1...3).contains(parts.count) && parts.allSatisfy { !$0.isEmpty && $0.allSatisfy(\.isASCII) }
            && parts.allSatisfy { $0.allSatisfy(\.isNumber) }
    }

    // MARK: The bridge itself

    /// iid 1 Accessory Information (2 Identify, 3 Manufacturer, 4 Model, 5 Name, 6 Serial
    /// Number, 7 Firmware Revision), iid 8 Protocol Information (9 Version): fixed, the bridge
    /// has no other services.
    static func bridgeAccessory(_ identity: Identity) -> HAPAccessory {
        let fixed = Dictionary(uniqueKeysWithValues: bridgeFixedValues(identity))
        func string(_ iid: Int, _ type: String) -> HAPCharacteristic {
            HAPCharacteristic(iid: iid, type: type, format: .string, permissions: [.read], value: fixed[iid])
        }
        return HAPAccessory(
            aid: bridgeAID,
            services: [
                HAPService(
                    iid: 1, type: "3E",
                    characteristics: [
                        HAPCharacteristic(iid: 2, type: "14", format: .bool, permissions: [.write]),
                        string(3, "20"), string(4, "21"), string(5, "23"), string(6, "30"), string(7, "52"),
                    ]),
                HAPService(iid: 8, type: "A2", characteristics: [string(9, "37")]),
            ])
    }

    static func bridgeFixedValues(_ identity: Identity) -> [(Int, JSONValue)] {
        [
            (3, "HomeMQTT"), (4, "HomeMQTT Bridge"), (5, .string(identity.name)),
            (6, .string(identity.serialNumber)), (7, .string(identity.firmware)), (9, "1.1.0"),
        ]
    }

    // MARK: Characteristics

    /// The characteristic as HAP describes it (its iid set by the caller); nil when nothing is
    /// left to do with it (a write-only one in a read-only scope).
    static func characteristic(_ c: Characteristic, readOnly: Bool) -> HAPCharacteristic? {
        let m = c.metadata
        var permissions: HAPPermissions = []
        let map: [(CharacteristicPermissions, HAPPermissions)] = [
            (.read, .read), (.write, .write), (.notify, .events), (.hidden, .hidden), (.timedWrite, .timedWrite),
            (.additionalAuthorization, .additionalAuthorization), (.writeResponse, .writeResponse),
        ]
        for (ours, theirs) in map where m.permissions.contains(ours) { permissions.insert(theirs) }
        if readOnly { permissions.subtract([.write, .timedWrite, .writeResponse, .additionalAuthorization]) }
        guard !permissions.isDisjoint(with: [.read, .write]) else { return nil }
        guard let format = HAPFormat(rawValue: m.format.rawValue) else { return nil }
        let valid = m.validValues.keys.sorted().compactMap { Int(exactly: $0) }
        return HAPCharacteristic(
            iid: 0, type: hapType(c.type), format: format, permissions: permissions, unit: m.unit,
            minValue: m.minValue, maxValue: m.maxValue, minStep: m.minStep,
            maxLength: m.format == .string ? m.maxLength : nil, validValues: valid.isEmpty ? nil : valid,
            description: StandardUUID.shortForm(c.type) == nil ? c.name : nil)
    }

    /// Apple's types in their short form (`25`), others as their UUID.
    static func hapType(_ type: String) -> String { StandardUUID.shortForm(type) ?? type }

    /// A value as HAP's JSON; a button's press reads as null (it is an event, not a state).
    static func json(_ value: CharacteristicValue?, _ format: CharacteristicFormat) -> JSONValue {
        guard let value else { return .null }
        return HAPAccessoryJSON.json(for: value, format: format)
    }
}
