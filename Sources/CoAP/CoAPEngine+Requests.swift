internal import CCoAP
import Foundation
import Logging

#if canImport(Glibc)
    import Glibc
#endif

// Our requests, on the network thread: the session per peer, the PDU (token, Uri-Path, payload
// with Block1 if large), and the answers libcoap hands back (piggybacked, separate, Block2
// reassembled) or its NACKs (no ACK after the retransmissions, a reset, ICMP).
extension CoAPEngine {
    func send(
        id: UInt64, method: CoAPMethod, peer: CoAPPeer, path: String, payload: [UInt8],
        deadline: ContinuousClock.Instant
    ) {
        guard let session = session(for: peer) else {
            complete(id, .failure(.badAddress(peer.host)))
            return
        }
        if !libcoapBlocks {
            transfers[id] = Transfer(method: method, path: path, payload: payload, session: session)
            inFlight[id] = (TokenKey(session: 0, token: []), deadline)
            return transmit(id)
        }
        guard let (pdu, token) = requestPDU(session, method, path) else {
            complete(id, .failure(.sendFailed("the request does not fit in a PDU")))
            return
        }
        // libcoap keeps the body until its last block is sent, then calls the release (on a
        // failure too, so the copy is never freed here).
        if !payload.isEmpty {
            let copy = Self.copy(payload)
            guard coap_add_data_large_request(session, pdu, payload.count, copy, coapRelease, copy) == 1 else {
                coap_delete_pdu(pdu)
                complete(id, .failure(.sendFailed("the request does not fit in a PDU")))
                return
            }
        }
        let key = TokenKey(session: UInt(bitPattern: session), token: token)
        byToken[key] = id
        inFlight[id] = (key, deadline)
        if coap_send(session, pdu) == COAP_INVALID_MID {
            forget(id)
            complete(id, .failure(.sendFailed("libcoap refused the request")))
        }
    }

    /// A confirmable request PDU with a new token and `path` as Uri-Path options (options after
    /// those, then the payload, are the caller's), or nil if it does not fit.
    func requestPDU(_ session: OpaquePointer, _ method: CoAPMethod, _ path: String) -> (OpaquePointer, [UInt8])? {
        let code = coap_pdu_code_t(rawValue: coap_pdu_code_t.RawValue(method.rawValue))
        guard
            let pdu = coap_pdu_init(
                COAP_MESSAGE_CON, code, coap_mid_t(coap_new_message_id(session)), coap_session_max_pdu_size(session))
        else { return nil }
        var token = [UInt8](repeating: 0, count: 8)
        var length = 0
        coap_session_new_token(session, &length, &token)
        token = Array(token.prefix(length))
        var built = coap_add_token(pdu, length, token) == 1
        for segment in path.split(separator: "/", omittingEmptySubsequences: true) where built {
            let bytes = Array(segment.utf8)
            built = coap_add_option(pdu, coap_option_num_t(COAP_OPTION_URI_PATH), bytes.count, bytes) != 0
        }
        guard built else {
            coap_delete_pdu(pdu)
            return nil
        }
        return (pdu, token)
    }

    /// The session requests to `peer` go on: the server session it wrote to us on (so they
    /// leave from the port it knows), else our client session to it, made on first use.
    func session(for peer: CoAPPeer) -> OpaquePointer? {
        if let session = serverSessions[peer] ?? clientSessions[peer] { return session }
        var address = coap_address_t()
        guard hm_coap_address_set(&address, peer.host, peer.port) == 1,
            let session = coap_new_client_session(context, nil, &address, COAP_PROTO_UDP)
        else { return nil }
        applyTransmission(session)
        clientSessions[peer] = session
        return session
    }

    func applyTransmission(_ session: OpaquePointer) {
        let transmission = transmission.effective
        coap_session_set_ack_timeout(session, Self.fixed(transmission.ackTimeout))
        coap_session_set_ack_random_factor(session, Self.fixed(transmission.ackRandomFactor))
        coap_session_set_max_retransmit(session, transmission.maxRetransmit)
        coap_session_set_nstart(session, transmission.nstart)
    }

    static func fixed(_ value: Double) -> coap_fixed_point_t {
        let whole = max(0, value.rounded(.down))
        return coap_fixed_point_t(
            integer_part: UInt16(min(whole, 65535)), fractional_part: UInt16(((value - whole) * 1000).rounded()))
    }

    static func copy(_ bytes: [UInt8]) -> UnsafeMutablePointer<UInt8> {
        let copy = malloc(max(bytes.count, 1))!.assumingMemoryBound(to: UInt8.self)
        bytes.withUnsafeBufferPointer { copy.update(from: $0.baseAddress!, count: bytes.count) }
        return copy
    }

    static func peer(of session: OpaquePointer) -> CoAPPeer {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        let port = hm_coap_address_get(coap_session_get_addr_remote(session), &buffer, socklen_t(buffer.count))
        let host = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        return CoAPPeer(host: String(decoding: host, as: UTF8.self), port: port)
    }

    static func token(of pdu: OpaquePointer) -> [UInt8] {
        let token = coap_pdu_get_token(pdu)
        guard token.length > 0, let bytes = token.s else { return [] }
        return Array(UnsafeBufferPointer(start: bytes, count: token.length))
    }

    /// The whole body of a PDU (libcoap has reassembled its blocks: SINGLE_BODY).
    static func body(of pdu: OpaquePointer) -> [UInt8] {
        var length = 0
        var data: UnsafePointer<UInt8>?
        var offset = 0
        var total = 0
        guard coap_get_data_large(pdu, &length, &data, &offset, &total) == 1, let data, length > 0 else { return [] }
        return Array(UnsafeBufferPointer(start: data, count: length))
    }

    // MARK: libcoap's callbacks

    func received(_ session: OpaquePointer, _ pdu: OpaquePointer) -> coap_response_t {
        let key = TokenKey(session: UInt(bitPattern: session), token: Self.token(of: pdu))
        guard let id = byToken[key] else {
            // A late answer (deadline passed, cancelled) or a token we never sent.
            logger.debug(
                "CoAP response with a token not in flight, rejected",
                metadata: ["peer": "\(Self.peer(of: session))"])
            return COAP_RESPONSE_FAIL
        }
        if !libcoapBlocks {
            receivedBlock(id, session, pdu)
            return COAP_RESPONSE_OK
        }
        forget(id)
        let code = CoAPCode(rawValue: UInt8(truncatingIfNeeded: coap_pdu_get_code(pdu).rawValue))
        complete(id, .success(CoAPResponse(code: code, payload: Self.body(of: pdu))))
        return COAP_RESPONSE_OK
    }

    func notAcknowledged(_ session: OpaquePointer, _ sent: OpaquePointer?, _ reason: coap_nack_reason_t) {
        guard let sent else { return }
        let key = TokenKey(session: UInt(bitPattern: session), token: Self.token(of: sent))
        guard let id = byToken[key] else { return }
        forget(id)
        let error: CoAPError =
            switch reason {
            case COAP_NACK_TOO_MANY_RETRIES: .noAcknowledgement
            case COAP_NACK_RST: .reset
            case COAP_NACK_ICMP_ISSUE, COAP_NACK_NOT_DELIVERABLE: .unreachable
            default: .sendFailed("libcoap NACK \(reason.rawValue)")
            }
        logger.debug("CoAP request not answered", metadata: ["peer": "\(Self.peer(of: session))", "error": "\(error)"])
        complete(id, .failure(error))
    }
}

/// Frees a body libcoap has finished sending (`coap_add_data_large_*`).
let coapRelease: coap_release_large_data_t = { _, pointer in free(pointer) }

func coapEngine(_ session: OpaquePointer?) -> CoAPEngine? {
    guard let session, let context = coap_session_get_context(session), let data = coap_get_app_data(context) else {
        return nil
    }
    return Unmanaged<CoAPEngine>.fromOpaque(data).takeUnretainedValue()
}

let coapResponseHandler: coap_response_handler_t = { session, _, received, _ in
    guard let session, let received, let engine = coapEngine(session) else { return COAP_RESPONSE_FAIL }
    return engine.received(session, received)
}

let coapNackHandler: coap_nack_handler_t = { session, sent, reason, _ in
    guard let session, let engine = coapEngine(session) else { return }
    engine.notAcknowledged(session, sent, reason)
}
