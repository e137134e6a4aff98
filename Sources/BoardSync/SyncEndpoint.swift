import BoardCRDT
import Foundation

/// The sans-IO core of a sync server or live peer: routes connections to boards and drives
/// their hubs. Bytes and `now` go in, bytes and events come out; it touches no socket or clock,
/// and opens boards only through the injected opener. `SyncHost` drives it over TCP; a
/// simulator drives the same code over simulated links and time.
///
/// Driving it:
/// 1. For each connection the transport picks a `SessionID`: `accept(_:now:)` for an inbound
///    one, `dialed(_:now:)` once an outbound one (single-board endpoints) is connected.
/// 2. `receive(_:_:now:)` with every byte read; write `output(for:maxBytes:now:)` whenever the
///    connection can take it; close the connection when `isFinished(_:)` says so; report a
///    closed connection with `closed(_:now:)`.
/// 3. Call `handleTimers(now:)` at `nextDeadline` (keep-alives, idle timeouts, view saves,
///    closing idle boards).
///
/// A server endpoint (`init(opener:)`) waits for each connection's HELLO, then opens (or
/// creates) the board it names through the opener and attaches the session to that board's
/// hub. A single-board endpoint (`init(board:store:)`, a peer) hosts one board and accepts any
/// board name.
public final class SyncEndpoint {
    /// Tokens required in HELLO (docs/DEPLOYMENT.md). The wall clock is injected: the endpoint
    /// reads no clock of its own. A token's authority ends when it expires or is revoked, on
    /// open sessions too: each closes at its token's expiry (`tokenExpired`), and when
    /// `revocations` changes, the sessions whose tokens it revokes close (`unauthorized`).
    public struct AccessControl {
        public var authority: TokenAuthority
        /// Seconds since 1970, for token expiry.
        public var wallClock: () -> Double
        /// Revoked subjects and tokens (shared with whatever else checks these tokens: a web view).
        public var revocations: RevocationList

        public init(authority: TokenAuthority, wallClock: @escaping () -> Double, revocations: RevocationList = RevocationList()) {
            self.authority = authority
            self.wallClock = wallClock
            self.revocations = revocations
        }
    }

    public struct Options {
        public var limits = SessionLimits()
        public var timing = SessionTiming()
        /// What this endpoint's sessions announce (`Capabilities`); an older set makes it talk
        /// like a build from before those features (the simulator mixes releases this way).
        public var capabilities = Capabilities.supported
        /// Server: boards open at once. Opening one more first closes boards nobody is connected
        /// to; with none to close, the client is told to retry later.
        public var maxOpenBoards = 1024
        /// Server: a board nobody has been connected to for this long is saved and closed.
        public var idleBoardTimeout: Double = 60
        /// When views are saved while edits stream in.
        public var saveQuietPeriod: Double = 0.25
        public var saveMaxDelay: Double = 1.0
        /// Peers: reconnect backoff for dial targets, in seconds: the first delay after a link
        /// drops or a dial fails, doubling up to the cap; reset once a dial connects.
        public var reconnectDelay: (first: Double, max: Double) = (0.2, 5)
        /// Spreads each reconnect delay (so peers of a restarted server do not all dial it at
        /// once). The endpoint draws no randomness itself: hosts inject it (`SyncHost` a system
        /// random factor, the simulator its seeded generator).
        public var jitter: (Double) -> Double = { $0 }
        /// Per board: live operations one connection may send per second (nil: unlimited).
        public var maxOperationsPerSecond: Double?
        /// Per board: images it may hold (nil: unlimited).
        public var maxAssetsPerBoard: Int?
        /// Server: who may do what. Nil: anyone who can connect reads and writes every board
        /// (for loopback development).
        public var access: AccessControl?
        /// Peers: the token presented in HELLO when dialing (empty: none).
        public var credentials: [UInt8] = []
        /// Operator log lines (boards, refusals, errors).
        public var log: (String) -> Void = { _ in }
        /// One sync of a board's log per turn of the host's loop for every peer frame merged in
        /// it, acknowledged after the sync (`BoardHub.groupCommit`). `SyncHost` turns it on.
        public var groupCommit = false
        /// Where this endpoint's presence clock starts (`Presence.clock` must grow across a
        /// replica's restarts: hosts pass wall-clock milliseconds; simulations 0).
        public var presenceClockStart: UInt64 = 0
        /// A planted bug for the simulator (`BoardHub.dropsRelayedPresence` on every board).
        @_spi(Mutations) public var dropsRelayedPresence = false

        public init() {}
    }

    /// One hosted board.
    public final class Board {
        public let name: String
        public let hub: BoardHub
        public let store: any HostedStore
        var scheduler: SaveScheduler
        /// When the board last had a session (for closing idle boards).
        var lastActive: Double
        /// Connections routed to this board (attached to its hub).
        var routed = 0
        /// Waiting in the endpoint's `timersChanged` list to be re-armed.
        var timersChanged = false
        /// Waiting in the endpoint's `boardsWithOutput` list.
        var outputNoted = false

        init(name: String, store: any HostedStore, scheduler: SaveScheduler, now: Double) {
            self.name = name
            self.hub = BoardHub(board: name, store: store)
            self.store = store
            self.scheduler = scheduler
            self.lastActive = now
        }
    }

    public private(set) var options: Options
    public internal(set) var boards: [String: Board] = [:]
    let opener: ((String) throws -> any HostedStore)?
    /// Sessions of a server that have not said HELLO yet (or were refused and are draining).
    var pending: [SessionID: SyncSession] = [:]
    /// Which board each attached session belongs to.
    var route: [SessionID: String] = [:]
    /// Why each board that failed to open did, and the code clients asking for it get
    /// (`limitReached` when the opener hit a fixed limit, `LimitError`).
    var openFailures: [String: (why: String, code: SessionError.Code)] = [:]
    var retiredBytes = (sent: 0, received: 0)
    var now: Double
    /// Bytes the transport holds for a session (not yet written), counted in each hub's budget.
    public var transportQueued: (SessionID) -> Int = { _ in 0 }
    /// Why the most recent session closed, as the session knew it.
    public internal(set) var lastCloseReason: SessionError?
    /// Peers to dial (the transport knows each one's address by its index).
    var dialTargets: [DialTarget] = []
    var dialOf: [SessionID: Int] = [:]
    /// Whether dropped links are dialed again (false: a host taken offline, a one-shot client).
    public internal(set) var reconnects = true
    /// The token grant of every attached session that presented one (access control).
    var grants: [SessionID: AccessGrant] = [:]
    /// Every board's and every pending session's next deadline (`DeadlineQueue`): the earliest
    /// is found without visiting the others. A board is re-armed after whatever may have moved
    /// its deadline (its hub says so through `onTimersChanged`; the endpoint notes its own
    /// changes: saves, idleness); a pending session after every call that touched it.
    var timers = DeadlineQueue<TimerKey>()
    /// Boards whose deadline may have changed since the queue last heard of it.
    var timersChanged: [Board] = []
    /// Boards with sessions that gained output since the host last asked, and pending sessions
    /// that did (`takeSessionsWithOutput`).
    var boardsWithOutput: [Board] = []
    var pendingWithOutput: Set<SessionID> = []
    /// The `now` of the latest `handleTimers`: a board whose last session leaves was last
    /// active then at the latest (hosts call `handleTimers` whenever anything is due).
    var lastTimersRun: Double?

    /// What a timer in `timers` belongs to.
    enum TimerKey: Hashable, Comparable {
        case board(String)
        case pending(SessionID)
    }

    /// The earliest expiry (wall clock) among `grants`, or nil: `handleTimers` re-checks the
    /// grants against the wall clock once it passes (the sessions' own deadlines were set on
    /// the host's clock, which a wall clock stepped forward can outrun).
    var earliestGrantExpiry: Double?

    struct DialTarget {
        var link: SessionID?
        var delay: Double
        /// When to dial next (nil: connected, being dialed, or not reconnecting).
        var due: Double?
    }

    /// A server endpoint: boards come from `opener` when a HELLO first names them.
    public init(opener: @escaping (String) throws -> any HostedStore, options: Options = Options(), now: Double) {
        self.opener = opener
        self.options = options
        self.now = now
        observeRevocations()
    }

    /// A single-board endpoint (a peer) holding `store` under `board`; it accepts any name.
    public init(board: String, store: any HostedStore, options: Options = Options(), now: Double) {
        self.opener = nil
        self.options = options
        self.now = now
        observeRevocations()
        let hosted = install(store, as: board)
        hosted.hub.acceptsAnyBoard = true
    }

    public var isServer: Bool { opener != nil }

    /// Server: a board was opened (a replication layer attaches to its hub here) or closed.
    public var onBoardOpened: ((Board) -> Void)?
    public var onBoardClosed: ((String) -> Void)?

    func makeSession(_ role: SyncSession.Role, _ replica: ReplicaID) -> SyncSession {
        var session = SyncSession(role: role, localReplica: replica, limits: options.limits, timing: options.timing,
                                  capabilities: options.capabilities)
        if role == .dialer { session.credentials = options.credentials }
        return session
    }

    // MARK: Connections

    /// An inbound connection.
    public func accept(_ id: SessionID, now: Double) {
        self.now = now
        // A peer without access control hands the connection to its hub at once; with it, the
        // HELLO's token is checked first, as a server does.
        if !isServer, options.access == nil, let board = boards.values.first {
            route[id] = board.name
            board.routed += 1
            board.hub.addAcceptor(id, makeSession(.acceptor, board.store.replica.id), now: now)
        } else {
            var session = makeSession(.acceptor, ReplicaID(0))
            session.listen(now: now)
            pending[id] = session
            pendingChanged(id)
        }
    }

    /// Turns an accepted connection away before its handshake (a transport limit, such as
    /// connections per address): the peer gets one ERROR, then `isFinished` says close.
    public func refuse(_ id: SessionID, _ error: SessionError, now: Double) {
        self.now = now
        pending[id]?.close(error)
        pendingChanged(id)
        options.log("connection \(id): refused: \(error.message)")
    }

    /// An outbound connection is up (single-board endpoints dial peers): start the handshake.
    public func dialed(_ id: SessionID, now: Double) {
        self.now = now
        guard let board = boards.values.first else { return }
        route[id] = board.name
        board.routed += 1
        board.hub.addDialer(id, makeSession(.dialer, board.store.replica.id), now: now)
    }

    /// Bytes read from a connection.
    @discardableResult
    public func receive(_ id: SessionID, _ bytes: [UInt8], now: Double) -> [SessionEvent] {
        self.now = now
        if let name = route[id], let board = boards[name] {
            return board.hub.receive(id, bytes, now: now)
        }
        guard var session = pending.removeValue(forKey: id) else { return [] }
        // Out of the dictionary while it grows: a copy of its buffer per read made a slow
        // handshake quadratic.
        let events = session.receive(bytes, now: now)
        pending[id] = session
        for event in events {
            if case .hello(let hello) = event {
                attach(id, hello)
                break
            }
        }
        pendingChanged(id)
        return events
    }

    /// Server: route a handshake to its board, opening or creating the board.
    func attach(_ id: SessionID, _ hello: Hello) {
        guard var session = pending[id] else { return }
        // The token first: a refusal says nothing more (not whether the board exists), and no
        // board is opened or created for someone without access.
        var readOnly = false
        var subject: String?
        var relay = false
        var grant: AccessGrant?
        if let access = options.access {
            switch access.check(hello.credentials, board: hello.board) {
            case .success(let verified):
                readOnly = verified.role == .read
                relay = verified.role == .peer
                subject = verified.subject
                grant = verified
            case .failure(let refusal):
                let name = Hello.isValidBoardName(hello.board) ? "'\(hello.board)'" : "(an invalid name)"
                options.log("connection \(id): access denied to board \(name): \(refusal)")
                // An expired token (signed, for this board) is told so, that its holder may
                // fetch a fresh one and dial again; every other refusal says only "denied".
                if case .expired = refusal {
                    session.close(SessionError(.tokenExpired, "the token expired; dial again with a fresh one"))
                } else {
                    session.close(SessionError(.unauthorized, "access denied"))
                }
                pending[id] = session
                return
            }
        }
        guard let board = isServer ? openBoard(hello.board) : boards.values.first else {
            let failure = openFailures[hello.board]
            session.close(SessionError(failure?.code ?? .badBoardName,
                                       "board '\(hello.board)' cannot be opened here\(failure.map { ": \($0.why)" } ?? "")"))
            pending[id] = session
            return
        }
        pending[id] = nil
        session.rebind(localReplica: board.store.replica.id)
        if let grant, let access = options.access {
            grants[id] = grant
            // The expiry (wall clock) becomes a deadline on the host's clock, which the session
            // fires like its keep-alives; `handleTimers` also re-checks on the wall clock.
            if let expires = grant.expires, let left = access.secondsLeft(grant) {
                session.tokenExpiry = now + left
                earliestGrantExpiry = min(earliestGrantExpiry ?? expires, expires)
            }
        }
        route[id] = board.name
        board.routed += 1
        board.lastActive = now
        board.hub.attach(id, session, hello: hello, readOnly: readOnly, subject: subject, relay: relay)
    }

    /// Called with a board's name whenever its replica changed (merged operations or images,
    /// local edits): for views that show boards live.
    public var onBoardChange: ((String) -> Void)?

    /// Views (web pages) looking at each board: a board with viewers is not closed when idle.
    var viewers: [String: Int] = [:]

    /// The transport closed a connection.
    public func closed(_ id: SessionID, now: Double) {
        self.now = now
        if let target = dialOf.removeValue(forKey: id) {
            dialTargets[target].link = nil
            // A link that got as far as the other side's HELLO worked: the backoff starts over.
            // One that failed before it (a TLS mismatch, a port that accepts and closes, a
            // refusal) keeps doubling, so a misconfigured peer does not redial in a tight loop.
            if let name = route[id], boards[name]?.hub.session(id)?.peer != nil {
                dialTargets[target].delay = options.reconnectDelay.first
            }
            scheduleRedial(target)
        }
        if let session = pending.removeValue(forKey: id) {
            pendingChanged(id)
            if let reason = session.closeReason { lastCloseReason = reason }
            return
        }
        grants[id] = nil
        guard let name = route.removeValue(forKey: id), let board = boards[name] else { return }
        board.routed -= 1
        if let session = board.hub.session(id) {
            if let reason = session.closeReason { lastCloseReason = reason }
            retiredBytes.sent += session.bytesSent
            retiredBytes.received += session.bytesReceived
        }
        board.hub.remove(id)
        // Its last session gone, the board's idle time counts from the latest timer run that
        // found it with sessions (or its latest attach, if later).
        if board.hub.sessionCount == 0, let last = lastTimersRun { board.lastActive = max(board.lastActive, last) }
        timersMayHaveChanged(board)
    }

    /// The board a session is attached to, if any.
    public func board(of id: SessionID) -> String? { route[id] }

    /// The session of a connection (attached or still in its handshake).
    public func session(_ id: SessionID) -> SyncSession? {
        if let name = route[id] { return boards[name]?.hub.session(id) }
        return pending[id]
    }

    // MARK: Output

    /// Output waiting for a connection (asset chunks are cut lazily, up to about `maxBytes`).
    public func output(for id: SessionID, maxBytes: Int = Int.max, now: Double) -> [UInt8] {
        self.now = now
        if let name = route[id], let board = boards[name] {
            return board.hub.output(for: id, maxBytes: maxBytes, now: now)
        }
        guard var session = pending.removeValue(forKey: id) else { return [] }
        let bytes = session.takeOutput(maxBytes: maxBytes, now: now)
        pending[id] = session
        timers.schedule(.pending(id), at: session.nextDeadline)
        return bytes
    }

    public func pendingOutput(for id: SessionID) -> Int {
        if let name = route[id] { return boards[name]?.hub.pendingOutput(for: id) ?? 0 }
        return pending[id]?.pendingOutputCount ?? 0
    }

    /// True when the connection's session has ended and all its output was taken: close it.
    public func isFinished(_ id: SessionID) -> Bool {
        guard let session = session(id) else { return true }
        return session.isClosed && pendingOutput(for: id) == 0
    }

    /// Sessions attached to `board`, in id order.
    public func sessions(of board: String) -> [SessionID] {
        boards[board]?.hub.sessionIDs ?? []
    }

    /// The connections whose sessions gained output (or closed) since the last call, in id
    /// order: a host writes these after each event instead of every session of a board, and
    /// closes those that are finished. Output a full socket held back is the host's to write
    /// when the socket drains (the session is listed again only when it gains more).
    public func takeSessionsWithOutput() -> [SessionID] {
        var ids = Array(pendingWithOutput)
        pendingWithOutput.removeAll(keepingCapacity: true)
        for board in boardsWithOutput {
            board.outputNoted = false
            ids += board.hub.takeSessionsWithOutput()
        }
        boardsWithOutput.removeAll(keepingCapacity: true)
        return ids.sorted()
    }

    /// Every connection the endpoint knows, attached or not, in id order.
    public var connections: [SessionID] {
        (Array(route.keys) + Array(pending.keys)).sorted()
    }

    lazy var presenceClock: UInt64 = options.presenceClockStart

    /// Called with the board's name for every presence a hub takes (arrivals, updates, and
    /// "gone" ones when a replica leaves or expires).
    public var onPresence: ((String, Presence) -> Void)?

}

/// An opener's refusal because the host is at a fixed limit (boards per server): reported to
/// the client as `limitReached` with this text.
public struct LimitError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
