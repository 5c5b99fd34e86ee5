import Foundation
public import MDNS

// Finding HAP accessories on the local network: the browser and a one-shot mDNS query for
// `_hap._tcp` (`MDNSQuery`) together, and what HAP reads from the TXT records of its instances.

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
    /// Announced as `_hap._udp` (HAP over Thread, CoAP) rather than `_hap._tcp`.
    public var isThread = false
}

/// Lists the `_hap._tcp.local` accessories on the local network (and the Thread accessories
/// of `_hap._udp.local`, with the same TXT keys).
public enum HAPDiscovery {
    public static let service = "_hap._tcp.local"
    public static let threadService = "_hap._udp.local"

    /// Both services at once: the IP accessories, then the Thread ones (`isThread`).
    public static func browseAll(timeout: Double = 3, interfaces: MDNSInterfaces = .all) async throws(HAPError)
        -> [HAPDiscoveredAccessory]
    {
        async let thread = threadAccessories(timeout: timeout, interfaces: interfaces)
        let ip = try await browse(timeout: timeout, interfaces: interfaces)
        return ip + (await thread)
    }

    /// Thread accessories are an addition: a failure to hear them leaves the IP list alone.
    private static func threadAccessories(timeout: Double, interfaces: MDNSInterfaces) async
        -> [HAPDiscoveredAccessory]
    {
        (try? await browse(service: threadService, timeout: timeout, interfaces: interfaces)) ?? []
    }

    /// Listens for `timeout` seconds in two ways at once and joins what both heard: the
    /// continuous browser (`HAPBrowser`: every admitted interface, IPv4 and IPv6, as the hap
    /// source follows accessories), and one question from an ephemeral IPv4 port, answered by
    /// unicast, for a machine where port 5353 cannot be shared. Fails only when neither could
    /// listen.
    public static func browse(
        service: String = service, timeout: Double = 3, interfaces: MDNSInterfaces = .all
    ) async throws(HAPError) -> [HAPDiscoveredAccessory] {
        let browser = HAPBrowser(service: service, interfaces: interfaces)
        // The browser is a child of this call: it runs while the question is asked and the
        // time runs out, and is cancelled and awaited before the call returns.
        let outcome = await withTaskGroup(of: (any Error)?.self) {
            group -> Result<[HAPDiscoveredAccessory], HAPError> in
            group.addTask {
                do { try await browser.run() } catch { return error }
                return nil
            }
            let started = ContinuousClock.now
            var asked: Result<[DNSMessage.Record], MDNSError>
            do throws(MDNSError) {
                asked = .success(try await MDNSQuery.records(service: service, timeout: timeout))
            } catch {
                asked = .failure(error)
            }
            // The question fails at once where IPv4 has no multicast route: the browser still
            // gets its whole time (an IPv6-only network).
            try? await Task.sleep(until: started + .seconds(timeout))
            let heard = await browser.accessories()
            group.cancelAll()
            let browserFailure = await group.next() ?? nil
            switch asked {
            case .success(let records):
                return .success(merged(accessories(from: records, service: service), heard))
            case .failure(let error) where browserFailure != nil:
                return .failure(
                    HAPError(code: error.code == .unreachable ? .unreachable : .io, message: error.message))
            case .failure:
                return .success(heard)
            }
        }
        return try outcome.get()
    }

    /// One entry per pairing id: the first list's, with every address the second adds.
    static func merged(_ first: [HAPDiscoveredAccessory], _ second: [HAPDiscoveredAccessory])
        -> [HAPDiscoveredAccessory]
    {
        var byID: [String: HAPDiscoveredAccessory] = [:]
        var order: [String] = []
        for accessory in first + second {
            let key = accessory.id.uppercased()
            guard var known = byID[key] else {
                byID[key] = accessory
                order.append(key)
                continue
            }
            for address in accessory.addresses where !known.addresses.contains(address) {
                known.addresses.append(address)
            }
            // A host that is the SRV target's name (no address came with it) gives way to one.
            if !known.addresses.contains(known.host), let address = known.addresses.first { known.host = address }
            byID[key] = known
        }
        return order.compactMap { byID[$0] }
    }

    /// Joins PTR, SRV, TXT and A records into accessories.
    static func accessories(from records: [DNSMessage.Record], service: String = service) -> [HAPDiscoveredAccessory] {
        resolve(records, service: service).map(\.accessory)
    }

    /// Joins PTR, SRV, TXT, A and AAAA records into accessories, with their instance names:
    /// the instances of `_hap._tcp` whose TXT has the pairing id (`id`); `md`, `ci`, `sf`, `c#`
    /// and `ff` are read with HAP's defaults.
    static func resolve(_ records: [DNSMessage.Record], service: String = service) -> [(
        instance: String, accessory: HAPDiscoveredAccessory
    )] {
        MDNSInstance.resolve(service: service, records).compactMap { instance in
            let txt = instance.txt
            guard let id = txt["id"] else { return nil }
            return (
                instance.name,
                HAPDiscoveredAccessory(
                    id: id, name: instance.label, model: txt["md"] ?? "", category: Int(txt["ci"] ?? "") ?? 1,
                    isPaired: txt["sf"] == "0", configurationNumber: Int(txt["c#"] ?? "") ?? 1,
                    featureFlags: Int(txt["ff"] ?? "") ?? 0, host: instance.addresses.first ?? instance.target,
                    port: instance.port, addresses: instance.addresses, isThread: service == threadService)
            )
        }
    }
}
