import HomeModel

/// What went wrong reading or writing HAP-over-CoAP bytes (issue 42): each case names the
/// place and the numbers, so a capture can be matched to the message. `hapError` is the same
/// failure in the gateway's terms.
public enum CoAPCodecError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Fewer bytes than a PDU header (7 for a request, 5 for a response or an event) at `offset`.
    case truncatedHeader(offset: Int, needed: Int, remaining: Int)
    /// A PDU's u16 body length runs past the end of the payload.
    case bodyPastEnd(offset: Int, length: Int, remaining: Int)
    /// A body longer than a u16 length can say (65,535 bytes).
    case bodyTooLong(length: Int)
    /// A response PDU without the response bit (control & 0x0E must be 0x02), or a request PDU
    /// whose control byte is not 0x00.
    case badControl(offset: Int, control: UInt8)
    /// A response answers a transaction other than the one asked at that place.
    case tidMismatch(index: Int, expected: UInt8, got: UInt8)
    /// A response's status byte is none of HAP-BLE's (0-6).
    case unknownStatus(tid: UInt8, status: UInt8)
    /// A request's opcode is none this codec knows.
    case unknownOpcode(offset: Int, opcode: UInt8)
    /// More or fewer responses than requests.
    case responseCount(expected: Int, got: Int)
    /// A TLV item that does not fit, a missing or malformed field of the attribute database.
    case badTLV(String)
    /// A value whose bytes do not fit its HAP format (length, UTF-8, range).
    case badValue(String)
    /// Encrypted data that no counter near the expected one opens (`tried` lists them); the
    /// session is out of step or the key is wrong.
    case counterFailure(expected: UInt64, tried: [UInt64])
    /// Encrypted data shorter than its 16-byte tag.
    case sealedTooShort(length: Int)

    public var description: String {
        switch self {
        case .truncatedHeader(let offset, let needed, let remaining):
            "PDU at byte \(offset): a header needs \(needed) bytes, \(remaining) remain"
        case .bodyPastEnd(let offset, let length, let remaining):
            "PDU at byte \(offset) claims a \(length)-byte body, \(remaining) bytes remain"
        case .bodyTooLong(let length): "a PDU body of \(length) bytes does not fit its u16 length"
        case .badControl(let offset, let control):
            "PDU at byte \(offset) has control byte 0x\(String(control, radix: 16)), not a "
                + "response's (bit 1 set, bits 2-3 clear) or a request's (0x00)"
        case .tidMismatch(let index, let expected, let got):
            "response #\(index) answers transaction \(got), not \(expected)"
        case .unknownStatus(let tid, let status): "response to transaction \(tid) has unknown status \(status)"
        case .unknownOpcode(let offset, let opcode): "request at byte \(offset) has unknown opcode \(opcode)"
        case .responseCount(let expected, let got): "\(got) responses to \(expected) requests"
        case .badTLV(let m): m
        case .badValue(let m): m
        case .counterFailure(let expected, let tried):
            "encrypted data opens with no counter near \(expected) (tried \(tried.map(String.init)))"
                + "; the session is out of step"
        case .sealedTooShort(let length): "encrypted data of \(length) bytes is shorter than its 16-byte tag"
        }
    }

    /// The failure as the HAP module reports failures to the gateway.
    public var hapError: HAPError {
        switch self {
        case .badTLV: HAPError(code: .badTLV, message: description)
        case .counterFailure, .sealedTooShort: HAPError(code: .badFrame, message: description)
        default: HAPError(code: .protocolError, message: description)
        }
    }
}
