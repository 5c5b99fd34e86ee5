internal import CCoAP
import Foundation
import Logging

#if canImport(Glibc)
    import Glibc
#endif

// A client's block-wise transfers (RFC 7959), done here rather than by libcoap. libcoap 4.3.1
// loses a Block2 body whose first block comes in a separate response: it builds the request
// for the next block from the request it still holds, and a request answered by an empty ACK is
// no longer held ("large body receive internal issue"; fixed upstream in 4.3.5, commit
// 0fbe59fc). A Thread accessory may well answer a large read late, so a client engine turns
// libcoap's block mode off and asks for the blocks itself: each block a confirmable request of
// its own (a new token, the same Uri-Path, no payload for Block2, as libcoap's own follow-ups),
// the body checked block by block and bounded.
extension CoAPEngine {
    /// One request's block-wise state, on the network thread.
    struct Transfer {
        let method: CoAPMethod
        let path: String
        let payload: [UInt8]
        let session: OpaquePointer
        /// Block1: the block size and the next block to send, while the payload goes in blocks.
        var block1Size = CoAPEngine.blockSize
        var block1Next = 0
        var payloadSent = false
        /// Block2: the body so far, the next block to ask for and its size exponent.
        var body: [UInt8] = []
        var block2Next = 0
        var block2SZX: UInt32 = 6

        var usesBlock1: Bool { payload.count > CoAPEngine.blockSize }
    }

    /// Block1 blocks of 1024 bytes (SZX 6), libcoap's size; a peer may ask for smaller ones.
    static let blockSize = 1024
    /// A body past this is refused (`CoAPError.badResponse`) rather than held.
    static let maxBody = 1 << 20

    /// Sends the transfer's next request: a Block1 block, a Block2 follow-up, or the whole.
    func transmit(_ id: UInt64) {
        guard let transfer = transfers[id], let deadline = inFlight[id]?.deadline else { return }
        let session = transfer.session
        guard let (pdu, token) = requestPDU(session, transfer.method, transfer.path) else {
            return fail(id, .sendFailed("the request does not fit in a PDU"))
        }
        var built = true
        var body: ArraySlice<UInt8> = []
        if transfer.block2Next > 0 {
            // Options in order: Block2 (23) here, Block1 (27) never with it.
            built = Self.addBlock(pdu, COAP_OPTION_BLOCK2, UInt32(transfer.block2Next), more: false, transfer.block2SZX)
        } else if transfer.usesBlock1 && !transfer.payloadSent {
            let start = transfer.block1Next * transfer.block1Size
            let end = min(start + transfer.block1Size, transfer.payload.count)
            let szx = UInt32(transfer.block1Size.trailingZeroBitCount - 4)
            built = Self.addBlock(
                pdu, COAP_OPTION_BLOCK1, UInt32(transfer.block1Next), more: end < transfer.payload.count, szx)
            // Size1 (RFC 7959 §4): the whole size, which libcoap 4.3.1 needs to join the body.
            var size = [UInt8](repeating: 0, count: 4)
            let sizeLength = coap_encode_var_safe(&size, 4, UInt32(transfer.payload.count))
            built = built && coap_add_option(pdu, coap_option_num_t(COAP_OPTION_SIZE1), Int(sizeLength), size) != 0
            body = transfer.payload[start..<end]
        } else if !transfer.payloadSent {
            body = transfer.payload[...]
        }
        if built && !body.isEmpty {
            built = body.withUnsafeBufferPointer { coap_add_data(pdu, $0.count, $0.baseAddress) } == 1
        }
        guard built else {
            coap_delete_pdu(pdu)
            return fail(id, .sendFailed("the request does not fit in a PDU"))
        }
        if let old = inFlight[id]?.key { byToken[old] = nil }
        let key = TokenKey(session: UInt(bitPattern: session), token: token)
        byToken[key] = id
        inFlight[id] = (key, deadline)
        if coap_send(session, pdu) == COAP_INVALID_MID { fail(id, .sendFailed("libcoap refused the request")) }
    }

    /// An answer to one of a transfer's requests: the next block asked for, or the whole answer.
    func receivedBlock(_ id: UInt64, _ session: OpaquePointer, _ pdu: OpaquePointer) {
        guard var transfer = transfers[id] else { return }
        let code = CoAPCode(rawValue: UInt8(truncatingIfNeeded: coap_pdu_get_code(pdu).rawValue))
        var length = 0
        var data: UnsafePointer<UInt8>?
        let bytes: [UInt8] =
            coap_get_data(pdu, &length, &data) == 1 && length > 0
            ? Array(UnsafeBufferPointer(start: data, count: length)) : []
        var block = coap_block_b_t()
        if code == CoAPCode(2, 31), transfer.usesBlock1, !transfer.payloadSent,
            coap_get_block_b(session, pdu, coap_option_num_t(COAP_OPTION_BLOCK1), &block) == 1
        {
            // 2.31 Continue: the peer has block `num` (and may want smaller ones from now on).
            let acknowledged = (Int(block.num) + 1) * transfer.block1Size
            guard block.num == transfer.block1Next, acknowledged < transfer.payload.count else {
                return fail(id, .badResponse("2.31 Continue for block \(block.num)"))
            }
            transfer.block1Size = min(transfer.block1Size, 16 << Int(block.szx))
            transfer.block1Next = acknowledged / transfer.block1Size
            transfers[id] = transfer
            return transmit(id)
        }
        transfer.payloadSent = true
        if code.isSuccess, coap_get_block_b(session, pdu, coap_option_num_t(COAP_OPTION_BLOCK2), &block) == 1 {
            guard Int(block.num) == transfer.block2Next else {
                return fail(id, .badResponse("Block2 block \(block.num) where \(transfer.block2Next) was asked for"))
            }
            transfer.body += bytes
            guard transfer.body.count <= Self.maxBody else {
                return fail(id, .badResponse("a body larger than \(Self.maxBody) bytes"))
            }
            if block.m == 1 {
                transfer.block2Next += 1
                transfer.block2SZX = UInt32(block.szx)
                transfers[id] = transfer
                return transmit(id)
            }
            return finish(id, .success(CoAPResponse(code: code, payload: transfer.body)))
        }
        finish(id, .success(CoAPResponse(code: code, payload: transfer.body.isEmpty ? bytes : transfer.body)))
    }

    private func fail(_ id: UInt64, _ error: CoAPError) { finish(id, .failure(error)) }

    private func finish(_ id: UInt64, _ outcome: Outcome) {
        forget(id)
        complete(id, outcome)
    }

    private static func addBlock(
        _ pdu: OpaquePointer, _ option: Int32, _ num: UInt32, more: Bool, _ szx: UInt32
    ) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 4)
        let length = coap_encode_var_safe(&buffer, 4, num << 4 | (more ? 8 : 0) | szx)
        return coap_add_option(pdu, coap_option_num_t(option), Int(length), buffer) != 0
    }
}
