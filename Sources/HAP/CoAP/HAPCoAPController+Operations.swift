public import HomeModel

// What a HAP-over-CoAP controller does with its session: the attribute database into the same
// model the IP controller reads, reads, writes, timed writes, subscriptions and pairings.
// Several characteristics go in one payload, one PDU each (TIDs of one request distinct).

/// A characteristic's answer in a read of several: its value, or the HAP-BLE status refusing it.
public typealias HAPCoAPReadResult = Result<CharacteristicValue, HAPError>

extension HAPCoAPController {
    static let pairingsType = "00000050-0000-1000-8000-0026BB765291"
    static let pairingServiceType = "00000055-0000-1000-8000-0026BB765291"

    /// The 0x09 attribute database, kept for the formats of later reads, writes and events.
    public func attributeDatabase() async throws(HAPError) -> ThreadAttributeDatabase {
        let response = try await sendOne(.attributeDatabase(tid: tid()), what: "the attribute database read")
        do throws(CoAPCodecError) {
            let tree = try ThreadAttributeDatabase.decode(response.body)
            database = tree
            return tree
        } catch {
            throw error.hapError
        }
    }

    /// The accessory as the model (`HAPAccessoryJSON`, as over IP): the database, then the value
    /// of every readable characteristic except the Pairing service's (a pairing exchange,
    /// not a value). `problems` as `ThreadAttributeDatabase.accessories`.
    public func accessories(problems: inout [String]) async throws(HAPError) -> [Accessory] {
        let tree = try await attributeDatabase()
        let readable =
            tree.accessories.first?.services.filter { $0.type != Self.pairingServiceType }
            .flatMap(\.characteristics).filter { $0.permissions.contains(.read) }.map(\.iid) ?? []
        var values: [UInt16: [UInt8]] = [:]
        if !readable.isEmpty {
            let requests = readable.map { CoAPRequestPDU.read(iid: $0, tid: tid()) }
            for (iid, response) in zip(readable, try await send(requests)) where response.status == .success {
                values[iid] = (try? response.value()) ?? nil
            }
        }
        do throws(CoAPCodecError) {
            return try tree.accessories(
                idPrefix: pairing.idPrefix, category: pairing.category, problems: &problems,
                value: { _, iid in values[iid] })
        } catch {
            throw error.hapError
        }
    }

    /// Values of `iids` (the database must have been read, for their formats).
    public func read(_ iids: [UInt16]) async throws(HAPError) -> [UInt16: HAPCoAPReadResult] {
        guard !iids.isEmpty else { return [:] }
        let requests = iids.map { CoAPRequestPDU.read(iid: $0, tid: tid()) }
        var out: [UInt16: HAPCoAPReadResult] = [:]
        for (iid, response) in zip(iids, try await send(requests)) {
            guard response.status == .success else {
                out[iid] = .failure(Self.statusError(response.status, "the read of \(iid)"))
                continue
            }
            do throws(CoAPCodecError) {
                guard let format = format(of: iid) else {
                    throw .badValue("characteristic \(iid) is not in the attribute database read")
                }
                out[iid] = .success(try HAPBLEValue.decode(response.value() ?? [], format: format))
            } catch {
                out[iid] = .failure(error.hapError)
            }
        }
        return out
    }

    /// One value.
    public func read(_ iid: UInt16) async throws(HAPError) -> CharacteristicValue {
        guard let result = try await read([iid])[iid] else { throw HAPError.proto("no answer for \(iid)") }
        return try result.get()
    }

    func encode(_ value: CharacteristicValue, for iid: UInt16) throws(HAPError) -> [UInt8] {
        guard let format = format(of: iid) else {
            throw HAPError.proto("characteristic \(iid) is not in the attribute database read")
        }
        do throws(CoAPCodecError) { return try HAPBLEValue.encode(value, format: format) } catch {
            throw error.hapError
        }
    }

    /// Writes a value; with `returnResponse`, the value the accessory answers with (write-
    /// response characteristics), else nil.
    @discardableResult
    public func write(_ iid: UInt16, _ value: CharacteristicValue, returnResponse: Bool = false)
        async throws(HAPError) -> CharacteristicValue?
    {
        let bytes = try encode(value, for: iid)
        let request = CoAPRequestPDU.write(iid: iid, tid: tid(), value: bytes, returnResponse: returnResponse)
        let response = try await sendOne(request, what: "the write of \(iid)")
        guard returnResponse, let returned = (try? response.value()) ?? nil, let format = format(of: iid) else {
            return nil
        }
        return try? HAPBLEValue.decode(returned, format: format)
    }

    /// A timed write: the value with its TTL (100 ms units), then the execute.
    public func timedWrite(_ iid: UInt16, _ value: CharacteristicValue, ttl: UInt8 = 50) async throws(HAPError) {
        let bytes = try encode(value, for: iid)
        _ = try await sendOne(
            .timedWrite(iid: iid, tid: tid(), value: bytes, ttl: ttl), what: "the timed write of \(iid)")
        _ = try await sendOne(.executeWrite(iid: iid, tid: tid()), what: "the execute write of \(iid)")
    }

    /// Events of `iids` come on `events` from now on (or no longer, `on` false).
    public func subscribe(_ iids: [UInt16], _ on: Bool = true) async throws(HAPError) {
        guard !iids.isEmpty else { return }
        let requests = iids.map {
            on ? CoAPRequestPDU.subscribe(iid: $0, tid: tid()) : .unsubscribe(iid: $0, tid: tid())
        }
        for (iid, response) in zip(iids, try await send(requests)) where response.status != .success {
            throw Self.statusError(response.status, "\(on ? "subscribing to" : "unsubscribing from") \(iid)")
        }
    }

    // MARK: Pairings

    /// The controllers paired with the accessory (admins only may ask), as aiohomekit asks:
    /// a write of the pairings characteristic with the request, then a read of its answer.
    public func listPairings() async throws(HAPError) -> [HAPPairingEntry] {
        PairingsRequest.entries(try await pairingsExchange(PairingsRequest.list(), step: "list pairings"))
    }

    /// Adds (or changes the permission of) another controller's pairing.
    public func addPairing(_ controllerID: String, publicKey: [UInt8], isAdmin: Bool) async throws(HAPError) {
        let request = PairingsRequest.add(controllerPairingID: controllerID, publicKey: publicKey, admin: isAdmin)
        _ = try await pairingsExchange(request, step: "add pairing")
    }

    /// Removes a controller's pairing (ours too: the session then ends).
    public func removePairing(_ controllerID: String) async throws(HAPError) {
        _ = try await pairingsExchange(
            PairingsRequest.remove(controllerPairingID: controllerID), step: "remove pairing")
    }

    private func pairingsExchange(_ m1: TLV8, step: String) async throws(HAPError) -> TLV8 {
        if database == nil { _ = try await attributeDatabase() }
        let iid = database?.accessories.first?.services.first { $0.type == Self.pairingServiceType }?
            .characteristics.first { $0.type == Self.pairingsType }?.iid
        guard let iid else { throw HAPError.proto("the accessory has no pairings characteristic (0x50)") }
        // One payload: the write of the request and the read of its answer, in order.
        let requests = [
            CoAPRequestPDU.write(iid: iid, tid: tid(), value: m1.encoded()), CoAPRequestPDU.read(iid: iid, tid: tid()),
        ]
        let responses = try await send(requests)
        for r in responses where r.status != .success {
            guard r.status == .insufficientAuthorization else { throw Self.statusError(r.status, step) }
            throw HAPError(
                code: .insufficientPrivileges,
                message: "the accessory refused to \(step): only an admin controller may list, add or remove its "
                    + "pairings, and this pairing is not one")
        }
        let bytes = (try? responses[1].value()) ?? nil ?? []
        let m2 = try TLV8.decode(bytes)
        if let code = m2[TLVType.error]?.first {
            throw (PairingTLVError(rawValue: code) ?? .unknown).hapError(during: step)
        }
        guard m2[TLVType.state] == [2] else { throw HAPError.badTLV("the accessory's answer to \(step) is not M2") }
        return m2
    }
}
