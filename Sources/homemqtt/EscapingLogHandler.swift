import HomeModel
import Logging

/// The process's log handler behind one that escapes control characters in every message and
/// metadata value (`escapingControlCharacters`): log lines quote what peers said — accessory
/// names and pairing ids, mDNS names, errors that carry an accessory's words — and a peer must
/// not reach an administrator's terminal (`journalctl -f`, the console of `homemqtt run`) with
/// escape sequences, nor split a line to forge another. Done here, once, rather than at each
/// of the many places that log peer text.
struct EscapingLogHandler: LogHandler {
    var base: any LogHandler

    var logLevel: Logger.Level {
        get { base.logLevel }
        set { base.logLevel = newValue }
    }

    var metadata: Logger.Metadata {
        get { base.metadata }
        set { base.metadata = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { base[metadataKey: key] }
        set { base[metadataKey: key] = newValue }
    }

    func log(event: LogEvent) {
        var event = event
        event.message = Logger.Message(stringLiteral: event.message.description.escapingControlCharacters)
        event.metadata = event.metadata?.mapValues(Self.escaping)
        base.log(event: event)
    }

    static func escaping(_ value: Logger.MetadataValue) -> Logger.MetadataValue {
        switch value {
        case .string(let text): .string(text.escapingControlCharacters)
        case .stringConvertible(let convertible): .string(convertible.description.escapingControlCharacters)
        case .array(let values): .array(values.map(escaping))
        case .dictionary(let values): .dictionary(values.mapValues(escaping))
        }
    }
}
