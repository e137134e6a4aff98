import BoardCRDT
import BoardModel
import Foundation

/// The sync protocol between two replicas of one board, as a sans-IO state machine.
///
/// Driving it (see docs/PROTOCOL.md):
/// 1. The dialing side calls `start(board:version:now:)`, which queues its HELLO; the accepting side calls `listen(now:)` and waits.
/// 2. Feed every received byte to `receive(_:now:)` (any split of the stream) and act on the
///    returned events. An acceptor answers `.hello` with `accept(version:)` (sending its HELLO).
/// 3. After the handshake the host sends what the peer lacks (`send(_:)` with
///    `replica.operations(since: peer.version)`), then `sendSynced(_:)`; afterwards it streams new
///    operations with `send(_:)`, acknowledges merges with `acknowledge(_:)`, asks for missing
///    assets with `want(_:)` and answers `.assetsWanted` with `queueAsset(_:_:from:)`.
/// 4. Write `takeOutput()` to the socket whenever it is writable; call `handleTimer(now:)` at
///    `nextDeadline`.
///
/// It touches no socket, clock or file. A protocol violation closes it for good (sticky): an
/// ERROR frame is queued, `.closed(error)` is reported, and later input is ignored.
package struct SyncSession: Sendable {
    public enum Role: Sendable { case dialer, acceptor }

    /// The phases, each holding its own data: what an open link queued lives in `OpenLink` and
    /// is dropped whole at close, so nothing but the goodbye follows an ERROR or BYE.
    private enum State: Sendable {
        case idle
        /// Dialer: our HELLO for `board` is queued. Acceptor: listening since `since`.
        case awaitingHello(board: String, since: Double)
        /// Acceptor: the peer's HELLO waits for the host's `accept`.
        case awaitingAccept(Hello)
        case open(OpenLink)
        /// Over: nil for a clean goodbye, else why. Only the byte queue (ending with the ERROR
        /// or BYE) is left to send.
        case closed(SessionError?)
        /// Transient while an open link is changed in place (never seen outside a method).
        case modifying
    }

    package let role: Role
    package private(set) var localReplica: ReplicaID
    package let limits: SessionLimits
    package let timing: SessionTiming
    package var credentials: [UInt8] = []
    /// When the token that let this session in expires, on the host's clock (the same clock as
    /// every `now`): `handleTimer` closes the session then with `tokenExpired`, and
    /// `nextDeadline` counts it. Nil: no token, or one that never expires.
    package var tokenExpiry: Double?

    private var state: State = .idle
    private var decoder: FrameDecoder
    /// Framed bytes for the transport, in order. Whatever the phase, the session holds at most
    /// `limits.maxQueuedBytes` here.
    private var outbox: [UInt8] = []
    /// PRESENCE messages from the peer dropped by the rate limit.
    package private(set) var presenceDropped = 0
    private var lastReceived: Double = 0
    /// When bytes last arrived (hosts resume a handshake's buffered frames at this time).
    package var lastReceivedAt: Double { lastReceived }
    private var lastSent: Double = 0
    /// When the last complete frame arrived, and the byte count then (stall detection).
    private var lastFrame: (at: Double, bytes: Int) = (0, 0)
    private var pingNonce: UInt64 = 0

    /// Bytes of frames received and sent, for statistics.
    package private(set) var bytesReceived = 0
    package private(set) var bytesSent = 0

    /// What this side announces in its HELLO (`Capabilities`). Features are used only when both
    /// sides announce them, so an older set makes a session talk like a build from before them
    /// (interoperability tests and simulations).
    package let capabilities: UInt64

    package init(role: Role, localReplica: ReplicaID, limits: SessionLimits = SessionLimits(), timing: SessionTiming = SessionTiming(),
                capabilities: UInt64 = Capabilities.supported) {
        self.role = role
        self.localReplica = localReplica
        self.limits = limits
        self.capabilities = capabilities
        self.timing = timing
        self.decoder = FrameDecoder(maxFrame: min(limits.maxFrame, limits.maxHandshakeFrame))
    }

    /// The peer's handshake once the session is open.
    package var peer: Hello? {
        if case .open(let link) = state { return link.peer }
        return nil
    }

    package var isOpen: Bool { peer != nil }

    package var isClosed: Bool {
        if case .closed = state { return true }
        return false
    }

    package var closeReason: SessionError? {
        if case .closed(let error) = state { return error }
        return nil
    }

    /// Features both sides announced (none before the session is open).
    package var sharedCapabilities: UInt64 {
        if case .open(let link) = state { return link.sharedCapabilities }
        return 0
    }

    /// The batch format the peer reads: 2 when both sides announced `Capabilities.packedPoints`.
    package var batchFormat: UInt8 {
        if case .open(let link) = state { return link.batchFormat }
        return 1
    }

    /// Whether live operations go to the peer as linked batches (format 3): both sides
    /// announced `Capabilities.linkedBatches`. A hub then cannot share one encoded frame among
    /// peers.
    package var sendsLinkedBatches: Bool {
        if case .open(let link) = state { return link.sendsLinkedBatches }
        return false
    }

    /// Whether the peer reads label operations (both sides announced `Capabilities.labels`);
    /// pre-encoded batches for one that does not must leave them out.
    package var readsLabels: Bool {
        if case .open(let link) = state { return link.readsLabels }
        return false
    }

    /// Whether both sides announced PRESENCE (the peer understands it and this side speaks it).
    package var peerSupportsPresence: Bool {
        if case .open(let link) = state { return link.supportsPresence }
        return false
    }

    /// Whether both sides announced history (requests may go either way).
    package var peerSupportsHistory: Bool {
        if case .open(let link) = state { return link.supportsHistory }
        return false
    }

    /// History requests this side sent and has no answer to yet.
    package var historyRequestsAwaiting: Set<UInt64> {
        if case .open(let link) = state { return link.ownHistoryRequests }
        return []
    }

    /// The peer's history requests the host has not answered yet.
    package var historyRequestsToAnswer: Set<UInt64> {
        if case .open(let link) = state { return link.peerHistoryRequests }
        return []
    }

    /// Assets requested on this link and not yet fully received.
    package var outstandingWants: Set<AssetHash> {
        if case .open(let link) = state { return link.outstandingWants }
        return []
    }

    /// Assets the peer asked for whose bytes are not all taken as output yet.
    package var queuedAssets: [AssetHash] {
        if case .open(let link) = state { return link.assetQueue.filter { $0.data.count > $0.offset }.map(\.hash) }
        return []
    }

    /// Assets queued or sent on this link: each crosses a link at most once.
    package var sentAssets: Set<AssetHash> {
        if case .open(let link) = state { return link.sentAssets }
        return []
    }

    /// Bytes waiting in the session (frames not yet taken, plus what the open link still
    /// means to send: live operations, presence, a PONG, asset bytes).
    /// Whether anything waits to be written (cheaper than `pendingOutputCount`).
    package var hasOutput: Bool {
        if !outbox.isEmpty { return true }
        if case .open(let link) = state { return link.hasPending }
        return false
    }

    package var pendingOutputCount: Int {
        if case .open(let link) = state { return outbox.count + link.pendingCount }
        return outbox.count
    }

    // MARK: Inputs

    /// Dialer: queue the HELLO for `board`, saying we hold `version`.
    package mutating func start(board: String, version: VersionVector, now: Double) {
        precondition(role == .dialer, "only the dialing side starts")
        guard case .idle = state else { return }
        lastReceived = now
        lastFrame = (now, bytesReceived)
        lastSent = now
        state = .awaitingHello(board: board, since: now)
        queue(.hello(Hello(board: board, replica: localReplica, credentials: credentials,
                           capabilities: capabilities, version: version)))
    }

    /// Acceptor: begin waiting for the dialer's HELLO.
    package mutating func listen(now: Double) {
        precondition(role == .acceptor, "only the accepting side listens")
        guard case .idle = state else { return }
        lastReceived = now
        lastFrame = (now, bytesReceived)
        lastSent = now
        state = .awaitingHello(board: "", since: now)
    }

    /// Acceptor: sets which replica answers, before `accept` (a server learns which board, and so
    /// which replica, from the HELLO itself).
    package mutating func rebind(localReplica: ReplicaID) {
        guard case .awaitingAccept = state else { return }
        self.localReplica = localReplica
    }

    /// Acceptor: answer the peer's HELLO, saying we hold `version` of its board.
    package mutating func accept(version: VersionVector) {
        guard case .awaitingAccept(let hello) = state else { return }
        queue(.hello(Hello(board: hello.board, replica: localReplica, capabilities: capabilities, version: version)))
        guard !isClosed else { return }
        open(hello)
    }

    /// Feeds received bytes (any split of the stream) and returns what happened.
    package mutating func receive(_ bytes: [UInt8], now: Double) -> [SessionEvent] {
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
                if let event = try handle(message, now: now) { events.append(event) }
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
    package mutating func handleTimer(now: Double) -> [SessionEvent] {
        switch state {
        case .idle, .closed, .modifying: return []
        case .awaitingHello(_, let since) where role == .acceptor && now >= since + timing.handshakeTimeout:
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
        if pingsAllowed, now >= lastSent + timing.keepAlive {
            pingNonce += 1
            queue(.ping(pingNonce))
            lastSent = now
        }
        return []
    }

    /// Whether keep-alive PINGs may go: an acceptor says nothing before its HELLO (a PING first
    /// is a protocol error to the dialer, which expects HELLO: seen when a loaded server's timer
    /// fired before it read the dialer's HELLO, or while the host had not yet accepted it).
    private var pingsAllowed: Bool {
        guard role == .acceptor else { return true }
        if case .open = state { return true }
        return false
    }

    /// When `handleTimer` next needs to run.
    package var nextDeadline: Double? {
        let deadline: Double
        switch state {
        case .idle, .closed, .modifying: return nil
        case .awaitingHello(_, let since) where role == .acceptor:
            deadline = min(lastReceived + timing.idleTimeout, since + timing.handshakeTimeout)
        default: deadline = pingsAllowed ? min(lastSent + timing.keepAlive, lastReceived + timing.idleTimeout) : lastReceived + timing.idleTimeout
        }
        return tokenExpiry.map { min($0, deadline) } ?? deadline
    }

    /// Closes: a clean BYE for nil, an ERROR frame otherwise. Live operations already sent go
    /// first, and before a BYE the answer to a PING that came before it; everything else the
    /// open link had queued (asset chunks, presence, and after an ERROR the PONG) is dropped
    /// with it.
    package mutating func close(_ error: SessionError? = nil) {
        guard !isClosed else { return }
        if case .open(var link) = state {
            state = .modifying
            link.flushLive(into: &outbox)
            if error == nil, let nonce = link.pendingPong { outbox += Message.pong(nonce).frame().encoded() }
        }
        let goodbye: Message = error.map { .error(code: $0.code.rawValue, message: $0.message) } ?? .bye
        outbox += goodbye.frame().encoded()
        state = .closed(error)
    }

    /// Takes up to about `maxBytes` of output for the socket. Asset chunks are cut lazily here,
    /// so a large asset never sits in memory twice.
    package mutating func takeOutput(maxBytes: Int = Int.max, now: Double? = nil) -> [UInt8] {
        withOpen { link, outbox in link.drain(into: &outbox, maxBytes: maxBytes) }
        if let now, !outbox.isEmpty { lastSent = now }
        let out = outbox
        outbox = []
        bytesSent += out.count
        return out
    }

    // MARK: Internals

    private mutating func open(_ hello: Hello) {
        state = .open(OpenLink(peer: hello, capabilities: capabilities, assetChunk: limits.assetChunk))
        decoder.maxFrame = limits.maxFrame
    }

    /// Changes the open link in place (its buffers stay uniquely referenced, so nothing is
    /// copied). Nil, and nothing runs, in any other phase.
    @discardableResult
    mutating func withOpen<R, E: Error>(_ body: (inout OpenLink, inout [UInt8]) throws(E) -> R) throws(E) -> R? {
        guard case .open(var link) = state else { return nil }
        state = .modifying
        var out = outbox
        outbox = []
        defer {
            outbox = out
            state = .open(link)
            enforceQueueLimit()
        }
        return try body(&link, &out)
    }

    /// Frames a message in any phase but closed (after live operations waiting, if open).
    mutating func queue(_ message: Message) {
        switch state {
        case .open: withOpen { link, outbox in link.queue(message, into: &outbox) }
        case .closed, .modifying: return
        case .idle, .awaitingHello, .awaitingAccept:
            outbox += message.frame().encoded()
            enforceQueueLimit()
        }
    }

    /// A peer that does not read cannot make this side hold more than the limit.
    private mutating func enforceQueueLimit() {
        guard outbox.count > limits.maxQueuedBytes, !isClosed else { return }
        outbox = []
        let error = SessionError(.slowReader, "more than \(limits.maxQueuedBytes) bytes queued for a peer that does not read")
        outbox += Message.error(code: error.code.rawValue, message: error.message).frame().encoded()
        state = .closed(error)
    }

    private mutating func fail(_ error: SessionError) -> SessionEvent {
        close(error)
        return .closed(error)
    }

    private mutating func handle(_ message: Message, now: Double) throws(SessionError) -> SessionEvent? {
        if case .error(let code, let text) = message {
            let error = SessionError(SessionError.Code(rawValue: code) ?? .internalError, text, remote: true)
            state = .closed(error)
            return .closed(error)
        }
        if case .bye = message {
            close(nil)
            state = .closed(nil)
            return .closed(nil)
        }
        switch state {
        case .awaitingHello(let board, _):
            guard case .hello(let hello) = message else {
                throw SessionError(.unexpectedMessage, "expected HELLO, got \(message.kind)")
            }
            guard Hello.isValidBoardName(hello.board) else {
                throw SessionError(.badBoardName, "'\(hello.board.prefix(40))' is not a plain board name")
            }
            if role == .dialer {
                // Bytes, not `String` equality (canonical equivalence).
                guard Array(hello.board.utf8) == Array(board.utf8) else {
                    throw SessionError(.boardMismatch, "asked for board '\(board)', the other side answered for '\(hello.board)'")
                }
                open(hello)
            } else {
                state = .awaitingAccept(hello)
            }
            return .hello(hello)
        case .awaitingAccept:
            throw SessionError(.unexpectedMessage, "\(message.kind) before the handshake was answered")
        case .open:
            let limits = self.limits
            var dropped = presenceDropped
            let event = try withOpen { (link, outbox) throws(SessionError) in
                try link.handle(message, receivedAt: now, limits: limits, dropped: &dropped, outbox: &outbox)
            }
            presenceDropped = dropped
            return event ?? nil
        case .idle, .closed, .modifying:
            return nil
        }
    }
}
