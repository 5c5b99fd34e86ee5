import Foundation

/// Paths of the repository and the things beside it, from this file's location.
enum RepoPaths {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let fixtures = root.appendingPathComponent("Tests/Fixtures/hap-fixtures")
}
