import Foundation

// The benchmark's result table: its rows, the Markdown table and the machine it ran on, and the
// formatting and statistics of the figures.

/// One line of the result table. Every figure is printed beside the baseline measured in the
/// same run, so that the ratio — not the absolute number — is what carries over between machines.
struct Row: Sendable {
    var scenario: String
    var metric: String
    var ours: String
    var baseline: String
    var ratio: String
    var target: String
    var met: String

    init(
        _ scenario: String, _ metric: String, ours: String, baseline: String = "—", ratio: String = "—",
        target: String = "—", met: String = "—"
    ) {
        self.scenario = scenario
        self.metric = metric
        self.ours = ours
        self.baseline = baseline
        self.ratio = ratio
        self.target = target
        self.met = met
    }

    static func failed(_ scenario: String, _ error: any Error) -> Row {
        Row(scenario, "error", ours: "FAILED: \(error)", met: "FAILED")
    }
}

enum Report {
    static let header = ["scenario", "metric", "HomeMQTT", "baseline", "ratio", "target", "met?"]

    /// A Markdown table: readable in a terminal and pasteable into Docs/performance.md as it is.
    static func table(_ rows: [Row]) -> String {
        let cells = [header] + rows.map { [$0.scenario, $0.metric, $0.ours, $0.baseline, $0.ratio, $0.target, $0.met] }
        let widths = header.indices.map { column in cells.map { $0[column].count }.max() ?? 0 }
        func line(_ values: [String]) -> String {
            "| "
                + values.enumerated().map {
                    $0.element.padding(toLength: widths[$0.offset], withPad: " ", startingAt: 0)
                }
                .joined(separator: " | ") + " |"
        }
        var out = [
            line(cells[0]), "|" + widths.map { String(repeating: "-", count: $0 + 2) }.joined(separator: "|") + "|",
        ]
        out += cells.dropFirst().map(line)
        return out.joined(separator: "\n")
    }

    /// "2 cores, AMD EPYC" — what the figures were measured on.
    static func machine() -> String {
        let cores = ProcessInfo.processInfo.activeProcessorCount
        let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let model =
            cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") }
            .flatMap { $0.split(separator: ":", maxSplits: 1).last }
            .map { $0.trimmingCharacters(in: .whitespaces) } ?? "unknown CPU"
        let memory =
            ((try? String(contentsOfFile: "/proc/meminfo", encoding: .utf8)) ?? "").split(separator: "\n")
            .first { $0.hasPrefix("MemTotal:") }
            .flatMap { $0.split(separator: " ").dropFirst().first }.flatMap { Double($0) }
            .map { String(format: "%.0f GB RAM", $0 / 1_048_576) } ?? "unknown RAM"
        return "\(cores) cores (nproc), \(model), \(memory)"
    }
}

// MARK: - Formatting and statistics

enum Format {
    static func rate(_ perSecond: Double) -> String {
        perSecond >= 10_000 ? String(format: "%.0f k msg/s", perSecond / 1000) : String(format: "%.0f msg/s", perSecond)
    }

    static func micros(_ seconds: Double) -> String {
        seconds >= 0.01 ? String(format: "%.1f ms", seconds * 1000) : String(format: "%.0f µs", seconds * 1e6)
    }

    static func seconds(_ seconds: Double) -> String { String(format: "%.2f s", seconds) }

    static func megabytes(_ kilobytes: Int) -> String { String(format: "%.0f MB", Double(kilobytes) / 1024) }

    static func ratio(_ value: Double) -> String { String(format: "%.2f×", value) }

    /// Instructions (callgrind's Ir): "412 k instr", "3.25 M instr".
    static func instructions(_ count: Double) -> String {
        switch count {
        case ..<10_000: String(format: "%.0f instr", count)
        case ..<1_000_000: String(format: "%.0f k instr", count / 1000)
        default: String(format: "%.2f M instr", count / 1_000_000)
        }
    }

    static func met(_ ok: Bool) -> String { ok ? "yes" : "NO" }
}

enum Stats {
    /// Nearest-rank percentile of unsorted samples (p in 0...100).
    static func percentile(_ samples: [Double], _ p: Double) -> Double {
        guard !samples.isEmpty else { return .nan }
        let sorted = samples.sorted()
        let rank = Int((p / 100 * Double(sorted.count)).rounded(.up)) - 1
        return sorted[min(max(rank, 0), sorted.count - 1)]
    }

    static func median(_ samples: [Double]) -> Double { percentile(samples, 50) }

    /// Least-squares line through the points: (slope, intercept).
    static func linearFit(_ points: [(x: Double, y: Double)]) -> (slope: Double, intercept: Double) {
        let n = Double(points.count)
        guard n >= 2 else { return (.nan, .nan) }
        let mx = points.map(\.x).reduce(0, +) / n
        let my = points.map(\.y).reduce(0, +) / n
        let sxy = points.map { ($0.x - mx) * ($0.y - my) }.reduce(0, +)
        let sxx = points.map { ($0.x - mx) * ($0.x - mx) }.reduce(0, +)
        let slope = sxx == 0 ? .nan : sxy / sxx
        return (slope, my - slope * mx)
    }
}

extension Duration {
    var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
