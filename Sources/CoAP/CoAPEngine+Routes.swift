internal import CCoAP
import Foundation
import Logging

#if canImport(Glibc)
    import Glibc
#endif

// Requests peers send us, on the network thread: the route's answer piggybacked, or an empty
// ACK and a separate response once the server's `run()` has the answer (libcoap's async: the
// request is kept and the route called again when triggered). Large answers go by Block2
// (libcoap serves the later blocks itself).
extension CoAPEngine {
    func serve(
        _ resource: OpaquePointer, _ session: OpaquePointer, _ request: OpaquePointer,
        _ query: UnsafePointer<coap_string_t>?,
        _ response: OpaquePointer
    ) {
        let token = Self.token(of: request)
        // The second call for a separate answer: libcoap frees the async entry after it.
        let tokenBytes = token
        let async = tokenBytes.withUnsafeBufferPointer { buffer in
            coap_find_async(session, coap_bin_const_t(length: buffer.count, s: buffer.baseAddress))
        }
        if let async {
            let id = UInt64(UInt(bitPattern: coap_async_get_app_data(async)))
            let answer = separateAnswers.removeValue(forKey: id) ?? CoAPResponse(code: .internalServerError)
            respond(answer, resource, session, request, query, response)
            return
        }
        let peer = Self.peer(of: session)
        if coap_session_get_type(session) == COAP_SESSION_TYPE_SERVER { keep(session, of: peer) }
        let path = Self.path(of: resource)
        guard let route = routes[path] else {
            coap_pdu_set_code(response, COAP_RESPONSE_CODE_NOT_FOUND)
            return
        }
        let raw = UInt8(truncatingIfNeeded: coap_pdu_get_code(request).rawValue)
        guard let method = CoAPMethod(rawValue: raw) else {
            coap_pdu_set_code(response, COAP_RESPONSE_CODE_NOT_ALLOWED)
            return
        }
        let incoming = CoAPIncoming(peer: peer, method: method, path: path, payload: Self.body(of: request))
        switch route {
        case .immediate(let handler):
            let answer = handler(incoming)
            self.incoming?.yield(incoming)
            respond(answer, resource, session, request, query, response)
        case .separate(let handler):
            let refusal: String? =
                if jobs == nil {
                    "no server run() to answer it"
                } else if separatePending.count >= separateLimit {
                    "\(separateLimit) separate answers pending"
                } else {
                    nil
                }
            guard refusal == nil, let jobs, let async = coap_register_async(session, request, 0) else {
                logger.notice(
                    "CoAP request answered 5.03",
                    metadata: ["peer": "\(peer)", "path": "\(path)", "why": "\(refusal ?? "libcoap async failed")"])
                coap_pdu_set_code(response, COAP_RESPONSE_CODE_SERVICE_UNAVAILABLE)
                return
            }
            let id = makeID()
            coap_async_set_app_data(async, UnsafeMutableRawPointer(bitPattern: UInt(id)))
            // Held until the answer is sent: the session must outlive the handler's run.
            coap_session_reference(session)
            separatePending[id] = (session, token)
            if case .terminated = jobs.yield(Job(id: id, incoming: incoming, handler: handler)) {
                finishSeparate(id, CoAPResponse(code: .serviceUnavailable))
            }
        // No code set: libcoap sends the empty ACK (RFC 7252 §5.2.2).
        }
    }

    /// A separate route's answer (posted by the server's `run()`): kept, and libcoap asked to
    /// call the route again, which sends it as a confirmable response.
    func finishSeparate(_ id: UInt64, _ answer: CoAPResponse) {
        guard let (session, token) = separatePending.removeValue(forKey: id) else { return }
        defer { coap_session_release(session) }
        let async = token.withUnsafeBufferPointer { buffer in
            coap_find_async(session, coap_bin_const_t(length: buffer.count, s: buffer.baseAddress))
        }
        guard let async else { return }
        separateAnswers[id] = answer
        coap_async_trigger(async)
    }

    private func respond(
        _ answer: CoAPResponse, _ resource: OpaquePointer, _ session: OpaquePointer, _ request: OpaquePointer,
        _ query: UnsafePointer<coap_string_t>?, _ response: OpaquePointer
    ) {
        if !answer.payload.isEmpty && !libcoapBlocks {
            // A client's event route: a small answer in the one PDU, or none.
            if answer.payload.withUnsafeBufferPointer({ coap_add_data(response, $0.count, $0.baseAddress) }) == 0 {
                coap_pdu_set_code(response, COAP_RESPONSE_CODE_INTERNAL_ERROR)
                return
            }
        } else if !answer.payload.isEmpty {
            // Adds Block2 (and Size2, ETag) when the body is larger than a PDU; libcoap keeps it
            // until the peer has the last block, then calls the release (on a failure, at once).
            let copy = Self.copy(answer.payload)
            let added = coap_add_data_large_response(
                resource, session, request, response, query, UInt16(COAP_MEDIATYPE_APPLICATION_OCTET_STREAM), -1,
                0, answer.payload.count, copy, coapRelease, copy)
            if added == 0 {
                // libcoap has called the release already.
                logger.warning(
                    "CoAP answer could not be added to the response", metadata: ["peer": "\(Self.peer(of: session))"])
                coap_pdu_set_code(response, COAP_RESPONSE_CODE_INTERNAL_ERROR)
                return
            }
        }
        coap_pdu_set_code(response, coap_pdu_code_t(rawValue: coap_pdu_code_t.RawValue(answer.code.rawValue)))
    }

    /// Remembers a peer's server session (at most `maxServerSessions`, the oldest let go).
    private func keep(_ session: OpaquePointer, of peer: CoAPPeer) {
        if let known = serverSessions[peer] {
            if known == session { return }
            coap_session_release(known)
            serverSessionOrder.removeAll { $0 == peer }
        }
        coap_session_reference(session)
        applyTransmission(session)
        serverSessions[peer] = session
        serverSessionOrder.append(peer)
        if serverSessionOrder.count > Self.maxServerSessions {
            let oldest = serverSessionOrder.removeFirst()
            if let session = serverSessions.removeValue(forKey: oldest) { coap_session_release(session) }
        }
    }

    static func path(of resource: OpaquePointer) -> String {
        guard let path = coap_resource_get_uri_path(resource), path.pointee.length > 0, let bytes = path.pointee.s
        else { return "" }
        return String(decoding: UnsafeBufferPointer(start: bytes, count: path.pointee.length), as: UTF8.self)
    }
}

let coapRouteHandler: coap_method_handler_t = { resource, session, request, query, response in
    guard let resource, let session, let request, let response, let engine = coapEngine(session) else { return }
    engine.serve(resource, session, request, query, response)
}
