import Foundation
import Testing
import TestSupport

@Suite("Test support helpers")
struct TestSupportTests {
    @Test func runProcessCapturesOutputStatusAndWorkingDirectory() async throws {
        try await withTemporaryDirectory { directory in
            let pwd = try await runChecked("pwd", [], workingDirectory: directory.path)
            #expect(pwd.standardOutput.trimmingCharacters(in: .newlines) == directory.path)
            let failing = try await runProcess("sh", ["-c", "echo oops >&2; exit 3"])
            #expect(failing.status == 3)
            #expect(failing.standardError == "oops\n")
            let environment = try await runChecked(
                "sh", ["-c", "echo $HOMEMQTT_TEST_VALUE"], environment: ["HOMEMQTT_TEST_VALUE": "42"])
            #expect(environment.standardOutput == "42\n")
        }
    }

    @Test func childProcessesGetSIGTERMAndTimeoutsAreReported() async throws {
        let sleeper = try ChildProcess("sleep", ["30"])
        #expect(sleeper.isRunning)
        #expect(await sleeper.terminate(grace: 5) == 128 + SIGTERM, "SIGTERM must not be blocked in the child")
        await #expect(throws: ProcessError.self) { try await runProcess("sleep", ["30"], timeout: 0.2) }
        await #expect(throws: TestTimeoutError.self) { try await waitUntil("never", timeout: 0.05) { false } }
    }

    @Test func brokerRestartsOnTheSamePort() async throws {
        let broker = try await MosquittoBroker.start()
        let port = broker.port
        #expect(port != 1883)
        #expect(canConnect(host: "127.0.0.1", port: port))
        await broker.stop()
        #expect(!broker.isRunning)
        #expect(!canConnect(host: "127.0.0.1", port: port))
        try await broker.start()
        #expect(broker.port == port)
        #expect(canConnect(host: "127.0.0.1", port: port))
        await broker.stop()
    }
}
