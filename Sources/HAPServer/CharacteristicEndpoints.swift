import HomeModel

// `/accessories`, `/characteristics` (GET and PUT) and `/prepare` for a verified session.

extension HAPServerConnection {
    func accessories() async -> HAPResponse {
        let database = context.database
        guard let tree = await withDeadline(context.databaseTimeout, on: eventLoop, { await database.accessories() })
        else {
            return .status(500, .timedOut)
        }
        context.index.withLock { $0 = CharacteristicIndex(tree) }
        return .json(200, AccessoryDocument.json(tree).encodedUTF8())
    }

    /// `GET /characteristics?id=1.10,2.10&meta=1&perms=1&type=1&ev=1`
    func readCharacteristics(_ request: HAPRequest) async -> HAPResponse {
        guard let idList = request.queryValue("id"), let ids = Self.parseIDs(idList) else {
            return .status(400, .invalidValue)
        }
        let flag = { (name: String) in ["1", "true"].contains(request.queryValue(name) ?? "") }
        let index = context.index.withLock { $0 }
        var statuses: [HAPCharacteristicID: HAPStatus] = [:]
        var toRead: [HAPCharacteristicID] = []
        for id in ids where statuses[id] == nil && !toRead.contains(id) {
            guard let c = index[id] else {
                statuses[id] = .doesNotExist
                continue
            }
            guard c.permissions.contains(.read) else {
                statuses[id] = .writeOnly
                continue
            }
            toRead.append(id)
        }
        // What the database keeps current is answered at once: no task, no deadline, no wait.
        var values = toRead.isEmpty ? [:] : context.database.valuesAtHand(toRead)
        if values.count < toRead.count {
            let database = context.database
            let who = requestContext
            let pending = toRead.filter { values[$0] == nil }
            let answers = await withDeadline(context.databaseTimeout, on: eventLoop) {
                await database.read(pending, context: who)
            }
            for id in pending {
                switch answers?[id] {
                case .success(let value)?: values[id] = value
                case .failure(let status)?: statuses[id] = status
                case nil: statuses[id] = answers == nil ? .timedOut : .communicationFailure
                }
            }
        }
        let failed = !statuses.isEmpty
        if !["meta", "perms", "type", "ev"].contains(where: flag) {
            return .json(failed ? 207 : 200, Self.plainRows(ids, values: values, statuses: failed ? statuses : nil))
        }
        var seen: Set<HAPCharacteristicID> = []
        var rows: [JSONValue] = []
        for id in ids where seen.insert(id).inserted {
            var row: [String: JSONValue] = ["aid": .int(Int64(id.aid)), "iid": .int(Int64(id.iid))]
            if let value = values[id] { row["value"] = value }
            if failed { row["status"] = .int(Int64(statuses[id]?.rawValue ?? 0)) }
            if let c = index[id] {
                if flag("meta") { row.merge(AccessoryDocument.meta(c)) { $1 } }
                if flag("perms") { row["perms"] = .array(c.permissions.names.map(JSONValue.string)) }
                if flag("type") { row["type"] = .string(c.type) }
                if flag("ev") { row["ev"] = .bool(context.registry.isSubscribed(self.id, to: id)) }
            }
            rows.append(.object(row))
        }
        return .json(failed ? 207 : 200, JSONValue.object(["characteristics": .array(rows)]).encodedUTF8())
    }

    /// The body of a read that asked for values only (what controllers poll with): the bytes the
    /// `JSONValue` document of the same rows encodes to (keys sorted: aid, iid, status, value),
    /// written without building that document and its dictionaries per request.
    static func plainRows(
        _ ids: [HAPCharacteristicID], values: [HAPCharacteristicID: JSONValue],
        statuses: [HAPCharacteristicID: HAPStatus]?
    ) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(32 + 40 * ids.count)
        out.append(contentsOf: #"{"characteristics":["#.utf8)
        var seen: Set<HAPCharacteristicID> = []
        for id in ids where seen.insert(id).inserted {
            if seen.count > 1 { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: #"{"aid":"#.utf8)
            out.append(contentsOf: String(id.aid).utf8)
            out.append(contentsOf: #","iid":"#.utf8)
            out.append(contentsOf: String(id.iid).utf8)
            if let statuses {
                out.append(contentsOf: #","status":"#.utf8)
                out.append(contentsOf: String(statuses[id]?.rawValue ?? 0).utf8)
            }
            if let value = values[id] {
                out.append(contentsOf: #","value":"#.utf8)
                out.append(contentsOf: value.encodedUTF8())
            }
            out.append(UInt8(ascii: "}"))
        }
        out.append(contentsOf: "]}".utf8)
        return out
    }

    /// `1.10,2.10` → ids; nil if any part is malformed.
    static func parseIDs(_ list: String) -> [HAPCharacteristicID]? {
        var ids: [HAPCharacteristicID] = []
        // As bytes: `aid.iid` pairs are ASCII, and splitting characters cost more than the read.
        func number(_ bytes: ArraySlice<UInt8>) -> Int? { Int(String(decoding: bytes, as: UTF8.self)) }
        for part in Array(list.utf8).split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false) {
            let numbers = part.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
            guard numbers.count == 2, let aid = number(numbers[0]), let iid = number(numbers[1]), aid > 0, iid > 0
            else { return nil }
            ids.append(HAPCharacteristicID(aid: aid, iid: iid))
        }
        return ids.isEmpty ? nil : ids
    }

    /// `PUT /characteristics` with `{"characteristics": [{aid, iid, value?, ev?, r?}], "pid"?}`.
    func writeCharacteristics(_ request: HAPRequest) async -> HAPResponse {
        guard let body = try? JSONValue(parsing: request.body), let items = body["characteristics"]?.arrayValue else {
            return .status(400, .invalidValue)
        }
        // A timed write names the `/prepare` it follows; it counts once, if it has not expired.
        var timedWriteValid = false
        if let pid = body["pid"] {
            if let p = prepared, pid.uint64Value == p.pid, ContinuousClock.now <= p.expires { timedWriteValid = true }
            prepared = nil
        }
        let hasPID = body["pid"] != nil
        let index = context.index.withLock { $0 }
        var order: [HAPCharacteristicID] = []
        var statuses: [HAPCharacteristicID: HAPStatus] = [:]
        var writes: [HAPWrite] = []
        for item in items {
            guard let aid = item["aid"]?.intValue, let iid = item["iid"]?.intValue else {
                return .status(400, .invalidValue)
            }
            let id = HAPCharacteristicID(aid: aid, iid: iid)
            order.append(id)
            guard let c = index[id] else {
                statuses[id] = .doesNotExist
                continue
            }
            if let ev = item["ev"] {
                guard let on = ev.boolValue ?? ev.intValue.map({ $0 != 0 }) else {
                    statuses[id] = .invalidValue
                    continue
                }
                guard c.permissions.contains(.events) else {
                    statuses[id] = .notificationNotSupported
                    continue
                }
                context.registry.subscribe(self.id, to: id, on)
            }
            guard let value = item["value"] else { continue }
            guard c.permissions.contains(.write) else {
                statuses[id] = .readOnly
                continue
            }
            if (c.permissions.contains(.timedWrite) || hasPID) && !timedWriteValid {
                statuses[id] = .invalidValue
                continue
            }
            switch ValueCheck.check(value, for: c) {
            case .failure(let status): statuses[id] = status
            case .success(let checked):
                let wantsResponse = (item["r"]?.boolValue ?? false) && c.permissions.contains(.writeResponse)
                writes.append(HAPWrite(id: id, value: checked, wantsResponse: wantsResponse))
            }
        }
        var returned: [HAPCharacteristicID: JSONValue] = [:]
        if !writes.isEmpty {
            let database = context.database
            let who = requestContext
            let pending = writes
            let answers = await withDeadline(context.databaseTimeout, on: eventLoop) {
                await database.write(pending, context: who)
            }
            for write in writes {
                switch answers?[write.id] {
                case .success(let value)?:
                    if write.wantsResponse, let value { returned[write.id] = value }
                case .failure(let status)?: statuses[write.id] = status
                case nil: statuses[write.id] = answers == nil ? .timedOut : .communicationFailure
                }
            }
        }
        if statuses.isEmpty && returned.isEmpty { return .noContent }
        var seen: Set<HAPCharacteristicID> = []
        let rows: [JSONValue] = order.filter { seen.insert($0).inserted }.map { id in
            var row: [String: JSONValue] = [
                "aid": .int(Int64(id.aid)), "iid": .int(Int64(id.iid)),
                "status": .int(Int64(statuses[id]?.rawValue ?? 0)),
            ]
            if let value = returned[id] { row["value"] = value }
            return .object(row)
        }
        return .json(207, JSONValue.object(["characteristics": .array(rows)]).encodedUTF8())
    }

    /// `PUT /prepare` with `{"ttl": ms, "pid": n}`: the next write naming `pid` within `ttl`.
    func prepare(_ request: HAPRequest) -> HAPResponse {
        guard let body = try? JSONValue(parsing: request.body), let ttl = body["ttl"]?.intValue, ttl > 0,
            let pid = body["pid"]?.uint64Value
        else { return .json(400, Array("{\"status\":\(HAPStatus.invalidValue.rawValue)}".utf8)) }
        prepared = (pid, ContinuousClock.now.advanced(by: .milliseconds(ttl)))
        return .json(200, Array("{\"status\":0}".utf8))
    }
}
