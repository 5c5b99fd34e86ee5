import Foundation
import HomeModel
import MQTT
import ServiceLifecycle

/// A gateway's life: the start-up phases (load, wait for the broker, publish the tree,
/// `online`), serving, and `stop`, which publishes `offline` last.
extension Gateway {
    /// Loads the home, waits for the broker, publishes the tree, then serves until graceful
    /// shutdown or cancellation; either stops every phase at once, and `stop` ends in order.
    ///
    /// Serving — requests, workers, source events, outputs — prefers the gateway's thread
    /// (`GatewayThread`) as its task executor, so these tasks and the actors without an
    /// executor of their own they call (the simulator, the home database) take turns on it.
    /// The start-up stays on the shared pool: made on the gateway's thread, the first
    /// publication of 10,000 accessories peaked ~55 MB higher (homemqtt-bench scenario 3), and
    /// its speed was the same. While connected, the MQTT client's network thread runs that
    /// thread's work (`MQTTTransport.host`), so a request is answered where it was read.
    public func run() async throws {
        mqtt.host(parts.thread)
        defer { mqtt.host(nil) }
        // Subscribed before anything happens, so that nothing is missed meanwhile.
        let sourceEvents = source.events()
        let homeEvents = database.events()
        let messages = mqtt.messages()
        let states = mqtt.connectionStates()
        let learnedLimits = mqtt.learnedLimits()

        try await withThrowingDiscardingTaskGroup { group in
            group.addTask { await self.outbox.drain { await self.republish($0) } }
            group.addTask { await self.syncNotifications() }
            for index in 0..<WorkQueues.workerCount {
                let stream = work.workerStreams[index]
                group.addTask(executorPreference: parts.thread) { await self.runWorker(stream) }
            }
            group.addTask { await self.watchDeadlines() }

            var failure: (any Error)?
            do {
                try await cancelWhenGracefulShutdown {
                    // Messages are taken from the start: the look at the broker reads its
                    // retained topics from them, and requests that come before `online` wait.
                    try await withThrowingDiscardingTaskGroup { phases in
                        phases.addTask(executorPreference: self.parts.thread) {
                            await self.consume(messages: messages)
                        }
                        do {
                            try await self.start(connection: states)
                            try await withTaskExecutorPreference(self.parts.thread) {
                                try await self.serve(
                                    sourceEvents: sourceEvents, homeEvents: homeEvents, states: states,
                                    learnedLimits: learnedLimits)
                            }
                        } catch {
                            phases.cancelAll()
                            throw error
                        }
                        phases.cancelAll()
                    }
                }
            } catch is CancellationError {
            } catch {
                failure = error
            }
            await stop()
            group.cancelAll()
            if let failure { throw failure }
        }
    }

    /// The start-up phases, each logged: load the accessories, wait for the MQTT client to
    /// connect, subscribe, publish the whole tree, `online` last.
    func start(connection states: AsyncStream<MQTTConnectionState>) async throws {
        logger.info("loading accessories", metadata: ["source": "\(source.sourceName)"])
        // With several homes, each gateway serves its own home's accessories.
        let initial = await source.accessories().filter { database.serves(accessoryID: $0.id) }
        try Task.checkCancellation()
        try await database.adopt(initial)
        await refreshHome()
        for accessory in initial { remember(accessory) }
        rebuild(announce: false)
        if let currentHome {
            for warning in scope.unmatchedEntries(accessories: initial, home: currentHome) {
                logger.warning(
                    "scope entry matches nothing", metadata: ["entry": "\(warning)", "config": "\(config.file)"])
            }
        }
        logger.info(
            "home loaded",
            metadata: [
                "accessories": "\(initial.count)", "in-scope": "\(tree.accessories.count)",
                "characteristics": "\(tree.characteristicCount)", "rooms": "\(tree.rooms.count)",
            ])

        phase = .waitingForBroker
        logger.info(
            "waiting for the broker",
            metadata: ["broker": "\(config.brokerDisplay)", "client-id": "\(config.mqtt.clientID)"])
        var connected = false
        for await state in states where state.isConnected {
            connected = true
            break
        }
        // The states end only when the client stops: the group is ending.
        guard connected, !Task.isCancelled else { throw CancellationError() }
        _ = connection.connected() // The first connection of the run: nothing to republish yet.
        phase = .publishing
        BrokerReports.limits(mqtt, config: config, logger: logger)

        try await lookAtTheBroker()
        recordBeforePublishing(tree)
        logger.info(
            "publishing the tree",
            metadata: [
                "accessories": "\(tree.accessories.count)", "characteristics": "\(tree.characteristicCount)",
            ])
        await publishAll()
        try Task.checkCancellation()
        clearRecordedGhosts()
        // The first health document before `online` too (a client that sees `online` finds
        // it there); the refreshes are counted from now.
        publishHealth(sample: true)
        healthState.refresh.start(now: clock.now)
        lastSeen.refresh.start(now: clock.now)
        // `online` last: a client that sees it knows the whole tree is there.
        enqueue(statusTopic, Array("online".utf8), retain: true)
        phase = .serving
        logger.info(
            "gateway online",
            metadata: [
                "broker": "\(config.brokerDisplay)", "base": "\(base)", "retained-topics": "\(retainedCount)",
            ])
        handleHeldMessages()
    }

    /// Takes source events, home events, MQTT messages, requests and connection changes until
    /// cancelled.
    func serve(
        sourceEvents: EventStream<SourceEvent>, homeEvents: EventStream<HomeEvent>,
        states: AsyncStream<MQTTConnectionState>, learnedLimits: AsyncStream<MQTTLearnedLimit>
    ) async throws {
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask { await self.consume(sourceEvents: sourceEvents) }
            group.addTask { for await event in homeEvents { await self.handle(homeEvent: event) } }
            group.addTask {
                for await _ in self.work.rebuildStream {
                    // The events of a burst arrive one actor turn apart; a short wait lets them
                    // all ask, so that one rebuild (and at most one more) answers the burst.
                    try? await Task.sleep(for: .milliseconds(20))
                    await self.rebuildIfTheHomeChanged()
                }
            }
            group.addTask { await self.settleRecords() }
            group.addTask { await self.runRateLimits() }
            group.addTask { await self.runHealth() }
            group.addTask { await self.runLastSeen() }
            for index in outputs.indices { group.addTask { await self.runOutput(index) } }
            group.addTask {
                for await request in self.work.requestStream { await self.run(request) }
            }
            group.addTask { for await state in states { await self.handle(connection: state) } }
            group.addTask { for await limit in learnedLimits { await self.learned(limit) } }
            if config.pollInterval > 0 { group.addTask { try await self.pollLoop() } }
        }
    }

    // The busiest streams are read on the actor: a waiting event is taken and handled without
    // leaving it (`for await` asks with the actor's isolation). A loop outside the actor would
    // hop on and off it for each one, two thread switches per notification or request on a
    // machine whose cores the broker and the clients share.
    func consume(sourceEvents: EventStream<SourceEvent>) async {
        for await event in sourceEvents { await handle(sourceEvent: event) }
    }

    /// The end of every run, in order: requests already handed to a worker are answered (for
    /// up to `stopGrace`), then `offline` goes through the outbox behind everything queued
    /// before it — the last thing this gateway publishes — and the outbox is drained into the
    /// MQTT client, which sends it before it disconnects (the client is its own service,
    /// stopped after this one). A gateway that never went online publishes nothing.
    func stop() async {
        let connectedOnce = phase == .publishing || phase == .serving
        logger.info("stopping", metadata: ["online": "\(isStarted)", "connected": "\(connectedOnce)"])
        work.finish()
        ownership.settleRequests.finish()
        let deadline = ContinuousClock.now + Self.stopGrace
        while work.pendingJobs.load(ordering: .relaxed) > 0, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
        if connectedOnce {
            publishHealth(sample: true, status: "offline")
            enqueue(statusTopic, Array("offline".utf8), retain: true)
        }
        phase = .stopped
        observers.finish()
        // Commands whose worker or queue ended with the serving group get their outcome here
        // (an in-process caller awaits it; nothing is published any more).
        for then in awaiting.takeAll() {
            then(self, .failure(GatewayFailure(code: .unavailable, message: "the gateway stopped")))
        }
        answerLocally(local.waiting.keys.sorted(), .unavailable, "the gateway stopped")
        outbox.finish()
        await outbox.wait(below: 1, until: deadline + Self.stopGrace)
        logger.info("gateway stopped")
    }

    /// The home this gateway served is gone from its base topic (removed, or moved to another):
    /// every retained topic it published — its record, the tree as published, the outputs'
    /// topics — is cleared, and nothing is published after, not even `offline`. Then it is
    /// stopped as any gateway is.
    public func retire() {
        var all = ownership.recorded
        all.formUnion(currentOwnership)
        let topics = all.topicsToClear(keeping: OwnedTopics())
        logger.info("clearing the topics of a home no longer served here", metadata: ["count": "\(topics.count)"])
        let inside = base + "/"
        for topic in topics where topic.hasPrefix(inside) || outputs.mayClear(topic, self) {
            enqueue(topic, [], retain: true)
        }
        if let store = ownership.store {
            do throws(ModelError) { try store.save(OwnedTopics()) } catch {
                logger.warning("cannot empty the record of published topics", metadata: ["error": "\(error.message)"])
            }
        }
        // `stop` publishes nothing from here on, and says no `offline` where nothing is left.
        phase = .stopped
    }

    /// How long `stop` waits for answers in progress, and then for the outbox.
    static let stopGrace: Duration = .seconds(1)
}
