import Foundation
import HAPServer
import HAPThread
import HomeModel

// A simulated accessory served as a Thread accessory (`homekit: thread`, issue 42): the same
// standalone service (its own directory, identity, random setup code, the gateway's typed core
// behind reads and writes), served by a `HAPThreadAccessory` over CoAP/UDP instead of a
// `HAPAccessoryServer` over TCP, and announced as `_hap._udp` with `_hap._tcp`'s TXT keys.
//
// The port is a free one, read back and announced: a gateway may serve several Thread
// accessories, and libcoap binds UDP with SO_REUSEADDR, so a 5683 another process holds would
// not fail the bind but split its datagrams. Controllers find the port through `_hap._udp`.
// It binds the first IPv6 address of `homekit.listen` (HAP over Thread is IPv6 only), `::` by
// default. A reset (`homekit-reset`) is not offered for it yet: its server runs until the end.

extension HomeKitBridgeService {
    /// The IPv6 address a Thread accessory binds: the first of `homekit.listen` that is one.
    var threadBindAddress: String { settings.bindAddresses.first { $0.contains(":") } ?? "::" }

    /// Serves `bridge` (one accessory, aid 1) over HAP over CoAP until the end.
    func serveThread(_ bridge: HomeKitBridge, code: HAPSetupCode) async {
        let responder = ResponderSlot()
        let thread: HAPThreadAccessory
        do {
            try AtomicFileWriter.createDirectory(files.directory)
            let configuration = HAPThreadAccessory.Configuration(
                accessory: .init(stateDirectory: files.directory, setupCode: code),
                bind: .init(host: threadBindAddress, port: 0))
            thread = try HAPThreadAccessory(
                configuration: configuration, database: bridge, logger: logger,
                onStatusChange: { [weak self] status in
                    guard let self, let responder = responder.value.withLock({ $0 }) else { return }
                    if let txt = self.txt(status) { responder.update(txt: txt) }
                })
        } catch {
            return await failed("cannot start: \(error)")
        }
        let port = Int(thread.address.port)
        await bridge.attach(thread.accessory)
        await bridge.shapeChanged()
        running.withLock {
            $0.port = port
            $0.threadAccessory = thread.accessory
            $0.error = nil
        }
        logger.info(
            "\(what) serving as a Thread accessory (HAP over CoAP)",
            metadata: names.merging(
                [
                    "address": "\(thread.address)", "id": "\(thread.accessory.status.pairingID)",
                    "paired": "\(thread.accessory.status.isPaired)",
                ], uniquingKeysWith: { $1 }))
        // Each task says whether it was the server's: an announcement that ends (none on
        // loopback) must not end the server.
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                do {
                    try await thread.run()
                } catch {
                    self.logger.error(
                        "\(self.what): stopped", metadata: self.names.merging(["error": "\(error)"]) { $1 })
                }
                return true
            }
            group.addTask {
                // Announced until the server stops: the goodbye when this task is cancelled.
                guard
                    let announcement = await self.announcement(
                        thread.accessory.status, port: port, type: BridgeAdvertisement.threadServiceType,
                        ipv6Only: true)
                else { return false }
                responder.value.withLock { $0 = announcement }
                // A change between the status read above and now reached no responder.
                if let txt = self.txt(thread.accessory.status) { announcement.update(txt: txt) }
                try? await announcement.run()
                return false
            }
            // The server's end (a graceful shutdown, cancellation) ends the announcement.
            for await wasServer in group where wasServer { break }
            group.cancelAll()
        }
        await bridge.attach(nil)
        running.withLock {
            $0.port = nil
            $0.threadAccessory = nil
        }
    }
}
