import HAP
import Logging

// Adding, removing and listing pairings, for admin controllers only: `POST /pairings` over IP,
// writes of the Pairing service's Pairings characteristic over CoAP. One answer for both.

/// What a pairings request comes to: the TLV to answer with, and whose sessions end once it is
/// out (`close`: a controller's, or with `controller` nil everyone's).
struct PairingsAnswer {
    var tlv: [UInt8]
    var close: (controller: String?, reason: String)?
    /// The request was no TLV at all.
    var malformed = false
}

enum PairingsRequest {
    enum Method: UInt8 {
        case add = 3, remove = 4, list = 5
    }

    static func answer(_ body: [UInt8], caller: HAPControllerPairing?, state: AccessoryState, logger: Logger)
        -> PairingsAnswer
    {
        let unknown = PairSetupMachine.error(.unknown, state: 2).encoded()
        guard let tlv = try? TLV8.decode(body) else { return PairingsAnswer(tlv: unknown, malformed: true) }
        guard tlv[TLVType.state] == [1], let raw = tlv[TLVType.method]?.first, let method = Method(rawValue: raw)
        else { return PairingsAnswer(tlv: unknown) }
        // Admin rights are read from the store, not from the session: a controller demoted (or
        // removed) since its pair-verify has lost them at once.
        guard let me = caller, state.pairing(id: me.id)?.isAdmin == true else {
            logger.info("refusing \(method) of pairings to a controller that is not an admin")
            return PairingsAnswer(tlv: PairSetupMachine.error(.authentication, state: 2).encoded())
        }
        switch method {
        case .add:
            guard let idBytes = tlv[TLVType.identifier], let id = String(bytes: idBytes, encoding: .utf8), !id.isEmpty,
                let key = tlv[TLVType.publicKey], key.count == 32,
                let permissions = tlv[TLVType.permissions]?.first
            else { return PairingsAnswer(tlv: unknown) }
            let pairing = HAPControllerPairing(id: id, publicKey: key, isAdmin: permissions & 1 == 1)
            if let refusal = state.addPairing(pairing) {
                return PairingsAnswer(tlv: PairSetupMachine.error(refusal, state: 2).encoded())
            }
            logger.notice("controller \(me.id) added the pairing \(id)\(pairing.isAdmin ? " (admin)" : "")")
            return PairingsAnswer(tlv: state2)
        case .remove:
            guard let idBytes = tlv[TLVType.identifier], let id = String(bytes: idBytes, encoding: .utf8) else {
                return PairingsAnswer(tlv: unknown)
            }
            switch state.removePairing(id: id) {
            case .failed:
                return PairingsAnswer(tlv: unknown)
            case .removed:
                logger.notice("controller \(me.id) removed the pairing \(id)")
                return PairingsAnswer(tlv: state2, close: (id, "the pairing \(id) was removed"))
            case .removedAll:
                logger.notice("controller \(me.id) removed the last admin pairing: the accessory is unpaired")
                return PairingsAnswer(tlv: state2, close: (nil, "the last admin pairing was removed"))
            }
        case .list:
            var out = TLV8()
            out.append(TLVType.state, byte: 2)
            for (n, pairing) in state.pairings.enumerated() {
                if n > 0 { out.appendSeparator() }
                out.append(TLVType.identifier, Array(pairing.id.utf8))
                out.append(TLVType.publicKey, pairing.publicKey)
                out.append(TLVType.permissions, byte: pairing.isAdmin ? 1 : 0)
            }
            return PairingsAnswer(tlv: out.encoded())
        }
    }

    static let state2: [UInt8] = {
        var tlv = TLV8()
        tlv.append(TLVType.state, byte: 2)
        return tlv.encoded()
    }()
}

extension HAPServerConnection {
    /// `POST /pairings`. Sessions of a removed pairing end once this response is out (ours is
    /// served in order).
    func pairings(_ request: HAPRequest) -> HAPResponse {
        let answer = PairingsRequest.answer(request.body, caller: controller, state: context.state, logger: logger)
        if answer.malformed { return Self.badTLV(state: 2) }
        if let close = answer.close { context.registry.close(controller: close.controller, reason: close.reason) }
        return .tlv(answer.tlv)
    }
}
