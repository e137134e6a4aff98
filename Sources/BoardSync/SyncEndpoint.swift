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
/// 4. After each of these, drain `pollEvent()` (boards opened, closed and changed, presences,
///    shared-log work), write the connections `takeSessionsWithOutput()` lists, and say how much
///    each connection's transport still holds (`noteTransportQueued`). The endpoint never calls
///    its host: everything it has for it is polled.
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
        /// Whether view saves' file writes leave the host's thread: a due save takes the
        /// store's `beginViewSave()` job and queues `.saveView` for the host, which runs it
        /// elsewhere and reports back with `viewSaveFinished` (one save in flight per board;
        /// the board neither saves again nor closes meanwhile). `SyncHost` turns it on, so a
        /// board's fsyncs delay no other board. Off: saves happen inside the endpoint's call.
        public var viewSavesOffThread = false
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
        /// Whether missing images are asked of peers (false: a client that only wants the
        /// operations, such as a history fetch, never downloads images).
        public var fetchesImages = true
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

    package private(set) var options: Options
    package internal(set) var boards: [String: Board] = [:]
    let opener: ((String) throws -> any HostedStore)?
    /// Every connection's record (`Internal/EndpointLink.swift`): connecting, handshaking with
    /// its session (not said HELLO yet, or refused and draining), or attached to a board.
    var links: [SessionID: EndpointLink] = [:]
    /// Why each board that failed to open did, and the code clients asking for it get
    /// (`limitReached` when the opener hit a fixed limit, `LimitError`).
    var openFailures: [String: (why: String, code: SessionError.Code)] = [:]
    var retiredBytes = (sent: 0, received: 0)
    /// Counters for an operator's metrics (`SyncMetrics`).
    public let metrics = SyncMetrics()
    var now: Double
    /// Why the most recent session closed, as the session knew it.
    package internal(set) var lastCloseReason: SessionError?
    /// Peers to dial (the transport knows each one's address by its index).
    var dialTargets: [DialTarget] = []
    /// Whether dropped links are dialed again (false: a host taken offline, a one-shot client).
    package internal(set) var reconnects = true
    /// Every board's and every pending session's next deadline (`DeadlineQueue`): the earliest
    /// is found without visiting the others. A board is re-armed after whatever may have moved
    /// its deadline (its hub lists itself in `activity` when it moved; the endpoint notes its own
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
        var backoff: Backoff
        /// When to dial next (nil: connected, being dialed, or not reconnecting).
        var due: Double?
    }

    /// A server endpoint: boards come from `opener` when a HELLO first names them.
    package init(opener: @escaping (String) throws -> any HostedStore, options: Options = Options(), now: Double) {
        self.opener = opener
        self.options = options
        self.now = now
        observeRevocations()
    }

    /// A single-board endpoint (a peer) holding `store` under `board`; it accepts any name.
    package init(board: String, store: any HostedStore, options: Options = Options(), now: Double) {
        self.opener = nil
        self.options = options
        self.now = now
        observeRevocations()
        let hosted = install(store, as: board)
        hosted.hub.acceptsAnyBoard = true
    }

    package var isServer: Bool { opener != nil }

    /// Events not drained yet (`pollEvent`, SyncEndpoint+Events.swift); boards with a
    /// `.boardChanged` among them.
    var events = EventQueue<Event>()
    var changedBoards: Set<String> = []
    /// Where this endpoint's hubs list themselves when they have something for it.
    let activity = HubActivity()
    /// Server: boards are replicated through a shared log whose layer attaches at each
    /// `.boardOpened` (`RedisBoardLog`): every board opens holding its greetings and sharing
    /// its merges (`BoardHub.sharedLog`), so no HELLO is answered before the layer has read the
    /// board's log. Set by the host before boards open.
    package var boardsShareALog = false
    /// With `boardsShareALog`: the shared log also decides who may author (`BoardHub.
    /// sharesAuthorship`), from the board's first HELLO on: the HELLO that opens a board is
    /// checked against the shared table like every later one.
    package var boardsShareAuthorship = false

    func makeSession(_ role: SyncSession.Role, _ replica: ReplicaID) -> SyncSession {
        var session = SyncSession(role: role, localReplica: replica, limits: options.limits, timing: options.timing,
                                  capabilities: options.capabilities)
        if role == .dialer { session.credentials = options.credentials }
        return session
    }

    /// Views (web pages) looking at each board: a board with viewers is not closed when idle.
    var viewers: [String: Int] = [:]


    // MARK: Output

    /// Output waiting for a connection (asset chunks are cut lazily, up to about `maxBytes`).
    package func output(for id: SessionID, maxBytes: Int = Int.max, now: Double) -> [UInt8] {
        self.now = now
        if let name = links[id]?.board, let board = boards[name] {
            return board.hub.output(for: id, maxBytes: maxBytes, now: now)
        }
        guard let (bytes, deadline) = withHandshaking(id, { session in (session.takeOutput(maxBytes: maxBytes, now: now), session.nextDeadline) }) else { return [] }
        timers.schedule(.pending(id), at: deadline)
        return bytes
    }

    package func pendingOutput(for id: SessionID) -> Int {
        switch links[id]?.phase {
        case .attached(let name)?: return boards[name]?.hub.pendingOutput(for: id) ?? 0
        case .handshaking(let session)?: return session.pendingOutputCount
        case .connecting?, .lent?, nil: return 0
        }
    }

    /// True when the connection's session has ended and all its output was taken: close it.
    package func isFinished(_ id: SessionID) -> Bool {
        guard let session = session(id) else { return true }
        return session.isClosed && pendingOutput(for: id) == 0
    }

    /// Sessions attached to `board`, in id order.
    package func sessions(of board: String) -> [SessionID] {
        boards[board]?.hub.sessionIDs ?? []
    }

    /// The connections whose sessions gained output (or closed) since the last call, in id
    /// order: a host writes these after each event instead of every session of a board, and
    /// closes those that are finished. Output a full socket held back is the host's to write
    /// when the socket drains (the session is listed again only when it gains more).
    package func takeSessionsWithOutput() -> [SessionID] {
        absorbHubActivity()
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
    package var connections: [SessionID] {
        links.compactMap { id, link in link.board != nil || link.isHandshaking ? id : nil }.sorted()
    }

    lazy var presenceClock: UInt64 = options.presenceClockStart
}

/// An opener's refusal because the host is at a fixed limit (boards per server): reported to
/// the client as `limitReached` with this text.
public struct LimitError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
