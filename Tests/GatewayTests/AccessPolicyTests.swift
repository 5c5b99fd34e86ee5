import Foundation
import Gateway
import HomeMQTTApp
import HomeModel
import TestSupport
import XCTest

/// `access:` read strictly, the one rule of who may publish what, and the ACL file made of it.
final class AccessPolicyTests: XCTestCase {
    func testEachRoleMayPublishWhatItsRoleAllows() {
        let light = "home/hallway/lamp/lightbulb/on/set"
        let lock = "home/hallway/lock/lock/target/set"
        func may(_ role: HomeRole, _ topic: String, ownsEveryHome: Bool = false) -> Bool {
            AccessPolicy.mayPublish(
                topic, base: "home", role: role, guestControl: ["hallway/lamp"], ownsEveryHome: ownsEveryHome)
        }
        // The list of homes: an administrator of every home only.
        XCTAssertFalse(may(.administrator, "home/$gateway/request/home/add"))
        XCTAssertFalse(may(.administrator, "home/$gateway/request/accessory/home"))
        XCTAssertTrue(may(.administrator, "home/$gateway/request/source/home", ownsEveryHome: true))
        XCTAssertFalse(may(.member, "home/$gateway/request/home/add", ownsEveryHome: true))
        XCTAssertTrue(may(.administrator, "home/$gateway/request/homes"))
        XCTAssertTrue(may(.administrator, "home/$gateway/request/room/add"))
        XCTAssertFalse(may(.member, "home/$gateway/request/room/add"))
        XCTAssertTrue(may(.member, lock))
        XCTAssertTrue(may(.guest, light))
        XCTAssertFalse(may(.guest, lock))
        XCTAssertTrue(may(.guest, "home/hallway/lock/lock/target/get"))
        XCTAssertFalse(may(.guest, "home/hallway/lamp-2/lightbulb/on/set"), "a prefix of a name is not the accessory")
        XCTAssertFalse(may(.administrator, "other/hallway/lamp/lightbulb/on/set"))
        XCTAssertTrue(may(.guest, "home/hallway/lamp/lightbulb/$toggle"))
        XCTAssertFalse(may(.guest, "home/hallway/lamp/$identify"))
        XCTAssertTrue(may(.member, "home/hallway/lock/$identify"))
    }

    func testTheACLFileGivesEachUserTheirRoleInEachHome() {
        let first = Home(name: "My Home")
        let cabin = Home(name: "Cabin", baseTopic: "home-cabin")
        let users = [
            AccessUser(name: "alice", roles: ["*": .administrator]),
            AccessUser(name: "bob", roles: ["my home": .member]),
            AccessUser(name: "gus", roles: ["home-cabin": .guest], guestControl: ["porch/lamp"]),
            AccessUser(name: "carol", roles: ["my home": .administrator, "cabin": .member]),
        ]
        let text = AccessPolicy.mosquittoACL(
            users: users, homes: [first, cabin], gatewayBase: "home", gatewayUser: "gw",
            gatewayPrefixes: ["homeassistant"], source: "test")
        let blocks = text.components(separatedBy: "\n\n")
        XCTAssertEqual(
            blocks[1],
            "# the gateway itself\nuser gw\ntopic readwrite home/#\ntopic readwrite home-cabin/#\ntopic readwrite homeassistant/#"
        )
        XCTAssertEqual(
            blocks[2],
            "user alice\n# My Home: administrator\ntopic readwrite home/#\n# Cabin: administrator\ntopic readwrite home-cabin/#"
        )
        XCTAssertTrue(
            blocks[3].hasPrefix("user bob\n# My Home: member\ntopic read home/#\ntopic write home/+/+/+/+/set"))
        XCTAssertFalse(blocks[3].contains("home-cabin"), "bob has no role in the cabin")
        XCTAssertTrue(
            blocks[5].hasPrefix(
                "user carol\n# not an administrator of every home: no changes to the list of homes\ntopic deny home/$gateway/request/home/add\n"
            ), blocks[5])
        XCTAssertTrue(
            blocks[5].contains(
                "topic deny home/$gateway/request/source/home\n# My Home: administrator\ntopic readwrite home/#"))
        XCTAssertEqual(
            blocks[4] + "\n",
            "user gus\n# Cabin: guest\ntopic read home-cabin/#\ntopic write home-cabin/+/+/+/+/get\ntopic write home-cabin/porch/lamp/+/+/set\ntopic write home-cabin/porch/lamp/$set\ntopic write home-cabin/porch/lamp/+/$toggle\n"
        )
    }

    /// The operations on the list of homes are those that declare `access: .homeList`; the
    /// ACL file denies each of them by name to an administrator of some homes, in the list's
    /// order, as it did when they were a list of names (the lines below are that file's).
    func testTheACLFileDeniesEveryOperationThatDeclaresTheListOfHomes() {
        let declared = ManagementOperations.core.filter { $0.access == .homeList }.map { $0.name }
        XCTAssertEqual(
            declared,
            [
                "home/add", "home/rename", "home/remove", "home/primary", "home/base-topic", "accessory/home",
                "source/home",
            ])
        XCTAssertEqual(AccessPolicy.homeListNames(), declared)
        // A source's operations declare theirs too (HAP's act on one home).
        XCTAssertEqual(AccessPolicy.homeListNames(HomeMQTTApp.sourceOperations), [])

        let text = AccessPolicy.mosquittoACL(
            users: [AccessUser(name: "carol", roles: ["my home": .administrator])],
            homes: [Home(name: "My Home"), Home(name: "Cabin", baseTopic: "home-cabin")], gatewayBase: "home",
            gatewayUser: nil, gatewayPrefixes: [], source: "test")
        let carol = text.components(separatedBy: "\n\n")[1]
        XCTAssertEqual(
            carol,
            """
            user carol
            # not an administrator of every home: no changes to the list of homes
            topic deny home/$gateway/request/home/add
            topic deny home/$gateway/request/home/rename
            topic deny home/$gateway/request/home/remove
            topic deny home/$gateway/request/home/primary
            topic deny home/$gateway/request/home/base-topic
            topic deny home/$gateway/request/accessory/home
            topic deny home/$gateway/request/source/home
            # My Home: administrator
            topic readwrite home/#

            """)
        for name in declared {
            XCTAssertTrue(carol.contains("topic deny home/$gateway/request/\(name)\n"), name)
        }
    }

    func testAccessIsReadStrictlyAndKeepsOnlyTheTokensHash() throws {
        let hash = AccessConfig.hex(AccessConfig.sha256("s3cret"))
        let config = try HomeMQTTApp.parseConfig(
            """
            access:
              users:
                - name: alice
                  token-sha256: \(hash)
                  roles: { "*": administrator, Cabin: guest }
            """, file: "gw.yml")
        let access = config[AccessConfig.self]
        XCTAssertEqual(access.users.first?.roles, ["*": .administrator, "cabin": .guest])
        XCTAssertEqual(access.user(presenting: "s3cret")?.name, "alice")
        XCTAssertNil(access.user(presenting: "s3cre"))
        XCTAssertFalse("\(access)".contains(hash))

        for (yaml, key) in [
            ("access: { users: [ { name: a, roles: { x: owner } } ] }", "access.users[0].roles"),
            (
                "access: { users: [ { name: a, roles: { x: guest }, token-sha256: abc } ] }",
                "access.users[0].token-sha256"
            ),
            ("access: { users: [ { name: a } ] }", "access.users[0].roles"),
            (
                "access: { users: [ { name: a, roles: { x: guest }, guest-control: [hallway] } ] }",
                "access.users[0].guest-control"
            ),
            ("access: { users: [ { name: a, roles: { x: guest }, colour: red } ] }", "access.users[0].colour"),
            (
                "access: { users: [ { name: a, roles: { x: guest } }, { name: a, roles: { x: guest } } ] }",
                "access.users[1].name"
            ),
        ] {
            XCTAssertThrowsError(try HomeMQTTApp.parseConfig(yaml, file: "gw.yml"), yaml) { error in
                XCTAssertEqual((error as? ConfigError)?.key, key, "\(yaml): \(error)")
            }
        }
    }
}
