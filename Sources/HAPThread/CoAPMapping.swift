import CoAP
import HAP
import HomeModel

// What the HAP peers' transport words (HAP's `CoAPCode`, paths such as "/1", `HAPError`) are in
// the CoAP module's (its `CoAPCode`, Uri-Path segments, `CoAPError`). Both modules name a
// `CoAPCode`; they are the same byte, so the mapping is exact both ways.

extension HAP.CoAPCode {
    init(_ code: CoAP.CoAPCode) { self.init(rawValue: code.rawValue) }
}

extension CoAP.CoAPCode {
    init(_ code: HAP.CoAPCode) { self.init(rawValue: code.rawValue) }
}

enum CoAPMapping {
    /// HAP's "/1" is the Uri-Path "1"; "/" is no Uri-Path at all, the CoAP module's "".
    static func uriPath(_ hapPath: String) -> String { String(hapPath.drop { $0 == "/" }) }

    /// The CoAP module's path back as HAP's ("1" → "/1", "" → "/").
    static func hapPath(_ uriPath: String) -> String { "/" + uriPath }

    /// A request that got no answer, as the peers expect it: a `HAPError` that never carries
    /// a payload (`CoAPError` carries none either).
    static func hapError(_ error: CoAPError, to peer: CoAPPeer) -> HAPError {
        switch error {
        case .deadlineExceeded, .noAcknowledgement:
            HAPError(code: .timeout, message: "no CoAP answer from \(peer): \(error)")
        case .unreachable, .reset, .badAddress:
            HAPError(code: .unreachable, message: "\(peer): \(error)")
        case .closed, .cancelled:
            HAPError(code: .closed, message: "\(peer): \(error)")
        case .sendFailed, .badResponse:
            HAPError(code: .protocolError, message: "\(peer): \(error)")
        }
    }

    /// `[::1]:5683` or `10.0.0.2:5683` (`CoAPPeer.description`, the accessory's name for a
    /// controller) back to its address; nil when it is not one.
    static func peer(_ key: String) -> CoAPPeer? {
        guard let colon = key.lastIndex(of: ":"), let port = UInt16(key[key.index(after: colon)...]) else {
            return nil
        }
        var host = key[..<colon]
        if host.hasPrefix("[") && host.hasSuffix("]") { host = host.dropFirst().dropLast() }
        guard !host.isEmpty else { return nil }
        return CoAPPeer(host: String(host), port: port)
    }
}
