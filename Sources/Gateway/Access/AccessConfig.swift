import Crypto
public import Foundation
public import HomeModel

/// A role in a home, after HomeKit's: an administrator does everything, pairing and home
/// management included; a member reads and controls; a guest reads, and controls only what the
/// administrator allowed (`guest-control`).
public enum HomeRole: String, Sendable, Hashable, CaseIterable, Comparable {
    case guest, member, administrator

    public static func < (a: HomeRole, b: HomeRole) -> Bool {
        allCases.firstIndex(of: a)! < allCases.firstIndex(of: b)!
    }
}

/// One person or client: a broker user name (the mosquitto ACL's `user`), an optional web view
/// token (kept as its SHA-256 only), and a role per home.
public struct AccessUser: Sendable, Hashable {
    public var name: String
    /// The SHA-256 of the user's web view token; nil: this user has no web token.
    public var tokenSHA256: [UInt8]?
    /// Home (id, name or base topic) → role; `*` for every home not named.
    public var roles: [String: HomeRole]
    /// What a guest may control, as topics under a home's base: an accessory
    /// (`hallway/hallway-light`) or one of its services (`hallway/hallway-light/lightbulb`).
    public var guestControl: [String]

    public init(name: String, tokenSHA256: [UInt8]? = nil, roles: [String: HomeRole], guestControl: [String] = []) {
        self.name = name
        self.tokenSHA256 = tokenSHA256
        self.roles = roles
        self.guestControl = guestControl
    }

    /// The user's role in `home`, if any: by its id, else its name, else its base topic (any
    /// case), else `*`.
    public func role(in home: Home, gatewayBase: String) -> HomeRole? {
        for key in [home.id, home.name, home.baseTopic ?? gatewayBase] {
            if let role = roles[key.lowercased()] { return role }
        }
        return roles["*"]
    }
}

/// `access:` in the config: who may do what in each home, for the web view's tokens and the
/// mosquitto ACL file `homemqtt access acl` writes.
public struct AccessConfig: ConfigSection, Hashable, CustomStringConvertible {
    public var users: [AccessUser] = []
    public init() {}

    /// What a log shows of it: names and roles, never a token's hash.
    public var description: String {
        "AccessConfig(users: \(users.map { "\($0.name) \($0.roles)" }))"
    }

    public static func read(_ top: ConfigReader, _ context: ConfigContext) throws(ConfigError) -> Self {
        var config = Self()
        guard let access = try top.reader("access") else { return config }
        for (path, node) in try access.list("users") ?? [] {
            let entry = try access.reader(for: node, path: path)
            let name = try entry.requiredString("name")
            guard !name.isEmpty, !name.contains(where: { $0.isWhitespace || $0.isNewline }) else {
                throw entry.error("name", "a broker user name without spaces, got '\(name)'")
            }
            if config.users.contains(where: { $0.name == name }) {
                throw entry.error("name", .duplicateKey, "the user '\(name)' is listed twice")
            }
            var hash: [UInt8]?
            if let hex = try entry.string("token-sha256") {
                guard let bytes = Self.hexBytes(hex), bytes.count == 32 else {
                    throw entry.error("token-sha256", "64 hexadecimal digits, as `homemqtt access token` prints")
                }
                hash = bytes
            }
            var roles: [String: HomeRole] = [:]
            guard let rolesNode = entry.node("roles"), let pairs = rolesNode.strictEntries, !pairs.isEmpty else {
                throw entry.error(
                    "roles", "a map of home (name, id, base topic or *) to administrator, member or guest")
            }
            _ = try entry.reader("roles")
            for (key, value) in pairs {
                guard let key, let text = value.strictText, let role = HomeRole(rawValue: text) else {
                    throw entry.error(
                        "roles",
                        "'\(key ?? "?")': the role is administrator, member or guest, got \(value.strictText.map { "'\($0)'" } ?? value.strictKindName)"
                    )
                }
                roles[key == "*" ? key : key.lowercased()] = role
            }
            let control = try entry.strings("guest-control") ?? []
            for item in control {
                let levels = item.split(separator: "/", omittingEmptySubsequences: false)
                guard (2...4).contains(levels.count), !levels.contains(where: \.isEmpty),
                    !item.unicodeScalars.contains(where: {
                        "+#".unicodeScalars.contains($0) || $0.properties.isWhitespace
                            || $0.properties.generalCategory == .control
                    })
                else {
                    throw entry.error(
                        "guest-control",
                        "'\(item)' is not <room>/<accessory>, <room>/<accessory>/<service> or …/<characteristic> under a home's base"
                    )
                }
            }
            try entry.finish()
            config.users.append(AccessUser(name: name, tokenSHA256: hash, roles: roles, guestControl: control))
        }
        try access.finish()
        return config
    }

    /// The user whose web token this is, compared by hash in constant time.
    public func user(presenting token: String) -> AccessUser? {
        let digest = Self.sha256(token)
        var found: AccessUser?
        for user in users {
            guard let hash = user.tokenSHA256 else { continue }
            var difference: UInt8 = 0
            for (a, b) in zip(hash, digest) { difference |= a ^ b }
            if difference == 0 { found = user }
        }
        return found
    }

    /// Whether any user has a web token.
    public var hasTokens: Bool { users.contains { $0.tokenSHA256 != nil } }

    public static func sha256(_ token: String) -> [UInt8] { Array(SHA256.hash(data: Data(token.utf8))) }

    public static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    static func hexBytes(_ text: String) -> [UInt8]? {
        let digits = Array(text.lowercased().utf8)
        guard digits.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        for pair in stride(from: 0, to: digits.count, by: 2) {
            guard let high = Self.nibble(digits[pair]), let low = Self.nibble(digits[pair + 1]) else { return nil }
            out.append(high << 4 | low)
        }
        return out
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        default: nil
        }
    }
}
