import Foundation
public import Gateway
public import HomeModel
import Synchronization

// The bridges running in this process, for what reaches them from elsewhere: a management
// operation on a home's request topic (its editor names the home's database), and the HAP
// controller, which must never pair with one of them.

/// The HomeKit bridges this process runs, one per home that has one.
public enum HomeKitBridges {
    private static let table = Mutex<[ObjectIdentifier: HomeKitBridgeService]>([:])

    static func register(_ service: HomeKitBridgeService) {
        table.withLock { $0[ObjectIdentifier(service)] = service }
    }

    static func unregister(_ service: HomeKitBridgeService) {
        _ = table.withLock { $0.removeValue(forKey: ObjectIdentifier(service)) }
    }

    /// Every bridge running now.
    public static var running: [HomeKitBridgeService] { table.withLock { Array($0.values) } }

    /// The bridge of the home whose gateway holds `database` (the home's view: an editor's).
    public static func serving(_ database: HomeDatabase) -> HomeKitBridgeService? {
        running.first { $0.database === database && $0.standalone == nil }
    }

    /// The server of the accessory `accessoryID` served alone in that home, if one runs.
    public static func serving(_ database: HomeDatabase, accessory accessoryID: String) -> HomeKitBridgeService? {
        running.first { $0.database === database && $0.accessoryID == accessoryID }
    }

    /// The running bridge of the gateway whose state is in `stateDirectory` that `host`:`port`
    /// reaches, if any: `host` is this machine (a loopback or one of its interfaces' addresses,
    /// or a name that resolves to one) and the bridge listens on `port`. Another gateway's bridge
    /// in the same process is no concern here: the route (`GatewayRoute`) guards against it.
    public static func reached(host: String, port: Int, stateDirectory: String) -> HomeKitBridgeService? {
        let own = URL(fileURLWithPath: stateDirectory).standardizedFileURL.path
        let candidates = running.filter {
            $0.listeningPort == port && URL(fileURLWithPath: $0.stateDirectory).standardizedFileURL.path == own
        }
        guard !candidates.isEmpty, LocalAddresses.isLocal(host) else { return nil }
        return candidates.first
    }
}

/// Whether an address is this machine's.
enum LocalAddresses {
    static func isLocal(_ host: String) -> Bool {
        let wanted = resolve(host)
        guard !wanted.isEmpty else { return false }
        let own = interfaces()
        return wanted.contains {
            $0.hasPrefix("127.") || $0 == "::1" || $0 == "0.0.0.0" || $0 == "::" || own.contains($0)
        }
    }

    /// The numeric addresses `host` names (itself when numeric).
    static func resolve(_ host: String) -> Set<String> {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &list) == 0, let first = list else { return [] }
        defer { freeaddrinfo(first) }
        var out = Set<String>()
        var next: UnsafeMutablePointer<addrinfo>? = first
        while let entry = next {
            if let address = numeric(entry.pointee.ai_addr) { out.insert(address) }
            next = entry.pointee.ai_next
        }
        return out
    }

    /// Every address of the machine's interfaces.
    static func interfaces() -> Set<String> {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return [] }
        defer { freeifaddrs(first) }
        var out = Set<String>()
        var next: UnsafeMutablePointer<ifaddrs>? = first
        while let entry = next {
            if let address = numeric(entry.pointee.ifa_addr) { out.insert(address) }
            next = entry.pointee.ifa_next
        }
        return out
    }

    /// An IPv4 or IPv6 socket address as text, without an IPv6 zone.
    static func numeric(_ address: UnsafeMutablePointer<sockaddr>?) -> String? {
        guard let address else { return nil }
        let family = Int32(address.pointee.sa_family)
        let length: socklen_t
        switch family {
        case AF_INET: length = socklen_t(MemoryLayout<sockaddr_in>.size)
        case AF_INET6: length = socklen_t(MemoryLayout<sockaddr_in6>.size)
        default: return nil
        }
        var text = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        guard getnameinfo(address, length, &text, socklen_t(text.count), nil, 0, NI_NUMERICHOST) == 0 else {
            return nil
        }
        let full = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return full.split(separator: "%").first.map(String.init) ?? full
    }
}
