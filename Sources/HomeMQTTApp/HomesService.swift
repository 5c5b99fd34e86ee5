import Foundation
public import Gateway
public import HomeModel
public import Logging
public import ServiceLifecycle

/// Serves every home beside the one on the gateway's base topic: a gateway of its own for each
/// (its own connection, base topic and last will), started when the home is added, retired —
/// its topics cleared — when the home is removed or its base topic moves. The homes' gateways
/// share the source, which runs beside the first home's gateway.
public final class HomesService: Service {
    /// One home's gateway, its services (its client, the gateway, its outputs on connections of
    /// their own; the source's is left out), and what lets go of the source's notifications
    /// it held once it stops serving.
    public struct Made: Sendable {
        var gateway: Gateway
        var services: [ServiceGroupConfiguration.ServiceConfiguration]
        var release: @Sendable () async -> Void
    }

    public typealias Make = @Sendable (Home) throws(ConfigError) -> Made

    let database: HomeDatabase
    let logger: Logger
    let make: Make

    init(database: HomeDatabase, logger: Logger, make: @escaping Make) {
        self.database = database
        self.logger = logger
        self.make = make
    }

    /// A home being served: its gateway, the group its services run in, and what finishes when
    /// that group has ended (its connection closed).
    struct Served: Sendable {
        let made: Made
        let group: ServiceGroup
        let ended: AsyncStream<Void>
    }

    public func run() async throws {
        // Subscribed first, so that a home added while the others start is not missed.
        let events = database.events()
        await withDiscardingTaskGroup { tasks in
            var served: [String: Served] = [:]
            func start(_ home: Home) {
                guard home.baseTopic != nil, served[home.id] == nil else { return }
                do throws(ConfigError) {
                    let made = try make(home)
                    // The source is not among them: the first home's group runs it.
                    let services = made.services.filter { !($0.service is any AccessorySource) }
                    let group = ServiceGroup(
                        configuration: ServiceGroupConfiguration(
                            services: services, gracefulShutdownSignals: [], logger: logger))
                    let (ended, end) = AsyncStream<Void>.makeStream()
                    served[home.id] = Served(made: made, group: group, ended: ended)
                    logger.info(
                        "serving a home", metadata: ["home": "\(home.name)", "base": "\(home.baseTopic ?? "")"])
                    tasks.addTask {
                        defer { end.finish() }
                        do {
                            try await group.run()
                        } catch {
                            self.logger.error(
                                "a home's gateway stopped", metadata: ["home": "\(home.name)", "error": "\(error)"])
                        }
                    }
                } catch {
                    logger.error("cannot serve a home", metadata: ["home": "\(home.name)", "error": "\(error)"])
                }
            }
            // Waits for the retired gateway's connection to close: a home whose base topic moved
            // is served again under the same client id, and a broker lets one session per id. A
            // new connection that came first would take over the old one before it had sent its
            // clears (they would stay on the broker, and its last will said `offline` after them).
            func retire(_ id: String) async {
                guard let home = served.removeValue(forKey: id) else { return }
                await home.made.gateway.retire()
                await home.made.release()
                await home.group.triggerGracefulShutdown()
                for await _ in home.ended {}
            }

            for home in database.homesNow { start(home) }
            for await event in events.cancelOnGracefulShutdown() {
                guard case .homes(let change) = event else { continue }
                switch change {
                case .added(let home):
                    start(home)
                case .removed(let home):
                    await retire(home.id)
                case .baseTopicChanged(let home, _):
                    await retire(home.id)
                    start(home)
                case .renamed, .primaryChanged:
                    break
                }
            }
            for home in served.values { await home.group.triggerGracefulShutdown() }
        }
    }
}
