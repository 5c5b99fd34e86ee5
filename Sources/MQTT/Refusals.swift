// What the broker refuses of this client's publishes, and what the client learns from it.
//
// A broker refuses a PUBLISH in one of three ways: it says so in the PUBACK (MQTT 5: reason
// 0x95 "packet too large", as mosquitto does for `message_size_limit`), it sends a DISCONNECT
// with a reason (MQTT 5: malformed packet, protocol error, topic name invalid, …), or it just
// closes the connection (MQTT 3.1.1's only way: a packet over `max_packet_size`, a topic over
// mosquitto's 200 separators). libmosquitto keeps a QoS 1/2 message it has not seen
// acknowledged and sends it again after every reconnect, so a refused message brought the
// connection down again and again. The client checks what it can before sending
// (`PublishCheck`), and when the broker still drops the connection right after a publish, it
// names the message that did it (`Connection.culprit`) and drops it before reconnecting.

/// A topic as a log line shows it: control characters escaped, and a long or deep topic cut
/// to its first levels and its last, with its level count and length.
public enum MQTTTopicShape {
    public static func describe(_ topic: String) -> String {
        let levels = MQTTTopicShape.levels(topic)
        let bytes = topic.utf8.count
        guard levels > 8 || bytes > 160 else { return escaped(topic) }
        let parts = topic.split(separator: "/", omittingEmptySubsequences: false)
        let head = parts.prefix(3).map { String($0.prefix(24)) }.joined(separator: "/")
        let tail = String(parts.last?.prefix(24) ?? "")
        return escaped("\(head)/…/\(tail)") + " (\(levels) levels, \(bytes) bytes)"
    }

    /// Levels of a topic: separators plus one.
    public static func levels(_ topic: String) -> Int {
        var topic = topic
        return topic.withUTF8 { bytes in
            var count = 1
            for byte in bytes where byte == 0x2F { count += 1 }
            return count
        }
    }

    /// C0 controls, DEL and C1 controls as `\u{1B}` (the form of HomeModel's
    /// `escapingControlCharacters`, which this module cannot import): a topic comes from a
    /// client and may hold what a terminal takes for a command.
    static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        var out = ""
        for scalar in text.unicodeScalars {
            if isControl(scalar) {
                let hex = String(scalar.value, radix: 16, uppercase: true)
                out += "\\u{" + (hex.count < 2 ? "0" + hex : hex) + "}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
    }
}

/// What a broker takes, held against a publish before libmosquitto gets it. libmosquitto checks
/// UTF-8, wildcards and length itself; levels and an unannounced packet limit it cannot know.
enum PublishCheck {
    static func topicTooDeep(_ topic: String, levels: Int, limit: Int) -> MQTTError {
        MQTTError(
            code: .invalidTopic,
            message: "a publish to '\(MQTTTopicShape.describe(topic))' has \(levels) levels, more than the broker "
                + "takes (\(limit), broker.max-topic-levels); not sent")
    }

    static func refusedBefore(_ topic: String) -> MQTTError {
        MQTTError(
            code: .refused,
            message: "the broker dropped the connection after a publish to '\(MQTTTopicShape.describe(topic))' "
                + "before; not sent again")
    }
}

/// A limit learned from a refused packet.
public enum LearnedPacketLimit {
    /// The smallest limit brokers are commonly given (mosquitto's examples, small devices).
    public static let floor = 4096

    /// The packet limit to publish under after the broker refused a packet of `refused` bytes
    /// while it kept every one up to `kept` bytes: the largest it kept, or, when that is small
    /// beside what it refused, 4096 (below a refusal larger than that) or half the refusal
    /// (below a smaller one), whichever is larger. A limit set too high costs one more refusal,
    /// which halves it; set too low, the tree comes in more pages. nil when the refusal was not
    /// about size (a packet no larger than one kept).
    public static func limit(refused: Int, kept: Int) -> Int? {
        guard refused > kept else { return nil }
        let guess = refused > floor ? floor : refused / 2
        return min(refused - 1, max(kept, max(guess, 128)))
    }
}
