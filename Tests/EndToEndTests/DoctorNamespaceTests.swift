import Foundation
import HomeModel
import TestSupport
import XCTest

/// `homemqtt doctor` hearing a real `_hap._udp` announcement: the simulator's Thread garage
/// (`homekit: thread`, announced by the gateway's mDNS responder) in one network namespace, the
/// doctor in another, a veth between them with a ULA /64 on each end, as a Thread accessory's
/// address is reached from the host. The doctor reads the real /proc of its namespace, whose
/// interfaces start with the kernel's defaults (accept_ra 1, accept_ra_rt_info_max_plen 0): it
/// names the veth as the interface that heard the accessory, says route information is
/// ignored there and the fix; the fix it printed is run, and the doctor then finds nothing wrong.
final class DoctorNamespaceTests: XCTestCase {
    final class Rig: @unchecked Sendable {
        let doctorSide: NetworkNamespace
        let accessorySide: NetworkNamespace
        let directory: TemporaryDirectory
        var processes: [ChildProcess] = []
        init(doctorSide: NetworkNamespace, accessorySide: NetworkNamespace, directory: TemporaryDirectory) {
            self.doctorSide = doctorSide
            self.accessorySide = accessorySide
            self.directory = directory
        }
        func stop() async {
            for p in processes.reversed() { await p.terminate(grace: 5) }
            await accessorySide.delete()
            await doctorSide.delete()
        }
    }

    func testTheDoctorHearsTheSimulatedThreadAccessoryAndItsFixWorks() async throws {
        TestCensus.record(.binary)
        let doctorSide = try await NetworkNamespace.create()
        let accessorySide: NetworkNamespace
        do { accessorySide = try await NetworkNamespace.create() } catch {
            await doctorSide.delete()
            throw error
        }
        let rig = Rig(
            doctorSide: doctorSide, accessorySide: accessorySide,
            directory: try TemporaryDirectory(prefix: "homemqtt-doctor-ns"))
        addTeardownBlock { await rig.stop() }
        let suffix = String(UUID().uuidString.prefix(6).lowercased())
        let near = "dn\(suffix)"
        let far = "da\(suffix)"
        try await runChecked("ip", ["link", "add", near, "type", "veth", "peer", "name", far])
        try await runChecked("ip", ["link", "set", near, "netns", doctorSide.name])
        try await runChecked("ip", ["link", "set", far, "netns", accessorySide.name])
        for (ns, device, v6, v4) in [
            (doctorSide, near, "fd11:22::1/64", "10.77.0.1/24"), (accessorySide, far, "fd11:22::2/64", "10.77.0.2/24"),
        ] {
            // No duplicate address detection: the addresses are usable at once, the link-local
            // one too. IPv4 as well: the gateway's mDNS responder speaks over IPv4 only
            // (224.0.0.251), and announces the IPv6 addresses there.
            try await runChecked("ip", ns.exec + ["sysctl", "-qw", "net.ipv6.conf.\(device).accept_dad=0"])
            try await runChecked("ip", ns.exec + ["ip", "-6", "addr", "add", v6, "dev", device, "nodad"])
            try await runChecked("ip", ns.exec + ["ip", "addr", "add", v4, "dev", device])
            try await runChecked("ip", ns.exec + ["ip", "link", "set", device, "up"])
        }
        // The responder's multicast goes out on the veth, as it would on eth0.
        try await runChecked("ip", accessorySide.exec + ["ip", "route", "replace", "224.0.0.0/4", "dev", far])

        // The accessory's side: a broker, and the gateway serving the garage as a Thread accessory.
        let broker = try ChildProcess("ip", accessorySide.exec + ["mosquitto", "-p", "1883"])
        rig.processes.append(broker)
        try await waitUntil("mosquitto in the namespace", timeout: 10, pollInterval: 0.1) {
            let r = try await runProcess(
                "ip", accessorySide.exec + ["mosquitto_pub", "-p", "1883", "-t", "probe", "-m", "x"])
            return r.status == 0
        }
        let accessories = rig.directory.url.appendingPathComponent("accessories")
        try FileManager.default.createDirectory(at: accessories, withIntermediateDirectories: true)
        let garage = try String(
            contentsOf: repositoryRoot.appendingPathComponent("Config/accessories/garage.yml"), encoding: .utf8)
        try ("homekit: thread\n" + garage).write(
            to: accessories.appendingPathComponent("garage.yml"), atomically: true, encoding: .utf8)
        let gatewayConfig = rig.directory.file("gateway.yml")
        try """
        broker:
          url: mqtt://127.0.0.1:1883
          client-id: doctor-accessory
        state-directory: \(rig.directory.file("state"))
        poll-interval: 0
        sources:
          - type: simulator
            directory: \(accessories.path)
        homeassistant:
          enabled: false
        homekit:
          enabled: true
          port: 0
        log-level: info
        """.write(toFile: gatewayConfig, atomically: true, encoding: .utf8)
        let gateway = try ChildProcess("ip", accessorySide.exec + [homemqttBinary, "run", "--config", gatewayConfig])
        rig.processes.append(gateway)
        // The responder answers from here on: the doctor's first question is answered.
        try await waitUntil("the Thread accessory advertised", timeout: 30) {
            guard gateway.isRunning else { throw ProcessError("homemqtt run exited: \(gateway.standardError)") }
            return gateway.standardError.contains("._hap._udp.local on port")
        }

        let doctorConfig = rig.directory.file("doctor.yml")
        try "state-directory: \(rig.directory.file("doctor-state"))\n".write(
            toFile: doctorConfig, atomically: true, encoding: .utf8)
        let doctor = ["ip"] + doctorSide.exec + [homemqttBinary, "doctor", "--config", doctorConfig, "--timeout", "3"]
        let first = try await runProcess(doctor[0], Array(doctor.dropFirst()), timeout: 30)
        XCTAssertEqual(first.status, 1, first.standardOutput + first.standardError)
        let out = first.standardOutput
        XCTAssertTrue(out.contains("_hap._udp) on every interface: 1 heard\n"), out)
        let listed = try XCTUnwrap(out.split(separator: "\n").first { $0.hasPrefix("  Garage Door Opener") }, out)
        XCTAssertTrue(listed.contains("fd11:22::2"), String(listed))
        XCTAssertTrue(listed.hasSuffix("heard on \(near)"), String(listed))
        XCTAssertNotNil(
            listed.firstMatch(of: /\sid ([0-9A-F]{2}:){5}[0-9A-F]{2}\s\sport [1-9][0-9]*\s/), String(listed))
        XCTAssertTrue(out.contains("Checking the interfaces that heard them: \(near)\n"), out)
        XCTAssertTrue(out.contains("OK       interface \(near): accept_ra is 1 (forwarding 0)"), out)
        XCTAssertTrue(out.contains("PROBLEM  interface \(near): accept_ra_rt_info_max_plen is 0: "), out)
        let route = try XCTUnwrap(
            out.split(separator: "\n").first {
                $0.hasPrefix("OK       accessory Garage Door Opener") && $0.contains(" fd11:22::2: ")
            }, out)
        XCTAssertTrue(route.hasSuffix("fd11:22::2: fd11:22::/64 dev \(near) (on the link)"), String(route))
        XCTAssertTrue(out.hasSuffix("1 problem: Thread accessories cannot be reached until it is fixed.\n"), out)

        // The fix as printed, run as the user would (the test runs as root) in the doctor's
        // namespace; the doctor then finds nothing wrong.
        let fix = try XCTUnwrap(
            out.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.first {
                $0.hasPrefix("sysctl -w ")
            }, out)
        XCTAssertEqual(fix, "sysctl -w net.ipv6.conf.\(near).accept_ra_rt_info_max_plen=64")
        try await runChecked("ip", doctorSide.exec + ["sh", "-c", fix])
        let second = try await runProcess(doctor[0], Array(doctor.dropFirst()), timeout: 30)
        XCTAssertEqual(second.status, 0, second.standardOutput + second.standardError)
        XCTAssertTrue(second.standardOutput.contains("OK       interface \(near): accept_ra_rt_info_max_plen is 64"))
        XCTAssertTrue(second.standardOutput.hasSuffix("Nothing wrong found.\n"), second.standardOutput)

        // For scripts: the same in JSON, the accessory with the interface it was heard on.
        let json = try await runProcess(doctor[0], Array(doctor.dropFirst()) + ["--json"], timeout: 30)
        XCTAssertEqual(json.status, 0, json.standardOutput + json.standardError)
        let document = try JSONValue(parsing: Array(json.standardOutput.utf8))
        XCTAssertEqual(document["ok"]?.boolValue, true)
        XCTAssertEqual(document["interfaces-heard"]?.boolValue, true)
        let accessory = try XCTUnwrap(document["accessories"]?.arrayValue?.first, json.standardOutput)
        XCTAssertEqual(accessory["name"]?.stringValue, "Garage Door Opener")
        XCTAssertEqual(accessory["interfaces"], .array([.string(near)]))
        XCTAssertEqual(accessory["addresses"]?.arrayValue?.contains(.string("fd11:22::2")), true, "\(accessory)")
    }
}
