import Foundation
import Testing
import TestSupport
@testable import HomeModel

// The gateway's id (GatewayIdentity): made once, kept, 0600, the same for every maker at once;
// and the route's text (GatewayRoute).

@Suite struct GatewayIdentityTests {
    @Test func theIdIsMadeOnceAndKept() throws {
        let state = try TemporaryDirectory()
        let first = try GatewayIdentity.load(stateDirectory: state.path)
        #expect(first.count == 16 && first.allSatisfy(\.isHexDigit))
        #expect(try GatewayIdentity.load(stateDirectory: state.path) == first)
        var info = stat()
        #expect(stat(state.file(GatewayIdentity.fileName), &info) == 0 && info.st_mode & 0o777 == 0o600)
        // Nothing left beside it (the file made before it was linked into place is gone).
        #expect(try FileManager.default.contentsOfDirectory(atPath: state.path) == [GatewayIdentity.fileName])
        // Held while it is used: a directory object used only for its path was gone (and
        // removed) before `load` made the directory again, left behind in /tmp.
        let another = try TemporaryDirectory()
        #expect(try GatewayIdentity.load(stateDirectory: another.path) != first)
    }

    /// The HAP source and a bridge of one gateway may make it at the same moment: one id wins,
    /// and every maker returns it.
    @Test func makersAtOnceAgree() async throws {
        let state = try TemporaryDirectory()
        let path = state.path
        let ids = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<8 { group.addTask { try GatewayIdentity.load(stateDirectory: path) } }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        #expect(ids.count == 1)
        #expect(try GatewayIdentity.load(stateDirectory: path) == ids.first)
    }

    @Test func aDamagedFileIsAnErrorNotANewId() throws {
        let state = try TemporaryDirectory()
        try "not an id\n".write(toFile: state.file(GatewayIdentity.fileName), atomically: true, encoding: .utf8)
        #expect(throws: ModelError.self) { try GatewayIdentity.load(stateDirectory: state.path) }
    }

    @Test func theRouteGrowsByThisGatewayOnce() {
        #expect(GatewayRoute.extended([], by: "aa") == "aa")
        #expect(GatewayRoute.extended(["bb"], by: "aa") == "bb,aa")
        #expect(GatewayRoute.extended(["bb", "aa"], by: "aa") == "bb,aa")
        #expect(GatewayRoute.parse(" bb, aa ,,") == ["bb", "aa"])
    }
}
