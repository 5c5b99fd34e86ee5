import Foundation
import MDNS

// Finding HAP accessories on the local network: a one-shot mDNS query for `_hap._tcp`
// (`MDNSQuery`) and what HAP reads from the TXT records of its instances.

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
        do {
            return accessories(from: try await MDNSQuery.records(service: service, timeout: timeout))
        } catch {
            throw HAPError(code: error.code == .unreachable ? .unreachable : .io, message: error.message)
        }
    }

    /// Joins PTR, SRV, TXT and A records into accessories.
    static func accessories(from records: [DNSMessage.Record]) -> [HAPDiscoveredAccessory] {
        resolve(records).map(\.accessory)
    }

    /// Joins PTR, SRV, TXT, A and AAAA records into accessories, with their instance names:
    /// the instances of `_hap._tcp` whose TXT has the pairing id (`id`); `md`, `ci`, `sf`, `c#`
    /// and `ff` are read with HAP's defaults.
    static func resolve(_ records: [DNSMessage.Record]) -> [(instance: String, accessory: HAPDiscoveredAccessory)] {
        MDNSInstance.resolve(service: service, records).compactMap { instance in
            let txt = instance.txt
            guard let id = txt["id"] else { return nil }
            return (
                instance.name,
                HAPDiscoveredAccessory(
                    id: id, name: instance.label, model: txt["md"] ?? "", category: Int(txt["ci"] ?? "") ?? 1,
                    isPaired: txt["sf"] == "0", configurationNumber: Int(txt["c#"] ?? "") ?? 1,
                    featureFlags: Int(txt["ff"] ?? "") ?? 0, host: instance.addresses.first ?? instance.target,
                    port: instance.port, addresses: instance.addresses)
            )
        }
    }
}
