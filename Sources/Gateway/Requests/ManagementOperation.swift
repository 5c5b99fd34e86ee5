// The management operations (`<base>/$gateway/request/<op>`) as types: each reads its request
// once and performs it on a home editor, the running gateway's or the CLI's without it. One list
// names them all; both dispatch through it, so an operation is written once.
public import HomeModel

/// One management operation: its name on the request topic, its fields, and what it does.
public protocol ManagementOperation: Sendable {
    /// The operation's name: `<base>/$gateway/request/<name>`.
    static var name: String { get }
    /// Whether only the running gateway can perform it (it talks to accessories, the broker
    /// or a source); the CLI then does not edit the home without it.
    static var needsGateway: Bool { get }
    /// Who may send it: declared here, so the ACL file and the web view's check follow the
    /// list of operations instead of a list of names kept beside it.
    static var access: OperationAccess { get }
    /// Reads the request's fields; the dispatcher refuses fields left unread afterwards.
    init(_ request: RequestReader) throws(GatewayFailure)
    /// The request's fields, as `init` reads them: what a client sends.
    var fields: [String: JSONValue] { get }
    /// Performs it; returns the answer's `data`.
    func perform(on editor: some HomeEditor) async throws(GatewayFailure) -> JSONValue
}

extension ManagementOperation {
    public static var needsGateway: Bool { false }
    public static var access: OperationAccess { .home }
}

/// Who may send an operation, beyond the role every request on `$gateway/request` needs
/// (an administrator of the home it is sent to).
public enum OperationAccess: Sendable, Hashable {
    /// An administrator of the home.
    case home
    /// It changes the list of homes or moves accessories between them: an administrator of
    /// every home (`AccessPolicy`).
    case homeList
}

/// An operation only the running gateway can perform. Without it the answer is `needs-gateway`.
public protocol GatewayOperation: ManagementOperation {
    func perform(on gateway: some RunningGateway) async throws(GatewayFailure) -> JSONValue
}

extension GatewayOperation {
    public static var needsGateway: Bool { true }

    public func perform(on editor: some HomeEditor) async throws(GatewayFailure) -> JSONValue {
        guard let gateway = editor.running else {
            throw GatewayFailure(code: .needsGateway, message: "\(Self.name) needs the running gateway")
        }
        return try await perform(on: gateway)
    }
}

/// What an operation changes: the home database and the stored scope, and the names a request
/// uses for rooms and accessories. The running gateway's editor also updates its topics and
/// announces the change; the CLI's without it changes the state directory only.
public protocol HomeEditor: Sendable {
    var database: HomeDatabase { get }
    /// The gateway's own base topic: where the home without a base topic of its own is served.
    var gatewayBase: String { get }
    /// Topic prefixes beside the homes' base topics the gateway publishes under (Home
    /// Assistant's discovery, Homie): no home's base topic may overlap them.
    var reservedTopics: [String] { get }
    /// Whether the list of homes may be changed here: on the gateway of the home on the gateway's
    /// base topic, or by the CLI without it; not on another home's request topic.
    var managesHomes: Bool { get }
    /// The running gateway, for what only it can do; nil when the home is edited without it.
    var running: (any RunningGateway)? { get }
    /// What pairs accessories with the sources (HAP's pairings): the running sources', or,
    /// without the gateway, each kind's over the state directory. A source's own operations
    /// find theirs here by type (`SourceOperation`).
    var pairings: [any PairingManager] { get }

    /// The room `key` names: its id, its name in any case, or its topic slug.
    func room(named key: String) async throws(GatewayFailure) -> Room
    /// The accessory `key` names: its id, topic or name.
    func accessory(named key: String) async throws(GatewayFailure) -> NamedAccessory
    /// The accessories the sources have now, of every home: the running gateway's shared
    /// source; without it, what the sources load alone (no paired accessory: only a running
    /// source reaches those).
    func sourceAccessories() async -> [Accessory]
    /// After the database took a change: the running gateway's topics follow it before the answer.
    func homeChanged() async
    /// The database refused a change: a failure of the storage itself is for the log too.
    func changeRefused(_ error: ModelError) async
    /// Takes an accessory out of the home (a paired one also loses its pairing).
    func remove(_ accessory: TopicTree.AccessoryNode) async throws(GatewayFailure)
    /// The scope in force.
    var scope: ScopeConfig { get async }
    /// Stores `scope` (already read into `filter`) and puts it in force.
    func replaceScope(_ scope: ScopeConfig, filter: ScopeFilter) async throws(GatewayFailure)
}

extension HomeEditor {
    /// Runs a change of the home database: its refusal is answered with the database's code and
    /// message, its success is followed by `homeChanged()`.
    @discardableResult
    public func change<T: Sendable>(_ body: (HomeDatabase) async throws(ModelError) -> T)
        async throws(GatewayFailure) -> T
    {
        do throws(ModelError) {
            let result = try await body(database)
            await homeChanged()
            return result
        } catch {
            await changeRefused(error)
            throw GatewayFailure(code: error.code, message: error.message)
        }
    }
}

/// What only the running gateway does: its tree and topics, its broker, its sources.
public protocol RunningGateway: HomeEditor {
    /// The `tree` document.
    func tree() async throws(GatewayFailure) -> JSONValue
    /// Publishes every retained topic again; returns how many there are.
    func republish() async -> Int
    /// Uptime, broker connection, sources and counts.
    func health() async -> JSONValue
    /// Asks the accessory to identify itself.
    func identify(accessoryID: String) async throws(GatewayFailure)
    /// Accessories paired anew: those removed from the home earlier are welcome again.
    func paired(accessoryIDs: [String]) async
}

/// An accessory a request names: its id, and its node when a source loaded it. Without the
/// gateway, an accessory only a running source knows (a paired one) has no node.
public struct NamedAccessory: Sendable {
    public var id: String
    public var node: TopicTree.AccessoryNode?

    public init(id: String, node: TopicTree.AccessoryNode?) {
        self.id = id
        self.node = node
    }
}

/// The list of management operations, and the one way a request reaches its operation.
public enum ManagementOperations {
    /// The gateway's own operations, in the order `unknown-op` names them. A source's own
    /// (HAP's pairing) come after these: `all(adding:)`.
    public static let core: [any ManagementOperation.Type] = [
        TreeGet.self, Republish.self, Health.self, RoomAdd.self, RoomRename.self, RoomRemove.self,
        AccessoryRename.self, AccessoryMove.self, AccessoryRemove.self, AccessoryIdentify.self, ServiceRename.self,
        ScopeGet.self, ScopeSet.self, HomesList.self, HomeAdd.self, HomeRename.self, HomeRemove.self,
        HomePrimary.self, HomeBaseTopic.self, AccessoryHome.self, SourceHome.self,
    ]

    /// The core operations, then `extra`. A name listed twice is answered by its first type.
    public static func all(adding extra: [any ManagementOperation.Type]) -> [any ManagementOperation.Type] {
        core + extra
    }

    /// Reads `fields` as a request for `name` among `operations` and performs it on `editor`.
    public static func perform(
        _ name: String, fields: [String: JSONValue], among operations: [any ManagementOperation.Type],
        on editor: some HomeEditor
    ) async throws(GatewayFailure) -> JSONValue {
        try await perform(try make(name, fields: fields, among: operations), on: editor)
    }

    /// Reads `fields` as a request for `name` among `operations`: the operation, ready to
    /// perform, or why not (`unknown-op`, a field missing, unknown or of the wrong type).
    public static func make(
        _ name: String, fields: [String: JSONValue], among operations: [any ManagementOperation.Type]
    ) throws(GatewayFailure) -> any ManagementOperation {
        let request = try RequestReader.request(fields)
        guard let type = named(name, among: operations) else {
            throw GatewayFailure(
                code: .unknownOp,
                message: "unknown operation '\(name)'; known: \(operations.map { $0.name }.joined(separator: ", "))")
        }
        let operation = try type.init(request)
        try request.finish()
        return operation
    }

    /// Performs `operation` on `editor` as its access allows: the one way every operation is
    /// performed, by name (the CLI without the gateway) or as a value (the gateway's commands).
    public static func perform(_ operation: any ManagementOperation, on editor: some HomeEditor)
        async throws(GatewayFailure) -> JSONValue
    {
        let type = type(of: operation)
        // As declared, once for every such operation: the list of homes changes only on the
        // gateway's base topic (or without the gateway).
        if type.access == .homeList { try editor.requireHomesEditor(type.name) }
        return try await operation.perform(on: editor)
    }

    /// The operation `name` of `operations`, if listed.
    public static func named(_ name: String, among operations: [any ManagementOperation.Type])
        -> (any ManagementOperation.Type)?
    {
        operations.first { $0.name == name }
    }
}
