// What the management operations change on the running gateway, through its `Editor`
// (`Requests/GatewayEditor.swift`).
public import HomeModel

extension Gateway {
    /// The home this gateway serves, as the database has it now.
    public func servedHome() async -> Home {
        await database.home
    }

    /// Every home of the database.
    public func allHomes() async -> [Home] {
        await database.homes
    }

    /// The database's event reaches `handle(homeEvent:)` too; refreshing here makes the topics
    /// current before the response is sent. Whichever rebuild sees the change first announces
    /// it (the tree diff), the other finds nothing left to announce.
    func homeChanged() async {
        await refreshHome()
        rebuild(announce: true)
    }

    func leaving(_ accessoryID: String) {
        served.markRemoved(accessoryID)
    }

    /// The database kept an accessory it was asked to remove: back into the tree.
    func stayed(_ accessoryID: String) {
        served.unmarkRemoved(accessoryID)
        rebuild(announce: true)
    }

    func paired(accessoryIDs: [String]) async {
        for id in accessoryIDs where served.unmarkRemoved(id) {
            do {
                try await database.restoreAccessory(id: id)
            } catch {
                // Shown now; the home database lists it as removed again at the next start.
                logger.warning(
                    "could not save that a paired accessory is back",
                    metadata: ["accessory": "\(id)", "error": "\(error.message)"])
            }
        }
        rebuild(announce: true)
    }

    func republish() -> Int {
        enqueue(.all)
        return retainedCount
    }

    func replaceScope(_ newScope: ScopeConfig, filter: ScopeFilter) throws(GatewayFailure) {
        if let scopeStore {
            do throws(ModelError) {
                try scopeStore.save(newScope)
            } catch {
                Editor.logStorageFailure(error, saving: "the scope", logger: logger)
                throw GatewayFailure(code: .io, message: "cannot save the scope: \(error.message)")
            }
        }
        served.setScope(filter)
        rebuild(announce: true)
        event(.scopeChanged, fields: [:])
    }
}
