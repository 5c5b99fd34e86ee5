import ArgumentParser
import CBenchRunLoop
import Foundation
import Gateway
import HomeMQTTApp
import HomeModel
import Logging
import MQTT
import ServiceLifecycle
import Simulator

// homemqtt-bench's commands: `run` (the scenarios and their table, at small or full scale),
// `gateway-child` (a gateway process of its own for the start-up, idle and instructions
// scenarios), `bare-subscriber` (the idle scenario's baseline process), `echo-child` and
// `hap-reads-child` (the instructions scenario's processes under callgrind), and `hap-profile`
// (scenario 4's HAP loops alone, for profilers).

enum Scale: String, ExpressibleByArgument, Sendable {
    /// Every scenario at a tiny size: seconds, for the smoke test.
    case small
    /// The sizes Docs/performance.md reports.
    case full
}

/// The entry point: an async main, on the main actor. Its main queue is drained by
/// `dispatchMain()`, or by Foundation's run loop when `runLoopVariable` is set: Callgrind.start sets
/// it, because valgrind 3.19 (Debian 12's) crashes in `dispatchMain()` (CBenchRunLoop's
/// RunLoopDrain.c says why, and installs the run loop before main runs).
@main
enum BenchEntry {
    static let runLoopVariable = "HOMEMQTT_BENCH_MAIN_RUN_LOOP"

    static func main() async {
        // The variable and the C side must agree, or valgrind runs would crash again.
        if ProcessInfo.processInfo.environment[runLoopVariable] != nil {
            precondition(homemqtt_bench_drains_in_run_loop() == 1, "the run-loop drain was not installed")
        }
        // As `homemqtt run` does, before anything is awaited (see `HomeMQTT.main`).
        if CommandLine.arguments.dropFirst().first == "gateway-child" { HomeMQTTApp.useOneMemoryArena() }
        await HomeMQTTBench.main()
    }
}

struct HomeMQTTBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "homemqtt-bench",
        abstract: "Benchmarks HomeMQTT against baselines measured in the same run, on a broker of its own.",
        subcommands: [
            RunBenchmarks.self, GatewayChild.self, BareSubscriber.self, EchoChild.self, HAPReadsChild.self,
            HAPProfile.self, ThreadClientCommand.self,
        ],
        defaultSubcommand: RunBenchmarks.self
    )
}

struct RunBenchmarks: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run the scenarios and print a table (the default command)."
    )

    @Option(help: "small: every scenario at a tiny size (seconds); full: the sizes Docs/performance.md reports.")
    var scale: Scale = .full

    @Option(
        help:
            ArgumentHelp(
                "Run only scenario N (1 throughput, 2 write round trip, 3 start-up, 4 HAP, 5 web view, 6 idle, "
                    + "7 instructions, 8 bridge, 9 thread).")
    )
    var only: Int?

    @Flag(help: "The gateway without each accessory's $state document and $set (accessory-state: false).")
    var noAccessoryState = false

    @Flag(help: "Every scenario's gateway with its web view on (web.enabled), to measure what it costs.")
    var web = false

    @Option(
        help:
            "Where scenario 7 writes the set round trip's callgrind profile (default: homemqtt-bench-profile in the temp dir)."
    )
    var profileDir: String?

    func validate() throws {
        if let only, !(1...9).contains(only) {
            throw ValidationError("--only must be 1, 2, 3, 4, 5, 6, 7, 8 or 9, got \(only)")
        }
    }

    func run() async throws {
        bootstrapLogging(level: .warning)
        BenchSettings.accessoryState.withLock { $0 = !noAccessoryState }
        BenchSettings.web.withLock { $0 = web }
        if let profileDir { BenchSettings.profileDirectory.withLock { $0 = profileDir } }
        let scenarios: [(Int, String, @Sendable (Scale) async throws -> [Row])] = [
            (1, ThroughputScenario.name, ThroughputScenario.run),
            (2, RoundTripScenario.name, RoundTripScenario.run),
            (3, StartupScenario.name, StartupScenario.run),
            (4, HAPScenario.name, HAPScenario.run),
            (5, WebScenario.name, WebScenario.run),
            (6, IdleScenario.name, IdleScenario.run),
            (7, InstructionsScenario.name, InstructionsScenario.run),
            (8, BridgeScenario.name, BridgeScenario.run),
            (9, ThreadScenario.name, ThreadScenario.run),
        ]
        let variant = (noAccessoryState ? " --no-accessory-state" : "") + (web ? " --web" : "")
        print("homemqtt-bench --scale \(scale.rawValue)\(variant) on \(Report.machine())")
        var rows: [Row] = []
        var failed = false
        for (number, name, body) in scenarios where only == nil || only == number {
            log("scenario \(name)…")
            let start = ContinuousClock.now
            do {
                rows += try await body(scale)
            } catch {
                failed = true
                rows.append(.failed(name, error))
            }
            log("scenario \(name) took \(Format.seconds(elapsed(start)))")
        }
        print(Report.table(rows))
        for note in BenchSettings.notes.withLock({ $0 }) { print(note) }
        if failed { throw ExitCode(1) }
    }

    private func log(_ text: String) {
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }
}

/// The gateway as `homemqtt run` starts it, for the start-up scenario: in a process of its own so
/// that its peak memory is its own.
struct GatewayChild: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gateway-child",
        abstract: "Run a gateway on a simulator config (used by the start-up scenario).",
        shouldDisplay: false
    )

    @Option var config: String
    @Flag(help: "Make the changes that stdin asks for in the simulator (`SourceChanges`).")
    var changesFromStdin = false

    func run() async throws {
        bootstrapLogging(level: .warning)
        let config = try HomeMQTTApp.loadConfig(file: config)
        let logger = Logger(label: "homemqtt")
        guard let simulator = config.sources.first?.settings as? SimulatorFactory else {
            throw BenchError("the bench's gateway runs a simulator source only")
        }
        let source = try SimulatedHome.load(directory: URL(fileURLWithPath: simulator.directory))
        let database = try HomeDatabase(directory: URL(fileURLWithPath: config.stateDirectory), exclusive: true)
        // As `homemqtt run` makes it, outputs included.
        let parts = try HomeMQTTApp.build(config: config, source: source, database: database, logger: logger)
        let group = ServiceGroup(
            configuration: .init(
                services: parts.services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        do {
            // The changes end when the bench closes stdin, before it stops the gateway.
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await group.run() }
                if changesFromStdin { tasks.addTask { try await SourceChanges.follow(source) } }
                try await tasks.waitForAll()
            }
        } catch is CancellationError {
            return
        }
    }
}

/// The idle scenario's baseline: our MQTT module connected with a gateway config's connection
/// settings (another client id), subscribed to one topic, printing each topic that arrives, and
/// nothing else; SIGTERM ends it.
struct BareSubscriber: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bare-subscriber",
        abstract: "Connect to a gateway config's broker and subscribe to one topic (used by the idle scenario).",
        shouldDisplay: false
    )

    @Option var config: String
    @Option var topic: String

    func run() async throws {
        bootstrapLogging(level: .warning)
        var mqtt = try HomeMQTTApp.loadConfig(file: config).mqtt
        mqtt.clientID = "homemqtt-bench-bare-subscriber"
        let client = MQTTClient(configuration: mqtt, logger: Logger(label: "homemqtt.bench.bare"))
        let messages = client.messages()
        try await client.connect()
        try await client.subscribe([(topic, .atLeastOnce)])
        // Unbuffered, line by line: the bench reads the file while this process runs.
        for await message in messages { FileHandle.standardOutput.write(Data((message.topic + "\n").utf8)) }
    }
}

func bootstrapLogging(level: Logger.Level) {
    LoggingSystem.bootstrap { label in
        var handler = StreamLogHandler.standardError(label: label)
        handler.logLevel = level
        return handler
    }
}
