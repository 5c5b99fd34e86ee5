import Foundation
import Gateway
import HomeMQTTApp
import HomeModel
import Logging
import Synchronization
import TestSupport
import XCTest

// The proof of the one extension list: a feature with settings and a source that pairs, each
// written here as one type (and what it makes), plugged in by one line added to
// `HomeMQTTApp.extensions` / `HomeMQTTApp.sources`, against the public API only.

/// `banner: {text, level, prefix}`: a document `<accessory>/<level>` = `text` on every accessory.
struct BannerConfig: ConfigSection, Hashable {
    var text = "hello"
    var level = "$banner"
    /// Claimed outside the base, to show a feature's prefix reaching `reservedTopicPrefixes`.
    var prefix: String?

    static func read(_ top: ConfigReader, _ context: ConfigContext) throws(ConfigError) -> Self {
        var config = Self()
        guard let reader = try top.reader("banner") else { return config }
        if let text = try reader.string("text") { config.text = text }
        if let level = try reader.string("level") {
            guard level.hasPrefix("$"), !level.contains("/") else {
                throw reader.error("level", "must be one topic level starting with $, got '\(level)'")
            }
            config.level = level
        }
        config.prefix = try reader.string("prefix")
        try reader.finish()
        return config
    }
}

enum BannerFeature: HomeMQTTExtension {
    static func reservedPrefixes(_ settings: BannerConfig) -> [String] { settings.prefix.map { [$0] } ?? [] }

    static func outputs(_ settings: BannerConfig, _ config: GatewayConfig) -> [any GatewayOutput] {
        [BannerOutput(settings)]
    }
}

final class BannerOutput: GatewayOutput {
    let settings: BannerConfig
    init(_ settings: BannerConfig) { self.settings = settings }

    var accessoryDocuments: [String] { [settings.level] }

    func publishDocuments(of node: TopicTree.AccessoryNode, _ gateway: isolated Gateway) -> [String] {
        gateway.publishRetained(node.topic + "/" + settings.level, Array(settings.text.utf8))
        return [node.topic + "/" + settings.level]
    }

    func republication(of node: TopicTree.AccessoryNode, _ gateway: isolated Gateway) -> [(String, [UInt8])] {
        [(node.topic + "/" + settings.level, Array(settings.text.utf8))]
    }
}

/// `type: widget`: a source with no accessories that pairs "widgets" by name, with its own
/// operations `widget/pair` and `widget/pairings` beside HAP's.
struct WidgetFactory: SourceFactory, CustomStringConvertible {
    static let type = "widget"
    static var operations: [any ManagementOperation.Type] { [WidgetPair.self, WidgetPairings.self] }

    static func read(_ entry: ConfigReader, _ context: ConfigContext) throws(ConfigError) -> Self { Self() }

    func make(_ context: SourceContext) throws -> MadeSource {
        MadeSource(source: CompositeSource([]), pairing: WidgetPairing())
    }

    var description: String { "widget" }
}

final class WidgetPairing: PairingManager {
    static let sourceType = WidgetFactory.type
    let paired = Mutex<[String]>([])

    func unpair(id: String) async throws(GatewayFailure) { paired.withLock { $0.removeAll { $0 == id } } }
    func pairingID(forAccessory accessoryID: String) -> String? { nil }
}

struct WidgetPair: SourceOperation {
    static let name = "widget/pair"
    var widget: String

    init(_ request: RequestReader) throws(GatewayFailure) { widget = try request.text("widget") }
    var fields: [String: JSONValue] { ["widget": .string(widget)] }

    func perform(with pairing: WidgetPairing, on editor: some HomeEditor) async throws(GatewayFailure) -> JSONValue {
        pairing.paired.withLock { $0.append(widget) }
        return .object(["widget": .string(widget)])
    }
}

struct WidgetPairings: SourceOperation {
    static let name = "widget/pairings"

    init(_ request: RequestReader) throws(GatewayFailure) {}
    var fields: [String: JSONValue] { [:] }

    func perform(with pairing: WidgetPairing, on editor: some HomeEditor) async throws(GatewayFailure) -> JSONValue {
        .array(pairing.paired.withLock { $0 }.map(JSONValue.string))
    }
}

final class HomeMQTTAppTests: XCTestCase {
    // The one line each.
    let extensions = HomeMQTTApp.extensions + [BannerFeature.self]
    let sources = HomeMQTTApp.sources + [WidgetFactory.self]

    func testAFeaturesSettingsAndPrefixesAreReadThroughTheList() throws {
        let text = "banner:\n  text: hi there\n  level: $note\n  prefix: banners\nsources:\n  - type: widget\n"
        let config = try HomeMQTTApp.parseConfig(text, file: "g.yml", extensions: extensions, sources: sources)
        XCTAssertEqual(config[BannerConfig.self], BannerConfig(text: "hi there", level: "$note", prefix: "banners"))
        XCTAssertEqual(config.reservedTopicPrefixes, ["homeassistant", "banners"])
        XCTAssertEqual(config.sources.map(\.type), ["widget"])
        XCTAssertEqual(
            HomeMQTTApp.outputs(for: config, extensions: extensions).count, 4, "state, HA, topic requests, banner")

        // Without the line, the section is an unknown key and the source an unknown type.
        XCTAssertThrowsError(try HomeMQTTApp.parseConfig("banner:\n  text: hi\n", file: "g.yml")) { error in
            XCTAssertTrue("\(error)".contains("banner: unknown key"), "\(error)")
        }
        XCTAssertThrowsError(try HomeMQTTApp.parseConfig("sources:\n  - type: widget\n", file: "g.yml")) { error in
            XCTAssertTrue("\(error)".contains("expected simulator or hap, got 'widget'"), "\(error)")
        }
        // Its own keys are read strictly, by its own section.
        XCTAssertThrowsError(
            try HomeMQTTApp.parseConfig("banner:\n  level: note\n", file: "g.yml", extensions: extensions)
        ) { error in
            XCTAssertTrue("\(error)".contains("must be one topic level starting with $"), "\(error)")
        }
    }

    /// The gateway serves both: the test output publishes under its settings, and the test
    /// source's operations work while HAP's still do, each finding its own pairing.
    func testTheGatewayServesATestOutputAndTwoPairingSources() async throws {
        let state = try TemporaryDirectory(prefix: "homemqtt-extensions")
        let config = try HomeMQTTApp.parseConfig(
            "banner:\n  text: from the banner\n", file: "g.yml", stateDirectory: state.path, extensions: extensions,
            sources: sources)
        let context = SourceContext(config: config, logger: Logger(label: "test.extensions"))
        let pairings = try HAPFactory().make(context).pairings + WidgetFactory().make(context).pairings
        let options = HomeMQTTApp.Options(
            pairings: pairings, operations: HomeMQTTApp.operations(of: sources), extensions: extensions)
        try await InProcessGateway.run(
            configure: { $0[BannerConfig.self] = config[BannerConfig.self] }, options: options
        ) { gw in
            let garage = "home/garage/garage-door-opener"
            XCTAssertEqual(gw.broker.retainedText()["\(garage)/$banner"], "from the banner")
            XCTAssertNotNil(gw.broker.retainedText()["\(garage)/$state"], "the shipped features still run")

            let paired = try await gw.request(
                "home/$gateway/request/widget/pair", #"{"widget": "blue"}"#,
                answer: "home/$gateway/response/widget/pair")
            XCTAssertEqual(paired["status"], "ok", "\(paired)")
            let widgets = try await gw.request(
                "home/$gateway/request/widget/pairings", "{}", answer: "home/$gateway/response/widget/pairings")
            XCTAssertEqual(widgets["data"], ["blue"], "\(widgets)")

            let hap = try await gw.request(
                "home/$gateway/request/pairings", "{}", answer: "home/$gateway/response/pairings")
            XCTAssertEqual(hap["status"], "ok", "\(hap)")
            XCTAssertEqual(hap["data"]?["pairings"], [])
            let unknown = try await gw.request(
                "home/$gateway/request/unpair", #"{"pairing": "AA:BB:CC:DD:EE:FF"}"#,
                answer: "home/$gateway/response/unpair")
            XCTAssertEqual(unknown["code"], "unknown-pairing", "HAP's own answer: \(unknown)")
        }
    }

    /// A source's operations without its pairing: the missing source is named.
    func testASourceOperationWithoutItsSourceNamesIt() async throws {
        let options = HomeMQTTApp.Options(operations: HomeMQTTApp.operations(of: sources), extensions: extensions)
        try await InProcessGateway.run(options: options) { gw in
            let answer = try await gw.request(
                "home/$gateway/request/widget/pairings", "{}", answer: "home/$gateway/response/widget/pairings")
            XCTAssertEqual(answer["code"], "no-pairing-source")
            XCTAssertEqual(
                answer["message"],
                .string("widget/pairings needs the widget source; add `- type: widget` under sources in the config"))
        }
    }
}
