public import Foundation
public import HomeModel
import Synchronization

/// The node id each accessory was first discovered with, kept in the state directory
/// (`homeassistant/identity.json`) and used wherever the accessory goes afterwards: moved to
/// another home (another base topic) and back, its config topic, its device identifier and
/// every unique id stay what they were, so Home Assistant keeps its entities, their entity ids
/// and the automations that name them.
///
/// An accessory met for the first time gets the id today's rule gives on the base it is met on
/// (`HomeAssistantDiscovery.nodeID`): on a state directory from before this file existed, the
/// first start records exactly the ids the configs on the broker already carry. Two gateways on
/// one broker have two bases, so ids they hand out never meet; an id already recorded for
/// another accessory is never handed out again (the hashed form instead).
///
/// Beside each id: the base of the home whose gateway last published the accessory's config.
/// A home an accessory left leaves its config to the home that holds it now, which publishes it
/// or, when the accessory is out of its scope, clears it (`HomeAssistantOutput`): whichever of
/// the two homes' gateways passes first, the config topic is cleared or published by one
/// connection only, never cleared by one after the other published it.
///
/// Every home of one gateway shares one instance (`shared(stateDirectory:)`); its gateways
/// call it from their own actors, so its state is behind a lock.
public final class HomeAssistantIdentity: Sendable {
    public struct Entry: Codable, Sendable, Equatable {
        public var nodeID: String
        /// The base topic of the home whose gateway published the config last; nil when it is
        /// not on the broker (cleared, or never published).
        public var publishedOn: String?

        enum CodingKeys: String, CodingKey { case nodeID = "node-id", publishedOn = "published-on" }
    }

    struct File: Codable {
        var version = 1
        var accessories: [String: Entry] = [:]
    }

    struct State {
        var entries: [String: Entry] = [:]
        var accessoryByNode: [String: String] = [:]
        /// Marks changed since the file was last written.
        var dirty = false
    }

    /// Nil for an identity held in memory only.
    public let file: URL?
    private let state: Mutex<State>

    public static let fileName = "homeassistant/identity.json"

    /// The identity in `stateDirectory`: the file's, or none yet. An unreadable file is an error
    /// (a new one would give every accessory a new id).
    public init(stateDirectory: String?) throws(ModelError) {
        file = stateDirectory.map { URL(fileURLWithPath: $0).appendingPathComponent(Self.fileName) }
        var state = State()
        if let file, let data = FileManager.default.contents(atPath: file.path) {
            let stored: File
            do {
                stored = try JSONDecoder().decode(File.self, from: data)
            } catch {
                throw ModelError(code: .corruptDatabase, message: "\(file.path) cannot be read: \(error)")
            }
            guard stored.version == 1 else {
                throw ModelError(code: .corruptDatabase, message: "\(file.path): not version 1")
            }
            state.entries = stored.accessories
            for (id, entry) in stored.accessories { state.accessoryByNode[entry.nodeID] = id }
        }
        self.state = Mutex(state)
    }

    /// One instance per state directory while any home's output holds it, so that every home
    /// of a gateway sees the ids the others hand out; a gateway made again later (a restart in
    /// one process) reads the file again.
    public static func shared(stateDirectory: String) throws(ModelError) -> HomeAssistantIdentity {
        let key = URL(fileURLWithPath: stateDirectory).standardizedFileURL.path
        return try registry.withLock { instances throws(ModelError) in
            if let kept = instances[key]?.value { return kept }
            let made = try HomeAssistantIdentity(stateDirectory: stateDirectory)
            instances[key] = Weak(value: made)
            return made
        }
    }

    private struct Weak: @unchecked Sendable { weak var value: HomeAssistantIdentity? }
    private static let registry = Mutex<[String: Weak]>([:])

    /// The node id of every accessory of `accessoryIDs`: the recorded one, or one handed out and
    /// recorded now (in id order, as `HomeAssistantDiscovery.nodeIDs` gives them on `base`);
    /// `flush` writes the new ones.
    public func nodeIDs(for accessoryIDs: [String], base: String) -> [String: String] {
        state.withLock { state in
            var out: [String: String] = [:]
            var new: [String] = []
            for id in accessoryIDs {
                if let entry = state.entries[id] { out[id] = entry.nodeID } else { new.append(id) }
            }
            guard !new.isEmpty else { return out }
            for id in Set(new).sorted() {
                let plain = HomeAssistantDiscovery.nodeID(accessoryID: id, base: base)
                let nodeID =
                    state.accessoryByNode[plain] == nil ? plain : "\(plain)_\(HomeAssistantDiscovery.fnv1a(id))"
                state.entries[id] = Entry(nodeID: nodeID)
                state.accessoryByNode[nodeID] = id
                out[id] = nodeID
            }
            state.dirty = true
            return out
        }
    }

    /// The accessory whose node id this is, if any was handed out.
    public func accessoryID(ofNode nodeID: String) -> String? {
        state.withLock { $0.accessoryByNode[nodeID] }
    }

    public func entry(_ accessoryID: String) -> Entry? { state.withLock { $0.entries[accessoryID] } }

    /// Notes where the accessory's config is now (nil: cleared); written by `flush`.
    public func setPublished(_ accessoryID: String, on base: String?) {
        state.withLock { state in
            guard var entry = state.entries[accessoryID], entry.publishedOn != base else { return }
            entry.publishedOn = base
            state.entries[accessoryID] = entry
            state.dirty = true
        }
    }

    /// Writes the ids and marks set since the last write (kept in memory and written at the
    /// next flush when this one fails).
    public func flush() throws(ModelError) {
        try state.withLock { state throws(ModelError) in
            guard state.dirty else { return }
            try save(&state)
        }
    }

    private func save(_ state: inout State) throws(ModelError) {
        guard let file else {
            state.dirty = false
            return
        }
        let entries = state.entries
        try AtomicFileWriter.createDirectory(file.deletingLastPathComponent())
        // Written as it is made, in the layout `JSONEncoder` gave it (pretty, keys sorted): its
        // document of 10,000 accessories was 8 MB at the start-up's peak. Read back by `File`.
        try AtomicFileWriter().write(to: file) { (stream: inout AtomicFileWriter.Stream) throws(ModelError) in
            try stream.append("{\n  \"accessories\" : {".utf8)
            for (index, (id, entry)) in entries.sorted(by: { $0.key < $1.key }).enumerated() {
                try stream.append((index == 0 ? "\n    " : ",\n    ").utf8)
                try stream.appendJSONString(id)
                try stream.append(" : {\n      \"node-id\" : ".utf8)
                try stream.appendJSONString(entry.nodeID)
                if let base = entry.publishedOn {
                    try stream.append(",\n      \"published-on\" : ".utf8)
                    try stream.appendJSONString(base)
                }
                try stream.append("\n    }".utf8)
            }
            try stream.append("\n  },\n  \"version\" : \(File().version)\n}\n".utf8)
        }
        state.dirty = false
    }
}
