import BoardModel
import BoardStore
@_spi(Mutations) import BoardCRDT
@_spi(Mutations) import BoardSync
import Foundation

/// Peers as live clients: each peer's link to its first dial target (its upstream: the server,
/// or the peer it relays through) is watched by BoardSync's `ClientEngine`, the logic `LiveBoard`
/// runs over its endpoint: typed changes, what the upstream acknowledged, the connection's
/// phase, and how a link's end is classified (a terminal refusal stops the client). Redials are
/// still timed by the endpoint's dial-target backoff (its jitter from the world's generator).
extension World {
    final class Client {
        var engine: ClientEngine
        /// The board the engine's typed changes give, folded from the start.
        var shown: BoardSnapshot
        /// The session of the current link to the upstream (nil while there is none).
        var upstream: SessionID?
        var liveSince: Double?
        var reconnect = ClientEngine.Reconnect(firstDelay: 0.2, maximumDelay: 10, resetAfter: 15)
        /// The upstream refused in a way retrying cannot fix: the client stopped.
        var stopped: SessionError?
        /// What the replica held when the typed changes were last checked against it.
        var checked: VersionVector
        /// `changes-dropped`: whether the next change is lost.
        var dropped = false
        /// Changes since `shown` was last brought up to date (`followed(by:)`), and how many
        /// steps made them.
        var unfolded = BoardChanges()
        var unfoldedSteps = 0

        init(_ replica: Replica) {
            shown = replica.snapshot()
            engine = ClientEngine(replica: replica, snapshot: shown)
            checked = replica.versionVector
        }
    }

    /// A peer's process starts (first start or restart): a new client over its replica (a
    /// terminal refusal stays: the app would show it failed).
    func startClient(_ host: Host) {
        guard host.index != plan.server, let replica = replica(host) else { return }
        let stopped = host.client?.stopped
        host.client = Client(replica)
        host.client?.stopped = stopped
        if let stopped {
            host.client?.engine.phase = .failed(stopped)
            host.endpoint?.setReconnecting(false, now: now)
        }
    }

    func isStopped(_ host: Host) -> Bool { host.client?.stopped != nil }

    /// A dial of `target` began (`session`) or failed (nil).
    func clientDialed(_ host: Host, target: Int, session: SessionID?) {
        guard target == 0, let client = host.client else { return }
        if client.stopped != nil {
            fail("client stopped", "\(host.name) dialed its upstream at \(now) after a terminal refusal (\(client.stopped!))")
        }
        let attempt = client.reconnect.dialing()
        if let session {
            client.upstream = session
            client.liveSince = nil
            client.engine.phase = .connecting(attempt: attempt)
        } else {
            linkEnded(host, client, reason: nil, words: "unreachable")
        }
    }

    /// The upstream link's session `session` closes: classified, and a terminal refusal stops
    /// the client.
    func clientLinkClosing(_ host: Host, _ session: SessionID) {
        guard let client = host.client, client.upstream == session else { return }
        client.upstream = nil
        let reason = host.endpoint?.session(session)?.closeReason
        linkEnded(host, client, reason: reason, words: reason?.summary ?? "the link closed")
    }

    private func linkEnded(_ host: Host, _ client: Client, reason: SessionError?, words: String) {
        client.engine.lastLinkError = words
        let wasLive = client.liveSince != nil
        let decision = client.reconnect.ended(refusal: ClientEngine.refusal(reason), wasLive: wasLive,
                                              liveFor: client.liveSince.map { now - $0 } ?? 0)
        client.liveSince = nil
        if case .stop(let error) = decision {
            note("client \(host.index) stops: \(error.code.name)")
            say("\(host.name): the client stops: \(error.summary)")
            client.stopped = error
            client.engine.phase = .failed(error)
            host.endpoint?.setReconnecting(false, now: now)
        } else {
            client.engine.phase = .offline(retryAt: host.endpoint?.nextDeadline ?? now, attempt: client.reconnect.attempt, lastError: words)
        }
    }

    /// After every step touching a peer: the engine looks at the upstream session, as
    /// `LiveBoard`'s pump does after each turn, and its typed changes, folded from the start,
    /// must give the replica's board.
    func observeClient(_ host: Host) {
        guard let client = host.client, let endpoint = host.endpoint, let replica = replica(host) else { return }
        if plan.mutation != .acknowledgementsUnseen, let id = client.upstream, let session = endpoint.session(id),
           let synced = client.engine.observe(session, hub: endpoint.boards[board]?.hub, id: id, held: replica.versionVector) {
            if synced && client.liveSince == nil { client.liveSince = now }
            if !session.isClosed { client.engine.phase = synced ? .live : .catchingUp }
        }
        // As `LiveBoard` does: the endpoint's events drained, typed changes made only when it
        // says the board changed (merges, images, local edits).
        var changed = false
        while let event = endpoint.pollEvent() {
            if case .boardChanged = event { changed = true }
        }
        guard changed else { return }
        let changes = client.engine.changes(to: replica)
        guard !changes.isEmpty || replica.versionVector != client.checked else { return }
        client.dropped.toggle()
        if !(plan.mutation == .changesDropped && client.dropped && !changes.isEmpty) {
            client.unfolded = client.unfolded.followed(by: changes)
        }
        client.checked = replica.versionVector
        client.unfoldedSteps += 1
        // Compared every `typedChangesCheckEvery` steps that moved the board (a snapshot costs
        // O(board)), folding every step's changes in between.
        guard client.unfoldedSteps >= typedChangesCheckEvery else { return }
        foldAndCompare(host, client, replica, "at \(now)")
    }

    /// Folds the changes not yet folded into the board shown; it must be the replica's.
    func foldAndCompare(_ host: Host, _ client: Client, _ replica: Replica, _ when: String) {
        client.shown = client.unfolded.applied(to: client.shown)
        client.unfolded = BoardChanges()
        client.unfoldedSteps = 0
        if client.shown != replica.snapshot() {
            fail("typed changes", "\(host.name): the typed changes folded from the start differ from the replica's board \(when)")
        }
    }

    /// Once the run has converged: every client that did not stop is live, with nothing of its
    /// own unacknowledged (nil: all is well; else what is not).
    func clientsNotQuiet() -> String? {
        var trouble: [String] = []
        for host in hosts where host.index != plan.server {
            guard let client = host.client, client.stopped == nil, let replica = replica(host) else { continue }
            let operations = client.engine.unacknowledgedOperations(held: replica.versionVector[replica.id])
            let images = client.engine.unacknowledgedImages
            if client.engine.phase != .live || operations > 0 || images > 0 {
                trouble.append("\(host.name) \(client.engine.phase), \(operations) operations and \(images) images unacknowledged")
            }
        }
        return trouble.isEmpty ? nil : trouble.joined(separator: "; ")
    }

    /// The clients' oracles at the end: quiet (live, all acknowledged), stopped ones failed, and
    /// the typed changes still giving the board.
    func checkClients() {
        if let trouble = clientsNotQuiet() {
            fail("client status", "after convergence: \(trouble)")
        }
        for host in hosts where host.index != plan.server {
            guard let client = host.client, let replica = replica(host) else { continue }
            if let stopped = client.stopped, client.engine.phase != .failed(stopped) {
                fail("client stopped", "\(host.name) stopped (\(stopped)) but its status is \(client.engine.phase)")
            }
            client.unfolded = client.unfolded.followed(by: client.engine.changes(to: replica))
            foldAndCompare(host, client, replica, "at the end")
        }
    }
}
