import HAP

// `POST /pairings`: add, remove and list pairings, for admin controllers only.

extension HAPServerConnection {
    enum PairingsMethod: UInt8 {
        case add = 3, remove = 4, list = 5
    }

    func pairings(_ request: HAPRequest) -> HAPResponse {
        guard let tlv = try? TLV8.decode(request.body) else { return Self.badTLV(state: 2) }
        guard tlv[TLVType.state] == [1], let raw = tlv[TLVType.method]?.first,
            let method = PairingsMethod(rawValue: raw)
        else { return .tlv(PairSetupMachine.error(.unknown, state: 2).encoded()) }
        // Admin rights are read from the store, not from the session: a controller demoted (or
        // removed) since its pair-verify has lost them at once.
        guard let me = controller, context.state.pairing(id: me.id)?.isAdmin == true else {
            logger.info("refusing \(method) of pairings to a controller that is not an admin")
            return .tlv(PairSetupMachine.error(.authentication, state: 2).encoded())
        }
        switch method {
        case .add:
            guard let idBytes = tlv[TLVType.identifier], let id = String(bytes: idBytes, encoding: .utf8), !id.isEmpty,
                let key = tlv[TLVType.publicKey], key.count == 32,
                let permissions = tlv[TLVType.permissions]?.first
            else { return .tlv(PairSetupMachine.error(.unknown, state: 2).encoded()) }
            let pairing = HAPControllerPairing(id: id, publicKey: key, isAdmin: permissions & 1 == 1)
            if let refusal = context.state.addPairing(pairing) {
                return .tlv(PairSetupMachine.error(refusal, state: 2).encoded())
            }
            logger.notice("controller \(me.id) added the pairing \(id)\(pairing.isAdmin ? " (admin)" : "")")
            return .tlv(Self.state2)
        case .remove:
            guard let idBytes = tlv[TLVType.identifier], let id = String(bytes: idBytes, encoding: .utf8) else {
                return .tlv(PairSetupMachine.error(.unknown, state: 2).encoded())
            }
            switch context.state.removePairing(id: id) {
            case .failed:
                return .tlv(PairSetupMachine.error(.unknown, state: 2).encoded())
            case .removed:
                logger.notice("controller \(me.id) removed the pairing \(id)")
                // Its sessions end once this response is out (ours is served in order).
                context.registry.close(controller: id, reason: "the pairing \(id) was removed")
            case .removedAll:
                logger.notice("controller \(me.id) removed the last admin pairing: the accessory is unpaired")
                context.registry.close(controller: nil, reason: "the last admin pairing was removed")
            }
            return .tlv(Self.state2)
        case .list:
            var out = TLV8()
            out.append(TLVType.state, byte: 2)
            for (n, pairing) in context.state.pairings.enumerated() {
                if n > 0 { out.appendSeparator() }
                out.append(TLVType.identifier, Array(pairing.id.utf8))
                out.append(TLVType.publicKey, pairing.publicKey)
                out.append(TLVType.permissions, byte: pairing.isAdmin ? 1 : 0)
            }
            return .tlv(out.encoded())
        }
    }

    static let state2: [UInt8] = {
        var tlv = TLV8()
        tlv.append(TLVType.state, byte: 2)
        return tlv.encoded()
    }()
}
