// The operations on the gateway itself: its tree, its topics, its health, an accessory's
// identify, and the scope (what of the home is on MQTT).
import Foundation
public import HomeModel

/// `tree`: the tree document, as `<base>/$gateway/tree` holds it.
public struct TreeGet: GatewayOperation {
    public static let name = "tree"

    public init() {}
    public init(_ request: RequestReader) throws(GatewayFailure) {}
    public var fields: [String: JSONValue] { [:] }

    public func perform(on gateway: some RunningGateway) async throws(GatewayFailure) -> JSONValue {
        try await gateway.tree()
    }
}

/// `republish`: every retained topic published again.
public struct Republish: GatewayOperation {
    public static let name = "republish"

    public init() {}
    public init(_ request: RequestReader) throws(GatewayFailure) {}
    public var fields: [String: JSONValue] { [:] }

    public func perform(on gateway: some RunningGateway) async throws(GatewayFailure) -> JSONValue {
        .object(["topics": .int(Int64(await gateway.republish()))])
    }
}

/// `health`: uptime, broker connection, sources and counts.
public struct Health: GatewayOperation {
    public static let name = "health"

    public init() {}
    public init(_ request: RequestReader) throws(GatewayFailure) {}
    public var fields: [String: JSONValue] { [:] }

    public func perform(on gateway: some RunningGateway) async throws(GatewayFailure) -> JSONValue {
        await gateway.health()
    }
}

/// `accessory/identify`: the accessory shows itself (a blink, a beep).
public struct AccessoryIdentify: GatewayOperation {
    public static let name = "accessory/identify"
    /// The accessory: id, name or topic.
    public var accessory: String

    public init(accessory: String) { self.accessory = accessory }

    public init(_ request: RequestReader) throws(GatewayFailure) {
        accessory = try request.text("accessory")
    }

    public var fields: [String: JSONValue] { ["accessory": .string(accessory)] }

    public func perform(on gateway: some RunningGateway) async throws(GatewayFailure) -> JSONValue {
        let accessory = try await gateway.accessory(named: self.accessory)
        try await gateway.identify(accessoryID: accessory.id)
        return .object(["id": .string(accessory.id)])
    }
}

/// `scope/get`: the scope in force.
public struct ScopeGet: ManagementOperation {
    public static let name = "scope/get"

    public init() {}
    public init(_ request: RequestReader) throws(GatewayFailure) {}
    public var fields: [String: JSONValue] { [:] }

    public func perform(on editor: some HomeEditor) async throws(GatewayFailure) -> JSONValue {
        try await editor.scope.requestJSON()
    }
}

/// `scope/set`: a new scope, stored in the state directory and put in force.
public struct ScopeSet: ManagementOperation {
    public static let name = "scope/set"
    /// An object like `scope/get` answers; read when performed, strictly.
    public var scope: JSONValue

    public init(scope: JSONValue) { self.scope = scope }

    public init(_ request: RequestReader) throws(GatewayFailure) {
        guard let scope = request.node("scope") else {
            throw GatewayFailure(
                code: .missingField, message: "\(Self.name) needs \"scope\": an object like \(ScopeGet.name) returns")
        }
        self.scope = scope
    }

    public var fields: [String: JSONValue] { ["scope": scope] }

    public func perform(on editor: some HomeEditor) async throws(GatewayFailure) -> JSONValue {
        let newScope = try ScopeConfig(request: scope)
        let filter: ScopeFilter
        do throws(ConfigError) {
            filter = try ScopeFilter(newScope, file: Self.name)
        } catch {
            throw GatewayFailure(code: .invalidScope, message: error.description)
        }
        try await editor.replaceScope(newScope, filter: filter)
        return try newScope.requestJSON()
    }
}

extension ScopeConfig {
    /// The scope as `scope/get` answers it.
    func requestJSON() throws(GatewayFailure) -> JSONValue {
        do {
            let data = try JSONEncoder().encode(self)
            return try JSONValue(parsing: Array(data))
        } catch {
            throw GatewayFailure(code: .internal, message: "cannot encode the scope: \(error)")
        }
    }

    /// Read strictly, as the config file's scope is: a key left out keeps its default, an
    /// unknown or ill-typed one is an error naming it (`scope.rooms.alow`).
    init(request value: JSONValue) throws(GatewayFailure) {
        let fields = try RequestReader(value, path: "scope", failure: GatewayFailure.requestField)
        func list(_ key: String) throws(GatewayFailure) -> ScopeList? {
            try ScopeList.read(key, in: fields, single: false)
        }
        self.init()
        if let v = try list("manufacturers") { manufacturers = v }
        if let v = try fields.bool("user-interactive-only") { userInteractiveOnly = v }
        if let v = try list("service-types") { serviceTypes = v }
        if let v = try list("characteristic-types") { characteristicTypes = v }
        if let v = try list("rooms") { rooms = v }
        if let v = try list("accessories") { accessories = v }
        if let v = try fields.strings("read-only") { readOnly = v }
        rateLimits = try RateLimit.readList("rate-limits", in: fields)
        if fields.has("services") {
            throw fields.error(
                "services", .unknownKey,
                "services is the config file's older name of user-interactive-only; send \"user-interactive-only\": false for all"
            )
        }
        try fields.finish()
    }
}
