public import HomeModel
import Logging

// What the HAP source asks of a verified session with one accessory server, whatever carries
// it: an HTTP connection over TCP (`HAPConnection`, HAP over IP) or a HAP-over-CoAP controller
// over UDP (`HAPThreadSession`, HAP over Thread). The source speaks HAP's JSON values to both
// (the IP wire format); the Thread session converts at its edge with the database's formats.

/// A verified session with one accessory server, as the HAP source uses it.
public protocol HAPSession: AnyObject, Sendable {
    /// The address the session reached the accessory at.
    var host: String { get }
    /// The accessories with their values, as `hap:<pairing id>:<aid>` model accessories;
    /// `problems`: values that were left out because they could not be read.
    func accessories(of pairing: HAPPairing) async throws(HAPError) -> (accessories: [Accessory], problems: [String])
    /// Per characteristic its value, or the accessory's refusal.
    func readCharacteristics(_ ids: [HAPCharacteristicID]) async throws(HAPError) -> [HAPCharacteristicID:
        Result<JSONValue, AccessoryError>]
    /// Each item `value` (a write) and/or `ev` (events on or off), as `PUT /characteristics`;
    /// returns the items the accessory refused.
    func writeCharacteristics(_ items: [HAPCharacteristicID: [String: JSONValue]], timed: Bool) async throws(HAPError)
        -> [HAPCharacteristicID: AccessoryError]
    /// Hands the values the accessory sends on its own (events) to `body`, in arrival order, the
    /// values of one message together, until the session ends (closed, or found dead) or the task
    /// is cancelled.
    func serveEvents(_ body: @escaping @Sendable ([(HAPCharacteristicID, JSONValue)]) async -> Void) async
    /// Why the session ended; nil while it is open.
    var closeReason: HAPError? { get async }
    func close() async
}

extension HAPSession {
    /// Items that are not timed writes.
    func writeCharacteristics(_ items: [HAPCharacteristicID: [String: JSONValue]]) async throws(HAPError)
        -> [HAPCharacteristicID: AccessoryError]
    {
        try await writeCharacteristics(items, timed: false)
    }
}

extension HAPConnection: HAPSession {
    public func accessories(of pairing: HAPPairing) async throws(HAPError) -> (
        accessories: [Accessory], problems: [String]
    ) {
        let json = try await accessoriesJSON()
        var problems: [String] = []
        do {
            let parsed = try HAPAccessoryJSON.parse(
                json: json, idPrefix: pairing.idPrefix, category: pairing.category, problems: &problems)
            return (parsed, problems)
        } catch {
            throw HAPError(
                code: .protocolError,
                message: "the accessory's /accessories does not describe accessories: \(error.message)")
        }
    }

    /// Off the connection's event loop (nonisolated: the caller's task reads the stream), one
    /// hop to `body` per message, as the source applied events before sessions.
    public nonisolated func serveEvents(
        _ body: @escaping @Sendable ([(HAPCharacteristicID, JSONValue)]) async -> Void
    ) async {
        // The stream ends when the connection closes.
        for await message in events {
            let values = Self.eventValues(message)
            if !values.isEmpty { await body(values) }
        }
    }

    /// Connects to the first of `hosts` that answers at the pairing's port and runs pair-verify.
    static func open(
        _ pairing: HAPPairing, hosts: [String], timeout: Double, logger: Logger
    ) async throws(HAPError) -> HAPConnection {
        let connection = try await connect(firstOf: hosts, port: pairing.port, timeout: timeout, logger: logger)
        do {
            try await connection.verify(pairing)
        } catch {
            await connection.close()
            throw error
        }
        return connection
    }
}
