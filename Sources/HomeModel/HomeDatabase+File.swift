public import Foundation

// The home database's file: reading it (refusing a corrupt or newer one), writing it, and the
// state format's upgrade of an older one.

extension HomeDatabase {
    static func load(_ file: URL) throws(ModelError) -> Document? {
        let bytes: [UInt8]
        do {
            guard FileManager.default.fileExists(atPath: file.path) else { return nil }
            bytes = Array(try Data(contentsOf: file))
        } catch {
            throw ModelError(
                code: .io, message: "could not read the home database \(file.path): \(error.localizedDescription)")
        }
        func corrupt(_ why: String) -> ModelError {
            ModelError(
                code: .corruptDatabase,
                message:
                    "the home database \(file.path) is corrupt (\(why)); it was left as it is — fix or move it away")
        }
        let json: JSONValue
        do { json = try JSONValue(parsing: bytes) } catch { throw corrupt(error.message) }
        guard let version = json["version"]?.int64Value else { throw corrupt("no \"version\"") }
        if version > Int64(currentVersion) {
            throw ModelError(
                code: .unsupportedVersion,
                message:
                    "the home database \(file.path) is version \(version), written by a newer HomeMQTT; this one reads version \(currentVersion). It was left as it is"
            )
        }
        guard version >= 1 else { throw corrupt("version \(version)") }
        var document: Document
        do {
            document = try JSONDecoder().decode(Document.self, from: Data(bytes))
        } catch {
            throw corrupt("\(error)")
        }
        // Version 1 held one home, served on the gateway's base topic: it reads as version 2.
        document.version = currentVersion
        guard document.homes.contains(where: { $0.id == document.primaryHomeID }) else {
            throw corrupt("the primary home \(document.primaryHomeID) is missing")
        }
        return document
    }

    /// The state format's migration to format 3: rewrites an older `home.json` in `directory`
    /// as the current version. Safe to run again; a missing file stays missing. The caller
    /// holds the database's lock (`StateFormat.prepare`).
    public static func upgradeFile(in directory: URL) throws(ModelError) {
        let file = directory.appendingPathComponent(fileName)
        guard let data = FileManager.default.contents(atPath: file.path),
            let version = (try? JSONValue(parsing: Array(data)))?["version"]?.int64Value,
            version < Int64(currentVersion), let document = try load(file)
        else { return }
        try save(document, to: file, writer: AtomicFileWriter())
    }

    static func save(_ document: Document, _ storage: Storage) throws(ModelError) {
        try save(document, to: storage.file, writer: storage.writer)
    }

    static func save(_ document: Document, to file: URL, writer: AtomicFileWriter) throws(ModelError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let data: Data
        do { data = try encoder.encode(document) } catch {
            throw ModelError(code: .io, message: "could not encode the home database: \(error)")
        }
        try writer.write(Array(data) + [0x0A], to: file)
    }
}
