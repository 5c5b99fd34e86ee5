public import HomeModel

// The HAP source's AccessorySource operations: read, write, notifications and identify, each
// through the connection of the accessory's pairing.

extension HAPSource {
    // MARK: AccessorySource operations

    private func locate(_ address: CharacteristicAddress) throws(AccessoryError) -> (
        any HAPSession, HAPCharacteristicID, Characteristic
    ) {
        guard let (pairingID, aid) = Self.parseAccessoryID(address.accessoryID),
            let acc = accessoriesByID[address.accessoryID]
        else {
            throw AccessoryError(.doesNotExist, "no HAP accessory \(address.accessoryID)")
        }
        guard let (_, c) = acc.characteristic(iid: address.iid) else {
            throw AccessoryError(.doesNotExist, "accessory \(address.accessoryID) has no characteristic \(address.iid)")
        }
        guard let connection = connections[pairingID] else {
            throw AccessoryError(.communicationFailure, "accessory \(address.accessoryID) is unreachable")
        }
        return (connection, HAPCharacteristicID(aid: aid, iid: address.iid), c)
    }

    public func read(_ address: CharacteristicAddress) async throws(AccessoryError) -> CharacteristicValue {
        let (connection, id, c) = try locate(address)
        guard c.metadata.permissions.contains(.read) else {
            throw AccessoryError(.writeOnly, "\(address) cannot be read")
        }
        let results: [HAPCharacteristicID: Result<JSONValue, AccessoryError>]
        do {
            results = try await connection.readCharacteristics([id])
        } catch {
            throw error.accessoryError
        }
        switch results[id] {
        case .success(let json)?:
            guard let (pairingID, _) = Self.parseAccessoryID(address.accessoryID),
                let value = update(pairingID: pairingID, id: id, json: json, emit: true)
            else {
                throw AccessoryError(
                    .communicationFailure,
                    "the accessory sent a value for \(address) that is not a valid \(c.metadata.format.rawValue)")
            }
            return value
        case .failure(let e)?:
            throw e
        case nil:
            throw AccessoryError(.communicationFailure, "no answer for \(address)")
        }
    }

    public func write(_ address: CharacteristicAddress, value: CharacteristicValue) async throws(AccessoryError) {
        let (connection, id, c) = try locate(address)
        guard c.metadata.permissions.contains(.write) else {
            throw AccessoryError(.readOnly, "\(address) cannot be written")
        }
        let json = HAPAccessoryJSON.json(for: value, format: c.metadata.format)
        let failures: [HAPCharacteristicID: AccessoryError]
        do {
            failures = try await connection.writeCharacteristics(
                [id: ["value": json]], timed: c.metadata.permissions.contains(.timedWrite))
        } catch {
            throw error.accessoryError
        }
        if let e = failures[id] { throw e }
        // The accessory does not send events to the controller that wrote the value.
        if c.metadata.permissions.contains(.read), let (pairingID, _) = Self.parseAccessoryID(address.accessoryID) {
            update(pairingID: pairingID, id: id, json: json, emit: true)
        }
    }

    public func setNotifications(enabled: Bool, for addresses: [CharacteristicAddress]) async -> [CharacteristicAddress:
        AccessoryError]
    {
        var failures: [CharacteristicAddress: AccessoryError] = [:]
        var byConnection:
            [ObjectIdentifier: (
                any HAPSession, [HAPCharacteristicID: [String: JSONValue]],
                [HAPCharacteristicID: CharacteristicAddress]
            )] = [:]
        // Characteristics turned back on, whose changes meanwhile sent no event: read after.
        var missed: [ObjectIdentifier: [HAPCharacteristicID]] = [:]
        for address in addresses {
            let wasOff = enabled ? notificationsOff.remove(address) != nil : !notificationsOff.insert(address).inserted
            do throws(AccessoryError) {
                let (connection, id, c) = try locate(address)
                guard c.metadata.permissions.contains(.notify) else {
                    failures[address] = AccessoryError(.notificationNotSupported, "\(address) does not notify")
                    continue
                }
                let key = ObjectIdentifier(connection)
                var entry = byConnection[key] ?? (connection, [:], [:])
                entry.1[id] = ["ev": .bool(enabled)]
                entry.2[id] = address
                byConnection[key] = entry
                if enabled, wasOff, c.metadata.permissions.contains(.read) { missed[key, default: []].append(id) }
            } catch {
                failures[address] = error
            }
        }
        for (key, (connection, items, map)) in byConnection {
            do {
                for (id, e) in try await connection.writeCharacteristics(items) {
                    if let a = map[id] { failures[a] = e }
                }
                let reread = (missed[key] ?? []).filter { map[$0].map { failures[$0] == nil } ?? false }
                if let address = map.values.first, let (pairingID, _) = Self.parseAccessoryID(address.accessoryID) {
                    await readBack(reread, pairingID, connection: connection)
                }
            } catch {
                for a in map.values { failures[a] = error.accessoryError }
            }
        }
        return failures
    }

    public func identify(accessoryID: String) async throws(AccessoryError) {
        guard let acc = accessoriesByID[accessoryID] else {
            throw AccessoryError(.doesNotExist, "no HAP accessory \(accessoryID)")
        }
        let identifyType = StandardUUID.longForm("14")
        guard
            let c = acc.services.first(where: { $0.type == StandardUUID.accessoryInformation })?.characteristic(
                type: identifyType)
        else {
            throw AccessoryError(.doesNotExist, "accessory \(accessoryID) has no Identify characteristic")
        }
        try await write(CharacteristicAddress(accessoryID: accessoryID, iid: c.iid), value: .bool(true))
    }
}
