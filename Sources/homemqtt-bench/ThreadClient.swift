import ArgumentParser
import Foundation
import HAP
import CoAP
import HAPThread
import HomeModel
import Logging
import Synchronization

// `homemqtt-bench thread-client`: our HAP-over-CoAP controller as scenario 9 measures it — the
// same line protocol as aiohomekit's (Scripts/bench-thread-aiohomekit.py, which documents it), in a
// process of its own so that its CPU time is the client's alone.

struct ThreadClientCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "thread-client",
        abstract: "Our HAP-over-CoAP controller driven line by line on stdin (used by scenario 9).",
        shouldDisplay: false
    )

    func run() async throws {
        let (lines, input) = AsyncStream.makeStream(of: String.self)
        // stdin is read on a thread of its own: a blocking read never holds a thread of the pool
        // the controller's requests and events run on.
        let reader = Thread {
            while let line = readLine() { input.yield(line) }
            input.finish()
        }
        reader.start()
        ThreadClient.emit(["ready": true])
        let client = ThreadClient()
        await withTaskGroup(of: Void.self) { group in
            for await line in lines {
                guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                    continue
                }
                let sequence = object["seq"] as? Int ?? 0
                do {
                    let answer = try await client.perform(object, group: &group)
                    ThreadClient.emit(answer.merging(["reply": sequence, "ok": true]) { $1 })
                } catch {
                    ThreadClient.emit(["reply": sequence, "ok": false, "error": "\(error)"])
                }
            }
            // stdin closed: the event tasks end with the session.
            await client.close()
            group.cancelAll()
        }
    }
}

/// One paired accessory's controller and the events timed since `listen`. Used from the one task
/// that reads commands; only the event log is shared with the event tasks.
final class ThreadClient {
    /// The events of the listened-to characteristic: when each came, and whether the drive's last
    /// value (100) came.
    struct Listening {
        var iid: UInt16
        var times: [Double] = []
        var done = false
    }

    private var controller: HAPCoAPController?
    private var link: HAPThreadControllerLink?
    /// Shared with the task that takes the events, so a class around the lock.
    final class Log: Sendable {
        let state = Mutex<Listening?>(nil)
    }
    private let listening = Log()
    private let started = ContinuousClock.now

    static func emit(_ object: [String: Any]) {
        guard let data = try? JSONSerialization.data(withJSONObject: object) else { return }
        FileHandle.standardOutput.write(data + Data("\n".utf8))
    }

    func close() async {
        await link?.client.close()
    }

    func perform(_ command: [String: Any], group: inout TaskGroup<Void>) async throws -> [String: Any] {
        let op = command["op"] as? String ?? ""
        if op == "pair" { return try await pair(command, group: &group) }
        guard let controller else { throw BenchError("\(op) before pair") }
        let iid = UInt16(command["iid"] as? Int ?? 0)
        let count = command["count"] as? Int ?? 0
        switch op {
        case "reads":
            return try await timed(count) { _ in _ = try await controller.read(iid) }
        case "writes":
            return try await timed(count) { n in try await controller.write(iid, .int(Int64(1 + n % 40))) }
        case "subscribe":
            try await controller.subscribe([iid])
            return [:]
        case "listen":
            listening.state.withLock { $0 = Listening(iid: iid) }
            return [:]
        case "wait":
            return try await wait(timeout: command["timeout"] as? Double ?? 120)
        default:
            throw BenchError("no command \(op)")
        }
    }

    /// Pair-setup with the code (a client of its own, closed after), then the session's client:
    /// pair-verify and the attribute database; answers the Brightness's iid.
    private func pair(_ command: [String: Any], group: inout TaskGroup<Void>) async throws -> [String: Any] {
        guard let host = command["host"] as? String, let port = command["port"] as? Int,
            let code = command["code"] as? String
        else { throw BenchError("pair needs host, port and code") }
        let peer = CoAPPeer(host: host, port: UInt16(port))
        let pairClient = try HAPThreadControllerLink.makeClient()
        let pairing: HAPPairing
        do {
            pairing = try await HAPCoAPController.pair(
                exchange: HAPThreadControllerLink(client: pairClient, accessory: peer), host: host, port: port,
                setupCode: code)
            await pairClient.close()
        } catch {
            await pairClient.close()
            throw error
        }
        let link = HAPThreadControllerLink(client: try HAPThreadControllerLink.makeClient(), accessory: peer)
        let controller = HAPCoAPController(pairing: pairing, exchange: link, logger: Logger(label: "bench-thread"))
        (self.link, self.controller) = (link, controller)
        group.addTask { await link.deliverEvents(to: controller) }
        let listening = self.listening, started = self.started
        group.addTask {
            for await event in controller.events {
                let now = (ContinuousClock.now - started) / .seconds(1)
                listening.state.withLock { state in
                    guard var s = state, s.iid == event.iid else { return }
                    s.times.append(now)
                    if case .int(100)? = event.value { s.done = true }
                    state = s
                }
            }
        }
        try await controller.verify()
        var problems: [String] = []
        let tree = try await controller.accessories(problems: &problems)
        let brightness = StandardUUID.longForm("8")
        for service in tree.first?.services ?? [] {
            for c in service.characteristics where StandardUUID.longForm(c.type) == brightness {
                return ["iid": c.iid]
            }
        }
        throw BenchError("no Brightness in the accessory's database")
    }

    /// `count` requests, each timed; "cpu": this process's CPU seconds over the loop.
    private func timed(_ count: Int, _ request: (Int) async throws -> Void) async throws -> [String: Any] {
        var samples: [Double] = []
        samples.reserveCapacity(count)
        let before = HAPScenario.processCPU()
        for n in 0..<count {
            let start = ContinuousClock.now
            try await request(n)
            samples.append((ContinuousClock.now - start) / .seconds(1))
        }
        return ["samples": samples, "cpu": HAPScenario.processCPU() - before]
    }

    /// Waits for the value 100 on the listened-to characteristic (a drive's last).
    private func wait(timeout: Double) async throws -> [String: Any] {
        let deadline = ContinuousClock.now + .seconds(timeout)
        while true {
            let state = listening.state.withLock { $0 }
            if let state, state.done, let first = state.times.first, let last = state.times.last {
                listening.state.withLock { $0 = nil }
                return ["count": state.times.count, "first": first, "last": last]
            }
            if ContinuousClock.now > deadline {
                throw BenchError("no value 100 after \(state?.times.count ?? 0) events")
            }
            try await Task.sleep(for: .milliseconds(1))
        }
    }
}
