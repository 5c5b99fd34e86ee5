import Foundation
public import HomeModel

// What a controller asks of a connected accessory: pair-verify, /accessories, reading and writing
// characteristics, events, and the pairings list.

/// A characteristic on one accessory server: HAP's `aid.iid`.
public struct HAPCharacteristicID: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var aid: UInt64
    public var iid: UInt64
    public init(aid: UInt64, iid: UInt64) { self.aid = aid; self.iid = iid }
    public static func < (l: Self, r: Self) -> Bool { (l.aid, l.iid) < (r.aid, r.iid) }
    public var description: String { "\(aid).\(iid)" }
}

/// One entry of an accessory's pairing list.
public struct HAPPairingEntry: Sendable, Hashable {
    public var controllerPairingID: String
    public var publicKey: String
    public var isAdmin: Bool
}

extension AccessoryError.Status {
    init(hap status: Int64) {
        self = AccessoryError.Status(rawValue: Int(status)) ?? .communicationFailure
    }
}

extension HAPConnection {
    static let jsonContentType = "application/hap+json"

    func json(_ response: HAPHTTPMessage, _ what: String) throws(HAPError) -> JSONValue {
        do {
            return try JSONValue(parsing: response.body)
        } catch {
            throw HAPError(code: .badJSON, message: "the accessory's \(what) is not valid JSON")
        }
    }

    /// Runs pair-verify with the stored pairing; afterwards everything is encrypted.
    public func verify(_ pairing: HAPPairing) async throws(HAPError) {
        try await PairingProtocol.pairVerify(self, pairing: pairing)
    }

    /// `GET /accessories`.
    public func accessoriesJSON() async throws(HAPError) -> JSONValue {
        let r = try await request("GET", "/accessories")
        guard r.status == 200 else { throw HAPError.proto("GET /accessories answered HTTP \(r.status)") }
        return try json(r, "/accessories")
    }

    /// `GET /characteristics?id=…`: per item a value or the accessory's HAP status.
    public func readCharacteristics(_ ids: [HAPCharacteristicID]) async throws(HAPError) -> [HAPCharacteristicID:
        Result<JSONValue, AccessoryError>]
    {
        guard !ids.isEmpty else { return [:] }
        var path = "/characteristics?id="
        for (n, id) in ids.enumerated() {
            if n > 0 { path += "," }
            path += String(id.aid)
            path += "."
            path += String(id.iid)
        }
        let r = try await request("GET", path)
        guard r.status == 200 || r.status == 207 else {
            throw HAPError.proto("GET /characteristics answered HTTP \(r.status)")
        }
        var out: [HAPCharacteristicID: Result<JSONValue, AccessoryError>] = [:]
        for item in try json(r, "characteristics answer")["characteristics"]?.arrayValue ?? [] {
            guard let aid = item["aid"]?.uint64Value, let iid = item["iid"]?.uint64Value else { continue }
            let id = HAPCharacteristicID(aid: aid, iid: iid)
            if let status = item["status"]?.int64Value, status != 0 {
                out[id] = .failure(
                    AccessoryError(
                        AccessoryError.Status(hap: status), "the accessory refused to read \(id) (HAP status \(status))"
                    ))
            } else {
                out[id] = .success(item["value"] ?? .null)
            }
        }
        for id in ids where out[id] == nil {
            out[id] = .failure(AccessoryError(.communicationFailure, "the accessory did not answer for \(id)"))
        }
        return out
    }

    /// `PUT /characteristics` with items such as `{"aid":1,"iid":9,"value":true}` or `"ev":true`;
    /// returns the items that failed. `timed` sends `PUT /prepare` first (for `tw` characteristics).
    public func writeCharacteristics(_ items: [HAPCharacteristicID: [String: JSONValue]], timed: Bool = false)
        async throws(HAPError) -> [HAPCharacteristicID: AccessoryError]
    {
        guard !items.isEmpty else { return [:] }
        var pid: UInt64?
        if timed {
            let id = UInt64.random(in: 1...UInt64(UInt32.max))
            pid = id
            let prep = JSONValue.object(["ttl": .int(5000), "pid": .uint(id)])
            let r = try await request(
                "PUT", "/prepare", body: Array(prep.encoded(wholeDoublesAsIntegers: true).utf8),
                contentType: Self.jsonContentType)
            let status = (try? json(r, "prepare answer"))?["status"]?.int64Value ?? -1
            guard r.status == 200, status == 0 else {
                let err = AccessoryError(
                    AccessoryError.Status(hap: status), "the accessory refused the timed write (HAP status \(status))")
                return Dictionary(uniqueKeysWithValues: items.keys.map { ($0, err) })
            }
        }
        let r = try await request(
            "PUT", "/characteristics", body: Self.writeBody(items, pid: pid), contentType: Self.jsonContentType)
        switch r.status {
        case 204, 200:
            return [:]
        case 207:
            var failures: [HAPCharacteristicID: AccessoryError] = [:]
            for item in try json(r, "characteristics answer")["characteristics"]?.arrayValue ?? [] {
                guard let aid = item["aid"]?.uint64Value, let iid = item["iid"]?.uint64Value,
                    let status = item["status"]?.int64Value, status != 0
                else { continue }
                let id = HAPCharacteristicID(aid: aid, iid: iid)
                failures[id] = AccessoryError(
                    AccessoryError.Status(hap: status),
                    "the accessory refused the write to \(id) (HAP status \(status))")
            }
            return failures
        default:
            let status = (try? json(r, "error"))?["status"]?.int64Value
            let err = AccessoryError(
                status.map { AccessoryError.Status(hap: $0) } ?? .communicationFailure,
                "the accessory answered HTTP \(r.status) to the write")
            return Dictionary(uniqueKeysWithValues: items.keys.map { ($0, err) })
        }
    }

    /// The body of `PUT /characteristics`: `{"characteristics":[…],"pid":…}` with the items
    /// sorted by id, each item's `aid`, `iid` and fields in sorted key order, byte for byte what
    /// `JSONValue.encoded(wholeDoublesAsIntegers: true)` writes for that document, without
    /// building the document and its dictionaries first.
    nonisolated static func writeBody(_ items: [HAPCharacteristicID: [String: JSONValue]], pid: UInt64?) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(48 * items.count + 40)
        out.append(contentsOf: #"{"characteristics":["#.utf8)
        let sorted = items.count == 1 ? Array(items) : items.sorted { $0.key < $1.key }
        for (n, (id, fields)) in sorted.enumerated() {
            if n > 0 { out.append(UInt8(ascii: ",")) }
            out.append(UInt8(ascii: "{"))
            var keys = ["aid", "iid"]
            for key in fields.keys where key != "aid" && key != "iid" { keys.append(key) }
            keys.sort()
            for (k, key) in keys.enumerated() {
                if k > 0 { out.append(UInt8(ascii: ",")) }
                JSONValue.appendString(key, to: &out)
                out.append(UInt8(ascii: ":"))
                switch key {
                case "aid": out.append(contentsOf: String(id.aid).utf8)
                case "iid": out.append(contentsOf: String(id.iid).utf8)
                default: out.append(contentsOf: (fields[key] ?? .null).encoded(wholeDoublesAsIntegers: true).utf8)
                }
            }
            out.append(UInt8(ascii: "}"))
        }
        out.append(UInt8(ascii: "]"))
        if let pid {
            out.append(contentsOf: #","pid":"#.utf8)
            out.append(contentsOf: String(pid).utf8)
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// Turns an `EVENT/1.0` body into values.
    public nonisolated static func eventValues(_ message: HAPHTTPMessage) -> [(HAPCharacteristicID, JSONValue)] {
        guard let body = try? JSONValue(parsing: message.body) else { return [] }
        return (body["characteristics"]?.arrayValue ?? []).compactMap { item in
            guard let aid = item["aid"]?.uint64Value, let iid = item["iid"]?.uint64Value, let v = item["value"] else {
                return nil
            }
            return (HAPCharacteristicID(aid: aid, iid: iid), v)
        }
    }

    /// An accessory answers a controller that is not an admin with an authentication error
    /// (HAP: `/pairings` is for admins only): that is said as what it means.
    func pairingsRequest(_ tlv: TLV8, step: String) async throws(HAPError) -> TLV8 {
        do {
            return try await PairingProtocol.exchange(self, path: "/pairings", tlv, step: step, expectState: 2)
        } catch  where error.code == .authentication {
            throw HAPError(
                code: .insufficientPrivileges,
                message:
                    "the accessory refused to \(step): only an admin controller may list, add or remove its pairings, and this pairing is not one"
            )
        }
    }

    public func listPairings() async throws(HAPError) -> [HAPPairingEntry] {
        PairingsRequest.entries(try await pairingsRequest(PairingsRequest.list(), step: "list pairings"))
    }

    public func addPairing(controllerPairingID: String, publicKey: [UInt8], admin: Bool) async throws(HAPError) {
        let request = PairingsRequest.add(controllerPairingID: controllerPairingID, publicKey: publicKey, admin: admin)
        _ = try await pairingsRequest(request, step: "add pairing")
    }

    public func removePairing(controllerPairingID: String) async throws(HAPError) {
        let request = PairingsRequest.remove(controllerPairingID: controllerPairingID)
        _ = try await pairingsRequest(request, step: "remove pairing")
    }
}
