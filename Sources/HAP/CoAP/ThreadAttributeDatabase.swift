import HomeModel

// The attribute database a HAP-over-Thread accessory answers to opcode 0x09 (issue 42): every
// accessory, service and characteristic with its HAP-BLE signature, as nested TLV containers.
// This file reads and writes the bytes; ThreadAttributeDatabase+Model.swift turns the tree into
// the `/accessories` JSON the IP controller reads, and a model into a tree.
//
// The containers (aiohomekit's `Pdu09*`): 0x18 the accessories, each a 0x19 holding 0x1A
// (aid) and 0x16 (services); each service a 0x15 holding 0x07 iid, 0x06 type, 0x0F properties,
// 0x10 linked services and 0x14 (characteristics); each characteristic a 0x13 holding 0x05 iid,
// 0x04 type, 0x0A properties, 0x0B description, 0x0C presentation format, 0x0D valid range,
// 0x0E step, 0x11 valid values, 0x12 valid-value ranges. Lists are split by empty 0x00 items.
// Encoding writes the fields in that order, the order the captured devices use, so a
// capture decoded and encoded again is the same bytes.

public struct ThreadAttributeDatabase: Sendable, Hashable {
    public struct Characteristic: Sendable, Hashable {
        /// Long, upper-case type UUID.
        public var type: String
        public var iid: UInt16
        /// HAP-BLE characteristic properties (0x0010 secure read, 0x0020 secure write, …).
        public var properties: UInt16
        public var userDescription: String?
        /// 7 bytes: format, exponent, unit (u16 LE), namespace, description.
        public var presentationFormat: [UInt8]?
        /// Minimum then maximum, each in the format's encoding.
        public var validRange: [UInt8]?
        public var step: [UInt8]?
        /// One u8 per valid value.
        public var validValues: [UInt8]?
        /// Pairs of u8: first and last of each range of valid values.
        public var validValuesRanges: [UInt8]?

        public init(
            type: String, iid: UInt16, properties: UInt16, userDescription: String? = nil,
            presentationFormat: [UInt8]? = nil, validRange: [UInt8]? = nil, step: [UInt8]? = nil,
            validValues: [UInt8]? = nil, validValuesRanges: [UInt8]? = nil
        ) {
            self.type = type
            self.iid = iid
            self.properties = properties
            self.userDescription = userDescription
            self.presentationFormat = presentationFormat
            self.validRange = validRange
            self.step = step
            self.validValues = validValues
            self.validValuesRanges = validValuesRanges
        }
    }

    public struct Service: Sendable, Hashable {
        public var type: String
        public var iid: UInt16
        /// 0x0001 primary, 0x0002 hidden, 0x0004 supports configuration; nil when not sent.
        public var properties: UInt16?
        /// nil when not sent; devices send an empty list for none.
        public var linkedServices: [UInt16]?
        public var characteristics: [Characteristic]

        public init(
            type: String, iid: UInt16, properties: UInt16? = nil, linkedServices: [UInt16]? = [],
            characteristics: [Characteristic]
        ) {
            self.type = type
            self.iid = iid
            self.properties = properties
            self.linkedServices = linkedServices
            self.characteristics = characteristics
        }
    }

    public struct Accessory: Sendable, Hashable {
        public var aid: UInt16
        public var services: [Service]
        public init(aid: UInt16, services: [Service]) {
            self.aid = aid
            self.services = services
        }
    }

    public var accessories: [Accessory]
    public init(accessories: [Accessory]) { self.accessories = accessories }

    enum Tag {
        static let accessories: UInt8 = 0x18, accessory: UInt8 = 0x19, aid: UInt8 = 0x1A
        static let services: UInt8 = 0x16, service: UInt8 = 0x15
        static let serviceIID: UInt8 = 0x07, serviceType: UInt8 = 0x06
        static let serviceProperties: UInt8 = 0x0F, linked: UInt8 = 0x10
        static let characteristics: UInt8 = 0x14, characteristic: UInt8 = 0x13
        static let iid: UInt8 = 0x05, type: UInt8 = 0x04, properties: UInt8 = 0x0A, description: UInt8 = 0x0B
        static let format: UInt8 = 0x0C, range: UInt8 = 0x0D, step: UInt8 = 0x0E
        static let validValues: UInt8 = 0x11, validValuesRanges: UInt8 = 0x12
    }

    // MARK: Decoding

    /// Reads the body of a 0x09 response. Fields a later HAP may add are skipped; a missing
    /// iid or type, a malformed TLV, a field of the wrong size or no accessory list at all is
    /// an error.
    public static func decode(_ bytes: [UInt8]) throws(CoAPCodecError) -> ThreadAttributeDatabase {
        let items = try HAPBLETLV.decode(bytes, context: "attribute database")
        guard items.contains(where: { $0.type == Tag.accessories }) else {
            throw .badTLV("attribute database: no accessory list (0x18)")
        }
        var accessories: [Accessory] = []
        for item in items where item.type == Tag.accessories {
            for group in try list(item.value, element: Tag.accessory, context: "accessory list") {
                accessories.append(try accessory(group, index: accessories.count))
            }
        }
        return ThreadAttributeDatabase(accessories: accessories)
    }

    /// The elements of a list container: each group between separators holds one `element`.
    static func list(_ bytes: [UInt8], element: UInt8, context: String) throws(CoAPCodecError) -> [[UInt8]] {
        try HAPBLETLV.split(HAPBLETLV.decode(bytes, context: context)).map { (group) throws(CoAPCodecError) in
            guard group.count == 1, group[0].type == element else {
                throw .badTLV(
                    "\(context): an element holds \(group.map { "0x" + String($0.type, radix: 16) }), "
                        + "not one 0x\(String(element, radix: 16))")
            }
            return group[0].value
        }
    }

    static func accessory(_ bytes: [UInt8], index: Int) throws(CoAPCodecError) -> Accessory {
        let context = "accessory #\(index)"
        var aid: UInt16?
        var services: [Service] = []
        for item in try HAPBLETLV.decode(bytes, context: context) {
            switch item.type {
            case Tag.aid: aid = try u16(item.value, "\(context) aid")
            case Tag.services:
                for group in try list(item.value, element: Tag.service, context: "\(context) services") {
                    services.append(try service(group, context: "\(context) service #\(services.count)"))
                }
            default: continue
            }
        }
        guard let aid else { throw .badTLV("\(context) has no aid (0x1A)") }
        return Accessory(aid: aid, services: services)
    }

    static func service(_ bytes: [UInt8], context: String) throws(CoAPCodecError) -> Service {
        var iid: UInt16?
        var type: String?
        var properties: UInt16?
        var linked: [UInt16]?
        var characteristics: [Characteristic] = []
        for item in try HAPBLETLV.decode(bytes, context: context) {
            switch item.type {
            case Tag.serviceIID: iid = try u16(item.value, "\(context) iid")
            case Tag.serviceType: type = try uuid(item.value, "\(context) type")
            case Tag.serviceProperties: properties = try u16(item.value, "\(context) properties")
            case Tag.linked:
                guard item.value.count % 2 == 0 else {
                    throw .badTLV("\(context): linked services of \(item.value.count) bytes, not u16s")
                }
                linked = stride(from: 0, to: item.value.count, by: 2).map {
                    UInt16(item.value[$0]) | UInt16(item.value[$0 + 1]) << 8
                }
            case Tag.characteristics:
                for group in try list(item.value, element: Tag.characteristic, context: "\(context) characteristics") {
                    characteristics.append(
                        try characteristic(group, context: "\(context) characteristic #\(characteristics.count)"))
                }
            default: continue
            }
        }
        guard let iid, let type else { throw .badTLV("\(context) lacks its iid (0x07) or type (0x06)") }
        return Service(
            type: type, iid: iid, properties: properties, linkedServices: linked, characteristics: characteristics)
    }

    static func characteristic(_ bytes: [UInt8], context: String) throws(CoAPCodecError) -> Characteristic {
        var iid: UInt16?
        var type: String?
        var c = Characteristic(type: "", iid: 0, properties: 0)
        for item in try HAPBLETLV.decode(bytes, context: context) {
            switch item.type {
            case Tag.iid: iid = try u16(item.value, "\(context) iid")
            case Tag.type: type = try uuid(item.value, "\(context) type")
            case Tag.properties: c.properties = try u16(item.value, "\(context) properties")
            case Tag.description:
                guard let s = String(validating: item.value, as: UTF8.self) else {
                    throw .badTLV("\(context): description is not UTF-8")
                }
                c.userDescription = s
            case Tag.format:
                guard item.value.count == 7 else {
                    throw .badTLV("\(context): presentation format of \(item.value.count) bytes, not 7")
                }
                c.presentationFormat = item.value
            case Tag.range: c.validRange = item.value
            case Tag.step: c.step = item.value
            case Tag.validValues: c.validValues = item.value
            case Tag.validValuesRanges: c.validValuesRanges = item.value
            default: continue
            }
        }
        guard let iid, let type else { throw .badTLV("\(context) lacks its iid (0x05) or type (0x04)") }
        c.iid = iid
        c.type = type
        return c
    }

    /// A u16 sent in 1 or 2 little-endian bytes.
    static func u16(_ b: [UInt8], _ what: String) throws(CoAPCodecError) -> UInt16 {
        guard (1...2).contains(b.count) else { throw .badTLV("\(what) is \(b.count) bytes, not a u16") }
        return UInt16(HAPBLEValue.littleEndian(b))
    }

    /// A type UUID: 16 bytes little-endian, or 1-4 bytes, the short form of Apple's base UUID.
    static func uuid(_ b: [UInt8], _ what: String) throws(CoAPCodecError) -> String {
        switch b.count {
        case 1...4: return StandardUUID.longForm(String(HAPBLEValue.littleEndian(b), radix: 16, uppercase: true))
        case 16:
            let hex = b.reversed().map { ($0 < 16 ? "0" : "") + String($0, radix: 16, uppercase: true) }.joined()
            return HAPAccessoryJSON.normalizeType(hex)
        default: throw .badTLV("\(what) is a \(b.count)-byte UUID, not 1-4 or 16 bytes")
        }
    }

    // MARK: Encoding

    /// The body of a 0x09 response for this tree.
    public func encoded() -> [UInt8] {
        let list = HAPBLETLV.joined(
            accessories.map { a in
                var inner: [UInt8] = []
                HAPBLETLV.append(Tag.aid, Self.le16(a.aid), to: &inner)
                HAPBLETLV.append(Tag.services, HAPBLETLV.joined(a.services.map(Self.encode)), to: &inner)
                var element: [UInt8] = []
                HAPBLETLV.append(Tag.accessory, inner, to: &element)
                return element
            })
        var out: [UInt8] = []
        HAPBLETLV.append(Tag.accessories, list, to: &out)
        return out
    }

    static func encode(_ s: Service) -> [UInt8] {
        var inner: [UInt8] = []
        HAPBLETLV.append(Tag.serviceIID, le16(s.iid), to: &inner)
        HAPBLETLV.append(Tag.serviceType, uuidBytes(s.type), to: &inner)
        if let p = s.properties { HAPBLETLV.append(Tag.serviceProperties, le16(p), to: &inner) }
        if let l = s.linkedServices { HAPBLETLV.append(Tag.linked, l.flatMap(le16), to: &inner) }
        HAPBLETLV.append(Tag.characteristics, HAPBLETLV.joined(s.characteristics.map(encode)), to: &inner)
        var out: [UInt8] = []
        HAPBLETLV.append(Tag.service, inner, to: &out)
        return out
    }

    static func encode(_ c: Characteristic) -> [UInt8] {
        var inner: [UInt8] = []
        HAPBLETLV.append(Tag.iid, le16(c.iid), to: &inner)
        HAPBLETLV.append(Tag.type, uuidBytes(c.type), to: &inner)
        HAPBLETLV.append(Tag.properties, le16(c.properties), to: &inner)
        let optional: [(UInt8, [UInt8]?)] = [
            (Tag.description, c.userDescription.map { Array($0.utf8) }), (Tag.format, c.presentationFormat),
            (Tag.range, c.validRange), (Tag.step, c.step), (Tag.validValues, c.validValues),
            (Tag.validValuesRanges, c.validValuesRanges),
        ]
        for case (let tag, let value?) in optional { HAPBLETLV.append(tag, value, to: &inner) }
        var out: [UInt8] = []
        HAPBLETLV.append(Tag.characteristic, inner, to: &out)
        return out
    }

    static func le16(_ v: UInt16) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8)] }

    /// Short form (fewest little-endian bytes, at least one) for Apple's base UUID, else 16 bytes.
    static func uuidBytes(_ type: String) -> [UInt8] {
        let long = StandardUUID.longForm(type)
        if let short = StandardUUID.shortForm(long), let v = UInt32(short, radix: 16) {
            var bytes = HAPBLEValue.bytesLE(UInt64(v), width: 4)
            while bytes.count > 1, bytes.last == 0 { bytes.removeLast() }
            return bytes
        }
        let hex = long.filter { $0 != "-" }
        return ([UInt8](hex: hex) ?? [UInt8](repeating: 0, count: 16)).reversed()
    }
}
