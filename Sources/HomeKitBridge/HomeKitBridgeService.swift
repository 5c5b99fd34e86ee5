import Foundation
public import Gateway
public import HAPServer
public import HomeModel
public import Logging
import MDNS
public import ServiceLifecycle
import SetupQR
import Synchronization

/// A home's HomeKit bridge as a `Service` beside its gateway: its setup (the code shown in the
/// log once, at the first start, and its QR code on standard error), the accessory server on
/// the home's port serving a `HomeKitBridge`, and the gateway's view feeding it. A reset (`homekit-reset`) stops the
/// server, forgets its identity and pairings, and starts a new one in its place.
///
/// A bridge that cannot start (its port taken, its state unreadable) logs why and says so in
/// its status; the gateway keeps serving MQTT.
///
/// An accessory served alone (`isHomeKitStandalone`, a simulator file's `homekit: standalone`)
/// is the same service for one accessory: the bridge starts one per such accessory in its
/// scope once the gateway's first snapshot names them, in its own directory, on a free port,
/// with its own random setup code and the accessory at aid 1.
public final class HomeKitBridgeService: Service, Sendable {
    public let homeID: String
    let gateway: Gateway
    let database: HomeDatabase
    let settings: HomeKitConfig
    let port: Int
    let files: BridgeFiles
    public let stateDirectory: String
    let logger: Logger
    /// Where the setup QR code goes at the first start (standard error, as Homebridge prints its own).
    let terminal: @Sendable (String) -> Void
    /// The accessory this service serves alone; nil for the home's bridge.
    let standalone: BridgeFiles.Standalone?

    struct Running {
        var bridge: HomeKitBridge?
        var server: HAPAccessoryServer?
        /// A Thread accessory's server (`homekit: thread`), in place of `server`.
        var threadAccessory: HAPCoAPAccessory?
        var setupID: String?
        var setupCode: HAPSetupCode?
        var port: Int?
        var error: String?
        /// Where a reset is asked of the server running now.
        var resets: AsyncStream<CheckedContinuation<Void, Never>>.Continuation?
        /// The caller of a reset under way, resumed once the new server listens.
        var waiter: CheckedContinuation<Void, Never>?

        mutating func takeWaiter() -> CheckedContinuation<Void, Never>? {
            defer { waiter = nil }
            return waiter
        }
    }

    let running = Mutex(Running())

    /// - Parameter port: the home's (`settings.port` for the first home, 0 for the others).
    public init(
        gateway: Gateway, database: HomeDatabase, settings: HomeKitConfig, port: Int, stateDirectory: String,
        logger: Logger, terminal: @escaping @Sendable (String) -> Void = HomeKitBridgeService.standardError
    ) {
        self.homeID = database.homeID ?? database.baseHomeID
        self.gateway = gateway
        self.database = database
        self.settings = settings
        self.port = port
        self.stateDirectory = stateDirectory
        self.files = BridgeFiles(stateDirectory: stateDirectory, homeID: homeID)
        self.logger = logger
        self.terminal = terminal
        self.standalone = nil
    }

    /// The service of an accessory the bridge `parent` leaves to serve alone: on a free port,
    /// with a random setup code (the config's `setup-code` is the bridge's).
    init(standalone: BridgeFiles.Standalone, of parent: HomeKitBridgeService) {
        homeID = parent.homeID
        gateway = parent.gateway
        database = parent.database
        var settings = parent.settings
        settings.setupCode = nil
        self.settings = settings
        port = 0
        stateDirectory = parent.stateDirectory
        files = BridgeFiles(
            stateDirectory: parent.stateDirectory, homeID: parent.homeID, standalone: standalone.accessoryID)
        logger = parent.logger
        terminal = parent.terminal
        self.standalone = standalone
    }

    /// The accessory served alone; nil for the home's bridge.
    public var accessoryID: String? { standalone?.accessoryID }

    /// HAP's category: the announcement's `ci` and the setup URI's (2 for the bridge).
    var category: Int { standalone?.category ?? 2 }

    /// What the log calls it.
    var what: String { standalone.map { "HomeKit accessory '\($0.name)'" } ?? "HomeKit bridge" }

    /// The log's metadata naming it.
    var names: Logger.Metadata {
        var names: Logger.Metadata = ["home": "\(homeName)"]
        if let standalone { names["accessory"] = "\(standalone.accessoryID)" }
        return names
    }

    /// Writes to standard error in one call (a setup URI's QR code is about 2 KB, under the
    /// pipe's atomic 4 KB), so that no log line of another thread lands inside the QR code.
    public static let standardError: @Sendable (String) -> Void = { text in
        FileHandle.standardError.write(Data(text.utf8))
    }

    /// The port its server listens on now; nil while none does.
    public var listeningPort: Int? { running.withLock { $0.port } }
    /// The HAP connections open now and those of them past pair-verify; nil when not serving.
    public var connectionCount: (open: Int, verified: Int)? { running.withLock { $0.server?.connectionCount } }

    /// The setup code and the URI its QR code carries, once the bridge has read its setup: for
    /// the web view's administrators (never over MQTT).
    public var setup: (code: String, uri: String)? {
        running.withLock { r in
            guard let code = r.setupCode, let id = r.setupID else { return nil }
            return (code.revealed, BridgeAdvertisement.setupURI(code: code, setupID: id, category: category))
        }
    }

    public var homeName: String { database.homesNow.first { $0.id == homeID }?.name ?? Home.defaultName }

    public func run() async throws {
        let setup: (code: HAPSetupCode, setupID: String, created: Bool)
        let bridge: HomeKitBridge
        do throws(ModelError) {
            setup = try files.loadSetup(configured: settings.setupCode, standalone: standalone)
            bridge = try HomeKitBridge(
                gateway: gateway, files: files, filter: settings.filter,
                identity: .init(
                    name: "HomeMQTT \(homeName)", serialNumber: String(homeID.prefix(8)),
                    firmware: HomeMQTTVersion.current),
                stateDirectory: stateDirectory, logger: logger, standalone: standalone?.accessoryID,
                gatewayID: try GatewayIdentity.load(stateDirectory: stateDirectory))
        } catch {
            return await failed("cannot read its state: \(error.message)")
        }
        if setup.created {
            // Once, at the first start: later starts never log it (`homemqtt homekit code`).
            let uri = BridgeAdvertisement.setupURI(code: setup.code, setupID: setup.setupID, category: category)
            logger.notice(
                "\(what): pair it in the Home app with setup code \(setup.code.revealed) (shown once; `homemqtt homekit code` shows it again)",
                // What a QR code of the bridge carries: an app that takes a setup URI pairs with it.
                metadata: names.merging(["setup-uri": "\(uri)"]) { $1 })
            terminal(
                Self.setupQRText(
                    uri: uri, code: setup.code, home: homeName, accessory: standalone?.name,
                    colors: isatty(STDERR_FILENO) == 1 ? .ansi : .plain))
        }
        running.withLock {
            $0.bridge = bridge
            $0.setupID = setup.setupID
            $0.setupCode = setup.code
        }
        HomeKitBridges.register(self)
        defer { HomeKitBridges.unregister(self) }
        let changes = await gateway.observe()
        await withDiscardingTaskGroup { group in
            group.addTask {
                for await change in changes.cancelOnGracefulShutdown() { await bridge.apply(change) }
                await bridge.viewEnded()
            }
            group.addTask {
                guard await bridge.firstSnapshot() else { return }
                await withDiscardingTaskGroup { served in
                    // The accessories it leaves to serve alone, each beside it, as long as it runs.
                    if self.standalone == nil {
                        for accessory in await bridge.standalones {
                            let service = HomeKitBridgeService(standalone: accessory, of: self)
                            served.addTask { try? await service.run() }
                        }
                    }
                    await self.serve(bridge, code: setup.code)
                }
            }
        }
    }

    /// The first start's words and QR code for a terminal (a log line cannot hold the code: the
    /// log escapes its newlines). Plain when standard error is no terminal (the journal).
    static func setupQRText(
        uri: String, code: HAPSetupCode, home: String, accessory: String? = nil, colors: QRMatrix.TerminalColors
    ) -> String {
        let what = accessory.map { "the HomeKit accessory '\($0)' of '\(home)'" } ?? "the HomeKit bridge of '\(home)'"
        let title = "Scan this code with the Home app to pair \(what) (setup code \(code.revealed)):"
        guard let qr = QRMatrix(encoding: uri) else { return title.escapingControlCharacters + "\n\(uri)\n" }
        return "\n" + title.escapingControlCharacters + "\n\n" + qr.terminalText(colors) + "\n"
    }

    /// Logs why the bridge does not serve, keeps it for the status, and waits for the end.
    func failed(_ message: String) async {
        logger.error("\(what): \(message)", metadata: names)
        running.withLock { $0.error = message }
        try? await gracefulShutdown()
    }

    private enum End {
        case stopped
        case reset
        case failed(String)
    }

    /// Runs the accessory server until the end, a new one after each reset.
    private func serve(_ bridge: HomeKitBridge, code: HAPSetupCode) async {
        if standalone?.thread == true { return await serveThread(bridge, code: code) }
        // A reset's caller, however the server it waits for ends.
        defer { running.withLock { $0.takeWaiter() }?.resume() }
        while true {
            var configuration = HAPAccessoryServer.Configuration(
                stateDirectory: files.directory, setupCode: code, port: port)
            configuration.bindAddresses = settings.bindAddresses
            let server: HAPAccessoryServer
            // The announcement of this server, once it listens; its status changes (paired,
            // unpaired, `c#`) reach it from the server's callback.
            let responder = ResponderSlot()
            do {
                try AtomicFileWriter.createDirectory(files.directory)
                server = try HAPAccessoryServer(
                    configuration: configuration, database: bridge, logger: logger,
                    onStatusChange: { [weak self] status in
                        guard let self, let responder = responder.value.withLock({ $0 }) else { return }
                        if let txt = self.txt(status) { responder.update(txt: txt) }
                    })
            } catch {
                running.withLock { $0.takeWaiter() }?.resume()
                return await failed("cannot start: \(error)")
            }
            let (resets, reset) = AsyncStream<CheckedContinuation<Void, Never>>.makeStream()
            running.withLock {
                $0.server = server
                $0.resets = reset
                $0.error = nil
                $0.port = nil
            }
            await bridge.attach(server)
            let end = await withTaskGroup(of: End?.self) { group in
                group.addTask {
                    do {
                        try await server.run()
                        return .stopped
                    } catch {
                        return .failed("\(error)")
                    }
                }
                group.addTask {
                    guard let port = try? await server.listeningPort() else { return nil }
                    await bridge.shapeChanged()
                    let counts = await bridge.counts
                    self.logger.info(
                        "\(self.what) serving",
                        metadata: self.names.merging(
                            [
                                "port": "\(port)", "id": "\(server.status.pairingID)",
                                "accessories": "\(self.standalone == nil ? counts.served - 1 : counts.served)",
                                "paired": "\(server.status.isPaired)",
                            ], uniquingKeysWith: { $1 }))
                    // A reset that waited for this server has it now.
                    self.running.withLock { r in
                        r.port = port
                        return r.takeWaiter()
                    }?.resume()
                    // Announced until the server stops: the goodbye when this task is cancelled.
                    guard let announcement = await self.announcement(server.status, port: port) else { return nil }
                    responder.value.withLock { $0 = announcement }
                    // A change between the status read above and now reached no responder.
                    if let txt = self.txt(server.status) { announcement.update(txt: txt) }
                    try? await announcement.run()
                    return nil
                }
                group.addTask { await self.resetRequested(resets) ? .reset : nil }
                var end: End = .stopped
                for await next in group {
                    guard let next else { continue }
                    end = next
                    break
                }
                group.cancelAll()
                return end
            }
            await bridge.attach(nil)
            running.withLock {
                $0.server = nil
                $0.resets = nil
                $0.port = nil
            }
            reset.finish()
            switch end {
            case .stopped:
                return
            case .failed(let message):
                running.withLock { $0.takeWaiter() }?.resume()
                return await failed(message)
            case .reset:
                resetIdentity()
            }
        }
    }

    // MARK: The announcement

    /// The bridge's name, or the accessory's: the announcement's label and `md`.
    var bridgeName: String { standalone?.name ?? "HomeMQTT \(homeName)" }

    /// The TXT record for the server's status now.
    func txt(_ server: HAPServerStatus) -> [String: String]? {
        let setupID = running.withLock { $0.setupID }
        var status = HomeKitBridgeStatus(
            homeID: homeID, homeName: homeName, pairingID: server.pairingID,
            configurationNumber: server.configurationNumber, isPaired: server.isPaired, setupID: setupID,
            pairings: [], accessories: 0, leftOut: [])
        status.category = category
        return BridgeAdvertisement.txt(status, model: bridgeName)
    }

    /// The responder for a server listening on `port`, on the interfaces `mdns-interfaces`
    /// admits, announcing the addresses it listens on: the admitted interfaces' for `0.0.0.0`
    /// and `::`, and those `listen` names. Nil for a bridge that listens on loopback only:
    /// nothing on the network could reach it (the in-process tests' bridges).
    func announcement(
        _ server: HAPServerStatus, port: Int, type: String = BridgeAdvertisement.serviceType, ipv6Only: Bool = false
    ) async -> MDNSResponder? {
        guard let txt = txt(server) else { return nil }
        let listen = settings.bindAddresses.filter { !ipv6Only || $0.contains(":") }
        let named = listen.filter { !["0.0.0.0", "::"].contains($0) }
        guard named.count < listen.count || named.contains(where: { !Self.isLoopback($0) }) else {
            logger.info("\(what): not announced over mDNS, it listens on loopback only", metadata: names)
            return nil
        }
        let admitted = MDNSResponder.addresses(admitting: settings.mdnsInterfaces)
        let addresses =
            named + admitted.filter { $0.contains(":") ? listen.contains("::") : listen.contains("0.0.0.0") }
        let hex = server.pairingID.replacingOccurrences(of: ":", with: "").lowercased()
        let instance = MDNSServiceInstance(
            name: bridgeName, type: type, host: "homemqtt-\(hex).local", port: port,
            txt: txt)
        return MDNSResponder(
            instance: instance, addresses: addresses, interfaces: settings.mdnsInterfaces, logger: logger)
    }

    static func isLoopback(_ address: String) -> Bool { address.hasPrefix("127.") || address == "::1" }

    // MARK: Status and reset

    /// What the bridge is now: for `homekit-status`, and what the mDNS announcement carries:
    /// id, `c#`, `sf`, category, setup id, port.
    public func status() async -> HomeKitBridgeStatus {
        let (bridge, server, thread, setupID, port, error) = running.withLock {
            ($0.bridge, $0.server, $0.threadAccessory, $0.setupID, $0.port, $0.error)
        }
        let counts = await bridge?.counts
        let serverStatus = server?.status ?? thread?.status
        let pairings = server?.pairings ?? thread?.pairings ?? []
        var status = HomeKitBridgeStatus(
            homeID: homeID, homeName: homeName, pairingID: serverStatus?.pairingID,
            configurationNumber: serverStatus?.configurationNumber, isPaired: serverStatus?.isPaired,
            setupID: setupID, port: port,
            pairings: pairings.map { .init(id: $0.id, isAdmin: $0.isAdmin) },
            accessories: counts?.served ?? 0, leftOut: counts?.leftOut ?? [], error: error)
        status.category = category
        status.accessoryID = standalone?.accessoryID
        if standalone == nil { status.standalone = await bridge?.standalones.map(\.accessoryID) ?? [] }
        return status
    }

    /// Forgets the bridge's identity and pairings and starts it anew; returns once the new
    /// server listens (or could not start). Every controller loses it: it pairs again as a new
    /// bridge, with the same setup code.
    public func reset() async -> HomeKitBridgeStatus {
        let reset = running.withLock { $0.resets }
        if let reset {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                if case .terminated = reset.yield(continuation) { continuation.resume() }
            }
        } else {
            // Not serving (it could not start): its files alone.
            try? HAPAccessoryIdentity.reset(in: files.directory)
        }
        return await status()
    }
}
