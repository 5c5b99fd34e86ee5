public import Foundation

// The loop guard between gateways. Each gateway has a random id of its own, kept in its state
// directory; every accessory a HomeMQTT HomeKit bridge serves carries its route (the ids of the
// gateways it passed through, this one last) in a hidden custom service. A gateway's HAP source
// leaves out every accessory whose route holds its own id: an accessory never comes back to a
// gateway it passed through, however long the cycle and whichever machines it crosses.

/// The route an accessory took through HomeMQTT gateways, as its bridge serves it.
public enum GatewayRoute {
    /// The hidden service that carries the route (custom UUID: HomeKit and controllers that do
    /// not know it leave it alone).
    public static let serviceType = "318D0DC1-9886-4226-B388-11D7B6A0E1D2"
    /// Its one characteristic: the gateway ids, oldest first, separated by commas (string, pr).
    public static let characteristicType = "63332CBD-0ADC-4CB4-BD0D-B4812CCCA8FE"
    /// HAP's longest string: 15 hops of 16-character ids fit.
    public static let maxLength = 256

    /// The route the accessory carries (empty when it did not come through a HomeMQTT bridge).
    public static func route(of accessory: Accessory) -> [String] {
        guard let service = accessory.services.first(where: { isRouteService($0.type) }),
            let c = service.characteristics.first(where: { $0.type.uppercased() == characteristicType }),
            case .string(let text)? = c.value
        else { return [] }
        return parse(text)
    }

    public static func isRouteService(_ type: String) -> Bool { type.uppercased() == serviceType }

    public static func parse(_ text: String) -> [String] {
        text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// The route as served: the incoming one, then `gatewayID` (not repeated).
    public static func extended(_ route: [String], by gatewayID: String) -> String {
        (route.last == gatewayID ? route : route + [gatewayID]).joined(separator: ",")
    }

    /// The accessories a gateway of id `gatewayID` keeps, and those that passed through it
    /// already (it would serve them twice, and a cycle would carry them round for ever).
    public static func partition(_ accessories: [Accessory], gatewayID: String?) -> (
        kept: [Accessory], cameBack: [Accessory]
    ) {
        guard let gatewayID else { return (accessories, []) }
        var kept: [Accessory] = []
        var cameBack: [Accessory] = []
        for a in accessories {
            if route(of: a).contains(gatewayID) { cameBack.append(a) } else { kept.append(a) }
        }
        return (kept, cameBack)
    }

    /// Whether a pairing brings nothing but what came back: something was left out and what is
    /// left serves nothing beyond its information (a bridge's own aid 1).
    public static func onlyCameBack(kept: [Accessory], cameBack: [Accessory]) -> Bool {
        !cameBack.isEmpty
            && kept.allSatisfy { a in
                a.services.allSatisfy {
                    $0.type == StandardUUID.accessoryInformation || $0.type == StandardUUID.protocolInformation
                        || isRouteService($0.type)
                }
            }
    }
}

/// The gateway's own id: 16 random hex digits in `<state directory>/gateway-id`, made once
/// (0600, like every state file) and never changed: a route names the gateways by it.
public enum GatewayIdentity {
    public static let fileName = "gateway-id"

    /// The id kept in `stateDirectory`, made now if there is none. Two makers at once (the HAP
    /// source and a bridge of the same gateway) agree: the file is linked into place only if
    /// it is absent, and whoever loses reads the winner's.
    public static func load(stateDirectory: String) throws(ModelError) -> String {
        let directory = URL(fileURLWithPath: stateDirectory)
        let file = directory.appendingPathComponent(fileName)
        if let id = read(file) { return id }
        var generator = SystemRandomNumberGenerator()
        let id = String(format: "%016llx", UInt64.random(in: 0...UInt64.max, using: &generator))
        try AtomicFileWriter.createDirectory(directory)
        let made = directory.appendingPathComponent("\(fileName).new-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try AtomicFileWriter().write(Array((id + "\n").utf8), to: made)
        defer { unlink(made.path) }
        if link(made.path, file.path) != 0, errno != EEXIST {
            throw ModelError(code: .io, message: "cannot create \(file.path): \(String(cString: strerror(errno)))")
        }
        guard let kept = read(file) else {
            throw ModelError(code: .corruptDatabase, message: "\(file.path) does not hold a gateway id")
        }
        return kept
    }

    static func read(_ file: URL) -> String? {
        guard let data = FileManager.default.contents(atPath: file.path) else { return nil }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return text.count == 16 && text.allSatisfy(\.isHexDigit) ? text.lowercased() : nil
    }
}
