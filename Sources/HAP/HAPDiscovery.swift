import Foundation
import NIOCore
import NIOPosix

// Finding HAP accessories on the local network: one-shot mDNS queries for _hap._tcp and the DNS
// parsing they need.

/// An accessory found by mDNS (`_hap._tcp`).
public struct HAPDiscoveredAccessory: Sendable, Hashable {
    /// The accessory's pairing id (TXT `id`).
    public var id: String
    /// The service instance name (usually the accessory's name).
    public var name: String
    public var model: String
    /// HAP category (TXT `ci`), 1 when absent.
    public var category: Int
    /// TXT `sf` = 0: paired with a controller already.
    public var isPaired: Bool
    /// TXT `c#`: grows when the accessory's `/accessories` changes.
    public var configurationNumber: Int
    /// TXT `ff`: pairing feature flags (bit 0 selects pair-setup method 1).
    public var featureFlags: Int
    /// The address to connect to: the first of `addresses`, or the SRV target's host name
    /// when no address came with it.
    public var host: String
    public var port: Int
    /// Every address the accessory announced (IPv4 first): a multi-homed accessory has several.
    public var addresses: [String] = []
}

/// Browses `_hap._tcp.local` with one-shot mDNS queries (answers come back by unicast).
public enum HAPDiscovery {
    static let service = "_hap._tcp.local"

    public static func browse(timeout: Double = 3) async throws(HAPError) -> [HAPDiscoveredAccessory] {
        let (inbound, continuation) = AsyncStream.makeStream(of: [UInt8].self)
        let channel: any Channel
        do {
            channel = try await DatagramBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .channelInitializer { ch in
                    ch.eventLoop.makeCompletedFuture {
                        try ch.pipeline.syncOperations.addHandler(DatagramReceiver(continuation))
                    }
                }
                .bind(host: "0.0.0.0", port: 0).get()
        } catch {
            throw HAPError(code: .io, message: "cannot open a UDP socket for mDNS: \(error)")
        }
        defer { channel.close(promise: nil) }
        let query = DNSMessage.query(name: service, type: 12)
        do {
            let target = try SocketAddress(ipAddress: "224.0.0.251", port: 5353)
            var buffer = channel.allocator.buffer(capacity: query.count)
            buffer.writeBytes(query)
            try await channel.writeAndFlush(AddressedEnvelope(remoteAddress: target, data: buffer)).get()
        } catch {
            throw HAPError(code: .unreachable, message: "cannot send the mDNS query (no multicast route?): \(error)")
        }
        var records: [DNSMessage.Record] = []
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                try? await Task.sleep(nanoseconds: UInt64(max(0.1, timeout) * 1_000_000_000))
                continuation.finish()
            }
            for await packet in inbound {
                if let msg = try? DNSMessage.parse(packet) { records += msg.records }
            }
            group.cancelAll()
        }
        return accessories(from: records)
    }

    /// Joins PTR, SRV, TXT and A records into accessories.
    public static func accessories(from records: [DNSMessage.Record]) -> [HAPDiscoveredAccessory] {
        resolve(records).map(\.accessory)
    }

    /// Joins PTR, SRV, TXT, A and AAAA records into accessories, with their instance names.
    static func resolve(_ records: [DNSMessage.Record]) -> [(instance: String, accessory: HAPDiscoveredAccessory)] {
        let instances = Set(
            records.compactMap { r -> String? in
                if case .ptr(let target) = r.data, r.name.lowercased() == service { return target }
                return nil
            })
        var out: [(instance: String, accessory: HAPDiscoveredAccessory)] = []
        for instance in instances.sorted() {
            var txt: [String: String] = [:]
            var srv: (String, Int)?
            for r in records where r.name.lowercased() == instance.lowercased() {
                switch r.data {
                case .txt(let kv): txt.merge(kv) { _, new in new }
                case .srv(let target, let port): srv = (target, port)
                default: break
                }
            }
            guard let id = txt["id"], let (target, port) = srv else { continue }
            var v4: [String] = []
            var v6: [String] = []
            for r in records where r.name.lowercased() == target.lowercased() {
                switch r.data {
                case .a(let ip) where !v4.contains(ip): v4.append(ip)
                case .aaaa(let ip) where !v6.contains(ip): v6.append(ip)
                default: break
                }
            }
            let addresses = v4 + v6
            let name = instance.hasSuffix("." + service) ? String(instance.dropLast(service.count + 1)) : instance
            out.append(
                (
                    instance,
                    HAPDiscoveredAccessory(
                        id: id, name: name, model: txt["md"] ?? "", category: Int(txt["ci"] ?? "") ?? 1,
                        isPaired: txt["sf"] == "0", configurationNumber: Int(txt["c#"] ?? "") ?? 1,
                        featureFlags: Int(txt["ff"] ?? "") ?? 0, host: addresses.first ?? target, port: port,
                        addresses: addresses)
                ))
        }
        return out
    }
}
