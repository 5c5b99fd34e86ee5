import Foundation
import TestSupport

/// The checkout's root, for the simulated home and the fixtures under `Tests/`.
let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()
