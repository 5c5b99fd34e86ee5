import ArgumentParser
import Foundation
import Gateway
import HomeMQTTApp
import HomeModel

// `homemqtt access token|acl`: a new web view token (printed once; the config keeps its hash) and
// the mosquitto ACL file made from `access:` and the homes, so that the broker enforces on MQTT
// the roles the web view enforces on its pages.

struct AccessCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "access", abstract: "Web view tokens and the mosquitto ACL file for the users' roles.",
        subcommands: [Token.self, ACL.self])

    struct Token: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "token",
            abstract: "Make a new token: prints it once, and the token-sha256 line for the user in access.users.")

        func run() async throws {
            var generator = SystemRandomNumberGenerator()
            let token = AccessConfig.hex((0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) })
            print("token: \(token)")
            print("token-sha256: \(AccessConfig.hex(AccessConfig.sha256(token)))")
        }
    }

    struct ACL: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "acl",
            abstract:
                "Write the mosquitto ACL file (acl_file) for access.users and every home; then reload mosquitto (SIGHUP)."
        )
        @OptionGroup var options: ConfigOptions
        @Option(help: "Where to write it (default: standard output).") var output: String?

        func run() async throws {
            let config: GatewayConfig
            do {
                config = try Setup.loadConfig(options)
            } catch {
                throw Setup.failure(error)
            }
            let database = try Setup.openDatabase(config, exclusive: false)
            let text = AccessPolicy.mosquittoACL(
                users: config[AccessConfig.self].users, homes: await database.homes, gatewayBase: config.baseTopic,
                gatewayUser: config.mqtt.username, gatewayPrefixes: HomeMQTTApp.reservedPrefixes(config),
                source: "\(config.file) and the homes in \(config.stateDirectory)", operations: OfflineHome.operations)
            guard let output else {
                print(text, terminator: "")
                return
            }
            // Read by the broker's user, and holds no secret: 0644, replaced whole.
            let temporary = output + ".tmp-\(getpid())"
            guard FileManager.default.createFile(atPath: temporary, contents: Data(text.utf8)),
                chmod(temporary, 0o644) == 0, rename(temporary, output) == 0
            else {
                unlink(temporary)
                throw Setup.failure(CLIError("cannot write \(output): \(String(cString: strerror(errno)))"))
            }
            FileHandle.standardError.write(
                Data("homemqtt: wrote \(output); tell mosquitto to read it again (SIGHUP)\n".utf8))
        }
    }
}
