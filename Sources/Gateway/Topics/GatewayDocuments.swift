public import HomeModel

/// The gateway's documents for other front ends (the CLI), built exactly as the gateway
/// publishes them.
public enum GatewayDocuments {
    public static func tree(_ tree: TopicTree, home: Home) -> JSONValue { Payloads.tree(tree, home: home) }
    public static func treeText(_ tree: TopicTree, home: Home) -> String { Payloads.treeText(tree, home: home) }
    public static func toggleable(_ service: TopicTree.ServiceNode) -> Bool {
        PrimaryControl.characteristic(in: service) != nil
    }
}
