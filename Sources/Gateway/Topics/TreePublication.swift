import HomeModel

// The tree document in the form that fits the broker's maximum packet size: whole, or in
// pages under `<base>/$gateway/tree/<n>` with an index at `<base>/$gateway/tree`.

/// How the tree goes onto the broker.
///
/// Whole when its packet fits. Otherwise in pages: the rooms of the whole document, in the
/// same order, split between pages `1…n` at accessory boundaries (a room too big for one page
/// continues on the next with its `id` again), each page `{"base", "home", "of": n, "page": k,
/// "rooms": [...]}`; every accessory entry is the whole document's, with its `topic`, `info`
/// and `availability`. An accessory too large for one page continues on the next with its
/// `id` again and the rest of its services, each part after the first marked
/// `"continued": true`. The index on the tree topic says `"paged": true` and lists the pages'
/// topics in order, how many accessories they hold, the `suffixes`, and under `omitted` any
/// accessory one of whose services alone does not fit a page. An index that does not fit either is
/// `nil`: the tree topic is then cleared rather than left holding an older tree.
enum TreePublication {
    case whole([UInt8])
    case paged(Pages)

    /// The pages as laid out: their topics, and each page's payload made when it is asked for
    /// (`payload(_:)`), so that a large home's pages are never all in memory at once — the
    /// caller publishes one and lets it go before making the next.
    struct Pages {
        var index: [UInt8]?
        var topics: [String]
        var omitted: [TopicTree.AccessoryNode]
        var accessories: Int
        fileprivate var layout: [[RoomPart]]
        /// Each page's length as counted (never less than its bytes): a page is made in a buffer
        /// of that size, not grown by doubling and copying.
        fileprivate var lengths: [Int]
        fileprivate var tree: TopicTree
        fileprivate var home: Home

        /// Page `number` (0-based) of `topics`, as it goes onto the broker.
        func payload(_ number: Int) -> [UInt8] {
            TreePublication.page(
                layout[number], number: number + 1, of: layout.count, length: lengths[number], tree: tree, home: home)
        }
    }

    /// `budget(topic)`: the largest payload a retained tree publication on `topic` may have.
    static func make(_ tree: TopicTree, home: Home, treeTopic: String, budget: (String) -> Int) -> TreePublication {
        let limit = budget(treeTopic)
        if limit == .max { return .whole(Payloads.treeBytes(tree, home: home)) }
        var counter = JSONTextWriter(countOnly: true)
        Payloads.writeTree(&counter, tree, home: home)
        guard counter.length <= limit else {
            return .paged(pages(tree, home: home, treeTopic: treeTopic, budget: budget))
        }
        var writer = JSONTextWriter(countOnly: false)
        writer.out.reserveCapacity(counter.length)
        Payloads.writeTree(&writer, tree, home: home)
        return .whole(writer.out)
    }

    /// The part of one room on one page: its accessory entries, each an accessory's id and the
    /// range of its services the entry holds (nil: all of them).
    fileprivate struct RoomPart {
        var room: TopicTree.RoomNode
        var accessories: [(id: String, services: Range<Int>?)] = []
    }

    /// Lays pages out in tree order, an accessory at a time, counting sizes only: the bytes of
    /// a page are made when it is published (`Pages.payload`). Sizes are counted with the
    /// longest page number there can be and a comma for every element, so a page never comes
    /// out larger than counted.
    static func pages(_ tree: TopicTree, home: Home, treeTopic: String, budget: (String) -> Int) -> Pages {
        let limit = budget(treeTopic + "/9999999")
        let frame = pageFrameLength(tree.base, home: home)
        var pages: [[RoomPart]] = []
        var lengths: [Int] = []
        var current: [RoomPart] = []
        var size = frame
        var omitted: [TopicTree.AccessoryNode] = []
        var count = 0
        func flush() {
            guard !current.isEmpty else { return }
            pages.append(current)
            lengths.append(size)
            current = []
            size = frame
        }
        for room in tree.rooms {
            let wrapper = roomWrapperLength(room, home: home) + 1
            let nodes = room.accessoryIDs.compactMap { tree.accessory(id: $0) }
            var opened = false
            if nodes.isEmpty {
                if size + wrapper > limit { flush() }
                current.append(RoomPart(room: room))
                size += wrapper
                continue
            }
            for node in nodes {
                let whole = entryLength(node, services: nil)
                var entries: [(services: Range<Int>?, length: Int)] = [(nil, whole)]
                if frame + wrapper + whole + 1 > limit {
                    guard let parts = parts(of: node, room: limit - frame - wrapper - 1) else {
                        omitted.append(node)
                        continue
                    }
                    entries = parts
                }
                for entry in entries {
                    if size + entry.length + 1 + (opened ? 0 : wrapper) > limit {
                        flush()
                        opened = false
                    }
                    if !opened {
                        current.append(RoomPart(room: room))
                        size += wrapper
                        opened = true
                    }
                    current[current.count - 1].accessories.append((node.id, entry.services))
                    size += entry.length + 1
                }
                count += 1
            }
        }
        flush()
        let topics = pages.indices.map { "\(treeTopic)/\($0 + 1)" }
        let index = indexBytes(base: tree.base, home: home, topics: topics, accessories: count, omitted: omitted)
        return Pages(
            index: index.count <= budget(treeTopic) ? index : nil, topics: topics, omitted: omitted,
            accessories: count, layout: pages, lengths: lengths, tree: tree, home: home)
    }

    /// The length of an accessory's entry (of `services` only, when given), counted.
    private static func entryLength(_ node: TopicTree.AccessoryNode, services: Range<Int>?) -> Int {
        var writer = JSONTextWriter(countOnly: true)
        Payloads.writeAccessory(&writer, node, services: services)
        return writer.length
    }

    /// An accessory whose entry does not fit a page alone, as entries of as many of its
    /// services as fit `room` bytes each (the first whole, the others `continued`); nil when
    /// one service alone does not fit.
    private static func parts(of node: TopicTree.AccessoryNode, room: Int) -> [(services: Range<Int>?, length: Int)]? {
        var parts: [(services: Range<Int>?, length: Int)] = []
        var start = 0
        while start < node.services.count {
            var end = start + 1
            var best = entryLength(node, services: start..<end)
            guard best <= room else { return nil }
            while end < node.services.count {
                let longer = entryLength(node, services: start..<(end + 1))
                guard longer <= room else { break }
                best = longer
                end += 1
            }
            parts.append((start..<end, best))
            start = end
        }
        return parts
    }

    private static func pageFrame(_ w: inout JSONTextWriter, base: String, home: Home, number: Int, of total: Int) {
        w.open()
        w.key("base"); w.string(base)
        w.key("home"); w.string(home.name)
        w.key("of"); w.int(total)
        w.key("page"); w.int(number)
        w.key("rooms"); w.openArray()
    }

    private static func pageFrameLength(_ base: String, home: Home) -> Int {
        var w = JSONTextWriter(countOnly: true)
        pageFrame(&w, base: base, home: home, number: 9_999_999, of: 9_999_999)
        w.closeArray()
        w.close()
        return w.length
    }

    private static func roomWrapperLength(_ room: TopicTree.RoomNode, home: Home) -> Int {
        var w = JSONTextWriter(countOnly: true)
        w.open()
        w.key("accessories"); w.openArray(); w.closeArray()
        Payloads.writeRoomFields(&w, room, home: home)
        w.close()
        return w.length
    }

    fileprivate static func page(
        _ parts: [RoomPart], number: Int, of total: Int, length: Int, tree: TopicTree, home: Home
    ) -> [UInt8] {
        var w = JSONTextWriter(countOnly: false)
        w.out.reserveCapacity(length)
        pageFrame(&w, base: tree.base, home: home, number: number, of: total)
        for part in parts {
            w.element(); w.open()
            w.key("accessories"); w.openArray()
            for entry in part.accessories {
                guard let node = tree.accessory(id: entry.id) else { continue }
                w.element()
                Payloads.writeAccessory(&w, node, services: entry.services)
            }
            w.closeArray()
            Payloads.writeRoomFields(&w, part.room, home: home)
            w.close()
        }
        w.closeArray()
        w.close()
        assert(w.out.count <= length, "page \(number) is \(w.out.count) bytes, counted \(length)")
        return w.out
    }

    private static func indexBytes(
        base: String, home: Home, topics: [String], accessories: Int, omitted: [TopicTree.AccessoryNode]
    ) -> [UInt8] {
        var w = JSONTextWriter(countOnly: false)
        w.open()
        w.key("accessories"); w.int(accessories)
        w.key("base"); w.string(base)
        w.key("home"); w.string(home.name)
        if !omitted.isEmpty {
            w.key("omitted"); w.openArray()
            for node in omitted {
                w.element(); w.open()
                w.key("availability"); w.string(node.topic + "/$availability")
                w.key("id"); w.string(node.id)
                w.key("info"); w.string(node.topic + "/$info")
                w.key("name"); w.string(node.displayName)
                w.key("topic"); w.string(node.topic)
                w.close()
            }
            w.closeArray()
        }
        w.key("paged"); w.bool(true)
        w.key("pages"); w.openArray()
        for topic in topics {
            w.element(); w.string(topic)
        }
        w.closeArray()
        Payloads.writeSuffixes(&w)
        w.close()
        return w.out
    }
}
