import Foundation
import Logging
import MDNS

// `homemqtt doctor`'s ear: the MDNS module's browser for `_hap._udp` (HAP over Thread; HAP over
// IP is `_hap._tcp`) for a few seconds, on the interfaces the config admits, keeping for each
// accessory the IPv6 interfaces its records came in on: those are the ones whose router
// advertisements bring the border router's route.

/// A Thread accessory heard while the doctor listened. All of it but `interfaces` is what a
/// peer on the LAN announced.
struct HeardThreadAccessory: Sendable, Equatable {
    var name: String
    /// TXT `id`: the pairing id ("" when the accessory announced none).
    var id: String
    var port: Int
    var addresses: [String]
    /// The IPv6 interfaces its records were heard on, sorted (none when heard over IPv4 only).
    var interfaces: [String]
}

enum DoctorListening {
    static let service = "_hap._udp.local"

    private enum Outcome: Sendable {
        case browserEnded(problem: String?)
        case heard(records: [DNSMessage.Record], heardOn: [String: Set<String>])
        case deadline
    }

    /// Listens for `seconds`; returns what was heard, and why nothing could be when no socket
    /// could be opened. The browser, the reader of its updates and the deadline are children
    /// of this call, all ended before it returns.
    static func listen(seconds: Double, interfaces: MDNSInterfaces, logger: Logger) async
        -> (accessories: [HeardThreadAccessory], problem: String?)
    {
        let browser = MDNSBrowser(service: service, interfaces: interfaces, logger: logger)
        return await withTaskGroup(of: Outcome.self) { group in
            group.addTask {
                do { try await browser.run() } catch { return .browserEnded(problem: "\(error)") }
                return .browserEnded(problem: nil)
            }
            group.addTask {
                // The updates end when the browser does; the last one holds every record.
                var records: [DNSMessage.Record] = []
                var heardOn: [String: Set<String>] = [:]
                for await update in browser.updates {
                    records = update.records
                    guard let interface = update.interface else { continue }
                    for record in update.received {
                        heardOn[record.name.lowercased(), default: []].insert(interface)
                        if case .ptr(let instance) = record.data {
                            heardOn[instance.lowercased(), default: []].insert(interface)
                        }
                    }
                }
                return .heard(records: records, heardOn: heardOn)
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(seconds))
                return .deadline
            }
            var problem: String?
            var heard: [HeardThreadAccessory] = []
            while let outcome = await group.next() {
                switch outcome {
                case .deadline:
                    group.cancelAll()
                case .browserEnded(let failure):
                    // Without a socket nothing will be heard: no use waiting out the time.
                    problem = failure
                    group.cancelAll()
                case .heard(let records, let heardOn):
                    heard = accessories(records, heardOn: heardOn)
                }
            }
            return (heard, problem)
        }
    }

    /// The instances of `_hap._udp` in `records`, each with the interfaces its PTR, SRV, TXT or
    /// address records were heard on.
    static func accessories(_ records: [DNSMessage.Record], heardOn: [String: Set<String>]) -> [HeardThreadAccessory] {
        MDNSInstance.resolve(service: service, records).map { instance in
            let on = (heardOn[instance.name.lowercased()] ?? []).union(heardOn[instance.target.lowercased()] ?? [])
            return HeardThreadAccessory(
                name: instance.label, id: instance.txt["id"] ?? "", port: instance.port,
                addresses: instance.addresses, interfaces: on.sorted())
        }
    }
}
