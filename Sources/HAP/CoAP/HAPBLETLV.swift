// HAP-BLE's TLVs, as HAP over CoAP carries them: the parameters of a PDU body (value, TTL, …)
// and the nested containers of the attribute database. The item format is TLV8's, but lists are
// split by type-0x00 separators (TLV8's pairing lists use 0xFF), and decoding reports
// `CoAPCodecError`.

/// The parameter types of a PDU body (HAP-BLE's `kTLVHAPParam…`, aiohomekit's `HAP_TLV`).
public enum HAPBLEParam {
    public static let separator: UInt8 = 0x00
    public static let value: UInt8 = 0x01
    public static let additionalAuthorizationData: UInt8 = 0x02
    public static let origin: UInt8 = 0x03
    /// Timed write: how long the write stays valid, in 100 ms units (u8).
    public static let ttl: UInt8 = 0x08
    /// A write that wants the characteristic's value back (HAP's `wr`).
    public static let returnResponse: UInt8 = 0x09
}

/// One TLV item with its fragments joined: TLV8's item (the format is the same).
public typealias HAPBLETLVItem = TLV8.Item

public enum HAPBLETLV {
    /// Decodes items, joining fragments: an item of the same type right after a 255-byte item
    /// continues it (as aiohomekit and HAP-BLE read them). An item that runs past the end is
    /// an error, never read short.
    public static func decode(_ bytes: ArraySlice<UInt8>, context: String) throws(CoAPCodecError) -> [HAPBLETLVItem] {
        switch TLV8.scan(bytes) {
        case .success(let items): return items
        case .failure(.noLength(let offset)):
            throw .badTLV("\(context): TLV item at byte \(offset) has a type but no length")
        case .failure(.overrun(let offset, let type, let claims, let remain)):
            throw .badTLV(
                "\(context): TLV item of type 0x\(String(type, radix: 16)) at byte \(offset) "
                    + "claims \(claims) bytes, \(remain) remain")
        }
    }

    public static func decode(_ bytes: [UInt8], context: String) throws(CoAPCodecError) -> [HAPBLETLVItem] {
        try decode(bytes[...], context: context)
    }

    /// Encodes items, splitting values over 255 bytes into fragments of the same type.
    public static func encode(_ items: [HAPBLETLVItem]) -> [UInt8] {
        var out: [UInt8] = []
        for item in items { append(item.type, item.value, to: &out) }
        return out
    }

    static func append(_ type: UInt8, _ value: [UInt8], to out: inout [UInt8]) {
        TLV8.append(type, value, to: &out)
    }

    /// A list's elements: the items between type-0x00 separators, each one TLV group.
    static func split(_ items: [HAPBLETLVItem]) -> [[HAPBLETLVItem]] {
        var groups: [[HAPBLETLVItem]] = [[]]
        for item in items {
            if item.type == HAPBLEParam.separator {
                groups.append([])
            } else {
                groups[groups.count - 1].append(item)
            }
        }
        return groups.filter { !$0.isEmpty }
    }

    /// A list encoded: each element's bytes, separated by an empty type-0x00 item.
    static func joined(_ elements: [[UInt8]]) -> [UInt8] {
        var out: [UInt8] = []
        for (i, e) in elements.enumerated() {
            if i > 0 { out += [HAPBLEParam.separator, 0] }
            out += e
        }
        return out
    }
}

/// A PDU body's parameters: what read, write, timed-write and event bodies carry.
public struct HAPBLEBody: Sendable, Hashable {
    public var value: [UInt8]?
    public var additionalAuthorizationData: [UInt8]?
    /// Timed write TTL in 100 ms units.
    public var ttl: UInt8?
    public var returnResponse: Bool

    public init(
        value: [UInt8]? = nil, additionalAuthorizationData: [UInt8]? = nil, ttl: UInt8? = nil,
        returnResponse: Bool = false
    ) {
        self.value = value
        self.additionalAuthorizationData = additionalAuthorizationData
        self.ttl = ttl
        self.returnResponse = returnResponse
    }

    /// The parameters in HAP-BLE's order: value, AAD, TTL, return-response.
    public func encoded() -> [UInt8] {
        var items: [HAPBLETLVItem] = []
        if let value { items.append(HAPBLETLVItem(HAPBLEParam.value, value)) }
        if let additionalAuthorizationData {
            items.append(HAPBLETLVItem(HAPBLEParam.additionalAuthorizationData, additionalAuthorizationData))
        }
        if let ttl { items.append(HAPBLETLVItem(HAPBLEParam.ttl, [ttl])) }
        if returnResponse { items.append(HAPBLETLVItem(HAPBLEParam.returnResponse, [1])) }
        return HAPBLETLV.encode(items)
    }

    /// Reads a body; an empty body has no parameters. Unknown parameters are skipped (later
    /// HAP versions add some), a malformed TLV is an error.
    public static func decode(_ bytes: [UInt8]) throws(CoAPCodecError) -> HAPBLEBody {
        var body = HAPBLEBody()
        for item in try HAPBLETLV.decode(bytes, context: "PDU body") {
            switch item.type {
            case HAPBLEParam.value: body.value = item.value
            case HAPBLEParam.additionalAuthorizationData: body.additionalAuthorizationData = item.value
            case HAPBLEParam.ttl:
                guard item.value.count == 1 else { throw .badTLV("PDU body: TTL of \(item.value.count) bytes, not 1") }
                body.ttl = item.value[0]
            case HAPBLEParam.returnResponse: body.returnResponse = item.value.first.map { $0 != 0 } ?? false
            default: continue
            }
        }
        return body
    }
}
