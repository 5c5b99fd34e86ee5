/// Why mDNS failed: a packet that could not be read, or a socket that could not be had.
public struct MDNSError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Code: String, Sendable, Hashable {
        /// A packet that is not DNS, or breaks its rules (anyone on the network may send one).
        case malformed
        /// No UDP socket for mDNS could be opened.
        case io
        /// A query could not be sent (no multicast route).
        case unreachable
    }

    public var code: Code
    public var message: String

    public init(code: Code, message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
