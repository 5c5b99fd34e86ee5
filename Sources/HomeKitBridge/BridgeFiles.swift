public import Foundation
public import HAPServer
public import HomeModel

// What a home's bridge keeps in the state directory, under `homekit/<home id>/`: the accessory
// server's identity and pairings (`hap-accessory.json`, the server's own), the setup code and
// setup id (`setup.json`), and the aids and iids handed out (`ids.json`). Every file is 0600.

/// A home's bridge directory and its files.
public struct BridgeFiles: Sendable {
    public let directory: URL

    public init(stateDirectory: String, homeID: String) {
        directory = Self.root(stateDirectory).appendingPathComponent(Self.folderName(homeID))
    }

    /// A standalone accessory's own files (`homekit/<home id>/standalone/<accessory id>/`): the
    /// same files as a bridge's, for its own server, its own setup and its aid 1.
    public init(stateDirectory: String, homeID: String, standalone accessoryID: String) {
        directory = Self(stateDirectory: stateDirectory, homeID: homeID).standaloneRoot
            .appendingPathComponent(Self.folderName(accessoryID))
    }

    /// Where the home's standalone accessories keep their files.
    public var standaloneRoot: URL { directory.appendingPathComponent("standalone") }

    /// The home's standalone accessories that have made their setup, by accessory id.
    public func standaloneFiles() -> [(accessoryID: String, files: BridgeFiles, setup: Setup)] {
        let folders = (try? FileManager.default.contentsOfDirectory(atPath: standaloneRoot.path)) ?? []
        return folders.sorted().compactMap { folder in
            let files = BridgeFiles(directory: standaloneRoot.appendingPathComponent(folder))
            guard let setup = try? files.readSetup(), let id = setup.accessoryID else { return nil }
            return (id, files, setup)
        }
    }

    init(directory: URL) { self.directory = directory }

    /// `homekit/` in the state directory: every home's bridge.
    public static func root(_ stateDirectory: String) -> URL {
        URL(fileURLWithPath: stateDirectory).appendingPathComponent("homekit")
    }

    /// A home id as a file name (ids are UUIDs; anything else is made safe).
    static func folderName(_ homeID: String) -> String {
        String(homeID.map { $0.isLetter || $0.isNumber || $0 == "-" ? $0 : "_" })
    }

    var setupFile: URL { directory.appendingPathComponent("setup.json") }
    var idsFile: URL { directory.appendingPathComponent("ids.json") }

    /// The pairing ids of every home's bridge kept in `stateDirectory`: the gateway's own
    /// accessories, which it never bridges and never pairs with.
    public static func ownPairingIDs(stateDirectory: String) -> Set<String> {
        let root = root(stateDirectory)
        let folders = (try? FileManager.default.contentsOfDirectory(atPath: root.path)) ?? []
        // Each home's bridge, and the standalone accessories beside it.
        let homes = folders.map { BridgeFiles(directory: root.appendingPathComponent($0)) }
        let directories = homes.flatMap { [$0.directory] + $0.standaloneFiles().map(\.files.directory) }
        return Set(directories.compactMap { HAPAccessoryIdentity.pairingID(in: $0) })
    }

    // MARK: Setup

    /// The setup code and the setup id (the four characters of the QR code's payload and of the
    /// announcement's `sh`), kept so that neither changes between starts.
    public struct Setup: Codable, Sendable, Equatable {
        var version = 1
        /// Nil when the config gives the code.
        var setupCode: String?
        public var setupID: String
        /// A standalone accessory's: its id, name and HAP category (the setup URI's, `ci`), so
        /// that `homemqtt homekit code` lists it without the running gateway. Nil for a bridge.
        public var accessoryID: String?
        public var name: String?
        public var category: Int?
        /// True for an accessory served as a Thread accessory (`homekit: thread`); nil otherwise.
        public var thread: Bool?

        enum CodingKeys: String, CodingKey {
            case version, setupCode = "setup-code", setupID = "setup-id", accessoryID = "accessory", name, category
            case thread
        }
    }

    /// The stored setup, or a new one written now (with a random code unless `configured`);
    /// `created` says the file was made now: the first start, when the code is shown in the log.
    func loadSetup(configured: HAPSetupCode?, standalone: Standalone? = nil) throws(ModelError)
        -> (code: HAPSetupCode, setupID: String, created: Bool)
    {
        if var setup = try readSetup() {
            if let standalone, standalone.describes(setup) == false {
                // Renamed, or its category changed: kept for `homemqtt homekit code`.
                standalone.describe(&setup)
                try write(setup, to: setupFile)
            }
            if let configured { return (configured, setup.setupID, false) }
            if let text = setup.setupCode, let code = HAPSetupCode(text) { return (code, setup.setupID, false) }
            // The config gave the code until now: a random one from here on, shown once.
            let code = HAPSetupCode.random()
            setup.setupCode = code.revealed
            try write(setup, to: setupFile)
            return (code, setup.setupID, true)
        }
        let code = configured ?? HAPSetupCode.random()
        var setup = Setup(setupCode: configured == nil ? code.revealed : nil, setupID: Self.randomSetupID())
        standalone?.describe(&setup)
        try write(setup, to: setupFile)
        return (code, setup.setupID, configured == nil)
    }

    /// The random code kept for this home, if any (`homemqtt homekit code`).
    public func storedSetupCode() throws(ModelError) -> HAPSetupCode? {
        try readSetup()?.setupCode.flatMap(HAPSetupCode.init)
    }

    public func readSetup() throws(ModelError) -> Setup? {
        try read(Setup.self, from: setupFile)
    }

    /// Four characters of 0-9 and A-Z.
    static func randomSetupID() -> String {
        let alphabet = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ")
        var generator = SystemRandomNumberGenerator()
        return String((0..<4).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &generator)] })
    }

    /// What a standalone accessory's setup file says of it.
    public struct Standalone: Sendable, Hashable {
        public var accessoryID: String
        public var name: String
        public var category: Int
        /// Served over HAP over CoAP (UDP, `_hap._udp`) as a Thread accessory, not over TCP.
        public var thread: Bool

        public init(accessoryID: String, name: String, category: Int, thread: Bool = false) {
            self.accessoryID = accessoryID
            self.name = name
            self.category = category
            self.thread = thread
        }

        func describes(_ setup: Setup) -> Bool {
            setup.accessoryID == accessoryID && setup.name == name && setup.category == category
                && (setup.thread ?? false) == thread
        }

        func describe(_ setup: inout Setup) {
            setup.accessoryID = accessoryID
            setup.name = name
            setup.category = category
            setup.thread = thread ? true : nil
        }
    }

    // MARK: Ids

    /// - Parameter firstAID: 2 for a bridge (1 is the bridge itself), 1 for a standalone
    ///   accessory (aid 1 is the accessory).
    func loadIDs(firstAID: Int = 2) throws(ModelError) -> BridgeIDs {
        try read(BridgeIDs.self, from: idsFile) ?? BridgeIDs(nextAID: firstAID)
    }

    func save(_ ids: BridgeIDs) throws(ModelError) {
        try write(ids, to: idsFile)
    }

    // MARK: Files

    private func read<T: Decodable>(_ type: T.Type, from file: URL) throws(ModelError) -> T? {
        guard FileManager.default.fileExists(atPath: file.path) else { return nil }
        do {
            return try JSONDecoder().decode(T.self, from: Data(contentsOf: file))
        } catch {
            throw ModelError(code: .corruptDatabase, message: "\(file.path) cannot be read: \(error)")
        }
    }

    private func write<T: Encodable>(_ value: T, to file: URL) throws(ModelError) {
        try AtomicFileWriter.createDirectory(directory)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let data: Data
        do {
            data = try encoder.encode(value)
        } catch {
            throw ModelError(code: .io, message: "cannot encode \(file.lastPathComponent): \(error)")
        }
        try AtomicFileWriter().write(data, to: file)
    }
}

/// The aids and iids a home's bridge handed out, by accessory id and by a key for each service
/// and characteristic. Never reused: an accessory that leaves keeps its entry (it gets the same
/// aid when it comes back), and a key never met again keeps its iid. The Home app files rooms,
/// names and automations under these numbers.
struct BridgeIDs: Codable, Sendable, Equatable {
    var version = 1
    /// The next aid to hand out; 1 is the bridge.
    var nextAID = 2
    var accessories: [String: Entry] = [:]

    struct Entry: Codable, Sendable, Equatable {
        var aid: Int
        /// Services and characteristics share one space of iids per accessory.
        var nextIID = 1
        var iids: [String: Int] = [:]

        enum CodingKeys: String, CodingKey { case aid, nextIID = "next-iid", iids }
    }

    enum CodingKeys: String, CodingKey { case version, nextAID = "next-aid", accessories }

    /// The key of the accessory information service, always iid 1 (HAP asks for it).
    static let informationKey = "information"

    /// The accessory's aid, handed out now if it has none; its information service takes iid 1.
    mutating func aid(for accessoryID: String) -> Int {
        if let entry = accessories[accessoryID] { return entry.aid }
        var entry = Entry(aid: nextAID)
        nextAID += 1
        entry.iids[Self.informationKey] = 1
        entry.nextIID = 2
        accessories[accessoryID] = entry
        return entry.aid
    }

    /// The iid of `key` within the accessory, handed out now if it has none.
    mutating func iid(_ key: String, of accessoryID: String) -> Int {
        _ = aid(for: accessoryID)
        if let iid = accessories[accessoryID]?.iids[key] { return iid }
        let iid = accessories[accessoryID]?.nextIID ?? 1
        accessories[accessoryID]?.iids[key] = iid
        accessories[accessoryID]?.nextIID = iid + 1
        return iid
    }
}
