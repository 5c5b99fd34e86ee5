/// HAP's TLV8: one byte type, one byte length, value. Values over 255 bytes are fragmented into
/// consecutive items of the same type; a separator item (type 0xFF, length 0) splits a list of
/// records (as in the pairings list).
public struct TLV8: Sendable, Hashable {
    public struct Item: Sendable, Hashable {
        public var type: UInt8
        public var value: [UInt8]
        public init(_ type: UInt8, _ value: [UInt8]) {
            self.type = type
            self.value = value
        }
    }

    public var items: [Item]

    public init(_ items: [Item] = []) { self.items = items }

    public static let separatorType: UInt8 = 0xFF

    /// Appends a value (fragmented on encode when longer than 255 bytes).
    public mutating func append(_ type: UInt8, _ value: [UInt8]) { items.append(Item(type, value)) }
    public mutating func append(_ type: UInt8, byte: UInt8) { items.append(Item(type, [byte])) }
    public mutating func appendSeparator() { items.append(Item(Self.separatorType, [])) }

    /// The first value of `type`.
    public subscript(type: UInt8) -> [UInt8]? { items.first { $0.type == type }?.value }

    public func encoded() -> [UInt8] {
        var out: [UInt8] = []
        for item in items {
            if item.value.isEmpty {
                out.append(item.type)
                out.append(0)
                continue
            }
            var offset = 0
            while offset < item.value.count {
                let n = min(255, item.value.count - offset)
                out.append(item.type)
                out.append(UInt8(n))
                out.append(contentsOf: item.value[offset..<offset + n])
                offset += n
            }
        }
        return out
    }

    /// Decodes, joining fragments: an item of the same type right after a 255-byte item continues it.
    public static func decode(_ bytes: [UInt8]) throws(HAPError) -> TLV8 {
        var items: [Item] = []
        var i = 0
        var lastWasFullFragment = false
        while i < bytes.count {
            guard i + 1 < bytes.count else {
                throw .badTLV("TLV8 item at offset \(i) has a type but no length")
            }
            let type = bytes[i]
            let length = Int(bytes[i + 1])
            guard i + 2 + length <= bytes.count else {
                throw .badTLV(
                    "TLV8 item of type \(type) at offset \(i) claims \(length) bytes but only \(bytes.count - i - 2) remain"
                )
            }
            let value = bytes[(i + 2)..<(i + 2 + length)]
            if lastWasFullFragment, let last = items.last, last.type == type {
                items[items.count - 1].value.append(contentsOf: value)
            } else {
                items.append(Item(type, Array(value)))
            }
            lastWasFullFragment = length == 255
            i += 2 + length
        }
        return TLV8(items)
    }

    /// Splits on separators into records.
    public func records() -> [TLV8] {
        var result: [TLV8] = []
        var current = TLV8()
        for item in items {
            if item.type == Self.separatorType {
                result.append(current)
                current = TLV8()
            } else {
                current.items.append(item)
            }
        }
        if !current.items.isEmpty || result.isEmpty { result.append(current) }
        return result
    }
}

/// TLV types used by pairing (HAP spec table 5-6).
public enum TLVType {
    public static let method: UInt8 = 0x00
    public static let identifier: UInt8 = 0x01
    public static let salt: UInt8 = 0x02
    public static let publicKey: UInt8 = 0x03
    public static let proof: UInt8 = 0x04
    public static let encryptedData: UInt8 = 0x05
    public static let state: UInt8 = 0x06
    public static let error: UInt8 = 0x07
    public static let retryDelay: UInt8 = 0x08
    public static let signature: UInt8 = 0x0A
    public static let permissions: UInt8 = 0x0B
    public static let flags: UInt8 = 0x13
    public static let separator: UInt8 = 0xFF
}
