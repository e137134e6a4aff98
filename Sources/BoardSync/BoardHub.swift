import BoardCRDT
import BoardModel
import Foundation

/// Identifies a session within a host.
public typealias SessionID = Int

/// One board shared with many sessions: the sans-IO coordination that both the sync server and
/// a live peer run. It answers handshakes with what the peer lacks, merges incoming operations
/// durably before acknowledging them, relays new operations to every other session (so A–B–C
/// converges without A and C meeting), fetches missing assets from whoever has them, and serves
/// assets it holds. The host owns sockets and time; it passes bytes and `now` in and writes each
/// session's `output(for:)` out.
public final class BoardHub {
    public let board: String
    public let store: ReplicaStore
    /// Accept a dialer's HELLO for any board name (a peer hosts exactly one board).
    public var acceptsAnyBoard = false
    /// Called after operations or assets changed the store (a host schedules a save).
    public var onChange: (() -> Void)?
    /// Called with log lines worth showing an operator.
    public var log: ((String) -> Void)?
    /// Output queued for all of this board's sessions together beyond which a new session is
    /// turned away (`busy`) instead of being handed a full delta: 200 handshakes on a large
    /// board must not hold 200 copies of it.
    public var maxQueuedOutput = 64 << 20
    /// Live operations one session may send per second, sustained (nil: unlimited); bursts of
    /// five seconds' worth pass. Handshake deltas (a replica catching up) are not counted.
    /// Beyond it the session closes with `tooFast`.
    public var maxOperationsPerSecond: Double?
    /// Images a board may hold (nil: unlimited); beyond it uploads are refused (`limitReached`).
    public var maxAssets: Int?
    private var buckets: [SessionID: (tokens: Double, at: Double)] = [:]
    var now = 0.0
    /// Output the host has taken from this board's sessions but not yet written to sockets (the
    /// transport's queues), counted against `maxQueuedOutput`.
    public var queuedInTransport: () -> Int = { 0 }
    /// The last handshake delta, encoded: peers arriving with the same vector (new replicas, say)
    /// share one encoding instead of each costing a full-state pass.
    private var deltaCache: (since: VersionVector, at: VersionVector, format: UInt8, count: Int, bytes: [UInt8])?
    /// Bytes of handshake deltas sent and not yet acknowledged, per session: flow control that
    /// also counts what sits in kernel socket buffers.
    private var deltasInFlight: [SessionID: Int] = [:]

    public internal(set) var sessions: [SessionID: SyncSession] = [:]
    /// Never later than the earliest deadline of any session or presence (nil: none), so that
    /// `nextDeadline`, which a host asks after every event, does not visit every session (with
    /// 1,000 connections that was a fifth of a server's time). A session's deadline only moves
    /// later as it sends and receives (its clocks rise), so the bound stays valid; it is
    /// lowered when a session is added or touched through `withSession` and when a presence
    /// arrives, and made exact again by `handleTimers` when it falls due.
    private(set) var deadlineBound: Double?
    private var assembler = AssetAssembler()
    /// Which session each missing asset is being fetched from.
    private var fetching: [AssetHash: SessionID] = [:]
    /// Sessions that asked for an asset this hub is still fetching.
    private var waiting: [AssetHash: Set<SessionID>] = [:]
    /// Assets each session said it does not have.
    private var unavailable: [SessionID: Set<AssetHash>] = [:]
    /// Peers' handshakes and what they acknowledged / finished sending.
    public private(set) var acknowledged: [SessionID: VersionVector] = [:]
    /// Group commit: merges are logged at once but synced once per turn of the host's loop (at
    /// `nextDeadline`, through `handleTimers`), and acknowledged after that sync; relays do not
    /// wait. Off: every merge is synced and acknowledged on its own.
    public var groupCommit = false
    /// Sessions whose merged operations wait for the next sync before their ACK.
    private var awaitingSync: Set<SessionID> = []
    /// When the oldest merge waiting for a sync was made (the hub's deadline).
    public private(set) var syncPendingSince: Double?
    public private(set) var syncedFrom: Set<SessionID> = []
    /// A lower bound of what each peer holds: its handshake vector merged with its acks.
    private var peerVersions: [SessionID: VersionVector] = [:]

    // Replication through a shared log (BoardHub+Replication.swift, docs/SCALE-OUT.md).
    public var replicate: (([OperationBatch]) -> UInt64)?
    public var onAssetStored: ((AssetHash, Data) -> Void)?
    public var fetchAsset: ((AssetHash) -> Void)?
    var pendingReplication: [OperationBatch] = []
    var awaitingReplication: [UInt64: (sessions: [SessionID], version: VersionVector)] = [:]
    var fetchingFromLog: Set<AssetHash> = []

    /// Operations merged from peers, and operations sent to peers (deltas and live), for statistics.
    public private(set) var operationsMerged = 0
    public private(set) var operationsSent = 0

    public init(board: String, store: ReplicaStore) {
        self.board = board
        self.store = store
    }

    // MARK: Sessions

    /// A session this host dialed: starts the handshake for `board`.
    public func addDialer(_ id: SessionID, _ session: SyncSession, now: Double) {
        var session = session
        session.start(board: board, version: store.replica.versionVector, now: now)
        insert(id, session)
    }

    /// An accepted session whose HELLO has arrived (the host looked up this hub by its board name).
    /// Attaches a session a server routed here. With access control, `subject` is its token's
    /// subject: it may author operations only for replica ids bound to that subject (bound at
    /// the replica's first operation, BoardHub+Authorship.swift), unless it is a trusted
    /// `relay` (a peer token).
    public func attach(_ id: SessionID, _ session: SyncSession, hello: Hello, readOnly: Bool = false,
                       subject: String? = nil, relay: Bool = false) {
        insert(id, session)
        now = max(now, session.lastReceivedAt)  // its HELLO's arrival: the hub's clock may lag
        if readOnly { self.readOnly.insert(id) }
        if let subject {
            subjectOf[id] = subject
            helloReplicas[id] = hello.replica
            if relay { relays.insert(id) }
            // A writer saying hello under another subject's replica id is refused now (nothing
            // is bound before its first operation).
            if !readOnly, !relay, !checkHello(hello.replica, for: id) { return }
        }
        acceptAndGreet(id, hello)
    }

    /// Token subjects of sessions (servers with access control), and the trusted relays.
    var subjectOf: [SessionID: String] = [:]
    var relays: Set<SessionID> = []
    /// The replica id each of those sessions said HELLO under (the only one it may bind).
    var helloReplicas: [SessionID: ReplicaID] = [:]
    /// Replica id → the subject that owns it: the whole table, loaded from the store on first
    /// use; with `sharedAuthorship`, the bindings learnt from the shared log so far (they never
    /// change once made).
    var authors: [ReplicaID: String]?
    /// Replica ids bound to each subject (counted against `maxReplicasPerSubject`; without
    /// `sharedAuthorship` only).
    var authorCounts: [String: Int] = [:]
    /// Replica ids one token subject may own on one board; beyond it the subject's new
    /// replicas (tabs, devices) are refused with `limitReached` while its others keep writing.
    public var maxReplicasPerSubject = BoardHub.defaultMaxReplicasPerSubject
    public static let defaultMaxReplicasPerSubject = 1_024
    /// Bindings one board holds in all: `sync/authors` stays far below what loading accepts
    /// (8 MiB; a line is at most 82 bytes), so no writer can make it unreadable. Beyond it new
    /// replicas are refused with `limitReached`; replicas already bound keep writing.
    public var maxAuthorsPerBoard = BoardHub.defaultMaxAuthorsPerBoard
    public static let defaultMaxAuthorsPerBoard = 65_536
    /// Set by a replication layer that decides authorship once for every server
    /// (`RedisBoardLog`): asked for what `AuthorshipRequest` names, it answers through
    /// `authorshipAnswered`. Meanwhile the operations that wait for the answer are held.
    public var sharedAuthorship: ((AuthorshipRequest) -> Void)?
    /// Requests handed to `sharedAuthorship` and not answered yet.
    var authorshipAsked: Set<AuthorshipRequest> = []
    /// Answers other than an owner, kept while the sessions that waited for them are released.
    var authorshipAnswers: [AuthorshipRequest: AuthorshipAnswer] = [:]
    /// Batches of writer sessions waiting for an authorship answer, in arrival order.
    var heldOperations: [SessionID: [OperationBatch]] = [:]
    /// Batches one session may have held while its authorship is decided; beyond it, `busy`.
    public var maxHeldBatches = 256

    /// Sessions whose token allows reading only: they receive everything; operations or image
    /// bytes they send are refused (the session closes with `readOnly`), never applied or
    /// relayed, and no image is ever requested from them.
    public private(set) var readOnly: Set<SessionID> = []

    private func refuseWrite(_ id: SessionID, _ what: String) {
        log?("session \(id): refused \(what) from a read-only session")
        sessions[id]?.close(SessionError(.readOnly, "this connection's token may only read board '\(board)'; its \(what) were not applied"))
    }

    /// An accepted session that has not said hello yet (peers, which host one board).
    public func addAcceptor(_ id: SessionID, _ session: SyncSession, now: Double) {
        var session = session
        session.listen(now: now)
        insert(id, session)
    }

    /// Every session joins here, so the deadline bound always counts it.
    private func insert(_ id: SessionID, _ session: SyncSession) {
        lowerDeadlineBound(to: session.nextDeadline)
        sessions[id] = session
    }

    public func remove(_ id: SessionID) {
        sessions[id] = nil
        // Whoever this session brought has left (others hear "gone").
        for (replica, entry) in presences.sorted(by: { $0.key < $1.key }) where entry.from == id {
            presences[replica] = nil
            let gone = Presence.gone(replica, clock: entry.presence.clock)
            relayPresence(gone, except: id)
            onPresence?(gone)
            publishPresence?(gone)
        }
        buckets[id] = nil
        readOnly.remove(id)
        subjectOf[id] = nil
        relays.remove(id)
        heldOperations[id] = nil
        helloReplicas[id] = nil
        acknowledged[id] = nil
        peerVersions[id] = nil
        syncedFrom.remove(id)
        deltasInFlight[id] = nil
        unavailable[id] = nil
        for (hash, set) in waiting { waiting[hash] = set.subtracting([id]) }
        let orphaned = fetching.filter { $0.value == id }.map(\.key)
        for hash in orphaned {
            fetching[hash] = nil
            assembler.discard(hash)  // what a connection started is released when it closes
        }
        if !orphaned.isEmpty { requestMissing(preferring: nil) }
    }

    /// Closes every session (for shutdown); their output then holds the goodbye.
    public func closeAll(_ error: SessionError?) {
        for id in sessions.keys { sessions[id]?.close(error) }
    }

    /// Closes one session with `error` (its token expired or was revoked); its output then
    /// holds the ERROR.
    public func close(_ id: SessionID, _ error: SessionError) {
        _ = withSession(id) { $0.close(error) }
    }

    // MARK: Input

    /// Feeds bytes from a session's connection; returns the session's events (for the host's
    /// logs and for one-shot clients that watch for completion).
    @discardableResult
    public func receive(_ id: SessionID, _ bytes: [UInt8], now: Double) -> [SessionEvent] {
        self.now = now
        guard let events = withSession(id, { $0.receive(bytes, now: now) }) else { return [] }
        // Group commit: consecutive live OPS frames from one read merge as one batch (one log
        // append, one fsync, one ACK, one relay). Complete deltas keep their own batch.
        var pending: [Op] = []
        for event in events {
            if case .operations(let batch) = event, batch.base == nil, batch.covers == nil {
                pending += batch.operations
                continue
            }
            if !pending.isEmpty {
                mergeFromPeer(id, OperationBatch(operations: pending))
                pending = []
            }
            handle(id, event)
        }
        if !pending.isEmpty { mergeFromPeer(id, OperationBatch(operations: pending)) }
        return events
    }

    public func handleTimers(now: Double) -> [(SessionID, SessionEvent)] {
        self.now = now
        commitMerges()
        // A group commit falls due every loop turn with merges: the sessions and presences are
        // visited only when one of them may be due.
        guard let bound = deadlineBound, bound <= now else { return [] }
        expirePresences()
        var fired: [(SessionID, SessionEvent)] = []
        deadlineBound = presences.values.lazy.map(\.expires).min()
        for id in Array(sessions.keys) {
            let events = withSession(id) { $0.handleTimer(now: now) } ?? []  // lowers the bound to the session's next deadline
            fired += events.map { (id, $0) }
        }
        return fired
    }

    private func lowerDeadlineBound(to deadline: Double?) {
        guard let deadline else { return }
        deadlineBound = min(deadlineBound ?? deadline, deadline)
    }

    /// The earliest deadline of every session and presence, found by visiting them all (what
    /// `deadlineBound` stands for; tests compare the two).
    var exactSessionDeadline: Double? {
        var earliest = presences.values.lazy.map(\.expires).min()
        forEachSession { _, session in
            if let deadline = session.nextDeadline { earliest = min(earliest ?? deadline, deadline) }
        }
        return earliest
    }

    /// When `handleTimers` may have work: the group commit's deadline, or the bound on the
    /// sessions' and presences' deadlines (never later than the earliest; possibly earlier, and
    /// then exact after the `handleTimers` call that finds nothing due). O(1).
    public var nextDeadline: Double? {
        guard let since = syncPendingSince else { return deadlineBound }
        return min(since, deadlineBound ?? since)
    }

    /// Group commit: makes the merges deferred since the last commit durable with one sync of
    /// the store, then acknowledges them. A failed sync closes the sessions that waited (they
    /// send their operations again when they reconnect; nothing was acknowledged).
    public func commitMerges() {
        guard syncPendingSince != nil else { return }
        syncPendingSince = nil
        let waiting = awaitingSync.sorted()
        awaitingSync.removeAll()
        do {
            try store.syncMerges()
        } catch {
            log?("could not save merged operations: \(error)")
            for id in waiting { sessions[id]?.close(SessionError(.internalError, "the server could not save operations (its log says why)")) }
            return
        }
        let version = store.replica.versionVector
        if let replicate {
            // Acknowledged once the shared log holds this turn's operations (`replicated`).
            let batches = pendingReplication
            pendingReplication = []
            awaitingReplication[replicate(batches)] = (waiting, version)
            return
        }
        for id in waiting { sessions[id]?.acknowledge(version) }
    }

    /// Output waiting for one session's socket.
    public func output(for id: SessionID, maxBytes: Int = Int.max, now: Double) -> [UInt8] {
        withSession(id) { $0.takeOutput(maxBytes: maxBytes, now: now) } ?? []
    }

    public func pendingOutput(for id: SessionID) -> Int {
        withSession(id) { $0.pendingOutputCount } ?? 0
    }

    /// Local edits made on this hub's store: stream them to every open session.
    public func broadcast(_ operations: [Op], except excluded: SessionID? = nil) {
        guard !operations.isEmpty else { return }
        let recipients = sessions.keys.filter { $0 != excluded }.sorted()
        guard !recipients.isEmpty else { return }
        // Encoded once for every recipient of self-contained batches (it was once per session, each coalescing its own
        // copy: the host takes every session's output right after each read anyway).
        let batch = OperationBatch(operations: operations)
        var frames: [UInt8: [UInt8]] = [:]  // by batch format: peers from before format 2 read 1
        for id in recipients {
            let sent = withSession(id) { session -> Bool in
                guard session.isOpen else { return false }
                if session.sendsLinkedBatches {
                    // Linked batches depend on what each link carried: encoded per session (a
                    // one-operation batch costs about a microsecond; it saves three quarters of
                    // the bytes).
                    session.send(batch)
                    return true
                }
                let format = session.batchFormat
                let frame = frames[format] ?? Message.operations(batch.encoded(format: format)).frame().encoded()
                frames[format] = frame
                session.sendOperationsFrame(frame)
                return true
            }
            if sent == true { operationsSent += operations.count }
        }
    }

    /// Reads or mutates a session where it is stored (the dictionary's in-place accessor): its
    /// buffers are never copied on write (a copy per call made streaming quadratic), and reading
    /// one field does not copy the whole session first, as `sessions[id]?.field` does (two
    /// batch links, buffers, tables: some twenty reference counts each way). `body` must not
    /// touch `sessions`.
    @discardableResult
    private func withSession<T>(_ id: SessionID, _ body: (inout SyncSession) -> T) -> T? {
        guard let index = sessions.index(forKey: id) else { return nil }
        // The session's next deadline after `body`, read in the same access.
        let (result, deadline) = { (session: inout SyncSession) in (body(&session), session.nextDeadline) }(&sessions.values[index])
        lowerDeadlineBound(to: deadline)
        return result
    }

    /// Runs `body` on every session in place, in no particular order (see `withSession`).
    private func forEachSession(_ body: (SessionID, inout SyncSession) -> Void) {
        var index = sessions.startIndex
        while index != sessions.endIndex {
            let id = sessions.keys[index]  // its own statement: no view of the storage is alive below
            body(id, &sessions.values[index])
            sessions.formIndex(after: &index)
        }
    }

    // MARK: Presence

    /// What a replica said last about itself on this board, which session brought it (nil: this
    /// host's own), and when it expires.
    public struct PresenceEntry: Equatable, Sendable {
        public var presence: Presence
        public var from: SessionID?
        public var expires: Double
    }

    /// Who is on the board now, by replica (ephemeral: never stored).
    public private(set) var presences: [ReplicaID: PresenceEntry] = [:]
    /// Called for every presence of another replica this hub takes (arrivals, updates, and
    /// "gone" ones: left, expired, or its session closed), for hosts that show them.
    public var onPresence: ((Presence) -> Void)?

    /// Announces a presence of this host (its own replica, or one it edits for, like a web page):
    /// kept, and sent to every session whose peer understands presence.
    public func setLocalPresence(_ presence: Presence, now: Double) {
        self.now = now
        take(presence, from: nil)
    }

    private func receivePresence(_ presence: Presence, from id: SessionID) {
        guard let hello = sessions[id]?.peer else { return }
        // With access control, a session speaks only for its own replica unless it is a
        // trusted relay; nobody speaks for this host's replica.
        if presence.replica == store.replica.id
            || (subjectOf[id] != nil && !relays.contains(id) && presence.replica != hello.replica) {
            log?("session \(id): dropped a presence for replica \(presence.replica), which it may not speak for")
            return
        }
        take(presence, from: id)
    }

    /// Latest wins by clock; a "gone" removes. What is taken is relayed to every other session.
    private func take(_ presence: Presence, from id: SessionID?) {
        let held = presences[presence.replica]
        if presence.isGone {
            guard let held, presence.clock >= held.presence.clock else { return }
            presences[presence.replica] = nil
        } else {
            if let held, presence.clock <= held.presence.clock { return }
            let expires = now + min(presence.ttl, Presence.maxTTL)
            presences[presence.replica] = PresenceEntry(presence: presence, from: id, expires: expires)
            lowerDeadlineBound(to: expires)
        }
        relayPresence(presence, except: id)
        if id != nil { onPresence?(presence) }
        if id != BoardHub.sharedLogSource { publishPresence?(presence) }
    }

    /// The `from` of presences that came through the shared log (other servers' clients): they
    /// are shown and relayed like a session's, expire by their ttl, and are never published back.
    public static let sharedLogSource: SessionID = -1

    /// Set by a replication layer: every presence this hub takes from its sessions or its host
    /// (and the "gone" of a closed session), for the other servers.
    public var publishPresence: ((Presence) -> Void)?

    /// A presence another server published for this board.
    public func receiveReplicatedPresence(_ presence: Presence, now: Double) {
        self.now = now
        guard presence.replica != store.replica.id else { return }
        take(presence, from: BoardHub.sharedLogSource)
    }

    /// A planted bug for the simulator's oracles (`board-sim --plant presence-not-relayed`):
    /// presences from sessions are kept but never passed on. Never set outside such runs.
    @_spi(Mutations) public var dropsRelayedPresence = false

    private func relayPresence(_ presence: Presence, except excluded: SessionID?) {
        if dropsRelayedPresence, excluded != nil { return }
        for id in sessions.keys.sorted() where id != excluded {
            withSession(id) { $0.sendPresence(presence) }
        }
    }

    /// Forgets presences whose time-to-live ran out (peers expire them on their own clocks).
    private func expirePresences() {
        for (replica, entry) in presences.sorted(by: { $0.key < $1.key }) where entry.expires <= now {
            presences[replica] = nil
            if entry.from != nil { onPresence?(Presence.gone(replica, clock: entry.presence.clock)) }
        }
    }

    // MARK: Replication through a shared log

    // A replication layer (BoardRedis's `RedisBoardLog`, docs/SCALE-OUT.md) sets `replicate`,
    // `onAssetStored` and `fetchAsset`, and calls the three methods below. With `replicate` set,
    // every group commit hands it the operations merged from this hub's sessions since the
    // last one (fresh ones only; a complete delta keeps its `covers`), and the sessions that
    // sent them are acknowledged when the log holds them, not before. `onAssetStored` sees each
    // image a session uploaded; `fetchAsset` is asked for images no session can offer.

    /// The shared log holds what the group commit that returned `ticket` handed over:
    /// acknowledges the sessions that waited for it (tickets complete in order).
    public func replicated(_ ticket: UInt64) {
        guard let entry = awaitingReplication.removeValue(forKey: ticket) else { return }
        for id in entry.sessions { sessions[id]?.acknowledge(entry.version) }
    }

    /// Operations read from the shared log (written by another server, or found there when the
    /// board opened): merged and relayed to this hub's sessions, never handed back to
    /// `replicate`. Returns how many were new. Throws when the store refuses them.
    @discardableResult
    public func mergeReplicated(_ batch: OperationBatch, now: Double) throws -> Int {
        self.now = now
        let vectorBefore = batch.covers != nil ? store.replica.versionVector : nil
        let fresh = try store.merging(batch, deferringSync: groupCommit)
        if groupCommit, syncPendingSince == nil { syncPendingSince = now }
        guard !fresh.isEmpty || rose(from: vectorBefore) else { return 0 }
        operationsMerged += fresh.count
        let named = fresh.compactMap { op in op.payload.asset.map { (hash: $0, item: op.payload.item) } }
        if !named.isEmpty { requestMissing(preferring: nil, named: named) }
        relay(fresh, of: batch, except: nil)
        onChange?()
        return fresh.count
    }

    /// What `fetchAsset(hash)` found: the bytes (checked against the hash), or nil when the
    /// log does not have them either (whoever waits hears NOASSET).
    public func assetFetched(_ hash: AssetHash, _ data: Data?) {
        guard fetchingFromLog.remove(hash) != nil else { return }
        guard let data else {
            for waiter in waiting.removeValue(forKey: hash) ?? [] { sessions[waiter]?.sendNoAsset(hash) }
            return
        }
        do {
            try store.addReceivedAsset(data, claimedHash: hash)
        } catch {
            log?("image \(hash) from the shared log refused: \(error)")
            for waiter in waiting.removeValue(forKey: hash) ?? [] { sessions[waiter]?.sendNoAsset(hash) }
            return
        }
        onChange?()
        for waiter in waiting.removeValue(forKey: hash) ?? [] { sessions[waiter]?.queueAsset(hash, data) }
    }

    /// While set, sessions that said HELLO wait (unanswered, their input buffered) instead of
    /// being greeted: a replication layer holds them until the board has caught up with the
    /// shared log, so nobody is handed a stale board and told it is complete.
    public var holdsGreetings = false {
        didSet {
            guard !holdsGreetings else { return }
            let held = heldGreetings
            heldGreetings = []
            for (id, hello) in held where sessions[id].map({ !$0.isClosed }) == true { acceptAndGreet(id, hello) }
        }
    }
    var heldGreetings: [(SessionID, Hello)] = []
    /// Whether the board's storage can serve it (BoardHub+Storage.swift).
    var storage = HubStorageState()

    /// Tickets whose sessions still wait for the shared log.
    public var replicationsAwaited: Int { awaitingReplication.count }

    // MARK: Protocol

    private func handle(_ id: SessionID, _ event: SessionEvent) {
        switch event {
        case .hello(let hello):
            guard sessions[id]?.role == .acceptor else {
                greet(id, hello)
                return
            }
            guard acceptsAnyBoard || hello.board == board else {
                sessions[id]?.close(SessionError(.boardMismatch, "this host serves '\(board)', not '\(hello.board)'"))
                return
            }
            acceptAndGreet(id, hello)
        case .operations(let batch):
            mergeFromPeer(id, batch)
        case .acknowledged(let vector):
            deltasInFlight[id] = nil
            acknowledged[id] = (acknowledged[id] ?? .empty).merged(with: vector)
            peerVersions[id] = (peerVersions[id] ?? .empty).merged(with: vector)
        case .synced:
            syncedFrom.insert(id)
        case .assetsWanted(let requests):
            for request in requests { serve(request, to: id) }
        case .assetChunk(let chunk):
            guard !readOnly.contains(id) else { return refuseWrite(id, "image bytes") }
            if let maxAssets, !store.replica.assets.contains(chunk.hash), store.replica.assets.count >= maxAssets {
                log?("session \(id): refused an image: the board holds its limit of \(maxAssets)")
                sessions[id]?.close(SessionError(.limitReached, "this board holds its limit of \(maxAssets) images"))
                return
            }
            do {
                if let bytes = try assembler.add(chunk) {
                    fetching[chunk.hash] = nil
                    try store.addReceivedAsset(Data(bytes), claimedHash: chunk.hash)
                    onChange?()
                    let data = Data(bytes)
                    onAssetStored?(chunk.hash, data)
                    for waiter in waiting.removeValue(forKey: chunk.hash) ?? [] {
                        sessions[waiter]?.queueAsset(chunk.hash, data)
                    }
                }
            } catch let error as SessionError {
                fetching[chunk.hash] = nil
                sessions[id]?.close(error)
            } catch {
                fetching[chunk.hash] = nil
                log?("session \(id): could not store image \(chunk.hash): \(error)")
                sessions[id]?.close(SessionError(.internalError, "the server could not store an image (its log says why)"))
            }
        case .assetUnavailable(let hash):
            unavailable[id, default: []].insert(hash)
            if fetching[hash] == id { fetching[hash] = nil }
            requestMissing(preferring: nil)
            if fetching[hash] == nil {
                for waiter in waiting.removeValue(forKey: hash) ?? [] { sessions[waiter]?.sendNoAsset(hash) }
            }
        case .presence(let presence):
            receivePresence(presence, from: id)
        case .closed(let error):
            if let error { log?("session \(id) closed: \(error)") }
        }
    }

    /// Answers an accepted peer's HELLO, greets it, then handles the frames that arrived behind
    /// the HELLO (a session stops parsing at a HELLO until it is accepted).
    private func acceptAndGreet(_ id: SessionID, _ hello: Hello) {
        if storageTrouble != nil { return refuseForStorage(id) }  // BoardHub+Storage.swift
        if holdsGreetings {
            heldGreetings.append((id, hello))
            return
        }
        sessions[id]?.accept(version: store.replica.versionVector)
        greet(id, hello)
        if let session = sessions[id], session.isOpen {
            receive(id, [], now: session.lastReceivedAt)
        }
    }

    /// After the handshake: send the peer exactly what it lacks, then the end-of-delta marker.
    private func greet(_ id: SessionID, _ hello: Hello) {
        let replica = store.replica
        do {
            try replica.checkPeerVersion(hello.version)
        } catch {
            log?("session \(id): refused replica \(hello.replica) on board '\(hello.board)': \(error)")
            sessions[id]?.close(SessionError(.invalidOperations, "\(error)"))
            return
        }
        let current = replica.versionVector
        let bytes: [UInt8]
        let count: Int
        let format = sessions[id]?.batchFormat ?? OperationBatch.formatVersion
        if let cached = deltaCache, cached.since == hello.version, cached.at == current, cached.format == format {
            (bytes, count) = (cached.bytes, cached.count)
        } else {
            var delta = replica.operations(since: hello.version)
            // Equivocation probes: our own latest operation and the latest we hold by the peer's
            // replica, even when the peer's vector covers them. Same id with another content on
            // the far side means someone forged operations under one of our ids: the receiver
            // refuses loudly instead of both sides agreeing on vectors over different operations.
            var probed = false
            for author in [replica.id, hello.replica] {
                if let probe = replica.latestOperation(by: author), hello.version.covers(probe.id) {
                    delta.operations.append(probe)
                    probed = true
                }
            }
            (bytes, count) = (delta.encoded(format: format), delta.operations.count)
            if !probed { deltaCache = (hello.version, current, format, count, bytes) }
        }
        // Memory a crowd of handshakes can cost: deltas not yet acknowledged plus output queued
        // here and in the transport stay under the budget (one delta is always allowed, so a
        // board larger than the budget can still be served, one peer at a time).
        let inFlight = deltasInFlight.values.reduce(0, +)
        var queued = queuedInTransport()
        forEachSession { _, session in queued += session.pendingOutputCount }
        if (inFlight > 0 || queued > 0), inFlight + queued + bytes.count > maxQueuedOutput {
            log?("session \(id): turned away replica \(hello.replica): \(inFlight + queued) bytes already on their way to other peers")
            sessions[id]?.close(SessionError(.busy, "the server has \(inFlight + queued) bytes on their way to other peers (limit \(maxQueuedOutput)); retry in a few seconds"))
            return
        }
        peerVersions[id] = hello.version
        operationsSent += count
        sessions[id]?.sendEncoded(bytes)
        if bytes.count > 1 << 16 { deltasInFlight[id] = bytes.count }
        sessions[id]?.sendSynced(current)
        // Who is on the board, with what is left of each presence's time-to-live.
        for (_, entry) in presences.sorted(by: { $0.key < $1.key }) where entry.from != id && entry.expires > now {
            var presence = entry.presence
            presence.ttl = entry.expires - now
            sessions[id]?.sendPresence(presence)
        }
        // Images nobody could offer before may be with this peer: ask it now.
        requestMissing(preferring: id)
        log?("session \(id): replica \(hello.replica) joined board '\(hello.board)'")
    }

    private func mergeFromPeer(_ id: SessionID, _ batch: OperationBatch) {
        // Every way operations arrive (handshake deltas, coalesced live batches) passes here.
        if readOnly.contains(id) {
            // An empty delta (a mirror with nothing of its own) is fine; anything else is not.
            if !batch.operations.isEmpty { refuseWrite(id, "operations") }
            return
        }
        if let rate = maxOperationsPerSecond, batch.base == nil, batch.covers == nil {
            let burst = rate * 5
            var bucket = buckets[id] ?? (burst, now)
            bucket.tokens = min(burst, bucket.tokens + rate * max(0, now - bucket.at))
            bucket.at = now
            guard Double(batch.operations.count) <= bucket.tokens else {
                log?("session \(id): more than \(Int(rate)) operations per second; closed")
                sessions[id]?.close(SessionError(.tooFast, "more than \(Int(rate)) operations per second (bursts of \(Int(burst)) allowed); slow down"))
                return
            }
            bucket.tokens -= Double(batch.operations.count)
            buckets[id] = bucket
        }
        // Authorship (servers with access control): a writer's batches wait, in order, while
        // one of them waits for the shared log's answer.
        if subjectOf[id] != nil, !relays.contains(id) {
            if heldOperations[id] != nil { return hold(batch, from: id) }
            switch authorship(of: batch, from: id) {
            case .allowed(let authorized): return mergeAuthorized(id, authorized)
            case .refused: return
            case .waiting:
                heldOperations[id] = []
                return hold(batch, from: id)
            }
        }
        mergeAuthorized(id, batch)
    }

    /// Merges a batch whose authors the session may send (after the read-only, rate and
    /// authorship checks), acknowledges and relays it.
    func mergeAuthorized(_ id: SessionID, _ batch: OperationBatch) {
        // Only a complete delta can raise the vector without a new operation: the vector before
        // is needed for nothing else.
        let vectorBefore = batch.covers != nil ? store.replica.versionVector : nil
        let fresh: [Op]
        do {
            fresh = try store.merging(batch, deferringSync: groupCommit)
        } catch let error as OperationError {
            log?("session \(id): refused operations: \(error)")
            sessions[id]?.close(SessionError(.invalidOperations, error.description))
            return
        } catch {
            // The error (a path on this server, say) goes to the operator's log, not the peer.
            log?("session \(id): could not save operations: \(error)")
            sessions[id]?.close(SessionError(.internalError, "the server could not save operations (its log says why)"))
            return
        }
        operationsMerged += fresh.count
        // A peer that said it lacks an image may have it by now if it sends operations using it.
        if var lacking = unavailable[id], !lacking.isEmpty {
            for op in fresh { if let hash = op.payload.asset { lacking.remove(hash) } }
            unavailable[id] = lacking
        }
        // Only images the new operations name can have gone missing by this merge: no scan of
        // every item on the board per frame (session events rescan all).
        let named = fresh.compactMap { op in op.payload.asset.map { (hash: $0, item: op.payload.item) } }
        if !named.isEmpty { requestMissing(preferring: id, named: named) }
        if groupCommit || replicate != nil {
            // Acknowledged after the store's next sync (this loop turn's, `commitMerges`).
            awaitingSync.insert(id)
            if syncPendingSince == nil { syncPendingSince = now }
        } else {
            sessions[id]?.acknowledge(store.replica.versionVector)
        }
        // A complete delta may raise the vector over operations its sender compacted away
        // without carrying a single new operation: the others must hear of that too, or the
        // next loose operation leaves them a gap that never closes (found by the simulator).
        guard !fresh.isEmpty || rose(from: vectorBefore) else { return }
        if replicate != nil {
            // For the shared log: the new operations. A complete delta goes as this board's own
            // complete delta from the same base: its `covers` (which closes the gaps its sender
            // compacted away) applies only with its `base`, and then the entry must carry every
            // operation beyond that base, not only the ones this hub lacked (found by the demo on
            // three servers: a reconnecting peer's offline edits never reached the others).
            if let base = batch.base, batch.covers != nil {
                pendingReplication.append(store.replica.operations(since: base))
            } else {
                pendingReplication.append(OperationBatch(operations: fresh))
            }
        }
        relay(fresh, of: batch, except: id)
        onChange?()
    }

    /// Passes merged operations on to every other open session. A complete delta may skip
    /// operations its sender had compacted away; relayed as loose operations they would leave
    /// gaps in the other peers' version vectors, so each gets a complete delta from what it is
    /// known to hold instead.
    private func relay(_ fresh: [Op], of batch: OperationBatch, except excluded: SessionID?) {
        guard batch.covers != nil else { return broadcast(fresh, except: excluded) }
        for other in sessions.keys.sorted() where other != excluded && withSession(other, { $0.isOpen }) == true {
            let delta = store.replica.operations(since: peerVersions[other] ?? .empty)
            operationsSent += delta.operations.count
            withSession(other) { $0.send(delta) }
        }
    }

    /// The batch's operations this board lacks, and its version vector now. A function of its
    /// own so the copy of the replica is gone before the merge: held across it, the merge
    /// would copy the whole board (copy-on-write) for every frame.
    /// Whether the board's vector rose above `before` (the vector before a complete delta's
    /// merge; nil for loose operations, which raise it only with new operations).
    private func rose(from before: VersionVector?) -> Bool {
        before.map { !$0.dominates(store.replica.versionVector) } ?? false
    }

    /// Asks for every referenced asset that is missing and not already on its way (with
    /// `named`, only the images those operations named that the board still shows and lacks).
    private func requestMissing(preferring preferred: SessionID?, named: [(hash: AssetHash, item: ItemID?)]? = nil) {
        let missing = (named.map { store.replica.missingAssets(named: $0) } ?? store.replica.missingAssets)
            .filter { fetching[$0] == nil && !fetchingFromLog.contains($0) }
        guard !missing.isEmpty else { return }
        var byPeer: [SessionID: [AssetRequest]] = [:]
        var open: [SessionID] = []
        forEachSession { id, session in if session.isOpen { open.append(id) } }
        open.sort()
        for hash in missing {
            let candidates = ([preferred].compactMap { $0 } + open).filter { id in
                withSession(id, { $0.isOpen }) == true && !readOnly.contains(id) && !(unavailable[id]?.contains(hash) ?? false)
            }
            guard let peer = candidates.first else {
                if let fetchAsset {
                    // The shared log's image store may have it (uploaded through another server).
                    fetchingFromLog.insert(hash)
                    fetchAsset(hash)
                    continue
                }
                // Nobody connected has it: whoever waits on this hub hears so now, not never.
                for waiter in waiting.removeValue(forKey: hash) ?? [] { sessions[waiter]?.sendNoAsset(hash) }
                continue
            }
            fetching[hash] = peer
            byPeer[peer, default: []].append(AssetRequest(hash: hash, offset: assembler.offset(for: hash)))
        }
        for (peer, requests) in byPeer { sessions[peer]?.want(requests) }
    }

    /// Answers a WANT at once unless the bytes are on their way from a *different* peer: two
    /// hosts that each wait for the other to answer the same WANT would never finish a sync.
    private func serve(_ request: AssetRequest, to id: SessionID) {
        if let data = store.replica.assets.data(for: request.hash) {
            sessions[id]?.queueAsset(request.hash, data, from: request.offset)
        } else if let source = fetching[request.hash], source != id {
            waiting[request.hash, default: []].insert(id)
        } else if fetchingFromLog.contains(request.hash) {
            waiting[request.hash, default: []].insert(id)
        } else {
            sessions[id]?.sendNoAsset(request.hash)
        }
    }
}
