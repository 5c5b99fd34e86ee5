import HomeModel

// What a command is checked against when it is submitted: the current tree (a view's address
// may come from a tree that a scope change or a removal has replaced since) and the value's
// metadata. A typed caller had no payload to parse, so its value is validated here again.
extension TopicTree {
    /// The node `address` names, if a write of `value` may go to it.
    func writable(_ address: CharacteristicAddress, _ value: CharacteristicValue)
        -> Result<CharacteristicNode, GatewayFailure>
    {
        guard let node = characteristic(address) else { return .failure(.gone(describe(address))) }
        if node.isReadOnlyScope {
            return .failure(
                GatewayFailure(
                    code: .readOnlyScope,
                    message: "\(node.typeName) of this accessory is read-only by the gateway's scope configuration"))
        }
        let metadata = ValueCodec.withStandardBounds(node.characteristic.metadata, type: node.characteristic.type)
        do throws(ModelError) {
            try ValueCodec.checkWritable(metadata, label: node.typeName)
            try ValueCodec.validate(value, metadata: metadata, label: node.typeName)
        } catch {
            return .failure(GatewayFailure(error))
        }
        return .success(node)
    }

    /// A service's primary control and the value that flips it from its `current` value.
    func toggle(
        _ accessoryID: String, _ serviceIID: UInt64, label: String,
        current: (CharacteristicAddress) -> CharacteristicValue?
    ) -> Result<(CharacteristicNode, CharacteristicValue), GatewayFailure> {
        guard let accessory = self.accessory(id: accessoryID),
            let service = accessory.services.first(where: { $0.service.iid == serviceIID })
        else { return .failure(.gone(label)) }
        guard let node = PrimaryControl.characteristic(in: service) else {
            return .failure(
                GatewayFailure(
                    code: .notToggleable,
                    message: "a \(service.typeName) service has no primary control in scope to toggle"))
        }
        if node.isReadOnlyScope {
            return .failure(
                GatewayFailure(
                    code: .readOnlyScope,
                    message: "\(node.typeName) of this accessory is read-only by the gateway's scope configuration"))
        }
        guard let value = PrimaryControl.flipped(node, current: current(node.address)) else {
            return .failure(GatewayFailure(code: .notToggleable, message: "no value to flip to"))
        }
        return .success((node, value))
    }

    /// Where a command's subject is in the tree, for the events page and errors.
    func describe(_ command: GatewayCommand) -> String {
        switch command {
        case .write(let address, _), .read(let address): describe(address)
        case .toggle(let accessoryID, let iid):
            accessory(id: accessoryID)?.services.first { $0.service.iid == iid }?.topic
                ?? "\(accessoryID) service \(iid)"
        case .identify(let accessoryID), .writeMany(let accessoryID, _):
            accessory(id: accessoryID)?.topic ?? accessoryID
        case .manage(let operation): "operation \(type(of: operation).name)"
        }
    }

    func describe(_ address: CharacteristicAddress) -> String {
        characteristic(address)?.topic ?? "\(address.accessoryID) \(address.iid)"
    }
}

extension GatewayFailure {
    /// A command's subject is no longer in the tree (a scope change or a removal since the
    /// caller looked).
    static func gone(_ label: String) -> GatewayFailure {
        GatewayFailure(code: .unknownTopic, message: "'\(label)' is no longer in the tree")
    }
}
