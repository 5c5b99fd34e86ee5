internal import CMosquitto
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

// The checks of a topic before it is published to and of a filter before it is subscribed to,
// by libmosquitto's own rules.

extension Connection {
    /// Every publish comes here: the C string's length is the topic's length only without a NUL
    /// inside it (`strlen` is one vectorised scan, where a loop over `utf8` cost ~1.4 k
    /// instructions for a 60-byte topic).
    static func validatePublishTopic(_ topic: String) throws(MQTTError) {
        let count = topic.utf8.count
        let valid =
            count > 0 && count <= 65535
            && topic.withCString {
                strlen($0) == count && mosquitto_pub_topic_check2($0, count) == MOSQ_ERR_SUCCESS.rawValue
            }
        guard valid else {
            throw MQTTError(
                code: .invalidTopic, message: "'\(MQTTTopicShape.describe(topic))' is not a valid topic to publish to")
        }
    }

    static func validateFilter(_ filter: String) throws(MQTTError) {
        let valid =
            !filter.isEmpty && !filter.utf8.contains(0)
            && filter.withCString { mosquitto_sub_topic_check2($0, filter.utf8.count) } == MOSQ_ERR_SUCCESS.rawValue
            && filter.utf8.count <= 65535
        guard valid else {
            throw MQTTError(code: .invalidTopic, message: "'\(filter)' is not a valid topic filter")
        }
    }
}
