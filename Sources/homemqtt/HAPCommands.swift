import ArgumentParser
import Foundation
import Gateway
import HomeMQTTApp
import HomeModel

// `homemqtt hap …`: HAP's commands in one group. discover, pair, pairings and unpair send HAP's
// own operations (`HAPPair`, …): through the running gateway when it is up, so that it serves a
// new pairing at once, and on the state directory when it is not, as the home commands do. The
// pairing-transfer commands (PairingTransferCommands.swift) talk to the accessory themselves.
// Before the group, each was a top-level command: those names stay, hidden, for a release.

struct HAPCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hap",
        abstract: "Pair with HAP (HomeKit) accessories and manage their pairings.",
        discussion:
            "discover, pair, pairings and unpair go through the running gateway when it is up (it serves a new pairing at once), and work on the state directory when it is not.",
        subcommands: HAPCommand.subcommands)

    static let subcommands: [any ParsableCommand.Type] = [
        DiscoverCommand.self, PairCommand.self, PairingsCommand.self, UnpairCommand.self, ImportPairingCommand.self,
        AccessoryPairingsCommand.self, AddPairingCommand.self, RemovePairingCommand.self,
    ]

    /// The top-level names of before the group, hidden from help, behaving the same.
    static let hiddenAliases: [any ParsableCommand.Type] = [
        HiddenAlias<DiscoverCommand>.self, HiddenAlias<PairCommand>.self, HiddenAlias<PairingsCommand>.self,
        HiddenAlias<UnpairCommand>.self, HiddenAlias<ImportPairingCommand>.self,
        HiddenAlias<AccessoryPairingsCommand>.self, HiddenAlias<AddPairingCommand>.self,
        HiddenAlias<RemovePairingCommand>.self,
    ]
}

/// A command under another name's place: the same options, validation and run, left out of
/// help. (`CommandConfiguration` is static, so one command cannot be listed twice differently.)
struct HiddenAlias<Command: AsyncParsableCommand>: AsyncParsableCommand {
    static var configuration: CommandConfiguration {
        var configuration = Command.configuration
        configuration.shouldDisplay = false
        return configuration
    }

    // Validated by the option group as the command itself would be.
    @OptionGroup var command: Command

    func run() async throws {
        var command = command
        try await command.run()
    }
}

/// What the HAP operations' commands share.
struct HAPRequestOptions: ParsableArguments {
    @OptionGroup var config: ConfigOptions
    @Flag(name: .shortAndLong, help: "Log what the HAP controller does (on stderr), without a running gateway.")
    var verbose = false

    /// Performs `operation` (see `HomeRequest.perform`), waiting `timeout` seconds for a running
    /// gateway's answer.
    func perform<Operation: ManagementOperation>(_ operation: Operation, timeout: Double, changes: Bool) async
        -> JSONValue
    {
        await HomeRequest.perform(
            operation, config, timeout: timeout, logLevel: verbose ? "info" : "error", changes: changes,
            withoutSource: true)
    }
}

struct DiscoverCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "discover",
        abstract: "List HAP accessories announcing themselves on the local network (mDNS _hap._tcp)."
    )

    @OptionGroup var options: HAPRequestOptions
    @Option(help: "Seconds to listen for answers.") var timeout: Double = 3

    func validate() throws {
        let range = HAPDiscover.timeouts
        guard range.contains(timeout) else {
            throw ValidationError("--timeout must be between \(range.lowerBound) and \(range.upperBound) seconds")
        }
    }

    func run() async throws {
        let found = await options.perform(HAPDiscover(timeout: timeout), timeout: timeout + 10, changes: false)
        let accessories = found.arrayValue ?? []
        if accessories.isEmpty {
            print("none found")
            return
        }
        for a in accessories {
            let text = { (key: String) in a[key]?.stringValue ?? "" }
            let number = { (key: String) in a[key]?.intValue.map { "\($0)" } ?? "?" }
            let host = text("host")
            let others = (a["addresses"]?.arrayValue ?? []).compactMap(\.stringValue).filter { $0 != host }
            let model = text("model")
            // Every field but the category is what a peer on the LAN announced: its control
            // characters are shown escaped (`\u{1B}`), never sent to the terminal.
            print(
                ("\(text("id"))  \(text("name"))  model \(model.isEmpty ? "—" : model)  category \(number("category")) (\(text("category-name")))  \(a["paired"]?.boolValue == true ? "paired" : "unpaired")  c#\(number("configuration-number"))  \(Self.endpoint(host, a["port"]?.intValue ?? 0))"
                    + (others.isEmpty ? "" : "  (also \(others.joined(separator: ", ")))")
                    + (text("transport") == "thread" ? "  thread (pair with --thread)" : ""))
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
            "Through the running gateway when it is up, which then serves the accessory at once; without it, the gateway serves it when it starts."
    )

    @OptionGroup var options: HAPRequestOptions
    @Option(help: "The accessory's address (see `homemqtt hap discover`).") var host: String
    @Option(help: "The accessory's HAP port.") var port: Int
    @Option(help: "The setup code printed on the accessory, XXX-XX-XXX.") var code: String
    @Option(help: "A name for the pairing (default: the accessory's own name).") var name: String?
    @Flag(
        help:
            "Pair over HAP over CoAP: a Thread accessory (`hap discover` marks it; a gateway that heard it knows)."
    )
    var thread = false

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
        // Pair-setup's SRP and a slow accessory take seconds; the controller's own timeouts
        // end it before this does.
        let paired = await options.perform(
            HAPPair(host: host, port: port, code: code, name: name, transport: thread ? .thread : nil), timeout: 90,
            changes: false)
        let host = paired["host"]?.stringValue ?? host
        let port = paired["port"]?.intValue ?? port
        print(
            "paired with \(paired["name"]?.stringValue ?? "the accessory") at \(host):\(port)".escapingControlCharacters
        )
        print("pairing id: \(paired["pairing"]?.stringValue ?? "?")".escapingControlCharacters)
        guard let accessories = paired["accessories"]?.arrayValue else {
            // The pairing stands; only the look at its accessories failed.
            print("accessories: unknown (the gateway reads them when it starts)")
            return
        }
        print("accessories: \(accessories.count)")
        for a in accessories {
            // `hap:<pairing id>:<aid>`: the aid is what tells a bridge's accessories apart.
            let aid = (a["id"]?.stringValue ?? "").split(separator: ":").last.map(String.init) ?? "?"
            print("  \(aid)  \(a["name"]?.stringValue ?? "")".escapingControlCharacters)
        }
    }
}

struct PairingsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pairings",
        abstract: "List the HAP pairings saved in the state directory (never their keys)."
    )

    @OptionGroup var options: HAPRequestOptions

    func run() async throws {
        let data = await options.perform(HAPPairings(), timeout: 10, changes: false)
        let pairings = data["pairings"]?.arrayValue ?? []
        if pairings.isEmpty {
            print("no pairings")
            return
        }
        for p in pairings {
            let name = p["name"]?.stringValue ?? "—"
            let endpoint = "\(p["host"]?.stringValue ?? "?"):\(p["port"]?.intValue ?? 0)"
            let thread = p["transport"]?.stringValue == "thread" ? "  (thread)" : ""
            print("\(p["pairing"]?.stringValue ?? "?")  \(name)  \(endpoint)\(thread)".escapingControlCharacters)
        }
    }
}

struct UnpairCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unpair",
        abstract: "Remove a pairing on the accessory and from the state directory.",
        discussion: "Through the running gateway when it is up, which then stops serving the accessory at once."
    )

    @OptionGroup var options: HAPRequestOptions
    @Argument(help: "The pairing id (as `homemqtt hap pairings` lists it), or one of its accessories' ids.")
    var id: String
    @Flag(help: "Remove the local pairing even when the accessory cannot be reached.") var force = false

    func run() async throws {
        _ = await options.perform(HAPUnpair(pairing: id, force: force), timeout: 30, changes: false)
        print("unpaired \(id)".escapingControlCharacters)
    }
}
