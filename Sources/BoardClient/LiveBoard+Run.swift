import BoardCRDT
import BoardModel
import BoardSync
import Foundation

extension LiveBoard {
    /// What of a session's close reason decides the next step: the server's ERROR, or an
    /// error this side found that retrying cannot fix (a protocol version neither side can
    /// change). Other errors found here are the link's trouble: nil, retried.
    static func refusal(_ reason: SessionError?) -> SessionError? { ClientEngine.refusal(reason) }

    /// How one connection ended.
    enum LinkOutcome: Sendable {
        /// This side said goodbye (close or cancellation).
        case finished
        /// The link dropped or the server ended it (`refusal`: its ERROR); `liveFor`: seconds
        /// it was live (0 when it never was).
        /// `closeReason`: the session's own (nil when the link ended under it).
        case dropped(reason: String, refusal: SessionError?, wasLive: Bool, liveFor: Double = 0, closeReason: SessionError? = nil)
    }

    /// Keeps the board live until the task is cancelled or `close()` is called: dials the
    /// server, handshakes, catches up, streams edits both ways, and reconnects with backoff and
    /// jitter when the link drops or the server turns it away for a reason worth retrying. Then
    /// it flushes, says goodbye, saves and releases the storage (the package's lock) and returns.
    ///
    /// Throws `Refusal` when the server refuses in a way retrying cannot fix (read-only access,
    /// not the author, unauthorized, a board it cannot open); the status is `.failed` and the
    /// storage is released as well. Throws `LiveBoardError` when the board has no `sync`, is
    /// closed, or is already running.
    public func run() async throws {
        guard store != nil else { throw LiveBoardError.closed }
        guard let sync else { throw LiveBoardError.noServer }
        guard !running else { throw LiveBoardError.alreadyRunning }
        running = true
        // The engine's reconnect policy decides; this loop does the waiting and the dialing.
        var reconnect = ClientEngine.Reconnect(firstDelay: sync.firstDelay, maximumDelay: sync.maximumDelay,
                                               resetAfter: sync.backoffResetAfter)
        var failure: SessionError?
        connecting: while !Task.isCancelled && !closeIsDue {
            let attempt = reconnect.dialing()
            setState(.connecting(attempt: attempt))
            // Nil: the attempt was cancelled (close's bound, or this task) and did not end at
            // once; it is left behind.
            guard let outcome = await connectOnce(sync, attempt: attempt) else { break connecting }
            if Task.isCancelled { break connecting }
            let lastError: String
            switch outcome {
            case .finished:
                break connecting
            case .dropped(let reason, let refusal, let wasLive, let liveFor, _):
                engine.lastLinkError = reason
                switch reconnect.ended(refusal: refusal, wasLive: wasLive, liveFor: liveFor) {
                case .stop(let error):
                    failure = error
                    break connecting
                case .redialNow:
                    continue connecting
                case .retry:
                    lastError = reason
                }
            }
            if Task.isCancelled || closeIsDue { break }
            let wait = reconnect.delay(jitter: jitter.nextUnit())
            setState(.offline(retryAt: clock.wallClock().timeIntervalSince1970 + wait, attempt: reconnect.attempt, lastError: lastError))
            let until = self.now() + wait
            await sleep(until: min(until, closeDeadline ?? until))
        }
        // The save in flight is awaited here, suspended: `release` would block the actor (and
        // with it a pool thread) for the rest of it.
        await waitForViewSave()
        running = false
        release(final: failure.map { .failed($0) } ?? .closed)
        if let failure { throw Self.refusal(of: failure) }
    }

    /// One connection attempt (credentials, connect, session) in a task of its own; nil when it
    /// was cancelled and left behind (`abandonAttempt`).
    func connectOnce(_ sync: Sync, attempt: Int) async -> LinkOutcome? {
        attemptGeneration += 1
        let generation = attemptGeneration
        let credentials = self.credentials
        let transport = self.transport
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<LinkOutcome?, Never>) in
                attemptWaiter = continuation
                attemptTask = Task {
                    let outcome: LinkOutcome
                    do {
                        let token = try await credentials.fetch()
                        try Task.checkCancellation()
                        outcome = try await transport.withConnection(to: sync.server) { connection in
                            await self.drive(connection, credentials: token, attempt: attempt)
                        }
                    } catch {
                        outcome = .dropped(reason: "\(error)", refusal: nil, wasLive: false)
                    }
                    self.attemptEnded(outcome, generation: generation)
                }
            }
        } onCancel: {
            Task { await self.interruptAttempt() }
        }
    }

    /// A close was asked for and nothing holds it up any more: every edit is acknowledged, or
    /// its bound passed.
    var closeIsDue: Bool {
        guard let closeDeadline else { return false }
        return (unacknowledgedOperations == 0 && unacknowledgedImages == 0) || self.now() >= closeDeadline
    }

    /// One connection: a sans-IO endpoint for this board, the bytes of `connection` fed to it
    /// and its output written back, its timers run at its deadlines.
    func drive(_ connection: any BoardConnection, credentials: [UInt8], attempt: Int) async -> LinkOutcome {
        guard let store, let sync, !Task.isCancelled else { return .finished }
        var options = SyncEndpoint.Options()
        options.credentials = credentials
        options.timing.idleTimeout = sync.idleTimeout
        options.timing.handshakeTimeout = sync.handshakeTimeout
        options.limits.maxFrame = sync.maxFrame
        options.limits.maxAsset = sync.maxImageBytes
        options.maxAssetsPerBoard = sync.maxImages
        options.maxOperationsPerSecond = sync.maxOperationsPerSecond
        options.presenceClockStart = UInt64(max(0, clock.wallClock().timeIntervalSince1970) * 1000)
        options.groupCommit = true  // a merge is published before its log fsync, acknowledged after it
        let endpoint = SyncEndpoint(board: sync.board, store: store, options: options, now: self.now())
        sessionID += 1
        let id = sessionID
        self.endpoint = endpoint
        linkEnded = nil
        endpoint.dialed(id, now: self.now())
        engine.presence.connectionOpened()  // said again on every connection
        defer {
            failHistoryWaiters("the connection to the server ended before the history answer")
            if sessionID == id {
                self.endpoint = nil
                publishPeers([])  // whoever the server showed is not known to be here any more
            }
        }
        return await withTaskGroup(of: Void.self) { group in
            group.addTask {
                do {
                    while let bytes = try await connection.receive() {
                        await self.received(bytes, on: id)
                    }
                    await self.linkClosed(nil, on: id)
                } catch is CancellationError {
                } catch {
                    await self.linkClosed("\(error)", on: id)
                }
            }
            let outcome = await pump(connection, endpoint, id, sync)
            group.cancelAll()
            return outcome
        }
    }

    func received(_ bytes: [UInt8], on id: SessionID) {
        guard let endpoint, id == sessionID else { return }
        trafficSoFar.received += bytes.count
        endpoint.receive(id, bytes, now: self.now())
        drainEvents()
        publishRemoteChange()
        signal()
    }

    /// The endpoint's events: a changed board marks `changes` (a remote change is published
    /// from it); nothing else it reports concerns a client.
    func drainEvents() {
        guard let endpoint else { return }
        var rosterMoved = false
        while let event = endpoint.pollEvent() {
            switch event {
            case .boardChanged: changes.changed = true
            case .presence: rosterMoved = true
            case .historyRequested(_, let id, let request):
                // A client keeps its history to itself: a server never asks, a hostile one is told no.
                endpoint.answerHistory(id, .refusal(request, .unavailable, "a live client serves no history"))
            case .historyAnswered(_, _, let answer): historyAnswered(answer)
            default: continue
            }
        }
        if rosterMoved { publishPeers(endpoint.presences()) }
    }

    func linkClosed(_ error: String?, on id: SessionID) {
        guard id == sessionID else { return }
        linkEnded = .some(error)
        signal()
    }

    /// Writes output, watches the session, sleeps until the next deadline or signal.
    ///
    /// A server that has not said HELLO within `sync.handshakeTimeout` of the connection is
    /// given up (the session enforces that only for the accepting side).
    private func pump(_ connection: any BoardConnection, _ endpoint: SyncEndpoint, _ id: SessionID, _ sync: Sync) async -> LinkOutcome {
        let board = sync.board
        var saidGoodbye = false
        var liveSince: Double?
        var wasLive: Bool { liveSince != nil }
        let helloDeadline = self.now() + sync.handshakeTimeout
        var sendFailed: (error: String, until: Double)?
        while true {
            // Left behind (close's bound or cancellation passed): the board is no longer ours.
            guard id == sessionID else { return .finished }
            let now = self.now()
            func liveFor() -> Double { liveSince.map { self.now() - $0 } ?? 0 }
            if let failed = sendFailed {
                // A write failed: what the server said before the link went (an ERROR that
                // refused this connection at once) may still sit unread. The receiving side
                // hands it over and then ends; its reason, not the write's, is the outcome.
                // Nothing else is judged meanwhile (bytes taken for the failed write never
                // left), and a cancelled attempt does not wait.
                if linkEnded == nil, !endpoint.isFinished(id), self.now() < failed.until, !Task.isCancelled {
                    await sleep(until: failed.until)
                    continue
                }
                let reason = endpoint.session(id)?.closeReason
                endpoint.closed(id, now: self.now())
                return .dropped(reason: reason.map { "\($0)" } ?? failed.error, refusal: Self.refusal(reason), wasLive: wasLive,
                                liveFor: liveFor(), closeReason: reason)
            }
            endpoint.handleTimers(now: now)
            let presenceDue = sendPresenceIfDue(endpoint, board, open: endpoint.session(id)?.isOpen == true, now: now)
            drainEvents()
            publishRemoteChange()
            // What the session says now, before writing (a write can fail on a link the server
            // has already dropped, after it made the session live).
            let session = endpoint.session(id)
            let hub = endpoint.boards[board]?.hub
            if let session { noteOneShot(session, hub: hub, id: id) }
            if let session, let synced = engine.observe(session, hub: hub, id: id, held: store?.replica.versionVector ?? .empty) {
                if synced && liveSince == nil { liveSince = now }
                if !saidGoodbye, !session.isClosed { setState(synced ? .live : .catchingUp) } else { refreshStatus() }
            }
            // At most a send buffer's worth at a time: a 64 MiB image is cut into chunks as the
            // socket takes them, not held whole a second time.
            let output = endpoint.output(for: id, maxBytes: Self.outputSlice, now: now)
            if !output.isEmpty {
                do {
                    try await connection.send(output)
                    trafficSoFar.sent += output.count
                } catch {
                    guard id == sessionID else { return .finished }
                    if saidGoodbye || error is CancellationError || Task.isCancelled {
                        let reason = endpoint.session(id)?.closeReason
                        endpoint.closed(id, now: self.now())
                        return saidGoodbye ? .finished : .dropped(reason: "\(error)", refusal: Self.refusal(reason), wasLive: wasLive, liveFor: liveFor(), closeReason: reason)
                    }
                    sendFailed = ("\(error)", self.now() + Self.unreadGrace)
                }
                continue  // more may have queued meanwhile
            }
            if endpoint.isFinished(id) {
                let reason = session?.closeReason
                endpoint.closed(id, now: self.now())
                if saidGoodbye { return .finished }
                let refusal = Self.refusal(reason)
                return .dropped(reason: reason.map { "\($0)" } ?? "the session ended", refusal: refusal, wasLive: wasLive, liveFor: liveFor(), closeReason: reason)
            }
            if let ended = linkEnded {
                let reason = session?.closeReason
                endpoint.closed(id, now: self.now())
                if saidGoodbye { return .finished }
                let refusal = Self.refusal(reason)
                return .dropped(reason: reason.map { "\($0)" } ?? ended ?? "the server closed the connection", refusal: refusal, wasLive: wasLive, liveFor: liveFor(), closeReason: reason)
            }
            let answered = session?.peer != nil
            if !answered && !saidGoodbye && now >= helloDeadline {
                endpoint.closed(id, now: self.now())
                return .dropped(reason: "the server did not answer HELLO within \(Self.seconds(sync.handshakeTimeout)) s", refusal: nil, wasLive: false)
            }
            if !saidGoodbye && (Task.isCancelled || closeIsDue || oneShotIsDone) {
                endpoint.shutdown(save: true, now: now)
                saidGoodbye = true
                continue
            }
            if saidGoodbye && Task.isCancelled {
                // The goodbye is written (the output above is empty); a cancelled attempt does
                // not wait for the answer (`sleep` would return at once: a spin on the actor).
                endpoint.closed(id, now: self.now())
                return .finished
            }
            var deadline = endpoint.nextDeadline
            if let closeDeadline, !saidGoodbye { deadline = min(deadline ?? closeDeadline, closeDeadline) }
            if !answered && !saidGoodbye { deadline = min(deadline ?? helloDeadline, helloDeadline) }
            if let presenceDue, !saidGoodbye { deadline = min(deadline ?? presenceDue, presenceDue) }
            await sleep(until: deadline)
        }
    }

    /// After a failed write, how long the bytes already received may take to be read.
    static let unreadGrace = 1.0

    /// Bytes taken from the endpoint per `send`.
    static let outputSlice = 256 << 10

    static func seconds(_ value: Double) -> String {
        value == value.rounded() ? "\(Int(value))" : "\(value)"
    }
}
