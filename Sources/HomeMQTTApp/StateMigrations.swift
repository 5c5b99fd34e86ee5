import Foundation
public import Gateway
public import HomeModel
import HAP

// The state directory's format (HomeModel's StateFormat) with the migrations of this app's files:
// the home database, the run-time scope, HAP pairings and the record of published topics.

extension HomeMQTTApp {
    /// The state directory `config` names, with every migration from format 1 to the current one.
    public static func stateFormat(_ config: GatewayConfig) -> StateFormat {
        StateFormat(
            directory: URL(fileURLWithPath: config.stateDirectory), version: HomeMQTTVersion.current,
            migrations: stateMigrations)
    }

    /// Brings the state directory up to the current format before anything reads it (see
    /// `StateFormat.prepare`): every command that uses the state directory calls this first.
    @discardableResult
    public static func prepareState(_ config: GatewayConfig) throws(ModelError) -> StateFormat.Upgrade? {
        try stateFormat(config).prepare()
    }

    /// Format 1 is every state directory written before `state.json` existed (up to 0.9.0):
    /// `home.json` already carried its version, `published/*.json` too; the scope and the
    /// pairing files did not. Format 2 gives them `"version": 1`, so that a later change to
    /// either can be told from this one. Format 3 raises home.json to version 2 (several homes).
    static let stateMigrations: [StateFormat.Migration] = [
        StateFormat.Migration(from: 1, summary: "scope.json and the pairing files carry their version") {
            directory throws(ModelError) in
            try FileVersion.stampIfMissing(directory.appendingPathComponent("scope.json"), version: 1)
            let pairings = directory.appendingPathComponent(HAPFactory.pairingDirectory)
            for name in (try? FileManager.default.contentsOfDirectory(atPath: pairings.path)) ?? []
            where HAPPairingStore.isPairingFile(name) {
                try FileVersion.stampIfMissing(pairings.appendingPathComponent(name), version: 1)
            }
        },
        // Format 3: several homes. home.json version 2 gives each home a base topic and
        // source prefixes; a version 1 file is its one home on the gateway's base topic.
        StateFormat.Migration(from: 2, summary: "home.json is version 2 (several homes)") {
            directory throws(ModelError) in
            try HomeDatabase.upgradeFile(in: directory)
        },
    ]
}
