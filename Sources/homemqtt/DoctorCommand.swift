import ArgumentParser
import Foundation
import HomeMQTTApp
import HomeModel
import MDNS

// `homemqtt doctor`: can this host reach Thread accessories (issue 42)? They are reached over
// IPv6 through a border router, and what fails most (home-assistant/core#115361, #80133) is the
// host: it ignores the router's advertisements (`accept_ra` 0, or 1 on a forwarding host) or
// the route in them (`accept_ra_rt_info_max_plen` below 64), so no route to the Thread prefix
// exists. The doctor listens for `_hap._udp`, reads the settings of the interfaces that heard
// it and the routes to what was announced, and says what is wrong and the commands that fix
// it. It changes nothing and needs no root. Exit status: 0 nothing wrong, 1 a problem, 2 usage.

struct DoctorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor",
        abstract: "Check that this host can reach HAP accessories over Thread (IPv6 routes from a border router).",
        discussion: """
            Listens for Thread accessories (mDNS _hap._udp) on the interfaces the config's hap source admits \
            (mdns-interfaces), checks the IPv6 router-advertisement settings of the interfaces that heard them \
            (of every interface with IPv6 when none did) and the route to each announced address, and prints \
            what to change. Changes nothing; needs no root. Exit status: 0 when nothing is wrong, 1 when \
            something is, 2 on a usage or config error.
            """)

    @OptionGroup var config: ConfigOptions
    @Option(help: "Seconds to listen for _hap._udp announcements (0: do not listen).") var timeout: Double = 3
    @Option(
        name: .customLong("address"),
        help: ArgumentHelp("Also check the route to this accessory address (repeatable).", valueName: "ipv6"))
    var addresses: [String] = []
    @Flag(help: "Print the findings as one JSON object, for scripts.") var json = false
    /// Where /proc is: tests give a directory of the same layout, holding the conditions they test.
    @Option(help: .hidden) var procRoot = "/proc"

    static let timeouts: ClosedRange<Double> = 0...60

    func validate() throws {
        var problem: String?
        if !Self.timeouts.contains(timeout) {
            problem = "--timeout must be between 0 and 60 seconds, got \(timeout)"
        } else if let address = addresses.first(where: { IPv6Text.bytes($0) == nil }) {
            problem = "--address must be an IPv6 address, got '\(address)'".escapingControlCharacters
        }
        guard let problem else { return }
        // ArgumentParser's own validation error exits 64; the doctor's usage errors exit 2.
        FileHandle.standardError.write(Data("homemqtt doctor: \(problem)\n".utf8))
        throw ExitCode(2)
    }

    func run() async throws {
        let interfaces: MDNSInterfaces
        do { interfaces = try admittedInterfaces() } catch { throw Setup.failure(error) }
        let logger = Setup.logger(level: "error")
        var heard: [HeardThreadAccessory] = []
        var findings: [DoctorFinding] = []
        if timeout > 0 {
            let listened = await DoctorListening.listen(seconds: timeout, interfaces: interfaces, logger: logger)
            heard = listened.accessories
            if let problem = listened.problem {
                findings.append(
                    DoctorFinding(level: .problem, subject: "mDNS", message: "cannot listen for _hap._udp: \(problem)"))
            } else if heard.isEmpty {
                findings.append(
                    DoctorFinding(
                        level: .warning, subject: "mDNS",
                        message:
                            "no Thread accessory (_hap._udp) heard in \(Self.seconds(timeout)): "
                            + "is a border router on this network (HomePod, Apple TV, an OpenThread border router), "
                            + "and are mDNS and IPv6 multicast let through?"
                    ))
            }
        }
        let proc = ProcFiles(root: procRoot)
        let checked = Self.interfacesToCheck(heard: heard, admitted: interfaces, proc: proc)
        for interface in checked.interfaces {
            findings += DoctorChecks.interface(interface, proc: proc)
        }
        let routes = proc.ipv6Routes()
        for accessory in heard {
            let subject = "accessory \(accessory.name) (\(accessory.id))".escapingControlCharacters
            for address in accessory.addresses {
                findings.append(
                    DoctorChecks.route(to: address.escapingControlCharacters, subject: subject, routes: routes))
            }
        }
        for address in addresses {
            findings.append(DoctorChecks.route(to: address, subject: "address \(address)", routes: routes))
        }
        let report = DoctorReport(
            listened: timeout, admitted: interfaces, heard: heard, interfaces: checked.interfaces,
            interfacesHeard: checked.heard, findings: findings)
        print(json ? report.json : report.text, terminator: "")
        if report.problems > 0 { throw ExitCode(1) }
    }

    /// The config's hap source's `mdns-interfaces`: every interface when the config does not
    /// say, or when there is no config file and none was named.
    func admittedInterfaces() throws -> MDNSInterfaces {
        let named =
            config.configOption != nil || !(ProcessInfo.processInfo.environment["HOMEMQTT_CONFIG"] ?? "").isEmpty
        guard named || FileManager.default.fileExists(atPath: config.config) else { return .all }
        let loaded = try Setup.loadConfig(config)
        return loaded.sources.lazy.compactMap { $0.settings as? HAPFactory }.first?.mdnsInterfaces ?? .all
    }

    /// The interfaces that heard `_hap._udp` (`heard` true), or, when none did (nothing heard, or
    /// heard over IPv4 or loopback only), every admitted interface with IPv6. Loopback is never
    /// one: no router advertises there.
    static func interfacesToCheck(heard: [HeardThreadAccessory], admitted: MDNSInterfaces, proc: ProcFiles)
        -> (interfaces: [String], heard: Bool)
    {
        let heardOn = Set(heard.flatMap(\.interfaces)).filter { $0 != "lo" }.sorted()
        if !heardOn.isEmpty { return (heardOn, true) }
        return (proc.interfacesWithIPv6().filter { $0 != "lo" && admitted.admits($0) }, false)
    }

    static func seconds(_ value: Double) -> String {
        value == value.rounded() ? "\(Int(value)) s" : "\(value) s"
    }
}
