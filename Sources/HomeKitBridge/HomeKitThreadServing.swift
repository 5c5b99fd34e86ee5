import Foundation
import HAPServer
import HAPThread
import HomeModel
import ServiceLifecycle

// A simulated accessory served as a Thread accessory (`homekit: thread`, issue 42): the same
// standalone service (its own directory, identity, random setup code, the gateway's typed core
// behind reads and writes), served by a `HAPThreadAccessory` over CoAP/UDP instead of a
// `HAPAccessoryServer` over TCP, and announced as `_hap._udp` with `_hap._tcp`'s TXT keys.
//
// The port is a free one, read back and announced: a gateway may serve several Thread
// accessories, and libcoap binds UDP with SO_REUSEADDR, so a 5683 another process holds would
// not fail the bind but split its datagrams. Controllers find the port through `_hap._udp`;
// a restart takes the same port again when it is free (HomeKitThreadPort.swift).
// It binds the first IPv6 address of `homekit.listen` (HAP over Thread is IPv6 only), `::` by
// default. A reset (`homekit-reset`) starts a new server with a new identity, as over IP.

extension HomeKitBridgeService {
    /// The IPv6 address a Thread accessory binds: the first of `homekit.listen` that is one.
    var threadBindAddress: String { settings.bindAddresses.first { $0.contains(":") } ?? "::" }

    /// Serves `bridge` (one accessory, aid 1) over HAP over CoAP until the end, a new identity
    /// after each reset (`homekit-reset`), as the IP server does.
    func serveThread(_ bridge: HomeKitBridge, code: HAPSetupCode) async {
        // A reset's caller, however the server it waits for ends.
        defer { running.withLock { $0.takeWaiter() }?.resume() }
        while await serveThreadOnce(bridge, code: code) {
            // A new accessory to every controller: on a new port too, as before the port was kept.
            resetIdentity(alsoForget: files.forgetThreadPort)
        }
    }

    /// One server's life: true when it ended for a reset.
    private func serveThreadOnce(_ bridge: HomeKitBridge, code: HAPSetupCode) async -> Bool {
        let responder = ResponderSlot()
        let thread: HAPThreadAccessory
        do {
            try AtomicFileWriter.createDirectory(files.directory)
            let configuration = HAPThreadAccessory.Configuration(
                accessory: .init(stateDirectory: files.directory, setupCode: code),
                bind: .init(host: threadBindAddress, port: files.threadPort(host: threadBindAddress)))
            thread = try HAPThreadAccessory(
                configuration: configuration, database: bridge, logger: logger,
                onStatusChange: { [weak self] status in
                    guard let self, let responder = responder.value.withLock({ $0 }) else { return }
                    if let txt = self.txt(status) { responder.update(txt: txt) }
                })
        } catch {
            running.withLock { $0.takeWaiter() }?.resume()
            await failed("cannot start: \(error)")
            return false
        }
        let port = Int(thread.address.port)
        files.keepThreadPort(port)
        await bridge.attach(thread.accessory)
        await bridge.shapeChanged()
        let (resets, reset) = AsyncStream<CheckedContinuation<Void, Never>>.makeStream()
        // A reset that waited for this server has it now.
        running.withLock {
            $0.port = port
            $0.threadAccessory = thread.accessory
            $0.resets = reset
            $0.error = nil
            return $0.takeWaiter()
        }?.resume()
        logger.info(
            "\(what) serving as a Thread accessory (HAP over CoAP)",
            metadata: names.merging(
                [
                    "address": "\(thread.address)", "id": "\(thread.accessory.status.pairingID)",
                    "paired": "\(thread.accessory.status.isPaired)",
                ], uniquingKeysWith: { $1 }))
        // Each task says how it ended: the server's end or a reset ends the others; an
        // announcement that ends (none on loopback) must not end the server.
        let wasReset = await withTaskGroup(of: Bool?.self) { group in
            group.addTask {
                do {
                    try await thread.run()
                } catch {
                    self.logger.error(
                        "\(self.what): stopped", metadata: self.names.merging(["error": "\(error)"]) { $1 })
                }
                return false
            }
            group.addTask {
                // Announced until the server stops: the goodbye when this task is cancelled.
                guard
                    let announcement = await self.announcement(
                        thread.accessory.status, port: port, type: BridgeAdvertisement.threadServiceType,
                        ipv6Only: true)
                else { return nil }
                responder.value.withLock { $0 = announcement }
                // A change between the status read above and now reached no responder.
                if let txt = self.txt(thread.accessory.status) { announcement.update(txt: txt) }
                try? await announcement.run()
                return nil
            }
            group.addTask { await self.resetRequested(resets) ? true : nil }
            var wasReset = false
            for await end in group {
                guard let end else { continue }
                wasReset = end
                break
            }
            group.cancelAll()
            return wasReset
        }
        await bridge.attach(nil)
        running.withLock {
            $0.port = nil
            $0.threadAccessory = nil
            $0.resets = nil
        }
        reset.finish()
        return wasReset
    }
}
