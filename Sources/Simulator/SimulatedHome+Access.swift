public import HomeModel

// The simulated home as an AccessorySource: accessories, reads, writes, notifications and
// identify, and finding the accessory, service and characteristic of an address.

extension SimulatedHome {
    // MARK: AccessorySource

    public func accessories() async -> [Accessory] {
        catchUp()
        // What the caller reads now is reported: only later changes wait for a subscription.
        unreported.removeAll()
        return accessoryList
    }

    public nonisolated func events() -> EventStream<SourceEvent> { hub.subscribe() }

    public func read(_ address: CharacteristicAddress) async throws(AccessoryError) -> CharacteristicValue {
        catchUp()
        let (ai, si, ci) = try locate(address)
        try requireReachable(ai)
        let c = accessoryList[ai].services[si].characteristics[ci]
        guard c.metadata.permissions.contains(.read) else {
            throw AccessoryError(.writeOnly, "\(label(ai, si, ci)) cannot be read")
        }
        let value = c.value ?? Self.emptyValue(for: c.metadata)
        // The protocol reports what a read learns as an event; with notifications on, every
        // change has been reported already.
        if !notifies(address) {
            hub.yield(.valueUpdated(address, value))
            unreported.remove(address)
        }
        return value
    }

    public func write(_ address: CharacteristicAddress, value: CharacteristicValue) async throws(AccessoryError) {
        if writeDelay > .zero {
            // Cancellation only shortens the delay; the write still answers.
            try? await Task.sleep(for: writeDelay)
        }
        catchUp()
        let (ai, si, ci) = try locate(address)
        try requireReachable(ai)
        let c = accessoryList[ai].services[si].characteristics[ci]
        guard c.metadata.permissions.contains(.write) else {
            throw AccessoryError(.readOnly, "\(label(ai, si, ci)) is read-only")
        }
        let checked: CharacteristicValue
        do {
            checked = try ValueCodec.validate(value, metadata: c.metadata, label: label(ai, si, ci))
        } catch {
            throw AccessoryError(.invalidValue, error.message)
        }
        if c.type == HAPType.identify { identifyLog.append(accessoryList[ai].id) }
        // Write-only characteristics (identify, control points) have no state to keep.
        if c.metadata.permissions.contains(.read) {
            store(checked, ai, si, ci, reportAlways: !notifies(address))
        }
        let serviceIID = accessoryList[ai].services[si].iid
        for key in engineKeys(accessoryList[ai].id, serviceIID) {
            runEngine(key) { engine, ctx in engine.didWrite(c.type, &ctx) }
        }
        // Steps due right away (a lock with no delay) complete with the write.
        process(until: now)
    }

    public func setNotifications(enabled: Bool, for addresses: [CharacteristicAddress]) async -> [CharacteristicAddress:
        AccessoryError]
    {
        catchUp()
        var failures: [CharacteristicAddress: AccessoryError] = [:]
        for address in addresses {
            do throws(AccessoryError) {
                let (ai, si, ci) = try locate(address)
                try requireReachable(ai)
                guard accessoryList[ai].services[si].characteristics[ci].metadata.permissions.contains(.notify) else {
                    throw AccessoryError(.notificationNotSupported, "\(label(ai, si, ci)) does not send notifications")
                }
                if !enabled {
                    notifying.remove(address)
                } else if notifying.insert(address), unreported.remove(address) != nil,
                    let value = accessoryList[ai].services[si].characteristics[ci].value
                {
                    hub.yield(.valueUpdated(address, value))
                }
            } catch {
                failures[address] = error
            }
        }
        return failures
    }

    public func identify(accessoryID: String) async throws(AccessoryError) {
        guard let ai = index(of: accessoryID) else {
            throw AccessoryError(.doesNotExist, "no accessory \(accessoryID)")
        }
        try requireReachable(ai)
        identifyLog.append(accessoryID)
    }

    // MARK: Finding accessories and characteristics

    func index(of accessoryID: String) -> Int? {
        if let recent, recent.id == accessoryID { return recent.position }
        if positions == nil {
            var made: [String: Int] = [:]
            for (index, accessory) in accessoryList.enumerated() where made[accessory.id] == nil {
                made[accessory.id] = index
            }
            positions = made
        }
        guard let position = positions?[accessoryID] else { return nil }
        recent = (accessoryID, position, nil)
        return position
    }

    /// Whether a controller turned on notifications of `address` (`notifying`).
    func notifies(_ address: CharacteristicAddress) -> Bool {
        guard let recent, recent.id == address.accessoryID else { return notifying.contains(address) }
        // The accessory's iids are taken at its first change of the run.
        let iids = recent.notifying ?? notifying.iids(ofAccessory: address.accessoryID) ?? []
        if recent.notifying == nil { self.recent?.notifying = iids }
        return CharacteristicAddressSet.contains(address.iid, in: iids)
    }

    func locate(_ address: CharacteristicAddress) throws(AccessoryError) -> (Int, Int, Int) {
        guard let ai = index(of: address.accessoryID) else {
            throw AccessoryError(.doesNotExist, "no accessory \(address.accessoryID)")
        }
        for (si, service) in accessoryList[ai].services.enumerated() {
            if let ci = service.characteristics.firstIndex(where: { $0.iid == address.iid }) { return (ai, si, ci) }
        }
        throw AccessoryError(.doesNotExist, "\(accessoryList[ai].name) has no characteristic \(address.iid)")
    }

    private func requireReachable(_ ai: Int) throws(AccessoryError) {
        guard accessoryList[ai].isReachable else {
            throw AccessoryError(.communicationFailure, "\(accessoryList[ai].name) is unreachable")
        }
    }

    /// `Garage Door Opener.Garage Door.target-door-state` — what people see in error messages.
    func label(_ ai: Int, _ si: Int, _ ci: Int) -> String {
        let accessory = accessoryList[ai]
        let service = accessory.services[si]
        let c = service.characteristics[ci]
        let serviceName = service.name ?? Catalog.serviceName(uuid: service.type) ?? service.type
        let characteristicName = Catalog.characteristicName(uuid: c.type) ?? c.name ?? c.type
        return "\(accessory.name).\(serviceName).\(characteristicName)"
    }

    /// What a readable characteristic without a value reads as.
    static func emptyValue(for metadata: CharacteristicMetadata) -> CharacteristicValue {
        switch metadata.format {
        case .bool: .bool(false)
        case .uint8, .uint16, .uint32, .uint64: .uint(UInt64(exactly: max(0, metadata.minValue ?? 0).rounded(.up)) ?? 0)
        case .int: .int(Int64(exactly: (metadata.minValue ?? 0).rounded(.up)) ?? 0)
        case .float: .float(metadata.minValue ?? 0)
        case .string: .string("")
        case .tlv8, .data: .data([])
        }
    }
}
