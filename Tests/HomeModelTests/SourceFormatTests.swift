import Foundation
import TestSupport
import Testing

/// The code follows the checked-in `.swift-format` (indentation, line length, the rest): what
/// `swift format --in-place --recursive Sources Tests Package.swift` makes of it is what is
/// committed. swift-format ships with the Swift toolchain.
@Suite struct SourceFormatTests {
    @Test func everySourceFileFollowsTheFormatConfiguration() async throws {
        let root = HAPPeer.repositoryRoot.path
        let result = try await runProcess(
            "swift-format",
            [
                "lint", "--strict", "--recursive", "--configuration", root + "/.swift-format",
                root + "/Sources", root + "/Tests", root + "/Package.swift",
            ],
            timeout: 300
        )
        let findings = result.standardError.split(separator: "\n")
        #expect(
            result.status == 0, "\(findings.count) findings, the first: \(findings.prefix(10).joined(separator: "\n"))")
    }
}
