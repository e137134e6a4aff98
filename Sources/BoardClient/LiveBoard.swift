import BoardCRDT
import BoardModel
import BoardNet
import BoardStore
import BoardSync
import Foundation

/// A board an app edits and keeps live: local storage first (editable at once, offline), a
/// server kept in sync by `run()`, changes and connection status as streams.
///
/// ```swift
/// let board = try LiveBoard.open(storage: .package(path: "notes.boardpkg"),
///                                sync: .init(server: "127.0.0.1:7420", board: "notes"))
/// let live = Task { try await board.run() }
/// try await board.edit { try $0.beginStroke(color: .black, width: 2, points: points) }
/// let report = await board.close()   // every edit acknowledged, or the bound passed
/// ```
///
/// Everything is isolated to the actor; the streams (`updates`, `status`) and the current
/// `snapshot`/`status` can be read from anywhere without waiting.
public actor LiveBoard {
    public nonisolated let replicaID: ReplicaID
    public nonisolated let storage: Storage
    public nonisolated let sync: Sync?
    let credentials: Credentials
    let transport: any BoardTransport
    /// Where the board reads time and sleeps (`open`'s `clock`), and draws its backoff jitter.
    public nonisolated let clock: any BoardClock
    let jitter: any BoardJitter

    /// Nil once closed. A `SavingStore` over the package or memory replica.
    var store: (any HostedStore)?
    /// View saves, off the actor (LiveBoard+Saving.swift).
    let viewSaves = ViewSaves()
    /// What the replica was when the store closed (reads after `close`).
    var closedReplica: Replica?
    /// The sans-IO endpoint of the current connection (nil while offline).
    var endpoint: SyncEndpoint?
    var sessionID: SessionID = 0
    /// Requests for the server's history waiting for their answers, by id
    /// (LiveBoard+ServerHistory.swift); failed when their link ends.
    var historyWaiters: [UInt64: CheckedContinuation<HistoryAnswer, any Error>] = [:]
    var nextHistoryRequest: UInt64 = 0
    let changes = ChangeFlag()

    let updateChannel: Multicast<BoardUpdate>
    let statusChannel: Multicast<LiveStatus>
    let peersChannel = Multicast<[Presence]>([], combine: { $1 })
    let identity: Identity
    /// The client's logic over the endpoint, sans-IO (BoardSync's `ClientEngine`): typed
    /// changes (the board as last published, kept at the cost of each change), what the server
    /// holds of this replica's operations and images and what it refused, the connection's
    /// phase and last error, and the presence this replica says (throttled by
    /// `Sync.presenceInterval`).
    var engine: ClientEngine
    /// Updates published since one's snapshot was last made (`snapshotEvery` bounds the chain
    /// of unmade snapshots a board keeps).
    var updatesSinceSnapshot = 0
    /// Bytes written to and read from every connection so far (`traffic`).
    var trafficSoFar = Traffic()
    /// Open `undoGroup` calls (only the outermost one opens and closes the replica's group).
    var undoGroupDepth = 0

    var running = false
    /// The `syncOnce` in progress, if any.
    var oneShot: SyncOnceProgress?
    var closeDeadline: Double?
    var closeWaiters: [CheckedContinuation<Void, Never>] = []
    var closeReport: CloseReport?
    var closeTimer: Task<Void, Never>?

    // The connection attempt in flight runs in a task of its own, so that `run()` can leave
    // behind one that does not end when cancelled (a credentials provider or transport that
    // ignores cancellation) and still return within its bound.
    var attemptTask: Task<Void, Never>?
    var attemptWaiter: CheckedContinuation<LinkOutcome?, Never>?
    var attemptGeneration = 0

    // The run loop's wake-up: edits, inbound bytes, close and cancellation signal it.
    var wakeWaiter: CheckedContinuation<Void, Never>?
    var wakePending = false
    var wakeGeneration = 0
    /// The transport ended the current link (nil inside: an orderly end).
    var linkEnded: String??

    // MARK: Opening

    /// Opens the board from `storage` (creating a package that does not exist) and returns it,
    /// editable at once. Nothing touches the network until `run()`.
    ///
    /// - Parameters:
    ///   - sync: the server and board name `run()` keeps this board in sync with (nil: local only).
    ///   - credentials: the token for each connection's HELLO, asked before every connect.
    ///   - identity: the replica id for a new package or memory board.
    ///   - transport: how the server is reached (`TCPTransport()`, `MemoryTransport`, your own).
    ///   - clock: where every deadline is read and slept on (`SystemBoardClock()`; a test's
    ///     `TestClock` from BoardClientTesting).
    ///   - jitter: where the reconnect backoff's jitter is drawn (`SystemJitter()`; a test's
    ///     `SeededJitter`).
    public static func open(storage: Storage, sync: Sync? = nil, credentials: Credentials = .none,
                            identity: Identity = Identity(), transport: any BoardTransport = TCPTransport(),
                            clock: any BoardClock = SystemBoardClock(), jitter: any BoardJitter = SystemJitter()) throws -> LiveBoard {
        if let sync, !Hello.isValidBoardName(sync.board) { throw LiveBoardError.invalidBoardName(sync.board) }
        let replicaID = identity.replicaID ?? LiveBoard.randomReplicaID()
        let store: any HostedStore
        switch storage {
        case .memory:
            store = MemoryReplicaStore(replica: Replica(id: replicaID))
        case .package(let path):
            let fileSystem = PosixFileSystem()
            if fileSystem.exists(path) {
                store = try BoardPackage.open(at: path, fileSystem: fileSystem, newReplicaID: LiveBoard.randomReplicaID)
            } else {
                try fileSystem.createDirectories(Path.parent(of: path))
                store = try BoardPackage.create(at: path, fileSystem: fileSystem, replicaID: replicaID)
            }
        }
        return LiveBoard(store: store, storage: storage, sync: sync, credentials: credentials, transport: transport, identity: identity,
                         clock: clock, jitter: jitter)
    }

    /// Opens the board from a `BoardPackage` the caller has open, and takes it over: the board
    /// owns the package from here on (its edits, its merges, its lock), and `close()` (or `run()`
    /// ending) closes it, releasing the lock. The package is `sending`: the compiler refuses any
    /// use of it after this call. `storage` is `.package(path:)` of its path; `identity`'s
    /// replica id is not used (the package keeps its own). A closed package throws `StoreError`
    /// (`closed`). Otherwise as `open(storage:sync:credentials:identity:transport:clock:jitter:)`.
    public static func open(package: sending BoardPackage, sync: Sync? = nil, credentials: Credentials = .none,
                            identity: Identity = Identity(), transport: any BoardTransport = TCPTransport(),
                            clock: any BoardClock = SystemBoardClock(), jitter: any BoardJitter = SystemJitter()) throws -> LiveBoard {
        if let sync, !Hello.isValidBoardName(sync.board) { throw LiveBoardError.invalidBoardName(sync.board) }
        // A closed package throws `StoreError` (closed) here, not at the first edit; an open
        // one's deferred merges are made durable before the board takes it over.
        try package.syncMerges()
        return LiveBoard(store: package, storage: .package(path: package.path), sync: sync, credentials: credentials,
                         transport: transport, identity: identity, clock: clock, jitter: jitter)
    }

    private init(store: any HostedStore, storage: Storage, sync: Sync?, credentials: Credentials, transport: any BoardTransport, identity: Identity,
                 clock: any BoardClock, jitter: any BoardJitter) {
        self.identity = identity
        self.clock = clock
        self.jitter = jitter
        self.store = SavingStore(store, saves: viewSaves)
        self.storage = storage
        self.sync = sync
        self.credentials = credentials
        self.transport = transport
        let replica = store.replica
        replicaID = replica.id
        let snapshot = replica.snapshot()
        engine = ClientEngine(replica: replica, snapshot: snapshot)
        updateChannel = Multicast(BoardUpdate(snapshot: snapshot, changes: BoardChanges(), origins: [.loaded], version: 0),
                                  combine: BoardUpdate.folding)
        statusChannel = Multicast(LiveStatus(state: .idle, unacknowledgedOperations: Int(replica.versionVector[replica.id]),
                                             unacknowledgedImages: engine.unacknowledgedImages), combine: { $1 })
    }

    static func randomReplicaID() -> ReplicaID {
        var generator = SystemRandomNumberGenerator()
        return ReplicaID(UInt64.random(in: 1...UInt64.max, using: &generator))
    }

    // MARK: Reading

    /// The board now (readable from any thread, without waiting).
    public nonisolated var snapshot: BoardSnapshot { updateChannel.current.snapshot }

    /// The connection status now.
    public nonisolated var currentStatus: LiveStatus { statusChannel.current }

    /// Every change to the board: the first element is the board as it is at subscription
    /// (origin `.loaded`, its changes adding every item), then one per local edit, undo, redo and
    /// merge of remote operations. Multicast (iterate it as often as you like); a slow iterator
    /// gets the latest snapshot with the changes it missed folded together. Ends when the board
    /// closes.
    public nonisolated var updates: LiveStream<BoardUpdate> {
        LiveStream(updateChannel) { current in
            BoardUpdate(snapshot: current.snapshot, changes: .everything(in: current.snapshot), origins: [.loaded], version: current.version)
        }
    }

    /// Connection status changes: the current status first, then each change (a slow iterator
    /// gets the latest). Ends when the board closes.
    public nonisolated var status: LiveStream<LiveStatus> { LiveStream(statusChannel) }

    /// The replica (a copy: the full CRDT state, for reads beyond the snapshot).
    public var replica: Replica { store?.replica ?? closedReplica! }

    /// Bytes this board has exchanged with servers, over every connection since it opened.
    public struct Traffic: Sendable, Equatable {
        public var sent = 0
        public var received = 0
        public init() {}
    }

    /// What crossed the wire so far (`Traffic`).
    public var traffic: Traffic { trafficSoFar }

    public var canUndo: Bool { replica.canUndo }
    public var canRedo: Bool { replica.canRedo }

    /// This replica's operations the server has not acknowledged.
    public var unacknowledgedOperations: Int {
        engine.unacknowledgedOperations(held: replica.versionVector[replicaID])
    }

    /// Images this replica's edits show that may not have reached the server
    /// (`LiveStatus.unacknowledgedImages`).
    public var unacknowledgedImages: Int { engine.unacknowledgedImages }

    // MARK: Editing

    /// Runs `body` on the replica and makes its operations durable (the package's op log,
    /// fsynced) before returning; they go to the server at once when live, at the next connect
    /// otherwise. When `body` throws, nothing changes.
    @discardableResult
    public func edit(_ body: (inout Replica) throws -> LocalEdit) throws -> LocalEdit {
        try commit(origin: .local, body)
    }

    /// Undoes this replica's latest edit (never others'); false when there is nothing to undo.
    @discardableResult
    public func undo() throws -> Bool {
        guard replica.canUndo else { return false }
        _ = try commit(origin: .undo) { try $0.undo() }
        return true
    }

    /// Redoes the latest undone edit; false when there is nothing to redo.
    @discardableResult
    public func redo() throws -> Bool {
        guard replica.canRedo else { return false }
        _ = try commit(origin: .redo) { try $0.redo() }
        return true
    }

    /// Runs `body` on the board's actor with every edit made in it undone (and redone) as one
    /// step: a drag of many `move`s, a pasted group. `body` may call `edit` any number of times
    /// and may await; edits other tasks make on this board while it is suspended join the group
    /// too (they are this replica's as well), others' replicas' never do. Groups nest; only the
    /// outermost makes the step. An `undo()` inside the group first closes it (the step so far is
    /// undone). The group closes when `body` returns or throws (edits it made before throwing stay).
    @discardableResult
    public func undoGroup<T: Sendable>(_ body: @Sendable (isolated LiveBoard) async throws -> T) async throws -> T {
        guard store != nil else { throw LiveBoardError.closed }
        undoGroupDepth += 1
        if undoGroupDepth == 1 { _ = try? commitRaw { $0.beginUndoGroup(); return LocalEdit() } }
        defer {
            undoGroupDepth -= 1
            if undoGroupDepth == 0, store != nil { _ = try? commitRaw { $0.endUndoGroup(); return LocalEdit() } }
        }
        return try await body(self)
    }

    private func commitRaw(_ body: (inout Replica) throws -> LocalEdit) throws -> LocalEdit {
        guard let store else { throw LiveBoardError.closed }
        if let endpoint, let sync {
            return try endpoint.edit(sync.board, now: now(), body)
        }
        return try store.commitEdit(body)
    }

    private func commit(origin: UpdateOrigin, _ body: (inout Replica) throws -> LocalEdit) throws -> LocalEdit {
        let edit = try commitRaw(body)
        engine.noteOwnOperations(edit.operations)
        drainEvents()
        changes.changed = false
        publishChange(origins: [origin])
        signal()
        return edit
    }

    /// Publishes an update when the board changed: the changes of the operations since the
    /// last one (and images that arrived), at their cost; the snapshot is made when read.
    func publishChange(origins: Set<UpdateOrigin>) {
        guard let store else { return }
        let changes = engine.changes(to: store.replica)
        noteViewChange()
        refreshStatus()
        guard !changes.isEmpty else { return }
        let source = SnapshotSource(previous: updateChannel.current.source, changes: changes)
        updatesSinceSnapshot += 1
        if updatesSinceSnapshot >= Self.snapshotEvery {
            // Nobody read the last `snapshotEvery` snapshots: make this one, so the chain of
            // changes held for them stays bounded (amortized O(board) / snapshotEvery), off
            // the actor: the update does not wait for it.
            source.makeInBackground()
            updatesSinceSnapshot = 0
        }
        updateChannel.publish(BoardUpdate(source: source, changes: changes, origins: origins, version: engine.version))
    }

    /// At most this many updates' snapshots stay unmade in a row.
    static let snapshotEvery = 128

    /// Remote operations or images merged: an update naming the replicas whose operations came.
    func publishRemoteChange() {
        guard changes.changed, let store else { return }
        changes.changed = false
        var origins = Set(engine.newReplicas(in: store.replica).map { UpdateOrigin.remote($0) })
        if origins.isEmpty { origins = [.images] }
        publishChange(origins: origins)
    }

    func setState(_ new: ClientEngine.Phase) {
        engine.phase = new
        refreshStatus()
    }

    /// The engine's phase as the status says it (`offline`'s `retryAt` is wall-clock seconds
    /// since 1970 in the engine).
    var state: LiveStatus.State {
        switch engine.phase {
        case .idle: return .idle
        case .connecting(let attempt): return .connecting(attempt: attempt)
        case .catchingUp: return .catchingUp
        case .live: return .live
        case .offline(let retryAt, let attempt, let lastError):
            return .offline(retryAt: Date(timeIntervalSince1970: retryAt), attempt: attempt, lastError: lastError)
        case .failed(let error): return .failed(Self.refusal(of: error))
        case .closed: return .closed
        }
    }

    /// A refusal that stops the run, classified (a limit of this side's is terminal whatever
    /// its code says).
    static func refusal(of error: SessionError) -> Refusal {
        var refusal = Refusal(error)
        if ClientEngine.exceedsOwnLimit(error) { refusal.recovery = .stop }
        return refusal
    }

    func refreshStatus() {
        let status = store == nil
            ? LiveStatus(state: state, unacknowledgedOperations: closeReport?.unacknowledgedOperations ?? 0,
                         unacknowledgedImages: closeReport?.unacknowledgedImages ?? 0)
            : LiveStatus(state: state, unacknowledgedOperations: unacknowledgedOperations, unacknowledgedImages: unacknowledgedImages,
                         lastError: engine.lastLinkError, refusedOperations: engine.refusedOperations,
                         refusal: engine.serverRefusal.map { Refusal($0.error) }, viewSaveError: viewSaves.lastError)
        if status != statusChannel.current { statusChannel.publish(status) }
    }
}

/// Set when the endpoint reports a change to the board (merges, images).
final class ChangeFlag {
    var changed = false
}
