import ArgumentParser
import Foundation
import Gateway
import HAP
import HomeModel
import Logging
import MDNS
import HomeMQTTApp

// The HAP commands: discover, pair, pairings and unpair, and the options they share.

/// What the HAP commands share: the pairing store of the config's state directory, and
/// failures as one line on stderr. No command prints or logs a key or a setup code.
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

    /// Where the config's hap source looks for accessories (`mdns-interfaces`); every
    /// interface when it has none.
    func mdnsInterfaces() throws -> MDNSInterfaces {
        do {
            let loaded = try Setup.loadConfig(config)
            return loaded.sources.lazy.compactMap { $0.settings as? HAPFactory }.first?.mdnsInterfaces ?? .all
        } catch let error as CLIError {
            throw HAPCommandOptions.fail(error.description, exit: 2)
        }
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

struct DiscoverCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "discover",
        abstract: "List HAP accessories announcing themselves on the local network (mDNS _hap._tcp)."
    )

    @OptionGroup var options: HAPCommandOptions
    @Option(help: "Seconds to listen for answers.") var timeout: Double = 3

    func validate() throws {
        guard timeout >= 0.5 && timeout <= 60 else {
            throw ValidationError("--timeout must be between 0.5 and 60 seconds")
        }
    }

    func run() async throws {
        _ = try options.controller(writing: false)
        let interfaces = try options.mdnsInterfaces()
        let found: [HAPDiscoveredAccessory]
        do throws(HAPError) {
            found = try await HAPDiscovery.browse(timeout: timeout, interfaces: interfaces)
        } catch {
            throw HAPCommandOptions.fail("discover", error)
        }
        if found.isEmpty {
            print("none found")
            return
        }
        for a in found {
            let category = Catalog.categories[a.category] ?? "other"
            // Every field but the category is what a peer on the LAN announced: its control
            // characters are shown escaped (`\u{1B}`), never sent to the terminal.
            print(
                ("\(a.id)  \(a.name)  model \(a.model.isEmpty ? "—" : a.model)  category \(a.category) (\(category))  \(a.isPaired ? "paired" : "unpaired")  c#\(a.configurationNumber)  \(Self.endpoint(a.host, a.port))"
                    + (a.addresses.count > 1
                        ? "  (also \(a.addresses.filter { $0 != a.host }.joined(separator: ", ")))" : ""))
                    .escapingControlCharacters
            )
        }
    }
}

extension DiscoverCommand {
    /// `host:port`, with an IPv6 address in brackets (`[fe80::1%eth0]:51826`).
    static func endpoint(_ host: String, _ port: Int) -> String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }
}

struct PairCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pair",
        abstract: "Pair with a HAP accessory and save the pairing in the state directory.",
        discussion:
            "A running gateway serves the new accessory after a restart; the request home/$gateway/request/pair pairs through a running gateway instead."
    )

    @OptionGroup var options: HAPCommandOptions
    @Option(help: "The accessory's address (see `homemqtt discover`).") var host: String
    @Option(help: "The accessory's HAP port.") var port: Int
    @Option(help: "The setup code printed on the accessory, XXX-XX-XXX.") var code: String
    @Option(help: "A name for the pairing (default: the accessory's own name).") var name: String?

    static func isSetupCode(_ code: String) -> Bool {
        let parts = code.split(separator: "-", omittingEmptySubsequences: false).map { Array($0.utf8) }
        let digits = parts.flatMap { $0 }
        guard digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return false }
        return parts.map(\.count) == [3, 2, 3] || (parts.count == 1 && digits.count == 8)
    }

    func validate() throws {
        // The code is not repeated in the message: it is the accessory's secret.
        guard Self.isSetupCode(code) else {
            throw ValidationError(
                "--code must be the accessory's eight-digit setup code written XXX-XX-XXX (e.g. 031-45-154)")
        }
        guard (1...65535).contains(port) else {
            throw ValidationError("--port must be 1…65535, got \(port)")
        }
        guard !host.trimmingCharacters(in: .whitespaces).isEmpty else {
            throw ValidationError("--host must not be empty")
        }
    }

    func run() async throws {
        let controller = try options.controller()
        let pairing: HAPPairing
        do {
            pairing = try await controller.pair(host: host, port: port, setupCode: code, name: name)
        } catch {
            throw HAPCommandOptions.fail("pairing with \(host):\(port)", error)
        }
        print(
            "paired with \(pairing.name ?? "the accessory") at \(pairing.host):\(pairing.port)"
                .escapingControlCharacters)
        print("pairing id: \(pairing.accessoryPairingID)".escapingControlCharacters)
        do {
            let accessories = try await controller.accessories(of: pairing)
            print("accessories: \(accessories.count)")
            for a in accessories { print("  \(a.aid)  \(a.name)".escapingControlCharacters) }
        } catch {
            // The pairing stands; only the look at its accessories failed.
            print("accessories: unknown (\(error.message))")
        }
    }
}

struct PairingsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pairings",
        abstract: "List the HAP pairings saved in the state directory (never their keys)."
    )

    @OptionGroup var options: HAPCommandOptions

    func run() async throws {
        let store = try options.store()
        let pairings: [HAPPairing]
        do {
            pairings = try store.all()
        } catch {
            throw HAPCommandOptions.fail("reading the pairings", error)
        }
        if pairings.isEmpty {
            print("no pairings in \(store.directory.path)")
            return
        }
        for p in pairings {
            print("\(p.accessoryPairingID)  \(p.name ?? "—")  \(p.host):\(p.port)".escapingControlCharacters)
        }
    }
}

struct UnpairCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unpair",
        abstract: "Remove a pairing on the accessory and from the state directory.",
        discussion:
            "A running gateway keeps the accessory until it restarts; home/$gateway/request/unpair unpairs through a running gateway instead."
    )

    @OptionGroup var options: HAPCommandOptions
    @Argument(help: "The pairing id (as `homemqtt pairings` lists it).") var id: String
    @Flag(help: "Remove the local pairing even when the accessory cannot be reached.") var force = false

    func run() async throws {
        let controller = try options.controller()
        do {
            try await controller.unpair(id: id, force: force)
        } catch  where error.isTransient && !force {
            throw HAPCommandOptions.fail(
                "unpairing \(id) failed (\(error.code)): \(error.message); --force removes the local pairing anyway")
        } catch {
            throw HAPCommandOptions.fail("unpairing \(id)", error)
        }
        print("unpaired \(id)")
    }
}
