public import HomeModel

/// What each role may publish under a home's base topic, for the web view's requests and, as a
/// mosquitto ACL file, for the broker: one rule, two enforcers.
///
/// Under a base `B`: `B/$gateway/request/…` (home management, pairing, scope) is an
/// administrator's; a member may send any accessory request (`set`, `get`, `$set`, `$toggle`,
/// `$identify`); a guest may read and `get`, and `set`, `$set` and `$toggle` only under what
/// `guest-control` names.
/// Everyone with a role reads all of `B/#`. The operations on the list of homes (`homes/…`
/// requests that add, remove or change a home, or move accessories between homes) change more
/// than one home: only an administrator of every home may send them.
public enum AccessPolicy {
    /// The names of the operations that change the list of homes or move accessories between
    /// them, as each declares (`access: .homeList`), in the order of `operations`.
    public static func homeListNames(_ operations: [any ManagementOperation.Type] = ManagementOperations.core)
        -> [String]
    {
        operations.filter { $0.access == .homeList }.map { $0.name }
    }

    /// The core's, named once: every request a web page sends is checked against them.
    private static let coreHomeListNames = Set(homeListNames())

    /// Whether `role` may publish `topic`, which is under `base`; `ownsEveryHome`: the user is an
    /// administrator of every home.
    public static func mayPublish(
        _ topic: String, base: String, role: HomeRole, guestControl: [String], ownsEveryHome: Bool
    ) -> Bool {
        guard topic.hasPrefix(base + "/") else { return false }
        let relative = topic.dropFirst(base.count + 1)
        if relative.hasPrefix("$gateway/") {
            let op = relative.dropFirst("$gateway/request/".count)
            if relative.hasPrefix("$gateway/request/"), coreHomeListNames.contains(String(op)) {
                return role == .administrator && ownsEveryHome
            }
            return role == .administrator
        }
        switch role {
        case .administrator, .member:
            return true
        case .guest:
            if relative.hasSuffix("/get") { return true }
            let kind = relative.split(separator: "/").last ?? ""
            guard ["set", "$set", "$toggle"].contains(kind) else { return false }
            return guestControl.contains { relative.hasPrefix($0 + "/") }
        }
    }

    /// The mosquitto ACL file (`acl_file`) for `users` in `homes`: a `user` block for the
    /// gateway's own broker user (every topic it publishes: each home's base, and
    /// `gatewayPrefixes` such as Home Assistant's discovery prefix), then one per user with
    /// `topic` lines for each home where the user has a role.
    /// `operations`: those the gateway answers; their declared `access` picks what is denied.
    public static func mosquittoACL(
        users: [AccessUser], homes: [Home], gatewayBase: String, gatewayUser: String?, gatewayPrefixes: [String],
        source: String, operations: [any ManagementOperation.Type] = ManagementOperations.core
    ) -> String {
        var lines = [
            "# The mosquitto ACL file for HomeMQTT, written by `homemqtt access acl` from",
            "# \(source). Do not edit it: change `access:` or the homes, write it again,",
            "# and tell mosquitto to read it again (SIGHUP, or `systemctl reload mosquitto`).",
            "# Clients not named here (anonymous ones included) may use none of these topics.",
        ]
        let bases = homes.map { $0.baseTopic ?? gatewayBase }
        if let gatewayUser {
            lines += ["", "# the gateway itself", "user \(gatewayUser)"]
            lines += (bases + gatewayPrefixes).map { "topic readwrite \($0)/#" }
        }
        for user in users {
            lines += ["", "user \(user.name)"]
            let ownsEveryHome = homes.allSatisfy { user.role(in: $0, gatewayBase: gatewayBase) == .administrator }
            if !ownsEveryHome, homes.contains(where: { user.role(in: $0, gatewayBase: gatewayBase) == .administrator })
            {
                // An administrator of some homes only: the operations on the list of homes are
                // answered on the gateway's base topic, and changing homes there is not theirs.
                lines.append("# not an administrator of every home: no changes to the list of homes")
                lines += homeListNames(operations).map { "topic deny \(gatewayBase)/$gateway/request/\($0)" }
            }
            for home in homes {
                guard let role = user.role(in: home, gatewayBase: gatewayBase) else { continue }
                let base = home.baseTopic ?? gatewayBase
                lines.append("# \(home.name): \(role.rawValue)")
                switch role {
                case .administrator:
                    lines.append("topic readwrite \(base)/#")
                case .member:
                    lines += [
                        "topic read \(base)/#", "topic write \(base)/+/+/+/+/set", "topic write \(base)/+/+/+/+/get",
                        "topic write \(base)/+/+/$set", "topic write \(base)/+/+/$identify",
                        "topic write \(base)/+/+/+/$toggle",
                    ]
                case .guest:
                    lines += ["topic read \(base)/#", "topic write \(base)/+/+/+/+/get"]
                    for allowed in user.guestControl {
                        // An accessory is two levels under the base, a service three.
                        let depth = allowed.split(separator: "/").count
                        if depth == 2 {
                            lines += [
                                "topic write \(base)/\(allowed)/+/+/set", "topic write \(base)/\(allowed)/$set",
                                "topic write \(base)/\(allowed)/+/$toggle",
                            ]
                        } else if depth == 3 {
                            lines += ["topic write \(base)/\(allowed)/+/set", "topic write \(base)/\(allowed)/$toggle"]
                        } else {
                            lines.append("topic write \(base)/\(allowed)/set")
                        }
                    }
                }
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }
}
