import ArgumentParser
import Foundation
import Gateway
import HAPServer
import HomeKitBridge
import HomeMQTTApp
import HomeModel
import SetupQR

// `homemqtt homekit …`: each home as a HomeKit bridge. `code` reads the setup code from the
// config or the state directory, never over MQTT; `status` and `reset` go through the running
// gateway when it is up (`homekit-status`, `homekit-reset` on the home's request topic) and
// work on the state directory when it is not.

struct HomeKitCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "homekit",
        abstract: "The gateway as a HomeKit bridge: its setup code, its status, a reset.",
        discussion:
            "Each home is one bridge (homekit.enabled in the config). status and reset go through the running gateway when it is up, and work on the state directory when it is not.",
        subcommands: [Code.self, Status.self, Reset.self])

    /// What the commands share: the config and the home.
    struct Options: ParsableArguments {
        @OptionGroup var config: ConfigOptions
        @Option(help: "The home (name, id or base topic); default: the home on the gateway's base topic.")
        var home: String?

        /// The config, the home, and the home's bridge files.
        func open() async throws -> (GatewayConfig, Home, BridgeFiles) {
            let config = try Setup.loadConfig(config)
            let database = try Setup.openDatabase(config, exclusive: false)
            let home: Home
            if let key = self.home {
                do {
                    home = try await database.home(named: key, gatewayBase: config.baseTopic)
                } catch {
                    throw CLIError(error.message)
                }
            } else {
                home = await database.home
            }
            return (config, home, BridgeFiles(stateDirectory: config.stateDirectory, homeID: home.id))
        }
    }

    struct Code: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "code", abstract: "Show the setup code the Home app pairs the bridge with, and its QR code.",
            discussion:
                "The QR code (of the X-HM:// setup URI) is black on white with ANSI colours on a terminal, "
                + "and plain half blocks otherwise (or with NO_COLOR), drawn for a dark background as Homebridge "
                + "draws its own."
        )
        @OptionGroup var options: Options
        @Flag(name: .customLong("no-qr"), help: "Print the setup code and URI only, without the QR code.")
        var noQR = false

        func run() async throws {
            let (config, home, files) = try await options.open()
            let settings = config[HomeKitConfig.self]
            if !settings.enabled {
                FileHandle.standardError.write(
                    Data("homemqtt: homekit.enabled is false: no bridge is served with this code\n".utf8))
            }
            if let code = settings.setupCode {
                print("\(code.revealed)  (homekit.setup-code in \(config.file))")
                try printURI(code, files)
                printStandalone(files)
                return
            }
            guard let code = try files.storedSetupCode() else {
                throw CLIError(
                    "the bridge of '\(home.name)' has no setup code yet: it makes one at its first start (homekit.enabled: true)"
                )
            }
            print(code.revealed)
            try printURI(code, files)
            printStandalone(files)
        }

        /// Each accessory served alone (`homekit: standalone` or `thread`) with its own code, URI and QR code,
        /// after the bridge's: what its first start logged.
        func printStandalone(_ bridge: BridgeFiles) {
            for alone in bridge.standaloneFiles() {
                guard let code = try? alone.files.storedSetupCode() else { continue }
                let name = alone.setup.name ?? alone.accessoryID
                // A Thread accessory (`homekit: thread`) is served alone too, over HAP over CoAP.
                let how = alone.setup.thread == true ? "standalone, Thread" : "standalone"
                print("\n" + "\(code.revealed)  (\(name), \(alone.accessoryID), \(how))".escapingControlCharacters)
                let uri = BridgeAdvertisement.setupURI(
                    code: code, setupID: alone.setup.setupID, category: alone.setup.category ?? 1)
                print(uri)
                guard !noQR, let qr = QRMatrix(encoding: uri) else { continue }
                let terminal = isatty(STDOUT_FILENO) == 1 && ProcessInfo.processInfo.environment["NO_COLOR"] == nil
                print("\n" + qr.terminalText(terminal ? .ansi : .plain), terminator: "")
            }
        }

        /// The setup URI a QR code carries, on a line of its own once the bridge has a setup id
        /// (made at its first start, with the code), and its QR code under it after a blank
        /// line: always, as Homebridge prints its own, unless `--no-qr`.
        func printURI(_ code: HAPSetupCode, _ files: BridgeFiles) throws {
            guard let setupID = try files.readSetup()?.setupID else { return }
            let uri = BridgeAdvertisement.setupURI(code: code, setupID: setupID)
            print(uri)
            guard !noQR, let qr = QRMatrix(encoding: uri) else { return }
            let terminal = isatty(STDOUT_FILENO) == 1 && ProcessInfo.processInfo.environment["NO_COLOR"] == nil
            print("\n" + qr.terminalText(terminal ? .ansi : .plain), terminator: "")
        }
    }

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "status", abstract: "Show the bridge's id, configuration number, port and pairings.")
        @OptionGroup var options: Options
        @Option(help: "An accessory served standalone (its id, e.g. sim:garage): its own server's status.")
        var accessory: String?

        func run() async throws {
            let (config, home, bridgeFiles) = try await options.open()
            let files = try HomeKitCommand.files(bridgeFiles, config: config, home: home, accessory: accessory)
            let status = try await HomeKitCommand.perform(
                HomeKitStatusOperation(accessory: accessory), config: config, home: home,
                offline: {
                    var o: [String: JSONValue] = ["home": .string(home.id), "home-name": .string(home.name)]
                    if let id = HAPAccessoryIdentity.pairingID(in: files.directory) { o["id"] = .string(id) }
                    let pairings = HAPAccessoryIdentity.pairings(in: files.directory)
                    o["paired"] = .bool(!pairings.isEmpty)
                    o["pairings"] = .array(
                        pairings.map { .object(["id": .string($0.id), "admin": .bool($0.isAdmin)]) })
                    if let setup = try? files.readSetup() { o["setup-id"] = .string(setup.setupID) }
                    return .object(o)
                })
            print(status.encoded(pretty: true))
        }
    }

    struct Reset: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "reset",
            abstract: "Unpair the bridge from every controller and give it a new identity.",
            discussion:
                "The Home app then sees a new bridge: pair it again with the same setup code (its accessories keep their ids, but rooms and automations made for the old bridge are gone)."
        )
        @OptionGroup var options: Options
        @Option(help: "An accessory served standalone (its id, e.g. sim:garage): reset it alone.")
        var accessory: String?

        func run() async throws {
            let (config, home, bridgeFiles) = try await options.open()
            let files = try HomeKitCommand.files(bridgeFiles, config: config, home: home, accessory: accessory)
            let status = try await HomeKitCommand.perform(
                HomeKitResetOperation(accessory: accessory), config: config, home: home,
                offline: {
                    do throws(HAPServerError) {
                        try HAPAccessoryIdentity.reset(in: files.directory)
                    } catch {
                        throw CLIError(error.message)
                    }
                    return .object(["home": .string(home.id), "home-name": .string(home.name), "paired": false])
                })
            let what = accessory.map { "the standalone HomeKit accessory \($0)" } ?? "the HomeKit bridge"
            print("reset \(what) of '\(home.name)': unpaired, with a new identity".escapingControlCharacters)
            if let id = status["id"]?.stringValue { print("id: \(id)") }
        }
    }

    /// The bridge's files, or those of the accessory it serves alone (known once it has started).
    static func files(_ bridge: BridgeFiles, config: GatewayConfig, home: Home, accessory: String?) throws
        -> BridgeFiles
    {
        guard let accessory else { return bridge }
        guard let alone = bridge.standaloneFiles().first(where: { $0.accessoryID == accessory }) else {
            throw CLIError(
                "'\(home.name)' has no accessory '\(accessory)' served standalone (homekit: standalone, after a start)"
                    .escapingControlCharacters)
        }
        return alone.files
    }

    /// `operation` on the running gateway of `home`, or `offline` on the state directory when
    /// the gateway is not running.
    static func perform<Operation: ManagementOperation>(
        _ operation: Operation, config: GatewayConfig, home: Home, offline: () throws -> JSONValue
    ) async throws -> JSONValue {
        let homeConfig = config.forHome(home)
        let logger = Setup.logger(level: "error")
        switch await RequestClient.connect(config: homeConfig, op: Operation.name, statusWait: 1.5, logger: logger) {
        case .online(let link):
            let response = try? await link.send(operation.fields, timeout: 30)
            await link.close()
            guard let response else {
                throw CLIError("\(Operation.name): no answer on \(link.responseTopic)")
            }
            guard response["status"] == .string("ok") else {
                throw CLIError(
                    "\(Operation.name): \(response["code"]?.stringValue ?? "error"): \(response["message"]?.stringValue ?? "")"
                )
            }
            return response["data"] ?? .null
        case .absent(let reason):
            let data = try offline()
            FileHandle.standardError.write(
                Data(
                    "homemqtt: the gateway is not running (\(reason)); used the state directory \(config.stateDirectory)\n"
                        .utf8))
            return data
        }
    }
}
