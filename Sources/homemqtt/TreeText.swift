import Gateway
import HomeModel

/// Text forms of the scoped tree for the terminal.
enum TreeText {
    enum Grouping { case room, category }

    static func render(_ inspection: Inspection, by grouping: Grouping) -> String {
        let tree = inspection.tree
        var groups: [(String, [TopicTree.AccessoryNode])] = []
        switch grouping {
        case .room:
            for room in tree.rooms {
                groups.append((room.room.name, room.accessoryIDs.compactMap(tree.accessory(id:))))
            }
        case .category:
            var byCategory: [String: [TopicTree.AccessoryNode]] = [:]
            for node in tree.accessories {
                byCategory[Catalog.categories[node.accessory.category] ?? "other", default: []].append(node)
            }
            groups = byCategory.sorted { $0.key < $1.key }.map {
                ($0.key, $0.value.sorted { $0.displayName < $1.displayName })
            }
        }
        // Names, manufacturers, models and string values may be a HAP accessory's words: each
        // line has its control characters escaped (`shown`), so none reaches the terminal raw.
        var out = shown("\(inspection.home.name) (\(tree.base))")
        for (title, nodes) in groups {
            out += shown(title)
            if nodes.isEmpty { out += "  (no accessories)\n" }
            for node in nodes {
                let a = node.accessory
                let where_ = grouping == .category ? ", \(node.room.name)" : ""
                out += shown(
                    "  \(node.displayName) — \(a.manufacturer) \(a.model)\(where_)\(a.isReachable ? "" : " [unreachable]")  \(node.topic)"
                )
                for service in node.services {
                    out += shown("    \(service.displayName) [\(service.typeName)]")
                    for c in service.characteristics {
                        let permissions = c.characteristic.metadata.permissions
                        let access =
                            (permissions.contains(.read) ? "r" : "-")
                            + (permissions.contains(.write) && !c.isReadOnlyScope ? "w" : "-")
                            + (permissions.contains(.notify) ? "n" : "-")
                        let value =
                            service.describedValue(of: c).map {
                                ValueCodec.text($0, metadata: c.characteristic.metadata)
                            }
                            ?? "—"
                        out += shown("      \(c.slug) = \(value) (\(access))")
                    }
                }
            }
        }
        return out
    }

    /// One line of text for the terminal, its control characters escaped.
    static func shown(_ line: String) -> String { line.escapingControlCharacters + "\n" }

    static func json(_ inspection: Inspection) -> String {
        GatewayDocuments.tree(inspection.tree, home: inspection.home).encoded(pretty: true)
    }

    static func topics(_ inspection: Inspection) -> String {
        let tree = inspection.tree
        let base = tree.base
        var out =
            "pub \(base)/$gateway/status\npub \(base)/$gateway/tree\npub \(base)/$gateway/event\npub \(base)/$gateway/error\n"
        out += "sub \(base)/$gateway/request/<op>\npub \(base)/$gateway/response/<op>\n"
        for node in tree.accessories {
            out += "pub \(node.topic)/$info\npub \(node.topic)/$availability\nsub \(node.topic)/$identify\n"
            for service in node.services {
                if GatewayDocuments.toggleable(service) {
                    out += "sub \(service.topic)/$toggle\npub \(service.topic)/$result\n"
                }
                for c in service.characteristics {
                    let permissions = c.characteristic.metadata.permissions
                    out += "pub \(c.topic)/meta\n"
                    if permissions.contains(.read) || permissions.contains(.notify) { out += "pub \(c.topic)/state\n" }
                    if permissions.contains(.write) && !c.isReadOnlyScope { out += "sub \(c.topic)/set\n" }
                    if permissions.contains(.read) { out += "sub \(c.topic)/get\n" }
                    out += "pub \(c.topic)/result\n"
                }
            }
        }
        return out
    }
}
