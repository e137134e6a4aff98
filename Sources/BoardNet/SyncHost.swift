import BoardCRDT
import BoardModel
import BoardStore
import BoardSync
import Foundation

/// Drives a `SyncEndpoint` over real TCP on an `EventLoop`: the sync server (many boards, each a
/// package in a data directory, created on first use) and live peers (one package, listening
/// and/or dialing other peers with reconnect and backoff). The routing, the hubs and their
/// timers live in the sans-IO endpoint; this class owns sockets, the clock and the timer armed
/// at the endpoint's next deadline. Loop thread only, apart from `execute`.
public final class SyncHost {
    /// The endpoint's options (limits, timing, log, backoff, access, ...: read and set them
    /// straight through, `options.limits`) plus what only the TCP driver knows.
    @dynamicMemberLookup
    public struct Options {
        /// Everything the sans-IO endpoint takes, passed to it as is.
        public var endpoint = SyncEndpoint.Options()
        /// Where new replica ids come from (packages created by the server, copies detected).
        public var newReplicaID: () -> ReplicaID = {
            var generator = SystemRandomNumberGenerator()
            return ReplicaID(UInt64.random(in: 1...UInt64.max, using: &generator))
        }
        /// Whether dropped links are dialed again (the endpoint's backoff, each delay spread
        /// by a random factor of 0.5 to 1.5).
        public var reconnect = true
        /// Server: accepted connections at once, and from one IP address (nil: unlimited).
        /// Beyond either, a new connection gets `busy` and is closed.
        public var maxConnections: Int?
        public var maxConnectionsPerAddress: Int?
        /// Server: boards the data directory may hold; creating one more is refused
        /// (`limitReached`). Nil: unlimited.
        public var maxBoards: Int?
        /// TLS for accepted connections (a server context: certificate and key). Nil: plain TCP.
        public var serverTLS: TLSContext?
        /// TLS for dialed connections (a client context that verifies the server). Nil: plain TCP.
        public var clientTLS: TLSContext?

        /// Threads that run view saves' file writes (`SyncEndpoint.Options.viewSavesOffThread`),
        /// a board always on the same one; 0 saves inside the loop's turn, as before.
        public var viewSaveThreads = 2

        /// History on demand (`SyncHost+History.swift`, docs/PROTOCOL.md): whether sessions'
        /// history requests are answered from the boards' packages (false: `unavailable`), the
        /// largest history read for them (archive and log on disk), the boards whose history is
        /// kept read at once, and how often a changed board's history is read again.
        public var servesHistory = true
        public var maxHistoryBytes = 16 << 20
        public var maxHistoryBoards = 4
        public var historyRefreshInterval: Double = 2

        public init() {
            endpoint.groupCommit = true
            endpoint.jitter = { delay in
                var generator = SystemRandomNumberGenerator()
                return delay * Double.random(in: 0.5...1.5, using: &generator)
            }
        }

        public subscript<Value>(dynamicMember path: WritableKeyPath<SyncEndpoint.Options, Value>) -> Value {
            get { endpoint[keyPath: path] }
            set { endpoint[keyPath: path] = newValue }
        }
    }

    public typealias HostedBoard = SyncEndpoint.Board

    public let loop: EventLoop
    public private(set) var options: Options
    public let endpoint: SyncEndpoint
    /// A server's data directory (nil for a host of one board).
    public private(set) var dataDirectory: String?
    var connections: [SessionID: any HostLink] = [:]
    /// Accepted connections' IP addresses, and how many each has open.
    private var acceptedFrom: [SessionID: String] = [:]
    private var perAddress: [String: Int] = [:]
    /// The endpoint's dial targets, by index.
    var dialAddresses: [SocketAddress] = []
    private var nextID: SessionID = 0
    var listener: TCPListener?
    var timer: (id: Int, at: Double)?
    var stopped = false
    private var flushScheduled = false
    /// View saves running off the loop (`SyncHost+Saving.swift`).
    let viewSaves: ViewSaves
    /// Sessions joining and leaving boards, when someone watches (`SyncHost+Sessions.swift`).
    var sessionWatch: SessionWatch?
    /// Boards' histories read for sessions' history requests, and the one queue they are read
    /// and answered on (`SyncHost+History.swift`).
    var historyServing: [String: HistoryServing] = [:]
    let historyQueue = DispatchQueue(label: "boardsync.host.history")
    /// Called with history answers to requests this host's sessions sent (`requestHistory`).
    public var onHistoryAnswer: ((SessionID, HistoryAnswer) -> Void)?
    /// Histories read for sessions' requests so far (for tests and metrics).
    public internal(set) var historyReads = 0
    /// Called after every event, so one-shot clients can check whether they are done.
    public var onProgress: (() -> Void)?
    /// For metrics: connections accepted, and sessions this side closed with an error, by code
    /// (a peer's own ERROR is not counted).
    public internal(set) var acceptedTotal = 0
    public internal(set) var closedByCode: [SessionError.Code: Int] = [:]

    public var boards: [String: HostedBoard] { endpoint.boards }
    /// Why the most recent link closed, as the session knew it (a peer's ERROR text, or the
    /// violation this side found), so a one-shot client can say what happened.
    public var lastCloseReason: SessionError? { endpoint.lastCloseReason }
    /// Why the most recent connection failed below the session (refused, reset, a TLS
    /// handshake that failed), if it did.
    public internal(set) var lastTransportError: String?
    /// The address the host listens on, if it listens.
    public var listenAddress: SocketAddress? { listener?.address }

    // MARK: Construction

    /// A sync server hosting every board in `dataDirectory` (created if missing).
    public init(serverDataDirectory: String, listen: SocketAddress, loop: EventLoop, options: Options = Options()) throws {
        let options = Self.withSaveThreads(Self.withSafeLog(options))
        self.loop = loop
        self.options = options
        viewSaves = ViewSaves(threads: options.viewSaveThreads)
        let fileSystem = PosixFileSystem()
        try fileSystem.createDirectories(serverDataDirectory)
        let log = options.log
        let newReplicaID = options.newReplicaID
        let maxBoards = options.maxBoards
        var boardCount = (try? fileSystem.listDirectory(serverDataDirectory))?.filter { $0.hasSuffix(".boardpkg") }.count ?? 0
        endpoint = SyncEndpoint(opener: { name in
            // A deleted board stays deleted until its operator re-creates the name.
            if let at = BoardTombstones.deletedAt(serverDataDirectory, name) { throw BoardDeletedError(board: name, deletedAt: at) }
            let path = Path.join(serverDataDirectory, "\(name).boardpkg")
            let existed = fileSystem.isDirectory(path)
            if !existed, let maxBoards, boardCount >= maxBoards {
                // Counted again at the limit: boards deleted since (the admin API) free their places.
                boardCount = (try? fileSystem.listDirectory(serverDataDirectory))?.filter { $0.hasSuffix(".boardpkg") }.count ?? boardCount
            }
            if !existed, let maxBoards, boardCount >= maxBoards {
                throw LimitError("the server holds its limit of \(maxBoards) boards; no new board can be created")
            }
            if !existed { boardCount += 1 }
            let package = existed
                ? try BoardPackage.open(at: path, fileSystem: fileSystem, newReplicaID: newReplicaID)
                : try BoardPackage.create(at: path, fileSystem: fileSystem, replicaID: newReplicaID())
            for notice in package.notices { log("board '\(name)': \(notice)") }
            log("board '\(name)': \(existed ? "opened" : "created") \(path) (\(package.replica.versionVector.totalCount) operations)")
            return package
        }, options: Self.withPresenceClock(options.endpoint), now: EventLoop.now())
        dataDirectory = serverDataDirectory
        wire()
        try startListening(listen)
    }

    /// A host for one board held in `store` (a live peer, a one-shot client, a test replica).
    public init(board: String, store: any HostedStore, listen: SocketAddress?,
                loop: EventLoop, options: Options = Options()) throws {
        let options = Self.withSaveThreads(Self.withSafeLog(options))
        self.loop = loop
        self.options = options
        viewSaves = ViewSaves(threads: options.viewSaveThreads)
        endpoint = SyncEndpoint(board: board, store: store, options: Self.withPresenceClock(options.endpoint), now: EventLoop.now())
        wire()
        if let listen { try startListening(listen) }
    }

    /// Every line this host logs goes through `LogText.escaped`: peers' error texts, names and
    /// refused board names cannot forge log lines or drive the operator's terminal.
    private static func withSafeLog(_ options: Options) -> Options {
        var options = options
        let log = options.log
        options.log = { line in log(LogText.escaped(line)) }
        return options
    }

    /// A replica's presence clock must grow across restarts: real hosts start it at the wall
    /// clock's milliseconds (unless the caller chose a start).
    private static func withPresenceClock(_ options: SyncEndpoint.Options) -> SyncEndpoint.Options {
        var options = options
        if options.presenceClockStart == 0 { options.presenceClockStart = UInt64(Date().timeIntervalSince1970 * 1000) }
        return options
    }

    private func wire() {
        endpoint.metrics.clock = { EventLoop.now() }  // group commits' syncs are timed
        if !options.reconnect { endpoint.setReconnecting(false, now: EventLoop.now()) }
        // The endpoint closes the sessions a change of revocations revokes (its own observer,
        // registered first); their ERROR is written and their connections closed here.
        options.access?.revocations.observe { [weak self] in self?.flushSoon() }
        armTimer()
    }

    private func startListening(_ address: SocketAddress) throws {
        let listener = try TCPListener(address: address, on: loop)
        listener.onAccept = { [weak self] connection in self?.accepted(connection) }
        listener.onError = { [options] line in options.log(line) }
        self.listener = listener
        options.log("listening on \(listener.address)")
    }

    // MARK: Timers

    /// Arms the loop timer at the endpoint's next deadline (or re-arms it when that moved
    /// earlier). The host never polls: a simulator jumps its clock to the same deadlines.
    func armTimer() {
        guard !stopped else { return }
        guard let deadline = endpoint.nextDeadline else {
            if let timer { loop.cancelTimer(timer.id); self.timer = nil }
            return
        }
        if let timer {
            if timer.at <= deadline { return }
            loop.cancelTimer(timer.id)
        }
        let delay = max(0, deadline - EventLoop.now())
        let id = loop.schedule(after: delay) { [weak self] in self?.timerFired() }
        timer = (id, deadline)
    }

    private func timerFired() {
        timer = nil
        guard !stopped else { return }
        endpoint.handleTimers(now: EventLoop.now())
        flushNoted()
        dialDue()
        armTimer()
        onProgress?()
    }

    // MARK: Connections

    func newLink(_ connection: any HostLink) -> SessionID {
        nextID += 1
        let id = nextID
        connection.maxQueuedBytes = options.limits.maxQueuedBytes
        connections[id] = connection
        connection.onData = { [weak self] bytes in self?.received(id, bytes) }
        connection.onWritable = { [weak self] in
            self?.flush(id)
            self?.onProgress?()  // a one-shot client may be done once its output has drained
        }
        connection.onClose = { [weak self] error in self?.closed(id, error) }
        return id
    }

    private func accepted(_ connection: TCPConnection) {
        guard !stopped else { connection.close(immediately: true); return }
        options.log("connection from \(connection.remote)")
        acceptedTotal += 1
        if let tls = options.serverTLS {
            do { try connection.acceptTLS(tls) } catch { return options.log("connection \(connection.remote) closed: \(error)") }
        }
        let id = newLink(connection)
        let address = connection.remote.split(separator: ":").dropLast().joined(separator: ":")
        acceptedFrom[id] = address
        perAddress[address, default: 0] += 1
        endpoint.accept(id, now: EventLoop.now())
        if let limit = options.maxConnections, acceptedFrom.count > limit {
            endpoint.refuse(id, SessionError(.busy, "the server has \(limit) connections open, its limit; retry later"), now: EventLoop.now())
        } else if let limit = options.maxConnectionsPerAddress, perAddress[address, default: 0] > limit {
            endpoint.refuse(id, SessionError(.busy, "\(limit) connections from \(address) are open, the limit per address; retry later"), now: EventLoop.now())
        }
        flush(id)
        armTimer()
    }

    private func received(_ id: SessionID, _ bytes: [UInt8]) {
        guard connections[id] != nil else { return }
        endpoint.receive(id, bytes, now: EventLoop.now())
        if sessionWatch != nil { noteJoined(id) }
        // What one session receives may queue output for others (relays): the endpoint lists
        // the sessions that gained output.
        flushNoted()
        flush(id)
        armTimer()
        onProgress?()
    }

    private func closed(_ id: SessionID, _ error: String?) {
        guard let connection = connections.removeValue(forKey: id) else { return }
        if let address = acceptedFrom.removeValue(forKey: id) {
            perAddress[address, default: 1] -= 1
            if perAddress[address] == 0 { perAddress[address] = nil }
        }
        let reason = endpoint.session(id)?.closeReason
        if let reason, !reason.remote { closedByCode[reason.code, default: 0] += 1 }
        // A reset once the session has ended (a BYE or an ERROR either way) is how a peer that
        // closes with bytes unread ends: an ordinary close, not a transport error.
        let error = connection.wasResetByPeer && endpoint.session(id)?.isClosed == true ? nil : error
        if let error { lastTransportError = error }
        endpoint.closed(id, now: EventLoop.now())
        if sessionWatch != nil { noteLeft(id) }
        flushNoted()
        options.log("connection \(connection.remote) closed\(error.map { ": \($0)" } ?? reason.map { ": \($0)" } ?? "")")
        if let reason, reason.remote, reason.code == .tokenExpired {
            options.log("the token presented to \(connection.remote) expired: connect again with a fresh token (`board-sync token`)")
        }
        armTimer()
        onProgress?()
    }

    /// Writes a connection's pending output while its socket takes it, stopping at a
    /// high-water mark (four asset chunks) until the connection's onWritable (asset chunks are
    /// cut lazily, so nothing piles up); closes it once its session has ended.
    func flush(_ id: SessionID) {
        guard let connection = connections[id] else { return }
        let now = EventLoop.now()
        let highWater = options.limits.assetChunk * 4
        while !connection.isClosed, connection.queuedBytes < highWater {
            let bytes = endpoint.output(for: id, maxBytes: highWater - connection.queuedBytes, now: now)
            if bytes.isEmpty { break }
            connection.send(bytes)
        }
        endpoint.noteTransportQueued(id, connection.queuedBytes)
        if endpoint.isFinished(id) { connection.close() }
    }

    /// Writes every session's pending output for a board.
    public func flush(_ board: String) {
        for id in endpoint.sessions(of: board) { flush(id) }
    }

    /// Something outside the host changed boards' hubs (a replication layer merged operations
    /// or acknowledged some, a view left): hands on the endpoint's events, writes the sessions
    /// that gained output and re-arms the timer.
    public func refresh() {
        flushNoted()
        armTimer()
        onProgress?()
    }

    func flushAll() {
        for id in connections.keys.sorted() { flush(id) }
    }

    /// Hands on the endpoint's events, then writes the sessions it says gained output since
    /// the last time (and closes those that are finished): work in proportion to what the
    /// event touched.
    func flushNoted() {
        drainEvents()
        for id in endpoint.takeSessionsWithOutput() { flush(id) }
    }

    /// The endpoint's events, in order: boards changed and presences to this host's listeners,
    /// boards opened and closed and shared-log work to its replication layer (whose calls into
    /// the hubs may queue more, drained in the same loop).
    func drainEvents() {
        while let event = endpoint.pollEvent() {
            switch event {
            case .boardChanged(let board): onBoardChange?(board)
            case .presence(let board, let presence): onPresence?(board, presence)
            case .saveView(let board, let job): startViewSave(board, job)
            case .historyRequested(let board, let id, let request): historyRequested(board: board, session: id, request)
            case .historyAnswered(_, let id, let answer): onHistoryAnswer?(id, answer)
            case .boardClosed(let board):
                forgetHistory(board)
                replication?.handle(event, on: self)
            case .boardOpened, .sharedLog: replication?.handle(event, on: self)
            }
        }
    }

    /// Flushes at the end of this loop iteration, once however many edits queue output before
    /// then (one write per burst instead of one per edit).
    func flushSoon() {
        guard !flushScheduled else { return }
        flushScheduled = true
        loop.schedule(after: 0) { [weak self] in
            guard let self else { return }
            self.flushScheduled = false
            self.flushNoted()
            self.armTimer()
        }
    }

    // MARK: Listeners (local edits, presence and stopping: SyncHost+Editing.swift)

    /// Called for every presence this host takes: arrivals, updates, and "gone" ones.
    public var onPresence: ((String, Presence) -> Void)?

    /// Called with a board's name whenever its replica changed (merged operations or images,
    /// local edits), once per event however many changes it made: for views that show boards live.
    public var onBoardChange: ((String) -> Void)?

    /// Called with a board's name once it was deleted while open (`deleteOpenBoard`): for views
    /// that show it (the web view closes its pages).
    public var onBoardDeleted: ((String) -> Void)?

    /// The replication layer (`RedisCluster`): handed every board opened and closed and every
    /// shared-log request. Set it before boards open, with `endpoint.boardsShareALog`.
    public weak var replication: (any HostReplication)?
}

/// A replication layer a host hands its endpoint's `.boardOpened`, `.boardClosed` and
/// `.sharedLog` events to, as it drains them (BoardRedisNet's `RedisCluster`).
public protocol HostReplication: AnyObject {
    func handle(_ event: SyncEndpoint.Event, on host: SyncHost)
}
