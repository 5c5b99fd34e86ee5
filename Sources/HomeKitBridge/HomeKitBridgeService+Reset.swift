import HAPServer
import ServiceLifecycle

// A reset (`homekit-reset`) as the IP server and the Thread accessory both take it: the request
// ends the running server, whose caller waits for the next one (its `waiter`), and the
// next one starts with a new identity and no pairings.

extension HomeKitBridgeService {
    /// Waits for a reset (`homekit-reset`): true, its caller kept to be resumed by the next
    /// server; false when the server ended first (the stream finished) or at shutdown.
    func resetRequested(_ resets: AsyncStream<CheckedContinuation<Void, Never>>) async -> Bool {
        for await request in resets.cancelOnGracefulShutdown() {
            running.withLock { $0.waiter = request }
            return true
        }
        return false
    }

    /// A new identity and no pairings for the next server; `alsoForget` for what else goes with
    /// the old identity (a Thread accessory's port).
    func resetIdentity(alsoForget: () -> Void = {}) {
        do throws(HAPServerError) {
            try HAPAccessoryIdentity.reset(in: files.directory)
            alsoForget()
            logger.notice("\(what) reset: a new identity, no pairings", metadata: names)
        } catch {
            logger.error("\(what): cannot reset", metadata: names.merging(["error": "\(error)"]) { $1 })
        }
    }
}
