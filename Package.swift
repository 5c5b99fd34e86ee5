// swift-tools-version:6.1
import PackageDescription

#if canImport(Glibc)
    import Glibc
#endif

/// The gateway's executables (`homemqtt`, and the bench whose gateway is measured) are linked by
/// lld, which the Swift toolchain ships, with packed relative relocations (`DT_RELR`): their
/// ~38,000 relative relocations in 10 KB instead of 0.9 MB, so a start reads and keeps fewer
/// pages. At 1,000 accessories the bench's gateway peaked at 48, 48 MB against 49, 49 linked as
/// before, freshly linked or read again from the disk (VmHWM, each the median of three start-ups,
/// alternated; lld alone made no difference; Docs/performance.md). glibc loads such a binary from 2.36
/// on and refuses it before: the relocations are packed only when the glibc built against
/// is 2.36 or later (Debian 12 is), so a binary built on an older system still runs there.
let linkedCompactly: [LinkerSetting] = {
    #if canImport(Glibc)
        // `gnu_get_libc_version`, which the Glibc module leaves out.
        typealias Version = @convention(c) () -> UnsafePointer<CChar>
        guard let symbol = dlsym(nil, "gnu_get_libc_version") else { return [] }
        let version = String(cString: unsafeBitCast(symbol, to: Version.self)()).split(separator: ".").compactMap {
            Int($0)
        }
        guard version.count >= 2, (version[0], version[1]) >= (2, 36) else { return [] }
        return [
            .unsafeFlags(
                ["-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs"], .when(platforms: [.linux]))
        ]
    #else
        return []
    #endif
}()

let package = Package(
    name: "HomeMQTT",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "homemqtt", targets: ["homemqtt"]),
        .executable(name: "homemqtt-bench", targets: ["homemqtt-bench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.80.0"),
        .package(url: "https://github.com/jpsim/Yams", from: "5.0.0"),
        .package(url: "https://github.com/attaswift/BigInt", from: "6.0.0"),
        // The web view (issue 17). Hummingbird without its default traits: they pull in
        // swift-configuration, which nothing here reads.
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1", traits: []),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket", from: "2.8.1"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
    ],
    targets: [
        // The package's C libraries, as system libraries: libmosquitto (only MQTT imports it) and
        // libqrencode (only SetupQR imports it).
        .systemLibrary(
            name: "CMosquitto",
            pkgConfig: "libmosquitto",
            providers: [.apt(["libmosquitto-dev"])]
        ),
        .systemLibrary(
            name: "CQREncode",
            pkgConfig: "libqrencode",
            providers: [.apt(["libqrencode-dev"])]
        ),
        // HAP's session frames (HAPSessionCipher): libsodium's ChaCha20-Poly1305, in place in our
        // buffers. swift-crypto's `ChaChaPoly` boxes each frame in `Data` and was most of a read's
        // cost in the HomeKit bridge; it still does everything else (HKDF, Ed25519, X25519, SHA).
        .systemLibrary(
            name: "CSodium",
            pkgConfig: "libsodium",
            providers: [.apt(["libsodium-dev"])]
        ),
        // HAP over Thread's transport (issue 42): libcoap 3, the reference CoAP implementation, in
        // its build without (D)TLS — HAP over CoAP encrypts each payload with its own session keys.
        // Only CoAP imports it.
        .systemLibrary(
            name: "CCoAP",
            pkgConfig: "libcoap-3-notls",
            providers: [.apt(["libcoap3-dev"])]
        ),
        // The HomeKit bridge's setup QR code: libqrencode's matrix, drawn as SVG and as terminal text.
        .target(name: "SetupQR", dependencies: ["CQREncode"]),
        .target(
            name: "MQTT",
            dependencies: [
                "CMosquitto",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // CoAP (RFC 7252, RFC 7959 Block2) over UDP: a client and a server on libcoap, each with its
        // network thread, as MQTT is on libmosquitto.
        .target(
            name: "CoAP",
            dependencies: [
                "CCoAP",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .target(
            name: "HomeModel",
            dependencies: [
                .product(name: "Yams", package: "Yams"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .target(
            name: "Simulator",
            dependencies: [
                "HomeModel",
                .product(name: "Yams", package: "Yams"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // mDNS service discovery for any service type: the DNS codec, the record cache, a
        // continuous browser and one-shot queries. HAP browses `_hap._tcp` with it.
        .target(
            name: "MDNS",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .target(
            name: "HAP",
            dependencies: [
                "HomeModel", "MDNS", "CSodium",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "BigInt", package: "BigInt"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The accessory side of HAP over IP: pair-setup and pair-verify as the accessory, the
        // encrypted sessions, /accessories, /characteristics, timed writes, /pairings and events,
        // serving a database the caller supplies. Uses HAP's crypto, TLV8 and session framing.
        .target(
            name: "HAPServer",
            dependencies: [
                "HAP", "HomeModel",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "BigInt", package: "BigInt"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // HAP over Thread on the wire (issue 42): the HAP-over-CoAP peers (HAP's controller,
        // HAPServer's accessory) carried by the CoAP module's client and server over UDP.
        .target(
            name: "HAPThread",
            dependencies: [
                "HAP", "HAPServer", "CoAP", "HomeModel",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .target(
            name: "Gateway",
            dependencies: [
                "MQTT", "HomeModel",
                .product(name: "Yams", package: "Yams"),
                // SHA-256 of the web view's tokens (`access:`), kept hashed at rest.
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                // Counters only (no-ops until a factory is bootstrapped); the exporter is WebView's.
                .product(name: "Metrics", package: "swift-metrics"),
            ]
        ),
        // The live web view: HTTP, the WebSocket and /metrics, kept out of Gateway, which has no
        // HTTP. Its pages are under Assets/ and compiled in (Assets+Generated.swift), so the
        // binary alone serves them.
        .target(
            name: "WebView",
            dependencies: [
                "Gateway", "HomeModel", "MQTT", "SetupQR",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            exclude: ["Assets"]
        ),
        // The MQTT topic dialect (`set`, `get`, `$toggle`, `$identify`, `$state`/`$set`,
        // `$gateway/request/<op>` and their answers): outputs of the gateway on its public API.
        .target(name: "TopicAPI", dependencies: ["Gateway", "HomeModel", "MQTT"]),
        // Home Assistant MQTT discovery: an output of the gateway (`GatewayOutput`).
        .target(name: "HomeAssistant", dependencies: ["Gateway", "HomeModel", "MQTT"]),
        // The Homie v5 output: the gateway's published home as Homie devices, on a connection of
        // its own, through the gateway's public views (`observe()`, `request`).
        .target(
            name: "Homie",
            dependencies: [
                "Gateway", "HomeModel", "MQTT",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // Each home as a HomeKit bridge: the accessory server (HAPServer) serving the gateway's
        // published home through its public views (`observe()`, `perform`).
        .target(
            name: "HomeKitBridge",
            dependencies: [
                "Gateway", "HAPServer", "HAPThread", "HomeModel", "MDNS", "SetupQR",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The composition root: the sections, outputs and sources that make the gateway, listed
        // once for the binary, the bench and the tests.
        .target(
            name: "HomeMQTTApp",
            dependencies: [
                "Gateway", "TopicAPI", "HomeAssistant", "Homie", "HomeModel", "MQTT", "WebView", "Simulator", "HAP",
                // HAPThread: the CoAP link of the hap source's Thread pairings (HAPFactory).
                "MDNS", "HomeKitBridge", "HAPThread",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .executableTarget(
            name: "homemqtt",
            dependencies: [
                "HomeMQTTApp", "Gateway", "Homie", "HomeModel", "Simulator", "HAP", "MQTT", "WebView", "HAPServer",
                "HomeKitBridge", "SetupQR", "MDNS",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            linkerSettings: linkedCompactly
        ),
        // Benchmarks against baselines measured in the same run (issue 8); starts its own broker.
        .executableTarget(
            name: "homemqtt-bench",
            dependencies: [
                "HomeMQTTApp", "Gateway", "TopicAPI", "MQTT", "Simulator", "HomeModel", "HAP", "Harness", "WebView",
                "CBenchRunLoop", "HAPThread", "CoAP",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            // The gateway it measures is linked as `homemqtt` is.
            linkerSettings: linkedCompactly
        ),
        // The bench's async main drained in Foundation's run loop under valgrind (RunLoopDrain.c).
        .target(name: "CBenchRunLoop"),
        // Real processes for the tests and the bench: a mosquitto on a free loopback port, the
        // HAP-python peer, child processes, temporary directories. Under Sources/ because the
        // bench, a shipped product, links it.
        .target(name: "Harness", dependencies: ["MQTT", "HAP"]),
        // The test targets' helpers (subscribers that await a message, a broker held in memory),
        // re-exporting Harness.
        .target(
            name: "TestSupport",
            dependencies: [
                "MQTT", "Harness",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Tests/TestSupport"
        ),
        // Child process for the MQTT last-will tests (our client with a will, killed by the test).
        .executableTarget(name: "mqtt-will-probe", dependencies: ["MQTT"], path: "Tests/mqtt-will-probe"),
        .testTarget(
            name: "MQTTTests",
            dependencies: [
                "MQTT", "TestSupport", "mqtt-will-probe",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // peer/: aiocoap scripts (an independent CoAP server, client and event receiver).
        .testTarget(
            name: "CoAPTests",
            dependencies: [
                "CoAP", "TestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            exclude: ["peer"]
        ),
        .testTarget(
            name: "HomeModelTests",
            dependencies: ["HomeModel", "TestSupport", .product(name: "Yams", package: "Yams")]),
        // The QR codes read back by zbarimg (zbar-tools), a reader independent of libqrencode.
        .testTarget(name: "SetupQRTests", dependencies: ["SetupQR", "TestSupport"]),
        .testTarget(
            name: "SimulatorTests",
            dependencies: [
                "Simulator", "HomeModel", "TestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // peer/: HAP-python and aiohomekit scripts, run by the end-to-end tests.
        .testTarget(name: "HAPTests", dependencies: ["HAP", "MDNS", "HomeModel", "TestSupport"], exclude: ["peer"]),
        .testTarget(name: "MDNSTests", dependencies: ["MDNS", "TestSupport"]),
        // The accessory server's test bridge (a database in memory) and a controller written
        // byte by byte, shared by HAPServerTests and the aiohomekit tests in EndToEndTests.
        .target(
            name: "HAPServerTestSupport",
            dependencies: [
                "HAPServer", "HAP", "HomeModel", "TestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            path: "Tests/HAPServerTestSupport"
        ),
        .testTarget(
            name: "HAPServerTests",
            dependencies: [
                // Simulator: the HAP-over-CoAP tests serve an accessory file of Config/accessories.
                "HAPServer", "HAPServerTestSupport", "HAP", "HomeModel", "Simulator", "TestSupport",
                // The CoAPUDP tests: the same peers over real UDP on ::1 (HAPThread on libcoap).
                "HAPThread", "CoAP",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The gateway with its HomeKit bridge on the memory broker, for the fast tier and the
        // aiohomekit tests.
        .target(
            name: "HomeKitBridgeTestSupport",
            dependencies: [
                "HomeKitBridge", "HomeMQTTApp", "Gateway", "HAPServer", "HomeModel", "MQTT", "Simulator", "TestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Tests/HomeKitBridgeTestSupport"
        ),
        .testTarget(
            name: "HomeKitBridgeTests",
            dependencies: [
                "HomeKitBridge", "HomeKitBridgeTestSupport", "HomeMQTTApp", "Gateway", "HAP", "HomeModel",
                "TestSupport",
                // LoopGuardTests: simulated homes of their own, two gateways; BridgeTreeTests: HAPService.
                "Simulator", "HAPServer",
                // ThreadAccessoryTests: our HAP-over-CoAP controller over UDP.
                "HAPThread", "CoAP",
                // BridgeFloodTests: strangers and garbage, byte by byte.
                "HAPServerTestSupport",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "GatewayTests",
            dependencies: [
                // homemqtt: ManagementOperationsTests and OperationAccessTests run its `OfflineHome`
                // (`@testable import`), not its binary.
                "HomeMQTTApp", "Gateway", "TopicAPI", "HomeAssistant", "HomeModel", "Simulator", "MQTT", "TestSupport",
                "HAP", "homemqtt",
                // HomeAssistantMQTTTests sends what Home Assistant sends (its templates, commands).
                "HomeAssistantTestSupport",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                // SourceEventCountTests reads the counters `/metrics` is made of.
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ]
        ),
        // Home Assistant's template evaluator and the commands Home Assistant sends, shared by
        // HomeAssistantTests and GatewayTests' HomeAssistantMQTTTests, which sends them to a gateway.
        .target(
            name: "HomeAssistantTestSupport", dependencies: ["HomeModel"], path: "Tests/HomeAssistantTestSupport"),
        // Home Assistant's configs, commands and templates; jinja/: the real Jinja2 with Home
        // Assistant's filters (`ha_render.py`), which renders every command template.
        .testTarget(
            name: "HomeAssistantTests",
            dependencies: [
                "HomeAssistant", "HomeMQTTApp", "Gateway", "HomeModel", "Simulator", "MQTT", "TestSupport",
                "HomeAssistantTestSupport",
            ],
            exclude: ["jinja"]
        ),
        // homie/: the Homie controller (`homie_consumer.py`) the end-to-end tests run.
        .testTarget(
            name: "HomieTests",
            dependencies: ["HomeMQTTApp", "Homie", "Gateway", "HomeModel", "TestSupport"],
            exclude: ["homie"]
        ),
        // The routes and `/ws` in process (HummingbirdTesting's live server, on a gateway over the
        // memory broker); EndToEndTests' Web*Tests keep them through the binary.
        .testTarget(
            name: "WebViewTests",
            dependencies: [
                "HomeMQTTApp", "WebView", "Gateway", "HomeModel", "Simulator", "MQTT", "TestSupport", "WebTestSupport",
                // HealthMetricsAgreementTests turns `accessory-state` off (AccessoryStateConfig).
                "TopicAPI",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "HummingbirdWSTesting", package: "hummingbird-websocket"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // The live tier: every test that runs the real `homemqtt` binary, HAP-python or aiohomekit,
        // a network namespace, Chromium, systemd-analyze, the upgrade from an older state directory,
        // or RabbitMQ/mqttools as the broker. `swift test --skip EndToEndTests` is the fast tier.
        // What talks to the web view as a browser or a misbehaving client would (a page over
        // `/ws`, curl, a raw socket), shared by the binary's tests and the in-process ones.
        .target(
            name: "WebTestSupport",
            dependencies: [
                "HomeModel", "TestSupport",
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/WebTestSupport"
        ),
        .testTarget(
            name: "EndToEndTests",
            dependencies: [
                "HomeMQTTApp", "Gateway", "HAP", "HAPServer", "HomeModel", "MQTT", "WebView", "TestSupport",
                "HAPServerTestSupport", "HomeKitBridge", "HomeKitBridgeTestSupport",
                "WebTestSupport",
                // homemqtt: the binary these tests run.
                "homemqtt",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)

// Imports are internal unless a file says `public import`: a module's public API names the
// modules it exposes, and nothing else leaks (CMosquitto above all stays inside MQTT).
for target in package.targets where target.type != .system {
    target.swiftSettings = (target.swiftSettings ?? []) + [.enableUpcomingFeature("InternalImportsByDefault")]
}
