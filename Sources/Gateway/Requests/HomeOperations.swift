// The operations that edit the home database: rooms, and the names and rooms of accessories and
// services. They need no running gateway: without one, the CLI performs them on the state
// directory.
public import HomeModel

/// `room/add`: a new room.
public struct RoomAdd: ManagementOperation {
    public static let name = "room/add"
    public var name: String

    public init(name: String) { self.name = name }

    public init(_ request: RequestReader) throws(GatewayFailure) {
        name = try request.text("name")
    }

    public var fields: [String: JSONValue] { ["name": .string(name)] }

    public func perform(on editor: some HomeEditor) async throws(GatewayFailure) -> JSONValue {
        let name = self.name
        let room = try await editor.change { db throws(ModelError) in try await db.addRoom(named: name) }
        return .object(["id": .string(room.id), "name": .string(room.name)])
    }
}

/// `room/rename`: a room's new name; its accessories' topics follow.
public struct RoomRename: ManagementOperation {
    public static let name = "room/rename"
    /// The room: id, name or topic slug.
    public var room: String
    public var name: String

    public init(room: String, name: String) {
        self.room = room
        self.name = name
    }

    public init(_ request: RequestReader) throws(GatewayFailure) {
        room = try request.text("room")
        name = try request.text("name")
    }

    public var fields: [String: JSONValue] { ["room": .string(room), "name": .string(name)] }

    public func perform(on editor: some HomeEditor) async throws(GatewayFailure) -> JSONValue {
        let room = try await editor.room(named: self.room)
        let name = self.name
        try await editor.change { db throws(ModelError) in try await db.renameRoom(id: room.id, to: name) }
        return .object(["id": .string(room.id), "name": .string(name), "old-name": .string(room.name)])
    }
}

/// `room/remove`: its accessories go to the default room.
public struct RoomRemove: ManagementOperation {
    public static let name = "room/remove"
    /// The room: id, name or topic slug.
    public var room: String

    public init(room: String) { self.room = room }

    public init(_ request: RequestReader) throws(GatewayFailure) {
        room = try request.text("room")
    }

    public var fields: [String: JSONValue] { ["room": .string(room)] }

    public func perform(on editor: some HomeEditor) async throws(GatewayFailure) -> JSONValue {
        let room = try await editor.room(named: self.room)
        try await editor.change { db throws(ModelError) in try await db.removeRoom(id: room.id) }
        return .object(["id": .string(room.id), "name": .string(room.name)])
    }
}

/// `accessory/rename`: a name given to an accessory, or (nil) its own name back.
public struct AccessoryRename: ManagementOperation {
    public static let name = "accessory/rename"
    /// The accessory: id, name or topic.
    public var accessory: String
    public var name: String?

    public init(accessory: String, name: String?) {
        self.accessory = accessory
        self.name = name
    }

    public init(_ request: RequestReader) throws(GatewayFailure) {
        accessory = try request.text("accessory")
        name = try request.optionalText("name")
    }

    public var fields: [String: JSONValue] {
        ["accessory": .string(accessory), "name": name.map(JSONValue.string) ?? .null]
    }

    public func perform(on editor: some HomeEditor) async throws(GatewayFailure) -> JSONValue {
        let accessory = try await editor.accessory(named: self.accessory)
        let name = self.name
        try await editor.change { db throws(ModelError) in try await db.renameAccessory(id: accessory.id, to: name) }
        return .object([
            "id": .string(accessory.id),
            "name": name.map(JSONValue.string) ?? accessory.node.map { .string($0.accessory.name) } ?? .null,
        ])
    }
}

/// `accessory/move`: an accessory assigned to a room.
public struct AccessoryMove: ManagementOperation {
    public static let name = "accessory/move"
    /// The accessory: id, name or topic.
    public var accessory: String
    /// The room: id, name or topic slug.
    public var room: String

    public init(accessory: String, room: String) {
        self.accessory = accessory
        self.room = room
    }

    public init(_ request: RequestReader) throws(GatewayFailure) {
        accessory = try request.text("accessory")
        room = try request.text("room")
    }

    public var fields: [String: JSONValue] { ["accessory": .string(accessory), "room": .string(room)] }

    public func perform(on editor: some HomeEditor) async throws(GatewayFailure) -> JSONValue {
        let accessory = try await editor.accessory(named: self.accessory)
        let room = try await editor.room(named: self.room)
        try await editor.change { db throws(ModelError) in
            try await db.assign(accessoryID: accessory.id, toRoom: room.id)
        }
        return .object(["id": .string(accessory.id), "room": .string(room.name)])
    }
}

/// `accessory/remove`: an accessory out of the home; a paired one also loses its pairing.
public struct AccessoryRemove: ManagementOperation {
    public static let name = "accessory/remove"
    /// The accessory: id, name or topic.
    public var accessory: String

    public init(accessory: String) { self.accessory = accessory }

    public init(_ request: RequestReader) throws(GatewayFailure) {
        accessory = try request.text("accessory")
    }

    public var fields: [String: JSONValue] { ["accessory": .string(accessory)] }

    public func perform(on editor: some HomeEditor) async throws(GatewayFailure) -> JSONValue {
        let accessory = try await editor.accessory(named: self.accessory)
        guard let node = accessory.node else {
            // Only a running source knows it: a paired accessory, whose pairing goes too.
            throw GatewayFailure(
                code: .needsGateway,
                message:
                    "'\(accessory.id)' is only known to the running gateway's sources (a paired accessory: removing it also removes its pairing); start the gateway and try again"
            )
        }
        try await editor.remove(node)
        return .object(["id": .string(accessory.id), "name": .string(node.displayName)])
    }
}

/// `service/rename`: a name given to a service, or (nil) its own name back.
public struct ServiceRename: ManagementOperation {
    public static let name = "service/rename"
    /// The accessory: id, name or topic.
    public var accessory: String
    /// The service: topic slug, name or instance id.
    public var service: String
    public var name: String?

    public init(accessory: String, service: String, name: String?) {
        self.accessory = accessory
        self.service = service
        self.name = name
    }

    public init(_ request: RequestReader) throws(GatewayFailure) {
        accessory = try request.text("accessory")
        service = try request.text("service")
        name = try request.optionalText("name")
    }

    public var fields: [String: JSONValue] {
        ["accessory": .string(accessory), "service": .string(service), "name": name.map(JSONValue.string) ?? .null]
    }

    public func perform(on editor: some HomeEditor) async throws(GatewayFailure) -> JSONValue {
        let accessory = try await editor.accessory(named: self.accessory)
        guard let node = accessory.node else {
            throw GatewayFailure(
                code: .needsGateway,
                message:
                    "the services of '\(self.accessory)' are only known to the running gateway; start it and try again")
        }
        let service = try node.service(named: self.service)
        let name = self.name
        try await editor.change { db throws(ModelError) in
            try await db.renameService(accessoryID: accessory.id, iid: service.iid, to: name)
        }
        return .object([
            "accessory": .string(accessory.id), "iid": .uint(service.iid), "name": name.map(JSONValue.string) ?? .null,
        ])
    }
}
