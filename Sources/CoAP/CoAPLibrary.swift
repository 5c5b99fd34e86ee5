internal import CCoAP
import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// libcoap's process-wide set-up, once: `coap_startup` and its log, routed to swift-log.
enum CoAPLibrary {
    static let logger = Logger(label: "CoAP.libcoap")
    /// Held while reading libcoap's texts in static buffers (`coap_endpoint_str`).
    static let textLock = Mutex(())

    private static let started: Bool = {
        coap_startup()
        // LOG_INFO at most: libcoap dumps PDUs (payloads: HAP ciphertext) only at LOG_DEBUG.
        coap_set_log_level(coap_log_t(LOG_INFO))
        coap_set_log_handler { level, message in
            guard let message else { return }
            let text = String(cString: message).trimmingCharacters(in: .whitespacesAndNewlines)
            let swiftLevel: Logger.Level =
                switch level {
                case ...Int32(LOG_ERR): .error
                case Int32(LOG_WARNING): .warning
                case Int32(LOG_NOTICE): .notice
                default: .debug
                }
            CoAPLibrary.logger.log(level: swiftLevel, "libcoap: \(text)")
        }
        return true
    }()

    static func start() { _ = started }
}

/// Names the calling thread for the system (as MQTT's `ThreadName`, which CoAP does not import):
/// swift-corelibs-foundation may pass the name on too late, so `/proc/thread-self/comm` it is.
enum ThreadNaming {
    static func set(_ name: String) {
        Thread.current.name = name
        let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        defer { close(fd) }
        let bytes = Array(name.utf8.prefix(15))
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }
}
