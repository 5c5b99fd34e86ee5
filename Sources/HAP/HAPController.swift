import Foundation
public import HomeModel
public import Logging

/// Pairs, unpairs and inspects accessories; the library side of `homemqtt hap pair/unpair/pairings`.
public actor HAPController {
    public let store: HAPPairingStore
    let logger: Logger
    /// Makes the CoAP link to a Thread accessory; nil: Thread accessories cannot be paired.
    let threadLinks: HAPThreadLinkMaker?

    public init(
        store: HAPPairingStore, logger: Logger = Logger(label: "homemqtt.hap"), threadLinks: HAPThreadLinkMaker? = nil
    ) {
        self.store = store
        self.logger = logger
        self.threadLinks = threadLinks
    }

    /// Pair-setup with the setup code at an explicit address; saves and returns the pairing.
    /// `featureFlags` is the accessory's mDNS `ff` (bit 0 selects pair-setup method 1).
    /// `transport` `.thread`: over HAP over CoAP (a Thread accessory, `_hap._udp`).
    public func pair(
        host: String, port: Int, setupCode: String, name: String? = nil, featureFlags: Int = 0, category: Int? = nil,
        transport: HAPTransport = .ip
    ) async throws(HAPError) -> HAPPairing {
        _ = try PairingProtocol.normalizeSetupCode(setupCode)
        logger.info("pairing with the \(transport == .thread ? "Thread " : "")accessory at \(host):\(port)")
        var pairing: HAPPairing
        if transport == .thread {
            pairing = try await pairOverThread(host: host, port: port, setupCode: setupCode, featureFlags: featureFlags)
        } else {
            let connection = try await HAPConnection.connect(host: host, port: port, logger: logger)
            do {
                pairing = try await PairingProtocol.pairSetup(
                    HTTPPairingChannel(connection: connection), setupCode: setupCode, featureFlags: featureFlags)
            } catch {
                await connection.close()
                throw error
            }
            await connection.close()
        }
        pairing.name = name
        pairing.category = category
        do {
            try store.save(pairing)
        } catch {
            throw HAPError(
                code: error.code,
                message:
                    "paired with \(pairing.accessoryPairingID), but saving the pairing failed (\(error.message)); reset the accessory before pairing again"
            )
        }
        logger.info("paired with accessory \(pairing.accessoryPairingID)")
        // Learn the accessory's name over the new session; the pairing stands without it.
        if name == nil, let accessories = try? await accessories(of: pairing),
            let first = accessories.first(where: { $0.aid == 1 }) ?? accessories.first
        {
            pairing.name = first.name
            do {
                try store.save(pairing)
            } catch {
                // The pairing is saved without the name; the accessory's own name still applies.
                logger.warning("could not save the accessory's name with its pairing: \(error.message)")
            }
        }
        return pairing
    }

    /// The pairings saved in the state directory.
    public func pairings() throws(HAPError) -> [HAPPairing] { try store.all() }

    /// The saved pairing with accessory `id`, in either case (Home Assistant shows ids in lower case).
    func pairing(id: String) throws(HAPError) -> HAPPairing {
        if let exact = try store.pairing(id: id) { return exact }
        guard let p = try store.all().first(where: { $0.accessoryPairingID.caseInsensitiveCompare(id) == .orderedSame })
        else {
            throw HAPError(code: .unknownPairing, message: "no pairing with accessory \(id) in \(store.directory.path)")
        }
        return p
    }

    /// Connects to a paired accessory and runs pair-verify.
    public func connect(_ pairing: HAPPairing, timeout: Double = 5) async throws(HAPError) -> HAPConnection {
        let connection = try await HAPConnection.connect(
            host: pairing.host, port: pairing.port, timeout: timeout, logger: logger)
        do {
            try await connection.verify(pairing)
        } catch {
            await connection.close()
            throw error
        }
        return connection
    }

    /// The accessories of a paired accessory server, read once.
    public func accessories(of pairing: HAPPairing) async throws(HAPError) -> [Accessory] {
        if pairing.isThread {
            return try await withThreadController(pairing) { controller async throws(HAPError) in
                var problems: [String] = []
                return try await controller.accessories(problems: &problems)
            }
        }
        let connection = try await connect(pairing)
        let json: JSONValue
        do {
            json = try await connection.accessoriesJSON()
        } catch {
            await connection.close()
            throw error
        }
        await connection.close()
        do {
            return try HAPAccessoryJSON.parse(json: json, idPrefix: pairing.idPrefix, category: pairing.category)
        } catch {
            throw HAPError(
                code: .protocolError,
                message: "the accessory's /accessories does not describe accessories: \(error.message)")
        }
    }

    /// The controllers the accessory knows (`/pairings` list).
    public func accessoryPairings(id: String) async throws(HAPError) -> [HAPPairingEntry] {
        let pairing = try pairing(id: id)
        if pairing.isThread {
            return try await withThreadController(pairing) { controller async throws(HAPError) in
                try await controller.listPairings()
            }
        }
        let connection = try await connect(pairing)
        do {
            let list = try await connection.listPairings()
            await connection.close()
            return list
        } catch {
            await connection.close()
            throw error
        }
    }

    /// Removes our pairing on the accessory, then the pairing file. An accessory that has
    /// already forgotten us counts as removed. With `force`, the file goes even when the
    /// accessory cannot be reached.
    public func unpair(id: String, force: Bool = false) async throws(HAPError) {
        let pairing = try pairing(id: id)
        do throws(HAPError) {
            if pairing.isThread {
                try await withThreadController(pairing) { controller async throws(HAPError) in
                    try await controller.removePairing(pairing.controllerPairingID)
                }
            } else {
                let connection = try await connect(pairing)
                do {
                    try await connection.removePairing(controllerPairingID: pairing.controllerPairingID)
                } catch {
                    await connection.close()
                    throw error
                }
                await connection.close()
            }
        } catch  where error.code == .unknownPairing {
            logger.info("accessory \(id) no longer knows this controller; removing the local pairing")
        } catch {
            if !force { throw error }
            logger.warning(
                "could not remove the pairing on accessory \(id) (\(error.message)); removing the local pairing anyway")
        }
        try store.remove(id: pairing.accessoryPairingID)
    }
}
