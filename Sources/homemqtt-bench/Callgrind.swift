import Foundation
import Harness
import Synchronization

// Processes under valgrind's callgrind for scenario 7: starting one, its instruction count once it
// has ended, and the difference of two runs per function (`callgrind_annotate`), for the profile.

enum Callgrind {
    /// Why callgrind cannot run here, or nil when it can.
    static var unavailableReason: String? {
        guard let path = try? findExecutable("valgrind"), FileManager.default.isExecutableFile(atPath: path) else {
            return "valgrind is not installed (apt-get install valgrind; Scripts/bootstrap.sh installs it)"
        }
        return nil
    }

    /// This executable without its debug information (`objcopy --strip-debug`; its symbols, which
    /// name the functions, stay), made once: valgrind 3.19 does not know the DWARF 5 forms in the
    /// Swift 6.3 build's debug information, and gives up on the whole process.
    static func benchExecutable() throws -> String {
        try stripped.withLock { copy in
            if let copy { return copy.file("homemqtt-bench") }
            let directory = try TemporaryDirectory(prefix: "homemqtt-bench-callgrind-exe")
            let target = directory.file("homemqtt-bench")
            guard let objcopy = (try? findExecutable("objcopy")) ?? (try? findExecutable("llvm-objcopy")) else {
                throw BenchError("neither objcopy nor llvm-objcopy found: cannot strip the bench's DWARF for valgrind")
            }
            let status = try runBlocking(objcopy, ["--strip-debug", try StartupScenario.executablePath(), target])
            guard status == 0 else { throw BenchError("\(objcopy) --strip-debug exited \(status)") }
            copy = directory
            return target
        }
    }

    private static let stripped = Mutex<TemporaryDirectory?>(nil)

    /// Runs a short command to its end on this thread (in the lock above, so no await).
    private static func runBlocking(_ executable: String, _ arguments: [String]) throws -> Int32 {
        let child = try ChildProcess(executable, arguments)
        while child.isRunning { usleep(10_000) }
        return child.exitStatus ?? -1
    }

    /// `executable` with `arguments` under callgrind, its profile written to `outFile` when it ends
    /// (also when a signal ends it: valgrind writes the profile before the process goes).
    /// `environment` entries are added to the bench's own.
    static func start(
        _ executable: String, _ arguments: [String], outFile: String, environment: [String: String]? = nil,
        standardInput: Bool = false
    ) throws -> ChildProcess {
        if let reason = unavailableReason { throw BenchError(reason) }
        return try ChildProcess(
            "valgrind", ["--tool=callgrind", "--callgrind-out-file=\(outFile)", executable] + arguments,
            environment: (environment ?? [:]).merging([BenchEntry.runLoopVariable: "1"]) { $1 },
            standardInput: standardInput)
    }

    /// Waits for a process under callgrind to end (SIGTERM first when `terminate`), and returns the
    /// instructions it executed, from its profile's `totals:` (or `summary:`) line.
    static func finish(_ child: ChildProcess, outFile: String, terminate: Bool, timeout: Double) async throws -> Int {
        if terminate {
            await child.terminate(grace: timeout)
        } else {
            do {
                try await child.waitForExit(timeout: timeout)
            } catch {
                await child.terminate(grace: 10)
                throw BenchError("\(child.arguments.dropFirst(2).prefix(2)) under callgrind took over \(timeout) s")
            }
        }
        guard let text = try? String(contentsOfFile: outFile, encoding: .utf8) else {
            throw BenchError(
                "callgrind wrote no profile for \(child.arguments.dropFirst(2).prefix(2)) (exit \(child.exitStatus ?? -1)): \(child.standardError.suffix(600))"
            )
        }
        return try totalInstructions(text)
    }

    /// The first figure of the `totals:` or `summary:` line of a callgrind profile (Ir, the
    /// instructions executed).
    static func totalInstructions(_ profile: String) throws -> Int {
        for line in profile.split(separator: "\n").reversed()
        where line.hasPrefix("totals:") || line.hasPrefix("summary:") {
            if let figure = line.split(separator: " ").dropFirst().first, let count = Int(figure) { return count }
        }
        throw BenchError("a callgrind profile without a totals: or summary: line")
    }

    /// Instructions per function of a profile, each function's own (self, not inclusive: a Swift
    /// async function resumes through the runtime, so callgrind sees cycles everywhere and
    /// inclusive figures count the same instructions many times), as `callgrind_annotate` counts
    /// them (every function, however small), keyed "function [object]".
    static func perFunction(_ outFile: String) async throws -> [String: Int] {
        let result = try await runProcess(
            "callgrind_annotate", ["--threshold=100", "--inclusive=no", outFile], timeout: 300)
        guard result.status == 0 else {
            throw BenchError("callgrind_annotate failed (exit \(result.status)): \(result.standardError.suffix(400))")
        }
        var costs: [String: Int] = [:]
        // "1,234,567 (12.34%)  file:function [object]"; the PROGRAM TOTALS line is no function.
        for line in result.standardOutput.split(separator: "\n") {
            let trimmed = line.drop { $0 == " " }
            guard let space = trimmed.firstIndex(of: " "), let close = trimmed.firstIndex(of: ")"),
                trimmed[trimmed.index(after: space)...].hasPrefix("("),
                let count = Int(trimmed[..<space].filter { $0 != "," })
            else { continue }
            var function = trimmed[trimmed.index(after: close)...].trimmingCharacters(in: .whitespaces)
            if function == "PROGRAM TOTALS" || function.isEmpty { continue }
            // Without the source file before the first colon ("???:" when there is none).
            if let colon = function.firstIndex(of: ":") { function = String(function[function.index(after: colon)...]) }
            costs[function, default: 0] += count
        }
        return costs
    }

    /// How much each function's own instructions grew from the profile `base` to `measured`, per
    /// unit of `units` (round trips, reads), largest first.
    static func difference(base: String, measured: String, units: Int) async throws
        -> [(perUnit: Double, function: String)]
    {
        let before = try await perFunction(base)
        let after = try await perFunction(measured)
        var grown: [(perUnit: Double, function: String)] = []
        for function in Set(before.keys).union(after.keys) {
            let difference = (after[function] ?? 0) - (before[function] ?? 0)
            grown.append((Double(difference) / Double(max(units, 1)), function))
        }
        grown.sort { $0.perUnit > $1.perUnit }
        return grown
    }

    /// "libswiftCore.so" of "swift_retain [/opt/swift/usr/lib/swift/linux/libswiftCore.so]".
    static func object(of function: String) -> String {
        guard function.hasSuffix("]"), let open = function.range(of: " [", options: .backwards) else { return "?" }
        let path = function[open.upperBound..<function.index(before: function.endIndex)]
        return String(path.split(separator: "/").last ?? Substring(path))
    }

    /// `text` with every Swift mangled name demangled (`swift demangle --simplified`), or as it is
    /// when the demangler is not there.
    static func demangled(_ text: String) async -> String {
        guard let swift = try? findExecutable("swift"),
            let child = try? ChildProcess(swift, ["demangle", "--simplified"], standardInput: true)
        else { return text }
        do {
            try child.write(text)
            child.closeInput()
            guard try await child.waitForExit(timeout: 60) == 0 else { return text }
            return child.standardOutput
        } catch {
            await child.terminate(grace: 1)
            return text
        }
    }
}
