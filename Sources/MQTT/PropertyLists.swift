internal import CMosquitto
import Synchronization

/// The MQTT 5 property lists of plain publishes — a payload format indicator and a content
/// type, nothing else, which is every publish of the gateway's topics — made once for each
/// kind and kept for the connection's life. libmosquitto only reads a publish's list (it
/// copies what it keeps for a retry), so one list serves every publish and every thread; made
/// and freed for each publish, it was three allocations and a string copy, and three frees.
final class PropertyLists: Sendable {
    private struct Entry: @unchecked Sendable {
        var isUTF8Text: Bool
        var contentType: String?
        /// Read only, by libmosquitto, from any thread; freed in `deinit`.
        var list: OpaquePointer
    }

    /// A few kinds at most (JSON, text); others are made for each publish.
    static let limit = 8

    private let entries = Mutex<[Entry]>([])

    deinit {
        entries.withLock { entries in
            for entry in entries {
                var list: OpaquePointer? = entry.list
                mosquitto_property_free_all(&list)
            }
        }
    }

    /// Whether `properties` hold a payload format or content type and nothing else.
    static func isPlain(_ properties: MQTTPublishProperties) -> Bool {
        properties.messageExpiry == nil && properties.userProperties.isEmpty && properties.responseTopic == nil
            && properties.correlationData == nil && (properties.isUTF8Text || properties.contentType != nil)
    }

    /// The kept list for plain `properties` (`isPlain`), made at the first asking; nil when
    /// libmosquitto refused to make it (a content type that is not UTF-8) or the table is full:
    /// the caller then makes its own, and reports what libmosquitto says.
    func list(for properties: MQTTPublishProperties) -> OpaquePointer? {
        entries.withLock { entries in
            if let entry = entries.first(where: {
                $0.isUTF8Text == properties.isUTF8Text && $0.contentType == properties.contentType
            }) {
                return entry.list
            }
            guard entries.count < Self.limit, let list = Self.make(properties) else { return nil }
            entries.append(Entry(isUTF8Text: properties.isUTF8Text, contentType: properties.contentType, list: list))
            return list
        }
    }

    private static func make(_ properties: MQTTPublishProperties) -> OpaquePointer? {
        var list: OpaquePointer?
        guard add(properties, to: &list) == MOSQ_ERR_SUCCESS.rawValue else {
            mosquitto_property_free_all(&list)
            return nil
        }
        return list
    }

    /// Adds `properties` to a libmosquitto property list: the one way a publish's list is made,
    /// kept (`list(for:)`) or for one publish (`Connection.send`). libmosquitto's code when it
    /// refuses one (a string that is not UTF-8); the list then holds those before it.
    static func add(_ properties: MQTTPublishProperties, to list: inout OpaquePointer?) -> Int32 {
        if let expiry = properties.messageExpiry {
            let rc = mosquitto_property_add_int32(&list, Int32(MQTT_PROP_MESSAGE_EXPIRY_INTERVAL.rawValue), expiry)
            if rc != MOSQ_ERR_SUCCESS.rawValue { return rc }
        }
        for property in properties.userProperties {
            let rc = property.name.withCString { name in
                property.value.withCString { value in
                    mosquitto_property_add_string_pair(&list, Int32(MQTT_PROP_USER_PROPERTY.rawValue), name, value)
                }
            }
            if rc != MOSQ_ERR_SUCCESS.rawValue { return rc }
        }
        if properties.isUTF8Text {
            let rc = mosquitto_property_add_byte(&list, Int32(MQTT_PROP_PAYLOAD_FORMAT_INDICATOR.rawValue), 1)
            if rc != MOSQ_ERR_SUCCESS.rawValue { return rc }
        }
        // Each on its own: an array of the two, made for every publish, was an allocation.
        if let text = properties.contentType {
            let rc = text.withCString {
                mosquitto_property_add_string(&list, Int32(MQTT_PROP_CONTENT_TYPE.rawValue), $0)
            }
            if rc != MOSQ_ERR_SUCCESS.rawValue { return rc }
        }
        if let text = properties.responseTopic {
            let rc = text.withCString {
                mosquitto_property_add_string(&list, Int32(MQTT_PROP_RESPONSE_TOPIC.rawValue), $0)
            }
            if rc != MOSQ_ERR_SUCCESS.rawValue { return rc }
        }
        if let data = properties.correlationData {
            let rc = data.withUnsafeBytes { bytes in
                mosquitto_property_add_binary(
                    &list, Int32(MQTT_PROP_CORRELATION_DATA.rawValue), bytes.baseAddress, UInt16(clamping: bytes.count))
            }
            if rc != MOSQ_ERR_SUCCESS.rawValue { return rc }
        }
        return MOSQ_ERR_SUCCESS.rawValue
    }
}
