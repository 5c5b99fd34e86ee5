import Foundation
import TestSupport
import XCTest

/// Runs `homemqtt-bench --scale small` as a user would, so that the benchmark cannot rot: every
/// scenario must run to its end and print its rows. Timings are not checked (they are the
/// benchmark's business, not the test suite's).
final class BenchmarkSmokeTests: XCTestCase {
    static let scenarios = [
        "1 notification throughput", "2 write round trip", "3 start-up", "4 HAP", "5 web view", "6 idle",
        "7 instructions",
    ]

    func testSmallScaleRunsEveryScenarioAndPrintsTheTable() async throws {
        let profile = try TemporaryDirectory(prefix: "homemqtt-bench-smoke-profile")
        let result = try await runProcess(
            builtProductPath("homemqtt-bench"), ["--scale", "small", "--profile-dir", profile.path], timeout: 600)
        XCTAssertEqual(result.status, 0, "stdout:\n\(result.standardOutput)\nstderr:\n\(result.standardError)")

        let lines = result.standardOutput.split(separator: "\n").map(String.init)
        let header = try XCTUnwrap(
            lines.firstIndex { $0.hasPrefix("| scenario") }, "no table in:\n\(result.standardOutput)")
        XCTAssertEqual(cells(lines[header]), ["scenario", "metric", "HomeMQTT", "baseline", "ratio", "target", "met?"])
        let rows = lines[(header + 2)...].filter { $0.hasPrefix("|") }.map(cells)
        for row in rows {
            XCTAssertEqual(row.count, 7, "a row with \(row.count) cells: \(row)")
            XCTAssertNotEqual(row.last, "FAILED", "a scenario failed: \(row)")
        }
        for scenario in Self.scenarios {
            XCTAssertTrue(
                rows.contains { $0.first == scenario }, "no row for '\(scenario)' in:\n\(result.standardOutput)")
        }
        // The MQTT scenarios always have their baseline beside the figure.
        for row in rows where row.first?.hasPrefix("4") == false && row[4] != "—" {
            XCTAssertTrue(row[4].hasSuffix("×"), "a ratio that is not one: \(row)")
        }
        XCTAssertTrue(rows.contains { $0.first == "1 notification throughput" && $0[3].hasPrefix("bare publisher") })
        XCTAssertTrue(rows.contains { $0.first == "2 write round trip" && $0[3].hasPrefix("echo client") })
        XCTAssertTrue(rows.contains { $0.first == "3 start-up" && $0[1].contains("peak RSS") })
        // The idle rows: a CPU share and RSS figures, each beside its baseline, all plausible.
        let idle = rows.filter { $0.first == "6 idle" }
        let cpu = try XCTUnwrap(idle.first { $0[1].contains("CPU over") }, "no idle CPU row in: \(idle)")
        XCTAssertGreaterThanOrEqual(try XCTUnwrap(number(cpu[2], unit: "%"), "\(cpu)"), 0)
        XCTAssertTrue(cpu[3].hasPrefix("bare subscriber"), "\(cpu)")
        XCTAssertEqual(cpu[5], "≤ 0.1 % of a core")
        for metric in ["peak RSS (VmHWM)", "RSS (VmRSS)"] {
            let row = try XCTUnwrap(idle.first { $0[1].contains("default home") && $0[1].hasSuffix(metric) }, metric)
            XCTAssertGreaterThan(try XCTUnwrap(number(row[2], unit: "MB"), "\(row)"), 0)
            XCTAssertTrue(row[3].hasPrefix("bare subscriber"), "\(row)")
            XCTAssertEqual(row[5], "≤ 30 MB")
        }
        // The instruction counts: the gateway's per round trip beside the echo client's, and the
        // HAP controller's per read (blocked only without the HAP peer).
        let instructions = rows.filter { $0.first == "7 instructions" }
        let roundTrip = try XCTUnwrap(
            instructions.first { $0[1].hasPrefix("set → state round trip") }, "\(instructions)")
        XCTAssertTrue(roundTrip[2].hasSuffix(" instr"), "\(roundTrip)")
        XCTAssertTrue(roundTrip[3].hasPrefix("echo client ") && roundTrip[3].hasSuffix(" instr"), "\(roundTrip)")
        let read = try XCTUnwrap(instructions.first { $0[1].hasPrefix("HAP read") }, "\(instructions)")
        XCTAssertTrue(read[2].hasSuffix(" instr") || read[2] == "blocked", "\(read)")
        XCTAssertTrue(
            result.standardOutput.contains(
                "scenario 7: the set round trip's top functions per round trip (callgrind): \(profile.path)/set-round-trip.md"
            ),
            result.standardOutput)
        let summary = try String(contentsOfFile: profile.file("set-round-trip.md"), encoding: .utf8)
        XCTAssertTrue(summary.contains("| instr per round trip | share | function [object] |"), summary)
    }

    func testAnUnknownScenarioIsRefusedByName() async throws {
        let result = try await runProcess(builtProductPath("homemqtt-bench"), ["--only", "8"], timeout: 60)
        XCTAssertNotEqual(result.status, 0)
        XCTAssertTrue(result.standardError.contains("--only must be 1, 2, 3, 4, 5, 6 or 7"), result.standardError)
    }

    /// "0.033 %" → 0.033 when the cell is a number in `unit`.
    private func number(_ cell: String, unit: String) -> Double? {
        guard cell.hasSuffix(" " + unit) else { return nil }
        return Double(cell.dropLast(unit.count + 1))
    }

    private func cells(_ line: String) -> [String] {
        line.split(separator: "|", omittingEmptySubsequences: false).dropFirst().dropLast()
            .map { $0.trimmingCharacters(in: .whitespaces) }
    }

    private func builtProductPath(_ name: String) -> String {
        let executable =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: executable).deletingLastPathComponent().appendingPathComponent(name).path
    }
}
