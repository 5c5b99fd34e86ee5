import Foundation
import Synchronization
import XCTest

/// Which tests run a gateway, and on what (issue 40: the share run on the memory rig). When
/// `HOMEMQTT_TEST_CENSUS` names a file, every way the tests start a gateway calls `record`, and
/// each test that did appends `<test name> <kind>` to the file, once per kind, when it finishes.
/// `Scripts/test-census.sh` runs the suite so and counts. Without the variable, nothing happens.
public enum TestCensus {
    public enum Kind: String, Sendable {
        /// The in-process gateway on a `MemoryBroker`: `Rig.memory`, `InProcessGateway`.
        case memory
        /// The in-process gateway on a real mosquitto: `Rig.mosquitto`, `GatewayHarness`.
        case mosquitto
        /// The in-process gateway on mqttools' broker (QoS 0 only): `Rig.mqttools`.
        case mqttools
        /// The real `homemqtt run`, as a child process.
        case binary
    }

    /// Notes that the running test started a gateway of `kind`.
    public static func record(_ kind: Kind) {
        guard let path = ProcessInfo.processInfo.environment["HOMEMQTT_TEST_CENSUS"], !path.isEmpty else { return }
        // Registered at the first record, during a test: that test's end is still observed.
        let register = state.withLock { state in
            state.kinds.insert(kind)
            defer { state.path = path }
            return state.path == nil
        }
        if register { XCTestObservationCenter.shared.addTestObserver(Observer()) }
    }

    private struct State {
        var path: String?
        var kinds: Set<Kind> = []
    }

    private static let state = Mutex(State())

    /// Writes the finished test's kinds (a line each, appended whole: the test processes of a
    /// parallel run share the file).
    fileprivate static func finished(_ name: String) {
        let (path, kinds) = state.withLock { state in
            defer { state.kinds = [] }
            return (state.path, state.kinds)
        }
        guard let path, !kinds.isEmpty else { return }
        let text = kinds.map { "\(name) \($0.rawValue)\n" }.sorted().joined()
        let descriptor = open(path, O_WRONLY | O_APPEND | O_CREAT, 0o644)
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        _ = text.utf8CString.withUnsafeBufferPointer { write(descriptor, $0.baseAddress, $0.count - 1) }
    }

    private final class Observer: NSObject, XCTestObservation {
        func testCaseDidFinish(_ testCase: XCTestCase) {
            // "-[Suite test]" on Darwin, "Suite.test" here.
            let name = testCase.name.trimmingCharacters(in: CharacterSet(charactersIn: "-[]"))
                .replacingOccurrences(of: " ", with: ".")
            TestCensus.finished(name)
        }
    }
}
