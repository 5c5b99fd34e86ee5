import Foundation
import HomeModel
import MDNS

// What `homemqtt doctor` prints: readable lines (what was heard, then one line per finding,
// OK / WARNING / PROBLEM, with the commands that fix a problem under it, then a verdict), or
// the same as one JSON object (`--json`). Names and addresses are a LAN peer's words: their
// control characters are shown escaped, never sent to the terminal.

struct DoctorReport {
    var listened: Double
    var admitted: MDNSInterfaces
    var heard: [HeardThreadAccessory]
    /// The interfaces whose settings were read.
    var interfaces: [String]
    /// Whether those heard `_hap._udp`, or are every interface with IPv6 since none did.
    var interfacesHeard: Bool
    var findings: [DoctorFinding]

    var problems: Int { findings.filter { $0.level == .problem }.count }
    var warnings: Int { findings.filter { $0.level == .warning }.count }

    var text: String {
        var lines: [String] = []
        if listened > 0 {
            let on =
                admitted == .all
                ? "every interface"
                : "the interfaces the config admits (mdns-interfaces)"
            lines.append(
                "Listened \(DoctorCommand.seconds(listened)) for Thread accessories (_hap._udp) on \(on): "
                    + (heard.count == 1 ? "1 heard" : "\(heard.count) heard"))
            for a in heard {
                let at = a.addresses.isEmpty ? "no address" : a.addresses.joined(separator: ", ")
                let on = a.interfaces.isEmpty ? "" : "  heard on \(a.interfaces.joined(separator: ", "))"
                lines.append("  \(a.name)  id \(a.id.isEmpty ? "—" : a.id)  port \(a.port)  \(at)\(on)")
            }
        }
        if interfaces.isEmpty {
            lines.append("No interface with IPv6 to check (loopback aside).")
        } else if interfacesHeard {
            lines.append("Checking the interfaces that heard them: \(interfaces.joined(separator: ", "))")
        } else {
            lines.append(
                "Checking every interface with IPv6, as none heard _hap._udp: \(interfaces.joined(separator: ", "))")
        }
        for finding in findings {
            let level = finding.level.rawValue.padding(toLength: 8, withPad: " ", startingAt: 0)
            lines.append("\(level) \(finding.subject): \(finding.message)")
            guard !finding.fix.isEmpty else { continue }
            lines.append("         to fix it (as root; the second line keeps it after a reboot):")
            for command in finding.fix { lines.append("           \(command)") }
        }
        if problems > 0 {
            lines.append(
                "\(problems == 1 ? "1 problem" : "\(problems) problems"): Thread accessories cannot be reached until "
                    + (problems == 1 ? "it is" : "they are") + " fixed.")
        } else {
            lines.append(
                "Nothing wrong found"
                    + (warnings > 0 ? " (\(warnings == 1 ? "1 warning" : "\(warnings) warnings"))." : "."))
        }
        return lines.map(\.escapingControlCharacters).joined(separator: "\n") + "\n"
    }

    var json: String {
        let document: JSONValue = .object([
            "ok": .bool(problems == 0),
            "problems": .int(Int64(problems)),
            "warnings": .int(Int64(warnings)),
            "listened": .double(listened),
            "accessories": .array(
                heard.map { a in
                    .object([
                        "name": .string(a.name), "id": .string(a.id), "port": .int(Int64(a.port)),
                        "addresses": .array(a.addresses.map { .string($0) }),
                        "interfaces": .array(a.interfaces.map { .string($0) }),
                    ])
                }),
            "interfaces": .array(interfaces.map { .string($0) }),
            "interfaces-heard": .bool(interfacesHeard),
            "findings": .array(
                findings.map { f in
                    .object([
                        "level": .string(f.level.rawValue.lowercased()), "subject": .string(f.subject),
                        "message": .string(f.message), "fix": .array(f.fix.map { .string($0) }),
                    ])
                }),
        ])
        return document.encoded(pretty: true) + "\n"
    }
}
