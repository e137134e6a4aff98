import BoardCRDT
import BoardModel

/// Limits a session enforces on what it receives and buffers.
public struct SessionLimits: Sendable {
    /// Largest frame accepted (type + payload).
    public var maxFrame = 16 << 20
    /// Largest asset accepted.
    public var maxAsset = 64 << 20
    /// Asset chunk size when sending.
    public var assetChunk = 256 << 10
    /// Bytes a host may queue for a peer before the peer counts as not reading (enforced by the
    /// transport, which knows what the socket has taken, and by the session for its own output).
    public var maxQueuedBytes = 64 << 20
    /// Largest frame before the handshake is done: a HELLO needs little, and an unauthenticated
    /// connection must not make the host buffer 16 MiB.
    public var maxHandshakeFrame = 1 << 20
    /// PRESENCE messages taken from a peer per second (a burst of twice as many is allowed);
    /// the rest are dropped unseen: a cursor's flood must not become every other peer's.
    public var presencePerSecond: Double = 30
    /// History requests (docs/PROTOCOL.md, "History on demand") a peer may have unanswered on
    /// one connection; one more is answered `busy` at once, unread by the host.
    public var historyRequestsInFlight = 1
    /// History requests taken from a peer per second (bursts of twice as many); the rest are
    /// answered `busy` at once.
    public var historyRequestsPerSecond: Double = 4
    /// Bytes of entries in one history answer (beyond a records answer's first entry, the
    /// board at the range's start, which is bounded by `maxFrame`): what an answerer sends at
    /// most, whatever the request asks.
    public var maxHistoryAnswer = 1 << 20

    public init() {}
}

/// Timing of keep-alives. Times are seconds on the host's monotonic clock, passed in.
public struct SessionTiming: Sendable {
    /// Send a PING after this long without sending anything.
    public var keepAlive: Double = 5
    /// Close the session after this long without receiving anything.
    public var idleTimeout: Double = 20
    /// A frame that stays incomplete for longer than `idleTimeout` while less than this many
    /// bytes per second arrive is a stall, not a slow transfer: a corrupted length field makes
    /// the receiver wait for bytes that will never come while keep-alives keep the link "busy".
    public var minimumFrameRate: Double = 4096
    /// An accepted connection must complete its HELLO within this long (keep-alives or a
    /// trickle of bytes do not extend it).
    public var handshakeTimeout: Double = 10

    public init(keepAlive: Double = 5, idleTimeout: Double = 20) {
        self.keepAlive = keepAlive
        self.idleTimeout = idleTimeout
    }
}

/// What a session reports to its host.
public enum SessionEvent: Equatable, Sendable {
    /// The peer's handshake. An acceptor answers with `accept(version:)` or `close(_:)`.
    case hello(Hello)
    /// Operations to merge (the host validates them by applying; invalid ones → `close`).
    case operations(OperationBatch)
    /// The peer has durably merged everything up to this vector.
    case acknowledged(VersionVector)
    /// The peer has sent everything it held when the session began.
    case synced(VersionVector)
    /// The peer wants these assets.
    case assetsWanted([AssetRequest])
    /// A chunk of an asset this side asked for (feed it to an `AssetAssembler`).
    case assetChunk(AssetChunk)
    case assetUnavailable(AssetHash)
    /// What a peer (or a replica behind it) is doing on the board (ephemeral).
    case presence(Presence)
    /// The peer dropped these operations of this side (for each replica, the highest dropped)
    /// and keeps the session open; `SessionError` (remote) says why.
    case refused(SessionError, VersionVector)
    /// The peer asks for history (already checked: well-formed, within the connection's
    /// requests in flight and per second). Answer with `SyncSession.answerHistory`.
    case historyRequested(HistoryRequest)
    /// The answer to a history request this side sent.
    case history(HistoryAnswer)
    /// The session is over: nil for a clean goodbye, else why.
    case closed(SessionError?)
}
