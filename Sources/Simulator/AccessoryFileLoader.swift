// Accessory files (Config/accessories/*.yml) — the schema, also in Config/accessories/README.md.
//
//   name: Garage Door Opener            # required; unique among all YAML accessories
//   manufacturer: Kilgo Devices, Inc.   # accessory information (defaults: Simulated, Simulated,
//   model: GD-1                         #   SIM-<file>[-<aid>], 1.0.0)
//   serial: KD-0001
//   firmware: 1.0.0
//   hardware: 1.0                       # optional hardware revision
//   category: garage-door-opener        # catalog category name or number; default from the
//                                       #   first service (bridge when `bridged:` is given)
//   room: Garage                        # suggested room
//   reachable: true
//   homekit: standalone                 # bridged (default) or standalone: its own HAP server
//   services:                           # accessory-information is added automatically
//     - type: garage-door-opener        # catalog name, HAP name (GarageDoorOpener) or UUID;
//                                       #   a full UUID not in the catalog is a custom service
//       name: Garage Door               # also the service's Name characteristic
//       primary: true
//       hidden: false
//       behaviour: { travel-time: 12 }  # see below
//       characteristics:                # by catalog name (power-state), HAP name (On) or UUID
//         target-door-state: closed     #   value: valid-value name or number, true/false, text
//         current-door-state: closed
//         brightness: { value: 80, min: 10, max: 90, step: 5, unit: percentage,
//                       valid-values: [..], max-length: 64, permissions: [read, write, notify] }
//       custom:                         # custom characteristics
//         - uuid: 7E536242-341C-4862-BE90-272CE15BD633   # full UUID, once per service
//           name: Fade Rate
//           format: float               # bool uint8 uint16 uint32 uint64 int float string tlv8 data
//           unit: seconds
//           min: 0
//           max: 10
//           step: 0.5
//           valid-values: { 0: slow, 1: fast }          # optional, integer formats
//           max-length: 64              # optional, strings
//           permissions: [read, write, notify]         # default [read, notify]
//           value: 1.0
//   bridged:                            # a bridge's accessories: the same keys except
//     - name: Hall Light                #   `bridged`; aids 2, 3, … in order
//       room: Hallway
//       services: [...]
//
// Required characteristics that a file leaves out are added with a default inside their
// metadata (the lowest valid value, false, 0 clamped into the range, 20 for celsius, "").
//
// Behaviours (`behaviour:` on a service): garage-door-opener `travel-time` (s, default 10);
// lock-mechanism `delay` (s, default 1); thermostat `step` (°C, default 0.1) and `every`
// (s, default 12); any service: `drift: { step, every, min, max }` or
// `script: [ { after: 10, value: 22.5 }, … ]` with `repeat: true|false`, acting on
// `characteristic:` (default: the service's first required read-only characteristic);
// `none: true` turns the automatic behaviour off.
//
// Imports: a `.json` file in the directory is a HAP `/accessories` dump (an array of
// accessories or {"accessories": [...]}); a YAML file may instead say
//   import: dumps/eve_energy.json       # relative to the YAML file
//   room: Kitchen                       # for every accessory of the dump …
//   rooms: { 2: Hallway }               # … or per aid
//   category: outlet
//   reachable: true
// Dump accessories keep their aids and iids; their ids are sim:<file-stem>:<aid>.
//
// Ids: a YAML accessory is sim:<file-stem>; its bridged accessories sim:<file-stem>:<aid>.
// iids: accessory-information is service 1 with characteristics 2…; then each service and its
// characteristics in order (required ones first, then the file's others, then custom ones).

public import Foundation
import Synchronization
public import HomeModel
import Yams

/// What a set of accessory files describes.
public struct SimulatorConfiguration: Sendable {
    public var accessories: [Accessory]
    public var behaviours: [ServiceBehaviour]
    /// What was read but not understood and left out (a dump's value that is not of its
    /// format), one line each, naming the file.
    public var warnings: [String] = []

    public init(accessories: [Accessory] = [], behaviours: [ServiceBehaviour] = []) {
        self.accessories = accessories
        self.behaviours = behaviours
    }
}

public enum AccessoryFileLoader {
    static let fileExtensions: Set<String> = ["yml", "yaml", "json"]

    /// Every `.yml`, `.yaml` and `.json` file directly in the directory, by name.
    public static func load(directory: URL) throws(SimulatorError) -> SimulatorConfiguration {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        } catch {
            throw SimulatorError(file: directory.relativePath, code: .io, message: directoryProblem(directory.path))
        }
        let files = names.sorted()
            .filter { fileExtensions.contains(($0 as NSString).pathExtension.lowercased()) }
            .map { directory.appendingPathComponent($0) }
        return try load(files: files)
    }

    /// Why the accessory directory cannot be listed, in words (Foundation's would be "The
    /// operation could not be completed").
    static func directoryProblem(_ path: String) -> String {
        var info = stat()
        guard stat(path, &info) == 0 else {
            let problem = ConfigText.problem(errno)
            return problem == .notFound ? "no such directory" : "cannot list the directory: \(problem.words)"
        }
        guard info.st_mode & mode_t(S_IFMT) == mode_t(S_IFDIR) else { return "is a file, not a directory" }
        guard let dir = opendir(path) else { return "cannot list the directory: \(ConfigText.problem(errno).words)" }
        closedir(dir)
        return "cannot list the directory"
    }

    /// All files or nothing: the first bad file (in the given order) stops the load.
    public static func load(files: [URL]) throws(SimulatorError) -> SimulatorConfiguration {
        // Each file is read and parsed on its own, on every core: parsing YAML is most of the
        // time a large home takes to load. What spans files (ids, names) is checked after, in
        // order.
        let parsed = Mutex([Result<FileContents, SimulatorError>?](repeating: nil, count: files.count))
        DispatchQueue.concurrentPerform(iterations: files.count) { index in
            let outcome = Result { () throws(SimulatorError) -> FileContents in try loadFile(files[index]) }
            parsed.withLock { $0[index] = outcome }
        }
        var result = SimulatorConfiguration()
        var idSources: [String: String] = [:]
        var names: [String: String] = [:]
        for (url, outcome) in zip(files, parsed.withLock { $0 }) {
            let file = url.relativePath
            guard let outcome else { continue }
            let loaded = try outcome.get()
            for accessory in loaded.config.accessories {
                if let other = idSources[accessory.id] {
                    throw SimulatorError(
                        file: file, code: .duplicateID,
                        message: "accessory id \(accessory.id) is also made by \(other); rename one of the files")
                }
                idSources[accessory.id] = file
            }
            for (name, key) in loaded.authoredNames {
                if let other = names[name.lowercased()] {
                    throw SimulatorError(
                        file: file, key: key, code: .duplicateName,
                        message: "an accessory named '\(name)' is already defined in \(other)")
                }
                names[name.lowercased()] = file
            }
            result.accessories += loaded.config.accessories
            result.behaviours += loaded.config.behaviours
            result.warnings += loaded.config.warnings
        }
        return result
    }

    private static func loadFile(_ url: URL) throws(SimulatorError) -> FileContents {
        let file = url.relativePath
        // Read as bytes and checked here: Foundation would say only that "the file isn't in the
        // correct format", and Yams would quote a control character raw.
        let bytes: [UInt8]
        do {
            bytes = try ConfigText.read(url.path)
        } catch {
            throw SimulatorError(file: file, code: .io, message: error.words)
        }
        let text: String
        switch ConfigText.text(bytes) {
        case .success(let decoded): text = decoded
        case .failure(let problem): throw SimulatorError(file: file, code: .io, message: problem.message)
        }
        let stem = url.deletingPathExtension().lastPathComponent
        if url.pathExtension.lowercased() == "json" {
            return FileContents(
                config: try DumpImporter.load(bytes: Array(text.utf8), file: file, stem: stem), authoredNames: [])
        }
        return try parseFile(yaml: text, file: file, stem: stem, baseDirectory: url.deletingLastPathComponent())
    }

    struct FileContents: Sendable {
        var config: SimulatorConfiguration
        /// Names written in YAML with their keys; dumps are exempt because real devices do
        /// repeat names (two bridged "IPCamera"s).
        var authoredNames: [(String, String)]
    }

    /// Parses one YAML accessory file.
    public static func parse(yaml: String, file: String, stem: String, baseDirectory: URL? = nil) throws(SimulatorError)
        -> SimulatorConfiguration
    {
        try parseFile(yaml: yaml, file: file, stem: stem, baseDirectory: baseDirectory).config
    }

    static func parseFile(yaml: String, file: String, stem: String, baseDirectory: URL?) throws(SimulatorError)
        -> FileContents
    {
        let root: Node?
        do {
            root = try Node.compose(yaml: yaml)
        } catch {
            // Yams puts the position and problem on the first two lines, then a snippet.
            let lines = String(describing: error).split(separator: "\n").prefix(2).map {
                $0.trimmingCharacters(in: .whitespaces)
            }
            throw SimulatorError(
                file: file, code: .yamlSyntax, message: "not valid YAML: \(lines.joined(separator: " "))")
        }
        guard let root else {
            throw SimulatorError(
                file: file, code: .missingKey, message: "the file is empty; it needs at least 'name' and 'services'")
        }
        let map = try FileReader(root, path: "", failure: SimulatorError.reading(file))
        if map.has("import") {
            return FileContents(
                config: try importDump(map, stem: stem, baseDirectory: baseDirectory), authoredNames: [])
        }
        var builder = AccessoryBuilder(file: file, stem: stem)
        return try builder.buildFile(map)
    }

    static func importDump(_ map: FileReader, stem: String, baseDirectory: URL?) throws(SimulatorError)
        -> SimulatorConfiguration
    {
        try map.allowOnly(["import", "room", "rooms", "category", "reachable"])
        let path = try map.requiredString("import")
        let url =
            path.hasPrefix("/")
            ? URL(fileURLWithPath: path) : (baseDirectory ?? URL(fileURLWithPath: ".")).appendingPathComponent(path)
        let bytes: [UInt8]
        do {
            bytes = Array(try Data(contentsOf: url))
        } catch {
            throw map.error("import", .io, "cannot read \(url.relativePath): \(error.localizedDescription)")
        }
        var config = try DumpImporter.load(bytes: bytes, file: url.relativePath, stem: stem)
        let room = try map.string("room")
        var rooms: [UInt64: String] = [:]
        if let roomMap = try map.reader("rooms") {
            for (key, node) in roomMap.entries {
                guard let aid = UInt64(key), config.accessories.contains(where: { $0.aid == aid }) else {
                    throw roomMap.error(
                        key, .unknownAccessory,
                        "the dump has no accessory with aid \(key); aids: \(config.accessories.map { String($0.aid) }.joined(separator: ", "))"
                    )
                }
                guard let name = node.scalar?.string else {
                    throw roomMap.error(key, .invalidValue, "expected a room name")
                }
                rooms[aid] = name
            }
        }
        let category = try map.string("category").map { name throws(SimulatorError) in
            guard let number = Catalog.category(named: name) else {
                throw map.error("category", .unknownType, "unknown category '\(name)'")
            }
            return number
        }
        let reachable = try map.bool("reachable")
        for i in config.accessories.indices {
            if let r = rooms[config.accessories[i].aid] ?? room { config.accessories[i].suggestedRoom = r }
            if let reachable { config.accessories[i].isReachable = reachable }
            if let category, config.accessories[i].aid == 1 { config.accessories[i].category = category }
        }
        return config
    }
}

extension SimulatedHome {
    /// Loads every accessory file of a directory; nothing starts if one of them is bad.
    /// - Parameter hub: where the home reports its events (a `DeferredSource`'s, when the home
    ///   is loaded by the service that runs it).
    /// - Parameter warn: told each line of `SimulatorConfiguration.warnings`.
    public static func load(
        directory: URL, clock: SimulatorClock = .system, hub: EventHub<SourceEvent> = EventHub(),
        warn: (String) -> Void = { _ in }
    ) throws(SimulatorError) -> SimulatedHome {
        let config = try AccessoryFileLoader.load(directory: directory)
        config.warnings.forEach(warn)
        return SimulatedHome(accessories: config.accessories, behaviours: config.behaviours, clock: clock, hub: hub)
    }

    public static func load(files: [URL], clock: SimulatorClock = .system) throws(SimulatorError) -> SimulatedHome {
        let config = try AccessoryFileLoader.load(files: files)
        return SimulatedHome(accessories: config.accessories, behaviours: config.behaviours, clock: clock)
    }
}

/// The category a device most likely has, from the service it exists for.
func inferredCategory(_ services: [AccessoryService]) -> Int {
    let byService: [String: String] = [
        "garage-door-opener": "garage-door-opener", "lightbulb": "lightbulb", "lock-mechanism": "door-lock",
        "outlet": "outlet", "switch": "switch", "thermostat": "thermostat", "fan": "fan", "ventilation-fan": "fan",
        "window-covering": "window-covering", "door": "door", "window": "window", "security-system": "security-system",
        "air-purifier": "air-purifier", "heater-cooler": "heater", "humidifier-dehumidifier": "humidifier",
        "camera-rtp-stream-management": "ip-camera", "doorbell": "video-doorbell", "television": "television",
        "faucet": "faucet", "valve": "sprinkler", "stateless-programmable-switch": "programmable-switch",
    ]
    let candidates = services.filter(\.isPrimary) + services.filter { $0.isUserInteractive && !$0.isPrimary }
    for service in candidates {
        guard let name = Catalog.serviceName(uuid: service.type) else { continue }
        if let category = byService[name].flatMap(Catalog.category(named:)) { return category }
        if name.hasSuffix("-sensor"), let sensor = Catalog.category(named: "sensor") { return sensor }
    }
    return 1
}
