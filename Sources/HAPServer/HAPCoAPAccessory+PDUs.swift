import HAP
import HomeModel

// The PDUs of a HAP-over-CoAP session, as the accessory answers them: the attribute database
// (0x09), reads (0x03), writes (0x02), timed writes (0x04 then 0x05) and subscriptions
// (0x0B/0x0C), each checked against the served tree before the database sees it.
//
// HAP-BLE statuses, where HAP-IP would answer its own codes: an iid the tree lacks is
// `invalidInstanceID`; an opcode not served (signature reads 0x01/0x06, ones unknown) is
// `unsupportedPDU`; a read of what cannot be read, a write of what cannot be written, a value
// of the wrong format or range, a timed-write characteristic written plainly, an execute with
// nothing prepared (or expired) is `invalidRequest`; the pairings characteristic touched by a
// controller that is not an admin is `insufficientAuthorization`. The database's own statuses
// map to the nearest (`-70409` → invalid iid, `-70401`/`-70411` → authorisation, the rest
// → invalid request). A database that does not answer within `databaseTimeout` is
// `maxProcedures` ("not now"): HAP-BLE has no timeout status, and HAP-IP's -70408 means that.

/// One PDU of a request payload: a request, or the TID of one whose opcode is unknown (it is
/// answered `unsupportedPDU`, and the others still are).
enum IncomingPDU {
    case request(CoAPRequestPDU)
    case unknown(tid: UInt8)

    static func split(_ bytes: [UInt8]) throws(CoAPCodecError) -> [IncomingPDU] {
        var out: [IncomingPDU] = []
        var i = 0
        while i < bytes.count {
            guard bytes.count - i >= 7 else { throw .truncatedHeader(offset: i, needed: 7, remaining: bytes.count - i) }
            let length = Int(bytes[i + 5]) | Int(bytes[i + 6]) << 8
            guard bytes.count - i - 7 >= length else {
                throw .bodyPastEnd(offset: i, length: length, remaining: bytes.count - i - 7)
            }
            let one = Array(bytes[i..<(i + 7 + length)])
            if bytes[i] == 0x00, CoAPOpcode(rawValue: bytes[i + 1]) == nil {
                out.append(.unknown(tid: bytes[i + 2]))
            } else {
                // The codec's own checks (control byte) for the rest.
                out += try CoAPRequestPDU.decodeAll(one).map { .request($0) }
            }
            i += 7 + length
        }
        return out
    }
}

/// The accessory as served: aid 1 of the database's tree, its characteristics by iid, the
/// 0x09 body and the iid of the pairings characteristic added to it.
struct ServedTree: Sendable {
    let accessory: HAPAccessory
    var aid: Int { accessory.aid }
    let characteristics: [UInt16: HAPCharacteristic]
    let attributeDatabase: [UInt8]
    let pairingsIID: UInt16

    static let pairingService = "00000055-0000-1000-8000-0026BB765291"
    static let pairingsCharacteristic = "00000050-0000-1000-8000-0026BB765291"

    /// The tree through the same `/accessories` JSON the IP server serves and the model the
    /// controllers read, then `ThreadAttributeDatabase`; the Pairing service (HAP-BLE's, where
    /// pairings are managed) follows the highest iid.
    init(_ tree: [HAPAccessory]) throws(HAPServerError) {
        guard let accessory = tree.first(where: { $0.aid == 1 }) ?? tree.first else {
            throw HAPServerError(.protocolError, "the database has no accessory to serve over CoAP")
        }
        self.accessory = accessory
        var byIID: [UInt16: HAPCharacteristic] = [:]
        var highest: UInt16 = 0
        for s in accessory.services {
            guard let sid = UInt16(exactly: s.iid), sid < .max - 2 else {
                throw HAPServerError(.protocolError, "service iid \(s.iid) does not fit HAP-BLE's u16")
            }
            highest = max(highest, sid)
            for c in s.characteristics {
                guard let iid = UInt16(exactly: c.iid), iid < .max - 2 else {
                    throw HAPServerError(.protocolError, "characteristic iid \(c.iid) does not fit HAP-BLE's u16")
                }
                byIID[iid] = c
                highest = max(highest, iid)
            }
        }
        characteristics = byIID
        pairingsIID = highest + 2
        var database: ThreadAttributeDatabase
        do {
            let json = AccessoryDocument.json([accessory])
            let model = try HAPAccessoryJSON.parse(json: json, idPrefix: "served")
            database = try ThreadAttributeDatabase(model)
        } catch {
            throw HAPServerError(.protocolError, "the accessory cannot be served over CoAP: \(error)")
        }
        let pairings = ThreadAttributeDatabase.Characteristic(
            type: Self.pairingsCharacteristic, iid: highest + 2, properties: 0x0010 | 0x0020,
            presentationFormat: HAPBLEFormat.presentationFormat(.tlv8, unit: nil))
        database.accessories[0].services.append(
            ThreadAttributeDatabase.Service(
                type: Self.pairingService, iid: highest + 1, characteristics: [pairings]))
        attributeDatabase = database.encoded()
    }

    static func format(_ c: HAPCharacteristic) -> CharacteristicFormat {
        CharacteristicFormat(rawValue: c.format.rawValue) ?? .data
    }

    /// A database value as HAP-BLE bytes.
    static func bytes(_ json: JSONValue, _ c: HAPCharacteristic) throws -> [UInt8] {
        guard let value = try HAPAccessoryJSON.convert(json, format: format(c)) else { return [] }
        return try HAPBLEValue.encode(value, format: format(c))
    }

    /// HAP-BLE bytes as the checked value the database gets; nil when they are not the
    /// characteristic's format or out of its range.
    static func value(_ bytes: [UInt8], _ c: HAPCharacteristic) -> JSONValue? {
        guard let v = try? HAPBLEValue.decode(bytes, format: format(c)) else { return nil }
        var json = HAPAccessoryJSON.json(for: v, format: format(c))
        // Unsigned formats decode as `.uint`; the checks (HAP-IP's, of JSON numbers) take `.int`.
        if case .uint(let u) = json, let i = Int64(exactly: u) { json = .int(i) }
        guard case .success(let checked) = ValueCheck.check(json, for: c) else { return nil }
        return checked
    }
}

extension HAPCoAPAccessory {
    func answer(_ pdu: IncomingPDU, session: UInt64, peer: String) async -> CoAPResponsePDU {
        guard case .request(let r) = pdu, let tree = served.withLock({ $0 }) else {
            if case .unknown(let tid) = pdu { return CoAPResponsePDU(tid: tid, status: .unsupportedPDU) }
            return CoAPResponsePDU(tid: 0, status: .invalidRequest)
        }
        func status(_ s: CoAPPDUStatus) -> CoAPResponsePDU { CoAPResponsePDU(tid: r.tid, status: s) }
        switch r.opcode {
        case .attributeDatabaseRead: return CoAPResponsePDU(tid: r.tid, body: tree.attributeDatabase)
        // Signatures are all in the database (0x09): HAP over CoAP has no use for these.
        case .characteristicSignatureRead, .serviceSignatureRead: return status(.unsupportedPDU)
        default: break
        }
        if r.iid == tree.pairingsIID { return await pairings(r, session: session, peer: peer) }
        guard let c = tree.characteristics[r.iid] else { return status(.invalidInstanceID) }
        let id = HAPCharacteristicID(aid: tree.aid, iid: Int(r.iid))
        let context = HAPRequestContext(
            session: HAPSessionID(session),
            controller: withSession(peer, session) { $0.controller.id } ?? "")
        switch r.opcode {
        case .characteristicRead:
            guard c.permissions.contains(.read) else { return status(.invalidRequest) }
            var value = database.valuesAtHand([id])[id]
            if value == nil {
                let database = database
                guard let answers = await withDatabaseDeadline({ await database.read([id], context: context) }) else {
                    return status(.maxProcedures)
                }
                switch answers[id] {
                case .success(let v)?: value = v
                case .failure(let s)?: return status(Self.bleStatus(s))
                case nil: return status(.invalidRequest)
                }
            }
            guard let value, let bytes = try? ServedTree.bytes(value, c) else { return status(.invalidRequest) }
            return CoAPResponsePDU(tid: r.tid, body: HAPBLEBody(value: bytes).encoded())
        case .characteristicWrite:
            guard c.permissions.contains(.write), !c.permissions.contains(.timedWrite),
                let body = try? HAPBLEBody.decode(r.body), let bytes = body.value
            else { return status(.invalidRequest) }
            return await write(bytes, to: c, id, tid: r.tid, returnResponse: body.returnResponse, context: context)
        case .characteristicTimedWrite:
            guard c.permissions.contains(.write), let body = try? HAPBLEBody.decode(r.body), let bytes = body.value,
                let ttl = body.ttl, ServedTree.value(bytes, c) != nil
            else { return status(.invalidRequest) }
            let expires = ContinuousClock.now.advanced(by: .milliseconds(100 * Int(ttl)))
            let kept = withSession(peer, session) { $0.prepared[r.iid] = (bytes, expires) }
            return status(kept == nil ? .invalidRequest : .success)
        case .characteristicExecuteWrite:
            let prepared = withSession(peer, session) { $0.prepared.removeValue(forKey: r.iid) } ?? nil
            guard let prepared, ContinuousClock.now <= prepared.expires else { return status(.invalidRequest) }
            return await write(prepared.value, to: c, id, tid: r.tid, returnResponse: false, context: context)
        case .subscribe, .unsubscribe:
            guard c.permissions.contains(.events) else { return status(.invalidRequest) }
            withSession(peer, session) { s in
                if r.opcode == .subscribe { s.subscriptions.insert(r.iid) } else { s.subscriptions.remove(r.iid) }
            }
            return status(.success)
        case .characteristicSignatureRead, .serviceSignatureRead, .attributeDatabaseRead:
            return status(.unsupportedPDU) // answered above
        }
    }

    private func write(
        _ bytes: [UInt8], to c: HAPCharacteristic, _ id: HAPCharacteristicID, tid: UInt8, returnResponse: Bool,
        context: HAPRequestContext
    ) async -> CoAPResponsePDU {
        guard let value = ServedTree.value(bytes, c) else { return CoAPResponsePDU(tid: tid, status: .invalidRequest) }
        let wantsResponse = returnResponse && c.permissions.contains(.writeResponse)
        let database = database
        let write = HAPWrite(id: id, value: value, wantsResponse: wantsResponse)
        guard let answers = await withDatabaseDeadline({ await database.write([write], context: context) }) else {
            return CoAPResponsePDU(tid: tid, status: .maxProcedures)
        }
        switch answers[id] {
        case .success(let returned)?:
            guard wantsResponse, let returned, let out = try? ServedTree.bytes(returned, c) else {
                return CoAPResponsePDU(tid: tid)
            }
            return CoAPResponsePDU(tid: tid, body: HAPBLEBody(value: out).encoded())
        case .failure(let s)?: return CoAPResponsePDU(tid: tid, status: Self.bleStatus(s))
        case nil: return CoAPResponsePDU(tid: tid, status: .invalidRequest)
        }
    }

    /// The pairings characteristic: a write carries a pairings request (list, add, remove) as
    /// its value, answered at once when asked (return-response) and kept for the read that
    /// aiohomekit makes next. Removing a pairing ends its sessions after this answer is sealed:
    /// the remover's own ends too when it removed itself.
    private func pairings(_ r: CoAPRequestPDU, session: UInt64, peer: String) async -> CoAPResponsePDU {
        guard let caller = withSession(peer, session, { $0.controller }) else {
            return CoAPResponsePDU(tid: r.tid, status: .invalidRequest)
        }
        switch r.opcode {
        case .characteristicWrite:
            // Admins only (read from the store: one removed or demoted since verifying is not).
            guard state.pairing(id: caller.id)?.isAdmin == true else {
                return CoAPResponsePDU(tid: r.tid, status: .insufficientAuthorization)
            }
            guard let body = try? HAPBLEBody.decode(r.body), let value = body.value else {
                return CoAPResponsePDU(tid: r.tid, status: .invalidRequest)
            }
            let answer = PairingsRequest.answer(value, caller: caller, state: state, logger: logger)
            withSession(peer, session) { $0.pairingsAnswer = answer.tlv }
            if let close = answer.close {
                // Others' sessions at once; the caller's own once its answer is out.
                closeSessions(except: (peer, session), controller: close.controller, reason: close.reason)
            }
            return CoAPResponsePDU(tid: r.tid, body: body.returnResponse ? HAPBLEBody(value: answer.tlv).encoded() : [])
        case .characteristicRead:
            // The answer of this session's own last write, even when that write removed its
            // pairing: it is read in the same payload, before the session ends.
            let answer = withSession(peer, session) { s in
                defer { s.pairingsAnswer = nil }
                return s.pairingsAnswer
            }
            return CoAPResponsePDU(tid: r.tid, body: HAPBLEBody(value: (answer ?? nil) ?? []).encoded())
        default:
            return CoAPResponsePDU(tid: r.tid, status: .invalidRequest)
        }
    }

    /// Runs a database call, or gives up when `databaseDeadline` passes (nil): the call is
    /// cancelled then, and the wait ends when it returns, which a database honouring
    /// cancellation does at once. Both are children of this task (no task outlives the request).
    func withDatabaseDeadline<T: Sendable>(_ operation: @escaping @Sendable () async -> T) async -> T? {
        let (timeout, deadline) = (configuration.databaseTimeout, configuration.databaseDeadline)
        return await withTaskGroup(of: T?.self) { group in
            group.addTask { await operation() }
            group.addTask {
                try? await deadline(timeout)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }

    static func bleStatus(_ s: HAPStatus) -> CoAPPDUStatus {
        switch s {
        case .doesNotExist: .invalidInstanceID
        case .insufficientPrivileges, .insufficientAuthorization: .insufficientAuthorization
        default: .invalidRequest
        }
    }
}
