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
///
/// One record per peer (`HubPeer`) holds all it knows of a session. The path of a peer's
/// operations, file by file: this file (sessions, input, timers, output) →
/// `BoardHub+Handshake` (HELLO, greeting with the delta) → `BoardHub+Access` and
/// `BoardHub+Authorship` (read-only, rate, who may author) → `BoardHub+Merge` (merge, group
/// commit, ACK, relay) → `BoardHub+Assets` (images) → `BoardHub+Presence` (who is here) →
/// `BoardHub+Replication` and `BoardHub+Storage` (a shared log under several servers);
/// `BoardHub+Events` (what it has for its host, polled).
public final class BoardHub {
    package let board: String
    package let store: ReplicaStore
    /// Accept a dialer's HELLO for any board name (a peer hosts exactly one board).
    package var acceptsAnyBoard = false
    /// Called with log lines worth showing an operator.
    package var log: ((String) -> Void)?
    /// Output queued for all of this board's sessions together beyond which a new session is
    /// turned away (`busy`) instead of being handed a full delta: 200 handshakes on a large
    /// board must not hold 200 copies of it.
    package var maxQueuedOutput = 64 << 20
    /// Live operations one session may send per second, sustained (nil: unlimited); bursts of
    /// five seconds' worth pass. Handshake deltas (a replica catching up) are not counted.
    /// Beyond it the session closes with `tooFast`.
    package var maxOperationsPerSecond: Double?
    /// Images a board may hold (nil: unlimited); beyond it uploads are refused (`limitReached`).
    package var maxAssets: Int?
    /// Whether missing images are asked of sessions (`SyncEndpoint.Options.fetchesImages`).
    package var fetchesImages = true
    var now = 0.0
    /// The last handshake delta, encoded: peers arriving with the same vector (new replicas, say)
    /// share one encoding instead of each costing a full-state pass.
    var deltaCache: (since: VersionVector, at: VersionVector, format: UInt8, count: Int, bytes: [UInt8])?

    /// Every session's peer record.
    var peers: [SessionID: HubPeer] = [:]
    /// When a peer that said NO_ASSET may next be asked again (`retryUnavailableAssets`).
    var nextAssetRetry: Double?
    /// Never later than the earliest deadline of any session or presence (nil: none), so that
    /// `nextDeadline`, which a host asks after every event, does not visit every session (with
    /// 1,000 connections that was a fifth of a server's time). A session's deadline only moves
    /// later as it sends and receives (its clocks rise), so the bound stays valid; it is
    /// lowered when a session is added or touched through `withSession` and when a presence
    /// arrives, and made exact again by `handleTimers` when it falls due.
    private(set) var deadlineBound: Double? {
        didSet { if deadlineBound != oldValue { timersMoved() } }
    }
    /// Whether `nextDeadline` may have changed since the endpoint last looked (the bound or the
    /// group commit's deadline moved, or a session joined or left): the endpoint re-arms this
    /// board in its `DeadlineQueue` then, so that it never visits boards to find the earliest.
    var timersMayHaveMoved = false
    /// Sessions that gained output (or closed) since the host last took them
    /// (`takeSessionsWithOutput`): a host writes those instead of every session of the board.
    private(set) var sessionsWithOutput: Set<SessionID> = []
    /// Events not drained yet (`pollEvent`).
    var events = EventQueue<HubEvent>()
    /// A `.changed` is queued and not drained yet (one stands for any number of changes).
    var changeQueued = false
    /// Where this hub lists itself when it gains events, output or a moved deadline (its
    /// endpoint's; nil when nobody drives it but the caller, as in tests).
    weak var activity: HubActivity?
    var activityNoted = false

    // Assets (BoardHub+Assets.swift): board-wide, by hash.
    var assembler = AssetAssembler()
    /// Which session each missing asset is being fetched from.
    var fetching: [AssetHash: SessionID] = [:]
    /// Sessions that asked for an asset this hub is still fetching.
    var waiting: [AssetHash: Set<SessionID>] = [:]

    // Group commit (BoardHub+Merge.swift).
    /// Merges are logged at once but synced once per turn of the host's loop (at
    /// `nextDeadline`, through `handleTimers`), and acknowledged after that sync; relays do not
    /// wait. Off: every merge is synced and acknowledged on its own.
    package var groupCommit = false
    /// Sessions whose merged operations wait for the next sync before their ACK, in the order
    /// they first did (each peer's `awaitingSync` says whether it still does).
    var commitWaiters: [SessionID] = []
    /// When the oldest merge waiting for a sync was made (the hub's deadline).
    package internal(set) var syncPendingSince: Double? {
        didSet { if syncPendingSince != oldValue { timersMoved() } }
    }

    // Replication through a shared log (BoardHub+Replication.swift, docs/SCALE-OUT.md).
    /// Whether a replication layer shares this board with other servers: merges, uploaded
    /// images, presences and fetches of missing images become `.sharedLog` events, and the
    /// sessions whose operations were handed over are acknowledged at `replicated(ticket)`.
    package var sharedLog = false
    /// The last ticket handed to the shared log.
    var lastTicket: UInt64 = 0
    var pendingReplication: [OperationBatch] = []
    var awaitingReplication: [UInt64: (sessions: [SessionID], version: VersionVector)] = [:]
    /// With a shared log: authors' operations (`mergeAuthored`) relayed only once the log holds
    /// them, by the ticket of the append that carries them (before that, a writer on another
    /// server could claim the author's replica id, the log holding none of its operations yet).
    var pendingAuthored: [Op] = []
    var awaitingAuthored: [UInt64: [Op]] = [:]
    var fetchingFromLog: Set<AssetHash> = []
    /// While set, sessions that said HELLO wait (unanswered, their input buffered) instead of
    /// being greeted: a replication layer holds them until the board has caught up with the
    /// shared log, so nobody is handed a stale board and told it is complete.
    package var holdsGreetings = false {
        didSet { if !holdsGreetings { releaseHeldGreetings() } }
    }
    /// Whether the board's storage can serve it (BoardHub+Storage.swift).
    var storage = HubStorageState()

    // Authorship (BoardHub+Authorship.swift): board-wide tables.
    /// Replica id → the subject that owns it: the whole table, loaded from the store on first
    /// use; with `sharesAuthorship`, the bindings learnt from the shared log so far (they never
    /// change once made).
    var authors: [ReplicaID: String]?
    /// Replica ids bound to each subject (counted against `maxReplicasPerSubject`; without
    /// `sharesAuthorship` only).
    var authorCounts: [String: Int] = [:]
    /// Replica ids one token subject may own on one board; beyond it the subject's new
    /// replicas (tabs, devices) are refused with `limitReached` while its others keep writing.
    package var maxReplicasPerSubject = BoardHub.defaultMaxReplicasPerSubject
    package static let defaultMaxReplicasPerSubject = 1_024
    /// Bindings one board holds in all: `sync/authors` stays far below what loading accepts
    /// (8 MiB; a line is at most 82 bytes), so no writer can make it unreadable. Beyond it new
    /// replicas are refused with `limitReached`; replicas already bound keep writing.
    package var maxAuthorsPerBoard = BoardHub.defaultMaxAuthorsPerBoard
    package static let defaultMaxAuthorsPerBoard = 65_536
    /// Set by a replication layer that decides authorship once for every server
    /// (`RedisBoardLog`): each question is a `.sharedLog(.decideAuthorship)` event, answered
    /// through `authorshipAnswered`. Meanwhile the operations that wait for the answer are held.
    package var sharesAuthorship = false
    /// Requests asked of the shared log and not answered yet.
    var authorshipAsked: Set<AuthorshipRequest> = []
    /// Answers other than an owner, kept while the sessions that waited for them are released.
    var authorshipAnswers: [AuthorshipRequest: AuthorshipAnswer] = [:]
    /// Batches one session may have held while its authorship is decided; beyond it, `busy`.
    package var maxHeldBatches = 256

    // Presence (BoardHub+Presence.swift).
    /// Who is on the board now, by replica (ephemeral: never stored).
    package internal(set) var presences: [ReplicaID: PresenceEntry] = [:]
    /// A planted bug for the simulator's oracles (`board-sim --plant presence-not-relayed`):
    /// presences from sessions are kept but never passed on. Never set outside such runs.
    @_spi(Mutations) public var dropsRelayedPresence = false

    /// Operations merged from peers, and operations sent to peers (deltas and live), for statistics.
    package internal(set) var operationsMerged = 0
    package internal(set) var operationsSent = 0
    /// Where group commits are counted and timed (the endpoint's), and the operations merged
    /// since the last commit.
    package var metrics: SyncMetrics?
    var operationsSinceCommit = 0

    package init(board: String, store: ReplicaStore) {
        self.board = board
        self.store = store
    }

    // MARK: Sessions

    /// A session this host dialed: starts the handshake for `board`.
    package func addDialer(_ id: SessionID, _ session: SyncSession, now: Double) {
        var session = session
        session.start(board: board, version: store.replica.versionVector, now: now)
        insert(id, HubPeer(session: session))
    }

    /// An accepted session that has not said hello yet (peers, which host one board).
    package func addAcceptor(_ id: SessionID, _ session: SyncSession, now: Double) {
        var session = session
        session.listen(now: now)
        insert(id, HubPeer(session: session))
    }

    /// An accepted session whose HELLO has arrived (the host looked up this hub by its board name).
    /// Attaches a session a server routed here. With access control, `subject` is its token's
    /// subject: it may author operations only for replica ids bound to that subject (bound at
    /// the replica's first operation, BoardHub+Authorship.swift), unless it is a trusted
    /// `relay` (a peer token).
    package func attach(_ id: SessionID, _ session: SyncSession, hello: Hello, readOnly: Bool = false,
                       subject: String? = nil, relay: Bool = false) {
        var peer = HubPeer(session: session)
        peer.readOnly = readOnly
        if let subject {
            peer.subject = subject
            peer.helloReplica = hello.replica
            peer.relay = relay
        }
        insert(id, peer)
        now = max(now, session.lastReceivedAt)  // its HELLO's arrival: the hub's clock may lag
        // A writer saying hello under another subject's replica id is refused now (nothing
        // is bound before its first operation).
        if subject != nil, !readOnly, !relay, !checkHello(hello.replica, for: id) { return }
        acceptAndGreet(id, hello)
    }

    /// Every session joins here, so the deadline bound always counts it.
    private func insert(_ id: SessionID, _ peer: HubPeer) {
        lowerDeadlineBound(to: peer.session.nextDeadline)
        peers[id] = peer
        if peer.session.hasOutput || peer.session.isClosed { noteOutput(id) }
        timersMoved()
    }

    /// Forgets a session: its record, and what board-wide tables say of it (whoever it brought
    /// has left, images it was fetching are asked of someone else).
    package func remove(_ id: SessionID) {
        peers[id] = nil
        sessionsWithOutput.remove(id)
        timersMoved()
        for (replica, entry) in presences.sorted(by: { $0.key < $1.key }) where entry.from == id {
            presences[replica] = nil
            let gone = Presence.gone(replica, clock: entry.presence.clock)
            relayPresence(gone, except: id)
            emit(.presence(gone))
            if sharedLog { emit(.sharedLog(.publishPresence(gone))) }
        }
        for (hash, set) in waiting where set.contains(id) { waiting[hash] = set.subtracting([id]) }
        let orphaned = fetching.filter { $0.value == id }.map(\.key)
        for hash in orphaned {
            fetching[hash] = nil
            assembler.discard(hash)  // what a connection started is released when it closes
        }
        if !orphaned.isEmpty { requestMissing(preferring: nil) }
    }

    /// Closes every session (for shutdown); their output then holds the goodbye.
    package func closeAll(_ error: SessionError?) {
        for id in Array(peers.keys) { closeSession(id, error) }
    }

    /// Closes one session with `error` (its token expired or was revoked, or it broke a rule);
    /// its output then holds the ERROR.
    package func close(_ id: SessionID, _ error: SessionError) {
        closeSession(id, error)
    }

    /// Every close goes through here: in place, and noted as output (the ERROR or BYE).
    func closeSession(_ id: SessionID, _ error: SessionError?) {
        withSession(id) { $0.close(error) }
    }

    // MARK: What a host or tool may read

    /// A session, by copy (for reading; the hub changes its own in place).
    package func session(_ id: SessionID) -> SyncSession? { peers[id]?.session }
    /// This board's sessions, in order.
    package var sessionIDs: [SessionID] { peers.keys.sorted() }
    package var sessionCount: Int { peers.count }
    /// Whether any session has finished its handshake.
    package var hasOpenSession: Bool { peers.values.contains { $0.session.isOpen } }
    /// What a session's peer acknowledged having merged durably (nil: nothing yet).
    package func acknowledged(by id: SessionID) -> VersionVector? { peers[id]?.acknowledged }
    /// Whether a session's peer has sent everything it held when the session began.
    package func hasSynced(_ id: SessionID) -> Bool { peers[id]?.synced ?? false }
    /// Whether a session's token allows reading only.
    package func isReadOnly(_ id: SessionID) -> Bool { peers[id]?.readOnly ?? false }
    /// Frame bytes this board's sessions have sent and received.
    package var bytesTransferred: (sent: Int, received: Int) {
        peers.values.reduce((0, 0)) { ($0.0 + $1.session.bytesSent, $0.1 + $1.session.bytesReceived) }
    }

    // MARK: Timers and output

    package func handleTimers(now: Double) -> [(SessionID, SessionEvent)] {
        self.now = now
        commitMerges()
        // A group commit falls due every loop turn with merges: the sessions and presences are
        // visited only when one of them may be due.
        guard let bound = deadlineBound, bound <= now else { return [] }
        expirePresences()
        var fired: [(SessionID, SessionEvent)] = []
        deadlineBound = presences.values.lazy.map(\.expires).min()
        retryUnavailableAssets()
        if let retry = nextAssetRetry { lowerDeadlineBound(to: retry) }
        for id in Array(peers.keys) {
            let events = withSession(id) { $0.handleTimer(now: now) } ?? []  // lowers the bound to the session's next deadline
            fired += events.map { (id, $0) }
        }
        return fired
    }

    func lowerDeadlineBound(to deadline: Double?) {
        guard let deadline else { return }
        deadlineBound = min(deadlineBound ?? deadline, deadline)
    }

    /// The earliest deadline of every session and presence, found by visiting them all (what
    /// `deadlineBound` stands for; tests compare the two).
    var exactSessionDeadline: Double? {
        var earliest = [presences.values.lazy.map(\.expires).min(), nextAssetRetry].compactMap { $0 }.min()
        forEachSession { _, session in
            if let deadline = session.nextDeadline { earliest = min(earliest ?? deadline, deadline) }
        }
        return earliest
    }

    /// When `handleTimers` may have work: the group commit's deadline, or the bound on the
    /// sessions' and presences' deadlines (never later than the earliest; possibly earlier, and
    /// then exact after the `handleTimers` call that finds nothing due). O(1).
    package var nextDeadline: Double? {
        guard let since = syncPendingSince else { return deadlineBound }
        return min(since, deadlineBound ?? since)
    }

    /// Output waiting for one session's socket.
    package func output(for id: SessionID, maxBytes: Int = Int.max, now: Double) -> [UInt8] {
        withSession(id, notingOutput: false) { $0.takeOutput(maxBytes: maxBytes, now: now) } ?? []
    }

    /// The host says how many bytes of a session's output its transport holds (after each
    /// write, and as the socket drains): counted against `maxQueuedOutput`.
    package func noteTransportQueued(_ id: SessionID, _ bytes: Int) {
        withPeer(id) { $0.transportQueued = bytes }
    }

    package func pendingOutput(for id: SessionID) -> Int {
        withSession(id, notingOutput: false) { $0.pendingOutputCount } ?? 0
    }

    /// The sessions that gained output or closed since the last call, in id order; the set
    /// starts over empty. A host writes these after each event (what a full socket held back
    /// is written when the socket drains).
    var hasSessionsWithOutput: Bool { !sessionsWithOutput.isEmpty }

    package func takeSessionsWithOutput() -> [SessionID] {
        let taken = sessionsWithOutput
        sessionsWithOutput = []
        return taken.sorted()
    }

    func noteOutput(_ id: SessionID) {
        guard sessionsWithOutput.insert(id).inserted else { return }
        if sessionsWithOutput.count == 1 { noteActivity() }
    }

    /// Reads or mutates a session where it is stored (the dictionary's in-place accessor): its
    /// buffers are never copied on write (a copy per call made streaming quadratic), and reading
    /// one field does not copy the whole session first, as `peers[id]?.session.field` does (two
    /// batch links, buffers, tables: some twenty reference counts each way). `body` must not
    /// touch `peers`.
    ///
    /// A session left with output to write (or closed) is noted for the host
    /// (`takeSessionsWithOutput`), unless `notingOutput` is false (the host taking output).
    @discardableResult
    func withSession<T>(_ id: SessionID, notingOutput: Bool = true, _ body: (inout SyncSession) -> T) -> T? {
        guard let index = peers.index(forKey: id) else { return nil }
        // The session's next deadline, and whether it has output, after `body`, read in the same access.
        let (result, deadline, output) = { (peer: inout HubPeer) in
            (body(&peer.session), peer.session.nextDeadline, notingOutput && (peer.session.hasOutput || peer.session.isClosed))
        }(&peers.values[index])
        lowerDeadlineBound(to: deadline)
        if output { noteOutput(id) }
        return result
    }

    /// Reads or mutates a peer record in place (see `withSession`; a read through
    /// `peers[id]?.field` copies the whole record first). `body` must not touch `peers`.
    @discardableResult
    func withPeer<T>(_ id: SessionID, _ body: (inout HubPeer) -> T) -> T? {
        guard let index = peers.index(forKey: id) else { return nil }
        return body(&peers.values[index])
    }

    /// Runs `body` on every session in place, in no particular order (see `withSession`).
    func forEachSession(_ body: (SessionID, inout SyncSession) -> Void) {
        var index = peers.startIndex
        while index != peers.endIndex {
            let id = peers.keys[index]  // its own statement: no view of the storage is alive below
            body(id, &peers.values[index].session)
            peers.formIndex(after: &index)
        }
    }

    /// Whether a session exists and has finished its handshake, read in place.
    func isOpen(_ id: SessionID) -> Bool {
        withSession(id) { $0.isOpen } ?? false
    }
}
