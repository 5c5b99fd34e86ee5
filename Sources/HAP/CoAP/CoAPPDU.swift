// HAP-over-CoAP PDUs (issue 42): what a controller POSTs to an accessory's `/` resource once
// the session is encrypted, and what comes back. Several PDUs travel in one payload, each
// request with its own transaction id (TID); the responses come back in the same order. The
// layout is HAP-BLE's, with the u16 body length always present (aiohomekit's `pdu.py`).

/// The operations of a request PDU.
public enum CoAPOpcode: UInt8, Sendable, Hashable, CaseIterable {
    case characteristicSignatureRead = 0x01
    case characteristicWrite = 0x02
    case characteristicRead = 0x03
    case characteristicTimedWrite = 0x04
    case characteristicExecuteWrite = 0x05
    case serviceSignatureRead = 0x06
    /// The whole attribute database (IID 0); the body of the answer is `ThreadAttributeDatabase`.
    case attributeDatabaseRead = 0x09
    case subscribe = 0x0B
    case unsubscribe = 0x0C
}

/// A response PDU's status (HAP-BLE's statuses, 0-6).
public enum CoAPPDUStatus: UInt8, Sendable, Hashable, CaseIterable {
    case success = 0
    case unsupportedPDU = 1
    case maxProcedures = 2
    case insufficientAuthorization = 3
    case invalidInstanceID = 4
    case insufficientAuthentication = 5
    case invalidRequest = 6
}

/// A request: control 0x00, opcode, TID, IID (u16 LE), body length (u16 LE), body.
public struct CoAPRequestPDU: Sendable, Hashable {
    public var opcode: CoAPOpcode
    public var tid: UInt8
    public var iid: UInt16
    public var body: [UInt8]

    public init(_ opcode: CoAPOpcode, tid: UInt8, iid: UInt16, body: [UInt8] = []) {
        self.opcode = opcode
        self.tid = tid
        self.iid = iid
        self.body = body
    }

    /// Reads one characteristic.
    public static func read(iid: UInt16, tid: UInt8) -> Self { Self(.characteristicRead, tid: tid, iid: iid) }

    /// Writes `value` (already in the characteristic's HAP-BLE encoding, see `HAPBLEValue`).
    public static func write(iid: UInt16, tid: UInt8, value: [UInt8], returnResponse: Bool = false) -> Self {
        Self(
            .characteristicWrite, tid: tid, iid: iid,
            body: HAPBLEBody(value: value, returnResponse: returnResponse).encoded())
    }

    /// The first half of a timed write: the value and how long it stays valid (100 ms units).
    public static func timedWrite(iid: UInt16, tid: UInt8, value: [UInt8], ttl: UInt8) -> Self {
        Self(.characteristicTimedWrite, tid: tid, iid: iid, body: HAPBLEBody(value: value, ttl: ttl).encoded())
    }

    /// The second half: carry out the timed write prepared on `iid`.
    public static func executeWrite(iid: UInt16, tid: UInt8) -> Self {
        Self(.characteristicExecuteWrite, tid: tid, iid: iid)
    }

    /// The whole attribute database; HAP over CoAP asks it of IID 0.
    public static func attributeDatabase(tid: UInt8) -> Self { Self(.attributeDatabaseRead, tid: tid, iid: 0) }

    public static func subscribe(iid: UInt16, tid: UInt8) -> Self { Self(.subscribe, tid: tid, iid: iid) }
    public static func unsubscribe(iid: UInt16, tid: UInt8) -> Self { Self(.unsubscribe, tid: tid, iid: iid) }

    public func encoded() throws(CoAPCodecError) -> [UInt8] {
        guard body.count <= Int(UInt16.max) else { throw .bodyTooLong(length: body.count) }
        let n = UInt16(body.count)
        return [0x00, opcode.rawValue, tid, UInt8(iid & 0xFF), UInt8(iid >> 8), UInt8(n & 0xFF), UInt8(n >> 8)] + body
    }

    /// Several requests in one payload.
    public static func encode(_ requests: [CoAPRequestPDU]) throws(CoAPCodecError) -> [UInt8] {
        var out: [UInt8] = []
        for r in requests { out += try r.encoded() }
        return out
    }

    /// The requests of a payload (what an accessory, such as the simulator's, reads).
    public static func decodeAll(_ bytes: [UInt8]) throws(CoAPCodecError) -> [CoAPRequestPDU] {
        var out: [CoAPRequestPDU] = []
        var i = 0
        while i < bytes.count {
            guard bytes.count - i >= 7 else {
                throw .truncatedHeader(offset: i, needed: 7, remaining: bytes.count - i)
            }
            guard bytes[i] == 0x00 else { throw .badControl(offset: i, control: bytes[i]) }
            guard let opcode = CoAPOpcode(rawValue: bytes[i + 1]) else {
                throw .unknownOpcode(offset: i, opcode: bytes[i + 1])
            }
            let iid = UInt16(bytes[i + 3]) | UInt16(bytes[i + 4]) << 8
            let length = Int(bytes[i + 5]) | Int(bytes[i + 6]) << 8
            guard bytes.count - i - 7 >= length else {
                throw .bodyPastEnd(offset: i, length: length, remaining: bytes.count - i - 7)
            }
            out.append(
                CoAPRequestPDU(opcode, tid: bytes[i + 2], iid: iid, body: Array(bytes[(i + 7)..<(i + 7 + length)])))
            i += 7 + length
        }
        return out
    }
}

/// A response: control (response bit set), TID, status, body length (u16 LE), body.
public struct CoAPResponsePDU: Sendable, Hashable {
    public var tid: UInt8
    public var status: CoAPPDUStatus
    public var body: [UInt8]

    public init(tid: UInt8, status: CoAPPDUStatus = .success, body: [UInt8] = []) {
        self.tid = tid
        self.status = status
        self.body = body
    }

    /// The body's value parameter (a read's answer); nil when the body has none.
    public func value() throws(CoAPCodecError) -> [UInt8]? { try HAPBLEBody.decode(body).value }

    public func encoded() throws(CoAPCodecError) -> [UInt8] {
        guard body.count <= Int(UInt16.max) else { throw .bodyTooLong(length: body.count) }
        let n = UInt16(body.count)
        return [0x02, tid, status.rawValue, UInt8(n & 0xFF), UInt8(n >> 8)] + body
    }

    public static func encode(_ responses: [CoAPResponsePDU]) throws(CoAPCodecError) -> [UInt8] {
        var out: [UInt8] = []
        for r in responses { out += try r.encoded() }
        return out
    }

    /// The responses of a payload, framing checked: a short header, a body past the end, a
    /// control byte without the response bit or an unknown status is an error. An empty
    /// payload has no responses.
    public static func decodeAll(_ bytes: [UInt8]) throws(CoAPCodecError) -> [CoAPResponsePDU] {
        var out: [CoAPResponsePDU] = []
        var i = 0
        while i < bytes.count {
            guard bytes.count - i >= 5 else {
                throw .truncatedHeader(offset: i, needed: 5, remaining: bytes.count - i)
            }
            // aiohomekit's check: bit 1 (response) set, bits 2-3 (fragment, …) clear.
            guard bytes[i] & 0b0000_1110 == 0b0000_0010 else { throw .badControl(offset: i, control: bytes[i]) }
            let tid = bytes[i + 1]
            guard let status = CoAPPDUStatus(rawValue: bytes[i + 2]) else {
                throw .unknownStatus(tid: tid, status: bytes[i + 2])
            }
            let length = Int(bytes[i + 3]) | Int(bytes[i + 4]) << 8
            guard bytes.count - i - 5 >= length else {
                throw .bodyPastEnd(offset: i, length: length, remaining: bytes.count - i - 5)
            }
            out.append(CoAPResponsePDU(tid: tid, status: status, body: Array(bytes[(i + 5)..<(i + 5 + length)])))
            i += 5 + length
        }
        return out
    }

    /// The responses to `requests`, one each, in order, each answering its request's TID.
    public static func decode(_ bytes: [UInt8], answering requests: [CoAPRequestPDU]) throws(CoAPCodecError)
        -> [CoAPResponsePDU]
    {
        let responses = try decodeAll(bytes)
        guard responses.count == requests.count else {
            throw .responseCount(expected: requests.count, got: responses.count)
        }
        for (index, (request, response)) in zip(requests, responses).enumerated() where request.tid != response.tid {
            throw .tidMismatch(index: index, expected: request.tid, got: response.tid)
        }
        return responses
    }
}

/// An event: what an accessory PUTs to the controller's `/` when a subscribed characteristic
/// changes (one byte aiohomekit ignores, IID u16 LE, body length u16 LE, body with the value).
public struct CoAPEventPDU: Sendable, Hashable {
    public var iid: UInt16
    public var body: [UInt8]

    public init(iid: UInt16, body: [UInt8]) {
        self.iid = iid
        self.body = body
    }

    public func encoded() throws(CoAPCodecError) -> [UInt8] {
        guard body.count <= Int(UInt16.max) else { throw .bodyTooLong(length: body.count) }
        let n = UInt16(body.count)
        return [0x00, UInt8(iid & 0xFF), UInt8(iid >> 8), UInt8(n & 0xFF), UInt8(n >> 8)] + body
    }

    public static func decodeAll(_ bytes: [UInt8]) throws(CoAPCodecError) -> [CoAPEventPDU] {
        var out: [CoAPEventPDU] = []
        var i = 0
        while i < bytes.count {
            guard bytes.count - i >= 5 else {
                throw .truncatedHeader(offset: i, needed: 5, remaining: bytes.count - i)
            }
            let iid = UInt16(bytes[i + 1]) | UInt16(bytes[i + 2]) << 8
            let length = Int(bytes[i + 3]) | Int(bytes[i + 4]) << 8
            guard bytes.count - i - 5 >= length else {
                throw .bodyPastEnd(offset: i, length: length, remaining: bytes.count - i - 5)
            }
            out.append(CoAPEventPDU(iid: iid, body: Array(bytes[(i + 5)..<(i + 5 + length)])))
            i += 5 + length
        }
        return out
    }
}
