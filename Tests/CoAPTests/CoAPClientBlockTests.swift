import CoAP
import Foundation
import Synchronization
import TestSupport
import XCTest

/// A peer whose Block2 body never ends, or skips a block: our client stops with a typed error
/// rather than hold it or join it wrong.
final class CoAPClientBlockTests: XCTestCase {
    /// Answers each request of ours with a piggybacked 2.05 carrying Block2 `num(index)`, M set,
    /// and 1024 bytes; returns how many it answered when `until` says stop or nothing comes.
    static func serveEndlessBlocks(_ peer: RawUDP, num: @escaping (Int) -> Int, until: () -> Bool) -> Int {
        var answered = 0
        while !until(), let request = peer.receive(timeout: 2) {
            let tokenLength = Int(request.bytes[0] & 0x0F)
            let token = Array(request.bytes[4..<(4 + tokenLength)])
            let value = UInt32(num(answered)) << 4 | 0x0E
            let block: [UInt8] =
                value < 0x100
                ? [UInt8(value)]
                : value < 0x10000
                    ? [UInt8(value >> 8), UInt8(value & 0xFF)]
                    : [UInt8(value >> 16), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
            // Option 23 (Block2): delta 13 + 10 in an extended byte.
            let answer: [UInt8] =
                [0x60 | UInt8(tokenLength), 0x45, request.bytes[2], request.bytes[3]] + token
                + [0xD0 | UInt8(block.count), 10] + block + [0xFF] + [UInt8](repeating: 0x42, count: 1024)
            peer.send(answer, to: request.port)
            answered += 1
        }
        return answered
    }

    func testEndlessBlock2BodyIsRefusedAtOneMebibyte() async throws {
        let peer = try RawUDP()
        let client = try CoAPClient()
        let target = CoAPPeer(host: "::1", port: peer.port)
        let done = Mutex(false)
        async let outcome = attempt { try await client.request(.post, peer: target, path: "0", deadline: .seconds(60)) }
        let answered = Self.serveEndlessBlocks(peer, num: { $0 }, until: { done.withLock { $0 } })
        let result = await outcome
        done.withLock { $0 = true }
        XCTAssertEqual(result.error, .badResponse("a body larger than 1048576 bytes"))
        XCTAssertEqual(answered, 1025, "blocks 0 to 1024 asked for, no more")
        await client.close()
    }

    func testSkippedBlock2BlockIsABadResponse() async throws {
        let peer = try RawUDP()
        let client = try CoAPClient()
        let target = CoAPPeer(host: "::1", port: peer.port)
        async let outcome = attempt { try await client.request(.post, peer: target, path: "0", deadline: .seconds(10)) }
        // Blocks 0 then 2.
        let answered = Self.serveEndlessBlocks(peer, num: { $0 == 0 ? 0 : 2 }, until: { false })
        let result = await outcome
        XCTAssertEqual(result.error, .badResponse("Block2 block 2 where 1 was asked for"))
        XCTAssertEqual(answered, 2)
        await client.close()
    }
}
