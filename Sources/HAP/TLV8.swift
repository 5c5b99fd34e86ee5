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
        for item in items { Self.append(item.type, item.value, to: &out) }
        return out
    }

    /// Writes one item, fragmented into consecutive items of its type past 255 bytes (HAP-BLE's
    /// TLVs are written the same way).
    static func append(_ type: UInt8, _ value: [UInt8], to out: inout [UInt8]) {
        if value.isEmpty {
            out += [type, 0]
            return
        }
        var offset = 0
        while offset < value.count {
            let n = min(255, value.count - offset)
            out += [type, UInt8(n)]
            out += value[offset..<offset + n]
            offset += n
        }
    }

    /// Decodes, joining fragments: an item of the same type right after a 255-byte item continues it.
    public static func decode(_ bytes: [UInt8]) throws(HAPError) -> TLV8 {
        switch scan(bytes[...]) {
        case .success(let items): return TLV8(items)
        case .failure(.noLength(let offset)): throw .badTLV("TLV8 item at offset \(offset) has a type but no length")
        case .failure(.overrun(let offset, let type, let claims, let remain)):
            throw .badTLV(
                "TLV8 item of type \(type) at offset \(offset) claims \(claims) bytes but only \(remain) remain")
        }
    }

    /// Where a TLV's bytes stop making sense, for each reader to say in its own words.
    enum ScanFault: Error {
        /// An item's type is the last byte.
        case noLength(offset: Int)
        /// An item claims more bytes than remain.
        case overrun(offset: Int, type: UInt8, claims: Int, remain: Int)
    }

    /// The items of `bytes`, fragments joined; an item that runs past the end is a fault, never
    /// read short. Offsets count from the slice's start.
    static func scan(_ bytes: ArraySlice<UInt8>) -> Result<[Item], ScanFault> {
        var items: [Item] = []
        var i = bytes.startIndex
        var lastWasFullFragment = false
        while i < bytes.endIndex {
            guard i + 1 < bytes.endIndex else { return .failure(.noLength(offset: i - bytes.startIndex)) }
            let type = bytes[i]
            let length = Int(bytes[i + 1])
            guard i + 2 + length <= bytes.endIndex else {
                return .failure(
                    .overrun(offset: i - bytes.startIndex, type: type, claims: length, remain: bytes.endIndex - i - 2))
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
        return .success(items)
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
