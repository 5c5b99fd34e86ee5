public import HomeModel

// Test and structure controls of the simulated home: simulated time, reachability,
// obstructions, values changed on the device, and accessories added, removed and renamed.

extension SimulatedHome {
    // MARK: Test and structure controls

    /// Moves simulated time forward, running every behaviour step that falls due, in order.
    public func advance(by seconds: Double) async {
        guard seconds > 0 else { return }
        offset += seconds
        catchUp()
        wakeRunner()
    }

    /// Seconds of simulated time since the home was created.
    public func currentTime() -> Double {
        catchUp()
        return now
    }

    /// Takes an accessory off the network or brings it back. A bridge takes its bridged
    /// accessories with it.
    @discardableResult
    public func setReachable(_ accessoryID: String, _ reachable: Bool) -> Bool {
        guard let ai = index(of: accessoryID) else { return false }
        catchUp()
        let affected = [ai] + accessoryList.indices.filter { accessoryList[$0].bridgeID == accessoryID }
        for i in affected where accessoryList[i].isReachable != reachable {
            accessoryList[i].isReachable = reachable
            hub.yield(.reachabilityChanged(id: accessoryList[i].id, isReachable: reachable))
        }
        return true
    }

    /// Something blocks the door (or stops blocking it). A moving door stops; a cleared
    /// obstruction lets the next target write move it again. Returns false if the accessory
    /// has nothing that can be obstructed.
    @discardableResult
    public func triggerObstruction(_ accessoryID: String, _ obstructed: Bool = true) -> Bool {
        guard let ai = index(of: accessoryID) else { return false }
        catchUp()
        var handled = false
        for key in engines.keys.filter({ $0.accessoryID == accessoryID }).sorted(by: Self.keyOrder) {
            runEngine(key) { engine, ctx in
                if engine.setObstructed(obstructed, &ctx) { handled = true }
            }
        }
        if !handled {
            // No door behaviour: flip any obstruction sensor the accessory has.
            for (si, service) in accessoryList[ai].services.enumerated() {
                if let ci = service.characteristics.firstIndex(where: { $0.type == HAPType.obstructionDetected }) {
                    store(.bool(obstructed), ai, si, ci)
                    handled = true
                }
            }
        }
        process(until: now)
        return handled
    }

    /// Changes a value from the device side (a button pressed on the accessory): no write
    /// permission needed, but the value must suit the characteristic.
    public func setValue(_ address: CharacteristicAddress, _ value: CharacteristicValue) throws(AccessoryError) {
        catchUp()
        let (ai, si, ci) = try locate(address)
        let c = accessoryList[ai].services[si].characteristics[ci]
        do {
            let checked = try ValueCodec.validate(value, metadata: c.metadata, label: label(ai, si, ci))
            store(checked, ai, si, ci)
        } catch {
            throw AccessoryError(.invalidValue, error.message)
        }
        let serviceIID = accessoryList[ai].services[si].iid
        for key in engineKeys(accessoryList[ai].id, serviceIID) {
            runEngine(key) { engine, ctx in engine.didWrite(c.type, &ctx) }
        }
        process(until: now)
    }

    /// The stored value, whatever the accessory's reachability (for tests).
    public func value(_ address: CharacteristicAddress) -> CharacteristicValue? {
        catchUp()
        guard let (ai, si, ci) = try? locate(address) else { return nil }
        return accessoryList[ai].services[si].characteristics[ci].value
    }

    public func notificationsEnabled() -> Set<CharacteristicAddress> { notifying.addresses }

    /// Puts an event into the streams as if it happened (tests use it as a marker).
    func emit(_ event: SourceEvent) { hub.yield(event) }

    /// Accessory ids in the order identify requests arrived.
    public func identifyRequests() -> [String] { identifyLog }

    /// Adds an accessory (or replaces one with the same id, reported as a change).
    public func add(_ accessory: Accessory, behaviours: [ServiceBehaviour] = [], automaticBehaviours: Bool = true) {
        catchUp()
        let replaced = index(of: accessory.id) != nil
        if replaced { dropState(of: accessory.id) }
        if let ai = index(of: accessory.id) {
            accessoryList[ai] = accessory
        } else {
            accessoryList.append(accessory)
            positions = nil
        }
        for service in accessory.services {
            let kinds = Self.kinds(
                for: service, accessoryID: accessory.id, explicit: behaviours, automatic: automaticBehaviours)
            for (index, kind) in kinds.enumerated() {
                guard let engine = makeEngine(kind) else { continue }
                let key = EngineKey(accessoryID: accessory.id, serviceIID: service.iid, index: index)
                engines[key] = engine
                engineIndexLimit = max(engineIndexLimit, key.index + 1)
                runEngine(key) { engine, ctx in engine.start(&ctx) }
            }
        }
        guard let ai = index(of: accessory.id) else { return }
        hub.yield(replaced ? .accessoryChanged(accessoryList[ai]) : .accessoryAdded(accessoryList[ai]))
    }

    /// Removes an accessory; removing a bridge removes its bridged accessories too.
    @discardableResult
    public func remove(accessoryID: String) -> Bool {
        guard index(of: accessoryID) != nil else { return false }
        catchUp()
        let ids = [accessoryID] + accessoryList.filter { $0.bridgeID == accessoryID }.map(\.id)
        for id in ids {
            dropState(of: id)
            accessoryList.removeAll { $0.id == id }
            positions = nil
            hub.yield(.accessoryRemoved(id: id))
        }
        return true
    }

    /// Renames an accessory as its owner would in its app: the name and the accessory
    /// information's Name characteristic change together.
    @discardableResult
    public func rename(accessoryID: String, to name: String) -> Bool {
        guard let ai = index(of: accessoryID) else { return false }
        accessoryList[ai].name = name
        for si in accessoryList[ai].services.indices
        where accessoryList[ai].services[si].type == StandardUUID.accessoryInformation {
            for ci in accessoryList[ai].services[si].characteristics.indices
            where accessoryList[ai].services[si].characteristics[ci].type == StandardUUID.name {
                accessoryList[ai].services[si].characteristics[ci].value = .string(name)
            }
        }
        hub.yield(.accessoryChanged(accessoryList[ai]))
        return true
    }

    private func dropState(of accessoryID: String) {
        for key in engines.keys where key.accessoryID == accessoryID { engines[key] = nil }
        pending.removeAll { $0.key.accessoryID == accessoryID }
        notifying.removeAccessory(accessoryID)
    }
}
