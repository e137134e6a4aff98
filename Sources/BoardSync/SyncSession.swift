import BoardCRDT
import BoardModel
import Foundation

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
    /// The peer's handshake. An acceptor answers with `accept(board:version:)` or `close(_:)`.
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
    /// The session is over: nil for a clean goodbye, else why.
    case closed(SessionError?)
}

/// The sync protocol between two replicas of one board, as a sans-IO state machine.
///
/// Driving it (see docs/PROTOCOL.md):
/// 1. The dialing side calls `start(now:)`, which queues its HELLO; the accepting side waits.
/// 2. Feed every received byte to `receive(_:now:)` (any split of the stream) and act on the
///    returned events. An acceptor answers `.hello` with `accept(...)` (sending its HELLO).
/// 3. After the handshake the host sends what the peer lacks (`send(_:)` with
///    `replica.operations(since: peer.version)`), then `sendSynced(_:)`; afterwards it streams new
///    operations with `send(_:)`, acknowledges merges with `acknowledge(_:)`, asks for missing
///    assets with `want(_:)` and answers `.assetsWanted` with `queueAsset(_:_:from:)`.
/// 4. Write `takeOutput()` to the socket whenever it is writable; call `handleTimer(now:)` at
///    `nextDeadline`.
///
/// It touches no socket, clock or file. A protocol violation closes it for good (sticky): an
/// ERROR frame is queued, `.closed(error)` is reported, and later input is ignored.
public struct SyncSession: Sendable {
    public enum Role: Sendable { case dialer, acceptor }

    private enum State: Sendable {
        case idle
        case awaitingHello
        case awaitingAccept(Hello)
        case open(Hello)
        case closed(SessionError?)
    }

    public let role: Role
    public private(set) var localReplica: ReplicaID
    public let limits: SessionLimits
    public let timing: SessionTiming
    public var credentials: [UInt8] = []
    /// When the token that let this session in expires, on the host's clock (the same clock as
    /// every `now`): `handleTimer` closes the session then with `tokenExpired`, and
    /// `nextDeadline` counts it. Nil: no token, or one that never expires.
    public var tokenExpiry: Double?

    private var state: State = .idle
    private var decoder: FrameDecoder
    private var outbox: [UInt8] = []
    /// Assets being sent, lazily cut into chunks. `Data` shares the store's bytes: twenty peers
    /// fetching one image hold one copy, not twenty.
    private var assetQueue: [(hash: AssetHash, data: Data, offset: Int)] = []
    /// The answer to the latest PING not yet sent: a peer that floods PINGs and never reads
    /// costs one pending PONG, not a queue of them.
    private var pendingPong: UInt64?
    private var pendingLive: [Op] = []
    /// What this session's live batches carried to the peer, and what the peer's carried here:
    /// linked batches (format 3) are encoded and decoded against them.
    private var outgoingLink = BatchLink()
    private var incomingLink = BatchLink()
    /// Presence waiting for output, latest per replica (a slow reader holds one per replica).
    private var pendingPresence: [ReplicaID: Presence] = [:]
    /// Token bucket for the peer's PRESENCE messages.
    private var presenceTokens: Double?
    private var presenceRefilledAt: Double = 0
    /// PRESENCE messages from the peer dropped by the rate limit.
    public private(set) var presenceDropped = 0
    private var lastReceived: Double = 0
    /// When bytes last arrived (hosts resume a handshake's buffered frames at this time).
    public var lastReceivedAt: Double { lastReceived }
    private var lastSent: Double = 0
    /// When the last complete frame arrived, and the byte count then (stall detection).
    private var lastFrame: (at: Double, bytes: Int) = (0, 0)
    private var pingNonce: UInt64 = 0
    private var boardName: String = ""

    /// Assets requested on this link and not yet fully received.
    public private(set) var outstandingWants: Set<AssetHash> = []
    /// Assets queued or sent on this link: each crosses a link at most once.
    public private(set) var sentAssets: Set<AssetHash> = []
    /// Bytes of frames received and sent, for statistics.
    public private(set) var bytesReceived = 0
    public private(set) var bytesSent = 0

    /// What this side announces in its HELLO (`Capabilities`). Features are used only when both
    /// sides announce them, so an older set makes a session talk like a build from before them
    /// (interoperability tests and simulations).
    public let capabilities: UInt64

    public init(role: Role, localReplica: ReplicaID, limits: SessionLimits = SessionLimits(), timing: SessionTiming = SessionTiming(),
                capabilities: UInt64 = Capabilities.supported) {
        self.role = role
        self.localReplica = localReplica
        self.limits = limits
        self.capabilities = capabilities
        self.timing = timing
        self.decoder = FrameDecoder(maxFrame: min(limits.maxFrame, limits.maxHandshakeFrame))
    }

    /// The peer's handshake once the session is open.
    public var peer: Hello? {
        if case .open(let hello) = state { return hello }
        return nil
    }

    public var isOpen: Bool { peer != nil }

    public var isClosed: Bool {
        if case .closed = state { return true }
        return false
    }

    public var closeReason: SessionError? {
        if case .closed(let error) = state { return error }
        return nil
    }

    // MARK: Inputs

    /// Dialer: queue the HELLO for `board`, saying we hold `version`.
    public mutating func start(board: String, version: VersionVector, now: Double) {
        precondition(role == .dialer, "only the dialing side starts")
        guard case .idle = state else { return }
        boardName = board
        lastReceived = now
        lastFrame = (now, bytesReceived)
        lastSent = now
        queue(.hello(Hello(board: board, replica: localReplica, credentials: credentials,
                           capabilities: capabilities, version: version)))
        state = .awaitingHello
    }

    /// Acceptor: begin waiting for the dialer's HELLO.
    public mutating func listen(now: Double) {
        precondition(role == .acceptor, "only the accepting side listens")
        guard case .idle = state else { return }
        lastReceived = now
        lastFrame = (now, bytesReceived)
        lastSent = now
        listenedAt = now
        state = .awaitingHello
    }

    /// When an acceptor began waiting for the HELLO.
    private var listenedAt = 0.0

    /// Acceptor: sets which replica answers, before `accept` (a server learns which board, and so
    /// which replica, from the HELLO itself).
    public mutating func rebind(localReplica: ReplicaID) {
        guard case .awaitingAccept = state else { return }
        self.localReplica = localReplica
    }

    /// Acceptor: answer the peer's HELLO, saying we hold `version` of its board.
    public mutating func accept(version: VersionVector) {
        guard case .awaitingAccept(let hello) = state else { return }
        queue(.hello(Hello(board: hello.board, replica: localReplica, capabilities: capabilities, version: version)))
        state = .open(hello)
        decoder.maxFrame = limits.maxFrame
    }

    /// Feeds received bytes (any split of the stream) and returns what happened.
    public mutating func receive(_ bytes: [UInt8], now: Double) -> [SessionEvent] {
        if isClosed { return [] }
        bytesReceived += bytes.count
        lastReceived = now
        decoder.append(bytes)
        var events: [SessionEvent] = []
        while !isClosed {
            let frame: Frame?
            do {
                frame = try decoder.next()
            } catch {
                events.append(fail(error))
                break
            }
            guard let frame else { break }
            lastFrame = (now, bytesReceived)
            do {
                let message = try Message(frame: frame, limits: limits)
                if let event = try handle(message) { events.append(event) }
            } catch {
                events.append(fail(error))
            }
            // Frames behind a HELLO wait in the decoder until the host accepts the session (a
            // PING in the same read as the HELLO is not "before the handshake"); the host then
            // calls `receive([])` to go on.
            if case .awaitingAccept = state { break }
        }
        return events
    }

    /// Checks keep-alive and idle deadlines.
    ///
    /// Each check compares `now` with the very sum `nextDeadline` returns (`now - lastSent >=
    /// keepAlive` can be false at `lastSent + keepAlive` by a rounding: a host on virtual time
    /// then fired the timer at that deadline forever).
    public mutating func handleTimer(now: Double) -> [SessionEvent] {
        switch state {
        case .idle, .closed: return []
        case .awaitingHello where role == .acceptor && now >= listenedAt + timing.handshakeTimeout:
            return [fail(SessionError(.idleTimeout, "no HELLO within \(Int(timing.handshakeTimeout)) s"))]
        default: break
        }
        if let tokenExpiry, now >= tokenExpiry {
            return [fail(SessionError(.tokenExpired, "the token of this connection expired; dial again with a fresh one"))]
        }
        if decoder.bufferedCount > 0, now >= lastFrame.at + timing.idleTimeout,
           Double(bytesReceived - lastFrame.bytes) < timing.minimumFrameRate * (now - lastFrame.at) {
            return [fail(SessionError(.idleTimeout, "a frame has been incomplete for \(Int(now - lastFrame.at)) s with almost nothing arriving (a damaged length field?)"))]
        }
        if now >= lastReceived + timing.idleTimeout {
            return [fail(SessionError(.idleTimeout, "nothing received for \(Int(timing.idleTimeout)) s"))]
        }
        if now >= lastSent + timing.keepAlive {
            pingNonce += 1
            queue(.ping(pingNonce))
            lastSent = now
        }
        return []
    }

    /// When `handleTimer` next needs to run.
    public var nextDeadline: Double? {
        let deadline: Double
        switch state {
        case .idle, .closed: return nil
        case .awaitingHello where role == .acceptor:
            deadline = min(lastSent + timing.keepAlive, lastReceived + timing.idleTimeout, listenedAt + timing.handshakeTimeout)
        default: deadline = min(lastSent + timing.keepAlive, lastReceived + timing.idleTimeout)
        }
        return tokenExpiry.map { min($0, deadline) } ?? deadline
    }

    // MARK: Outputs

    /// Sends operations (a delta or live ones). Ignored before the handshake or after close.
    /// Consecutive live batches are coalesced into one OPS frame when output is taken (any other
    /// frame flushes them first, so the order of frames is kept).
    public mutating func send(_ batch: OperationBatch) {
        guard isOpen, !batch.operations.isEmpty || batch.covers != nil else { return }
        if batch.base == nil, batch.covers == nil {
            pendingLive += batch.operations
            return
        }
        queue(.operations(batch.encoded(format: batchFormat)))
    }

    /// Features both sides announced.
    public var sharedCapabilities: UInt64 {
        (peer?.capabilities ?? 0) & capabilities
    }

    /// The batch format the peer reads: 2 when both sides announced `Capabilities.packedPoints`.
    public var batchFormat: UInt8 {
        sharedCapabilities & Capabilities.packedPoints != 0 ? OperationBatch.formatVersion : 1
    }

    /// Whether live operations go to the peer as linked batches (format 3): both sides
    /// announced `Capabilities.linkedBatches`. A hub then cannot share one encoded frame among
    /// peers.
    public var sendsLinkedBatches: Bool {
        sharedCapabilities & Capabilities.linkedBatches != 0
    }

    /// Sends an already encoded batch (a handshake delta shared by several peers), in the
    /// session's `batchFormat`.
    public mutating func sendEncoded(_ batch: [UInt8]) {
        guard isOpen else { return }
        queue(.operations(batch))
    }

    /// Sends a whole OPS frame encoded once by the caller for several sessions (a hub relaying
    /// one peer's operations to every other peer encodes them once per `batchFormat`, not once
    /// per peer).
    public mutating func sendOperationsFrame(_ frame: [UInt8]) {
        guard isOpen else { return }
        flushLive()
        append(frame)
    }

    /// Whether both sides announced PRESENCE (the peer understands it and this side speaks it).
    public var peerSupportsPresence: Bool {
        sharedCapabilities & Capabilities.presence != 0
    }

    /// Sends what a replica is doing on the board. Latest wins: a newer presence of the same
    /// replica replaces one not yet taken as output. Dropped for peers that did not announce
    /// the capability (they would refuse an unknown message).
    public mutating func sendPresence(_ presence: Presence) {
        guard isOpen, peerSupportsPresence else { return }
        pendingPresence[presence.replica] = presence
    }

    /// Marks the end of the initial delta.
    public mutating func sendSynced(_ version: VersionVector) {
        guard isOpen else { return }
        queue(.synced(version))
    }

    /// Tells the peer what is now durably merged here.
    public mutating func acknowledge(_ version: VersionVector) {
        guard isOpen else { return }
        queue(.ack(version))
    }

    /// Asks for assets (each from where a previous transfer stopped). Hashes already
    /// outstanding on this link are not asked again.
    public mutating func want(_ requests: [AssetRequest]) {
        guard isOpen else { return }
        let fresh = requests.filter { outstandingWants.insert($0.hash).inserted }
        guard !fresh.isEmpty else { return }
        for start in stride(from: 0, to: fresh.count, by: 1024) {
            queue(.want(Array(fresh[start..<min(start + 1024, fresh.count)])))
        }
    }

    /// Queues an asset's bytes from `offset` in chunks. Each asset is sent at most once per
    /// link (a resumed request after a reconnect is a new link).
    public mutating func queueAsset(_ hash: AssetHash, _ data: Data, from offset: UInt64 = 0) {
        guard isOpen, sentAssets.insert(hash).inserted else { return }
        assetQueue.append((hash, data, Int(min(offset, UInt64(data.count)))))
    }

    public mutating func sendNoAsset(_ hash: AssetHash) {
        guard isOpen else { return }
        queue(.noAsset(hash))
    }

    /// Closes: a clean BYE for nil, an ERROR frame otherwise.
    public mutating func close(_ error: SessionError? = nil) {
        guard !isClosed else { return }
        if let error { queue(.error(code: error.code.rawValue, message: error.message)) } else { queue(.bye) }
        state = .closed(error)
    }

    /// Bytes waiting in the session (frames not yet taken, plus queued asset bytes).
    public var pendingOutputCount: Int {
        outbox.count + pendingLive.count + pendingPresence.count * 64 + (pendingPong == nil ? 0 : 16) + assetQueue.reduce(0) { $0 + $1.data.count - $1.offset }
    }

    /// Takes up to about `maxBytes` of output for the socket. Asset chunks are cut lazily here,
    /// so a large asset never sits in memory twice.
    public mutating func takeOutput(maxBytes: Int = Int.max, now: Double? = nil) -> [UInt8] {
        flushLive()
        if !pendingPresence.isEmpty {
            let presences = pendingPresence.values.sorted { $0.replica < $1.replica }
            pendingPresence = [:]
            for presence in presences { queue(.presence(presence)) }
        }
        if let nonce = pendingPong {
            pendingPong = nil
            queue(.pong(nonce))
        }
        while outbox.count < min(maxBytes, limits.assetChunk * 2), !assetQueue.isEmpty {
            var item = assetQueue.removeFirst()
            let end = min(item.data.count, item.offset + limits.assetChunk)
            let base = item.data.startIndex
            let chunk = AssetChunk(hash: item.hash, totalSize: UInt64(item.data.count), offset: UInt64(item.offset),
                                   bytes: Array(item.data[(base + item.offset)..<(base + end)]))
            queue(.assetChunk(chunk))
            item.offset = end
            if end < item.data.count { assetQueue.insert(item, at: 0) }
        }
        if let now, !outbox.isEmpty { lastSent = now }
        let out = outbox
        outbox = []
        bytesSent += out.count
        return out
    }

    // MARK: Internals

    private mutating func queue(_ message: Message) {
        flushLive()
        append(message.frame().encoded())
    }

    private mutating func append(_ frame: [UInt8]) {
        outbox += frame
        // A peer that does not read cannot make this side hold more than the limit.
        if outbox.count > limits.maxQueuedBytes, !isClosed {
            outbox = []
            pendingLive = []
            pendingPresence = [:]
            assetQueue = []
            let error = SessionError(.slowReader, "more than \(limits.maxQueuedBytes) bytes queued for a peer that does not read")
            outbox += Message.error(code: error.code.rawValue, message: error.message).frame().encoded()
            state = .closed(error)
        }
    }

    private mutating func flushLive() {
        guard !pendingLive.isEmpty else { return }
        let batch = OperationBatch(operations: pendingLive)
        pendingLive = []
        let bytes = sendsLinkedBatches ? batch.encoded(linkedTo: &outgoingLink) : batch.encoded(format: batchFormat)
        outbox += Message.operations(bytes).frame().encoded()
    }

    private mutating func fail(_ error: SessionError) -> SessionEvent {
        close(error)
        return .closed(error)
    }

    private mutating func handle(_ message: Message) throws(SessionError) -> SessionEvent? {
        if case .error(let code, let text) = message {
            let error = SessionError(SessionError.Code(rawValue: code) ?? .internalError, text, remote: true)
            state = .closed(error)
            return .closed(error)
        }
        if case .bye = message {
            if !isClosed { queue(.bye) }
            state = .closed(nil)
            return .closed(nil)
        }
        switch state {
        case .awaitingHello:
            guard case .hello(let hello) = message else {
                throw SessionError(.unexpectedMessage, "expected HELLO, got \(message.kind)")
            }
            guard Hello.isValidBoardName(hello.board) else {
                throw SessionError(.badBoardName, "'\(hello.board.prefix(40))' is not a plain board name")
            }
            if role == .dialer {
                // Bytes, not `String` equality (canonical equivalence).
                guard Array(hello.board.utf8) == Array(boardName.utf8) else {
                    throw SessionError(.boardMismatch, "asked for board '\(boardName)', peer answered for '\(hello.board)'")
                }
                state = .open(hello)
                decoder.maxFrame = limits.maxFrame
            } else {
                state = .awaitingAccept(hello)
            }
            return .hello(hello)
        case .awaitingAccept:
            throw SessionError(.unexpectedMessage, "\(message.kind) before the handshake was answered")
        case .open:
            switch message {
            case .hello: throw SessionError(.unexpectedMessage, "a second HELLO")
            case .operations(let bytes):
                do {
                    // Linked batches (format 3) read against what this peer sent before; the
                    // self-contained formats do not touch the link.
                    return .operations(try OperationBatch(decoding: bytes, link: &incomingLink))
                } catch {
                    throw SessionError(.invalidOperations, "\(error)")
                }
            case .ack(let vector): return .acknowledged(vector)
            case .synced(let vector): return .synced(vector)
            case .want(let requests): return .assetsWanted(requests)
            case .assetChunk(let chunk):
                guard outstandingWants.contains(chunk.hash) else {
                    throw SessionError(.unexpectedMessage, "asset \(chunk.hash.hex.prefix(12)) was not asked for")
                }
                if chunk.offset + UInt64(chunk.bytes.count) == chunk.totalSize { outstandingWants.remove(chunk.hash) }
                return .assetChunk(chunk)
            case .noAsset(let hash):
                outstandingWants.remove(hash)
                return .assetUnavailable(hash)
            case .ping(let nonce):
                pendingPong = nonce
                return nil
            case .pong: return nil
            case .presence(let presence):
                // Token bucket: `presencePerSecond`, bursts of twice that.
                let burst = limits.presencePerSecond * 2
                let elapsed = max(0, lastReceived - presenceRefilledAt)
                var tokens = min(burst, (presenceTokens ?? burst) + elapsed * limits.presencePerSecond)
                presenceRefilledAt = lastReceived
                guard tokens >= 1 else {
                    presenceTokens = tokens
                    presenceDropped += 1
                    return nil
                }
                tokens -= 1
                presenceTokens = tokens
                return .presence(presence)
            case .error, .bye: return nil
            }
        case .idle, .closed:
            return nil
        }
    }
}
