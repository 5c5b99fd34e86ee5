import HomeModel

/// Management operations, one at a time off the message loop: a `pair` or `discover` takes
/// seconds, and writes and reads must not wait behind it.
extension Gateway {
    /// An operation waiting for its turn.
    struct GatewayRequest: Sendable {
        var operation: any ManagementOperation
        var label: String
        var ticket: UInt64
    }

    /// Performs one operation on the gateway's editor and hands over its outcome.
    func run(_ request: GatewayRequest) async {
        let outcome: GatewayOutcome
        do throws(GatewayFailure) {
            outcome = .success(
                .data(try await ManagementOperations.perform(request.operation, on: Editor(gateway: self))))
        } catch {
            outcome = .failure(error)
        }
        guard let then = awaiting.take(request.ticket) else { return }
        answered(type(of: request.operation).name, request.label, outcome, then)
    }
}
