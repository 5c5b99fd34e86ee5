// The controller's pairing commands for Thread accessories (issue 42): pair-setup, the look at
// the accessories, the pairings list and remove-pairing, over HAP over CoAP through a link the
// composition root makes (`threadLinks`), each on a link of its own that is closed after.

extension HAPController {
    /// The link maker, or the error a gateway without one gives.
    private func linkMaker() throws(HAPError) -> HAPThreadLinkMaker {
        guard let threadLinks else {
            throw HAPError(code: .unreachable, message: "this gateway was built without HAP over Thread")
        }
        return threadLinks
    }

    /// Pair-setup over CoAP (`/1`); the pairing is marked as Thread's.
    func pairOverThread(host: String, port: Int, setupCode: String, featureFlags: Int) async throws(HAPError)
        -> HAPPairing
    {
        let link = try linkMaker()(host, port)
        do {
            var pairing = try await HAPCoAPController.pair(
                exchange: link, host: host, port: port, setupCode: setupCode, featureFlags: featureFlags)
            await link.close()
            pairing.transport = .thread
            return pairing
        } catch {
            await link.close()
            throw error
        }
    }

    /// Runs `body` with a controller of a paired Thread accessory (verified on its first
    /// request), then closes its link.
    func withThreadController<T: Sendable>(
        _ pairing: HAPPairing, _ body: (HAPCoAPController) async throws(HAPError) -> T
    ) async throws(HAPError) -> T {
        let link = try linkMaker()(pairing.host, pairing.port)
        let controller = HAPCoAPController(pairing: pairing, exchange: link, logger: logger)
        do {
            let result = try await body(controller)
            await link.close()
            return result
        } catch {
            await link.close()
            throw error
        }
    }
}
