import Foundation
import TestSupport

/// The repository's root, from this file's place in it: the shipped simulated home, the fixtures
/// and the peers' scripts under `Tests/`.
let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

/// `homemqtt` beside the test bundle (both are in the build's products directory).
let homemqttBinary: String = (try? builtProduct("homemqtt")) ?? "homemqtt (not built)"
