import Foundation
import HomeModel
import Testing

@testable import HAP
import TestSupport

/// The session cipher of HAP over CoAP: keys, nonces, the window of counters, and the real
/// aiohomekit's EncryptionContext on the other side (`Scripts/aiohomekit-coap-cipher.py`).
@Suite struct CoAPSessionCipherTests {
    static let secret = [UInt8](hex: "5b1b2c8a9d3e4f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8")!

    @Test func bothSidesAgreeAndCountersMove() throws {
        let keys = CoAPSessionKeys(sharedSecret: Self.secret)
        #expect(Set([keys.controlRead, keys.controlWrite, keys.eventRead]).count == 3)
        var controller = CoAPSessionCipher(keys: keys, role: .controller)
        var accessory = CoAPSessionCipher(keys: keys, role: .accessory)
        for i in 0..<3 {
            let request = try CoAPRequestPDU.read(iid: 51, tid: UInt8(i)).encoded()
            #expect(try accessory.open(controller.seal(request)) == request)
            let response = try CoAPResponsePDU(tid: UInt8(i), body: [1, 1, 1]).encoded()
            #expect(try controller.open(accessory.seal(response)) == response)
            #expect(try controller.openEvent(accessory.sealEvent([UInt8(i)])) == [UInt8(i)])
        }
        #expect(controller.outgoing.counter == 3 && controller.incoming.counter == 3 && controller.events.counter == 3)
        // The nonce: four zero bytes, then the counter little-endian.
        #expect(CoAPCipherDirection.nonce(0x0102) == [0, 0, 0, 0, 2, 1, 0, 0, 0, 0, 0, 0])
    }

    /// A response sealed a few counters ahead or behind still opens, and the counter follows
    /// it; one far off is a counter failure, not a framing error.
    @Test func nearbyCountersOpenAndFarOnesAreACounterFailure() throws {
        let keys = CoAPSessionKeys(sharedSecret: Self.secret)
        var sender = CoAPCipherDirection(key: keys.controlRead)
        var receiver = CoAPCipherDirection(key: keys.controlRead)
        for _ in 0..<10 { _ = try receiver.open(sender.seal([1, 2, 3])) }
        #expect(receiver.counter == 10)
        // Three lost on the way: 13 opens with 10 expected.
        for _ in 0..<3 { _ = sender.seal([0]) }
        let ahead = try receiver.open(sender.seal([7]))
        #expect(ahead.plaintext == [7] && ahead.counter == 13)
        #expect(receiver.counter == 14)
        // A retransmission of 11: behind, still in the window.
        var old = CoAPCipherDirection(key: keys.controlRead, counter: 11)
        #expect(try receiver.open(old.seal([8])).counter == 11)
        #expect(receiver.counter == 12)
        // 40 ahead: outside the window.
        var far = CoAPCipherDirection(key: keys.controlRead, counter: 52)
        #expect(
            throws: CoAPCodecError.counterFailure(expected: 12, tried: [12, 11, 10, 9, 8, 7, 13, 14, 15, 16, 17, 0])
        ) {
            try receiver.open(far.seal([9]))
        }
        #expect(receiver.counter == 12)
        // The wrong key looks the same from here: no counter opens it.
        var stranger = CoAPCipherDirection(key: keys.controlWrite, counter: 12)
        #expect(throws: CoAPCodecError.self) { try receiver.open(stranger.seal([1])) }
        #expect(throws: CoAPCodecError.sealedTooShort(length: 15)) {
            try receiver.open([UInt8](repeating: 0, count: 15))
        }
        // A peer that started over (counter 0) is followed, and this side's sending starts over too.
        var session = CoAPSessionCipher(keys: keys, role: .controller)
        for _ in 0..<8 { _ = session.seal([0]) }
        session.incoming = CoAPCipherDirection(key: keys.controlRead, counter: 8)
        var restarted = CoAPCipherDirection(key: keys.controlRead)
        #expect(try session.open(restarted.seal([5])) == [5])
        #expect(session.outgoing.counter == 0)
    }
}

/// The same against aiohomekit's controller: its keys, its sealed requests opened by our
/// accessory side, our responses (one past a lost counter) and events opened by it.
@Suite(.enabled(if: HAPPeer.unavailableReason == nil || HAPPeer.isRequired, "needs the venv's aiohomekit"))
struct CoAPSessionCipherAiohomekitTests {
    @Test func aiohomekitsControllerAndOurAccessoryTalk() async throws {
        let keys = CoAPSessionKeys(sharedSecret: CoAPSessionCipherTests.secret)
        var accessory = CoAPSessionCipher(keys: keys, role: .accessory)
        let requests = try [CoAPRequestPDU.attributeDatabase(tid: 1), .read(iid: 51, tid: 2), .read(iid: 52, tid: 3)]
            .map { try $0.encoded() }
        let responses: [[UInt8]] = [[2, 1, 0, 0, 0], [2, 2, 0, 3, 0, 1, 1, 1], [2, 3, 0, 0, 0], [2, 4, 6, 0, 0]]
        var sealedResponses = responses.prefix(2).map { accessory.seal($0) }
        _ = accessory.seal([0xEE]) // lost on the way: aiohomekit has to look one ahead
        sealedResponses += responses.suffix(2).map { accessory.seal($0) }
        let events = [[UInt8]([0, 51, 0, 3, 0, 1, 1, 0]), [0, 52, 0, 0, 0]].map { accessory.sealEvent($0) }
        let job: JSONValue = .object([
            "secret": .string(CoAPSessionCipherTests.secret.hexString),
            "requests": .array(requests.map { .string($0.hexString) }),
            "responses": .array(sealedResponses.map { .string($0.hexString) }),
            "events": .array(events.map { .string($0.hexString) }),
        ])
        let input = FileManager.default.temporaryDirectory.appendingPathComponent("coap-cipher-\(UUID()).json")
        try Data(job.encoded().utf8).write(to: input)
        defer { try? FileManager.default.removeItem(at: input) }
        let script = RepoPaths.root.appendingPathComponent("Scripts/aiohomekit-coap-cipher.py").path
        let result = try await runChecked(
            "/bin/sh", ["-c", "exec \"$0\" \"$1\" < \"$2\"", HAPPeer.python.path, script, input.path], timeout: 60)
        let out = try JSONValue(parsing: result.standardOutput)
        #expect(out["keys"]?["read"]?.stringValue == keys.controlRead.hexString)
        #expect(out["keys"]?["write"]?.stringValue == keys.controlWrite.hexString)
        #expect(out["keys"]?["event"]?.stringValue == keys.eventRead.hexString)
        let theirRequests = (out["sealed_requests"]?.arrayValue ?? []).compactMap {
            $0.stringValue.flatMap { [UInt8](hex: $0) }
        }
        #expect(theirRequests.count == 3)
        #expect(try theirRequests.map { try accessory.open($0) } == requests)
        let opened = (out["opened_responses"]?.arrayValue ?? []).map { $0.stringValue.flatMap { [UInt8](hex: $0) } }
        #expect(opened == responses.map { Optional($0) })
        let openedEvents = (out["opened_events"]?.arrayValue ?? []).map { $0.stringValue.flatMap { [UInt8](hex: $0) } }
        #expect(openedEvents == [[0, 51, 0, 3, 0, 1, 1, 0], [0, 52, 0, 0, 0]])
    }
}
