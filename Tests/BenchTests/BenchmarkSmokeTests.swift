import Foundation
import TestSupport
import XCTest

/// Runs `homemqtt-bench --scale small` as a user would, so that the benchmark cannot rot: every
/// scenario must run to its end and print its rows. Timings are not checked (they are the
/// benchmark's business, not the test suite's).
final class BenchmarkSmokeTests: XCTestCase {
    static let scenarios = ["1 notification throughput", "2 write round trip", "3 start-up", "4 HAP", "5 web view"]

    func testSmallScaleRunsEveryScenarioAndPrintsTheTable() async throws {
        let result = try await runProcess(builtProductPath("homemqtt-bench"), ["--scale", "small"], timeout: 600)
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
    }

    func testAnUnknownScenarioIsRefusedByName() async throws {
        let result = try await runProcess(builtProductPath("homemqtt-bench"), ["--only", "7"], timeout: 60)
        XCTAssertNotEqual(result.status, 0)
        XCTAssertTrue(result.standardError.contains("--only must be 1, 2, 3, 4 or 5"), result.standardError)
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
