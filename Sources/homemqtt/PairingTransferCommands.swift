import ArgumentParser
import Foundation
import HAP
import HomeMQTTApp
import HomeModel

// Pairings moved, not reset: import-pairing (HomeMQTT added through another controller's
// pairing), and the accessory's own list of controllers: accessory-pairings, add-pairing,
// remove-pairing. None prints a private key.

struct ImportPairingCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import-pairing",
        abstract: "Add HomeMQTT to accessories another controller (aiohomekit, Home Assistant) is paired with.",
        discussion:
            "FILE is aiohomekit's pairing data, or Home Assistant's .storage/core.config_entries (its homekit_controller entries). For each accessory, HomeMQTT uses that pairing once to add an admin pairing of its own, checks it, and saves only its own: the other controller keeps working with its keys. The imported pairing must be an admin."
    )

    @OptionGroup var options: HAPCommandOptions
    @Argument(help: "The pairing file.") var file: String
    @Option(help: "The accessory's pairing id, when the file holds several.") var accessory: String?
    @Option(help: "A name for the pairing (default: the entry's title or alias).") var name: String?

    func run() async throws {
        let controller = try options.controller()
        guard let data = FileManager.default.contents(atPath: file) else {
            throw HAPCommandOptions.fail("cannot read \(file)", exit: 2)
        }
        var found: [ForeignPairing]
        do {
            found = try ForeignPairing.parse(Array(data), file: file)
        } catch {
            throw HAPCommandOptions.fail(error.message, exit: 2)
        }
        if name != nil && accessory == nil && found.count > 1 {
            throw HAPCommandOptions.fail("\(file) holds \(found.count) pairings: --name needs --accessory", exit: 2)
        }
        if let accessory {
            found = found.filter { $0.accessoryPairingID.caseInsensitiveCompare(accessory) == .orderedSame }
            guard !found.isEmpty else {
                throw HAPCommandOptions.fail("\(file) has no pairing with accessory \(accessory)", exit: 2)
            }
        }
        var failed = false
        for foreign in found {
            do {
                let pairing = try await controller.importPairing(foreign, name: name)
                print(
                    "added HomeMQTT's pairing to \(pairing.accessoryPairingID) (\(pairing.name ?? "—")) at \(pairing.host):\(pairing.port); controller \(foreign.controllerPairingID) keeps its own"
                )
            } catch  where error.code == .alreadyPaired && found.count > 1 {
                // Importing a whole file again after a partial failure: the ones done stay done.
                print("skipped \(foreign.accessoryPairingID): \(error.message)")
            } catch {
                failed = true
                FileHandle.standardError.write(
                    Data(
                        "homemqtt: importing \(foreign.accessoryPairingID) failed (\(error.code)): \(error.message)\n"
                            .utf8))
            }
        }
        if failed { throw ExitCode(1) }
    }
}

struct AccessoryPairingsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "accessory-pairings",
        abstract: "List the controllers a paired accessory knows (its /pairings), HomeMQTT among them."
    )

    @OptionGroup var options: HAPCommandOptions
    @Argument(help: "The pairing id (as `homemqtt hap pairings` lists it).") var id: String

    func run() async throws {
        let controller = try options.controller(writing: false)
        do {
            let own = try await controller.pairings()
                .first { $0.accessoryPairingID.caseInsensitiveCompare(id) == .orderedSame }?.controllerPairingID
            for entry in try await controller.accessoryPairings(id: id) {
                let mark =
                    own.map { entry.controllerPairingID.caseInsensitiveCompare($0) == .orderedSame } == true
                    ? "  (HomeMQTT)" : ""
                print("\(entry.controllerPairingID)  \(entry.isAdmin ? "admin" : "user ")  \(entry.publicKey)\(mark)")
            }
        } catch {
            throw HAPCommandOptions.fail("listing the controllers of \(id)", error)
        }
    }
}

struct AddPairingCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add-pairing",
        abstract: "Add another controller to a paired accessory (HomeMQTT's pairing must be an admin)."
    )

    @OptionGroup var options: HAPCommandOptions
    @Argument(help: "The pairing id (as `homemqtt hap pairings` lists it).") var id: String
    @Option(help: "The other controller's pairing id (a UUID: HAP-python accepts no other).") var controllerID: String
    @Option(help: "The other controller's Ed25519 public key, 64 hex digits.") var publicKey: String
    @Flag(help: "Make it an admin, which may add and remove controllers in turn.") var admin = false

    func run() async throws {
        let controller = try options.controller(writing: false)
        guard let key = [UInt8](hex: publicKey) else {
            throw HAPCommandOptions.fail("--public-key must be hex digits", exit: 2)
        }
        do {
            try await controller.addPairing(id: id, controllerPairingID: controllerID, publicKey: key, admin: admin)
        } catch {
            throw HAPCommandOptions.fail("adding controller \(controllerID) to \(id)", error)
        }
        print("added controller \(controllerID) to \(id) as \(admin ? "an admin" : "a user")")
    }
}

struct RemovePairingCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove-pairing",
        abstract: "Remove another controller from a paired accessory (HomeMQTT's own: unpair)."
    )

    @OptionGroup var options: HAPCommandOptions
    @Argument(help: "The pairing id (as `homemqtt hap pairings` lists it).") var id: String
    @Option(help: "The controller's pairing id, as accessory-pairings lists it.") var controllerID: String

    func run() async throws {
        let controller = try options.controller(writing: false)
        do {
            try await controller.removePairing(id: id, controllerPairingID: controllerID)
        } catch {
            throw HAPCommandOptions.fail("removing controller \(controllerID) from \(id)", error)
        }
        print("removed controller \(controllerID) from \(id)")
    }
}

/// What the pairing-transfer commands share: the pairing store of the config's state
/// directory, and failures as one line on stderr. No command prints or logs a key.
struct HAPCommandOptions: ParsableArguments {
    @OptionGroup var config: ConfigOptions
    @Flag(name: .shortAndLong, help: "Log what the HAP controller does (on stderr).") var verbose = false

    /// `<state-directory>/pairings` of the config.
    /// - Parameter writing: the command changes pairings (see `Setup.prepareState`).
    func store(writing: Bool = false) throws -> HAPPairingStore {
        do {
            let config = try Setup.loadConfig(config)
            try Setup.prepareState(config, writing: writing)
            return Setup.pairingStore(config)
        } catch let error as CLIError {
            throw HAPCommandOptions.fail(error.description, exit: 2)
        } catch let error as ModelError {
            throw HAPCommandOptions.fail(error.message, exit: 1)
        }
    }

    func controller(writing: Bool = true) throws -> HAPController {
        let store = try store(writing: writing)
        return HAPController(store: store, logger: Setup.logger(level: verbose ? "info" : "warning"))
    }

    /// Writes the failure on stderr; the caller throws the exit code.
    static func fail(_ message: String, exit: Int32 = 1) -> ExitCode {
        FileHandle.standardError.write(Data("homemqtt: \(message)\n".utf8))
        return ExitCode(exit)
    }

    static func fail(_ what: String, _ error: HAPError) -> ExitCode {
        fail("\(what) failed (\(error.code)): \(error.message)")
    }
}
