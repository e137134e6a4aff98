import BoardNet
import BoardRedis
import BoardSync
import Foundation

/// Drives a `RedisBoardLog` over two TCP connections to one Redis server on a `SyncHost`'s
/// event loop: connects (and reconnects with backoff), writes what the log queues, feeds it
/// what Redis answers, arms its timers, and attaches every board the host opens.
/// Loop thread only.
public final class RedisCluster: HostReplication {
    public let address: SocketAddress
    public let boardLog: RedisBoardLog
    let loop: EventLoop
    /// Revocations shared through this Redis (`shareRevocations`), if any.
    var revocationLink: RevocationLink?
    private var connections: [RedisBoardLog.Link: TCPConnection] = [:]
    private var connected: Set<RedisBoardLog.Link> = []
    private var backoff: [RedisBoardLog.Link: Backoff] = [:]
    /// When each link connected: one Redis closes right away (it refuses an unauthenticated
    /// client's long command) keeps backing off instead of being redialled ten times a second.
    private var connectedAt: [RedisBoardLog.Link: Double] = [:]
    private var timer: (id: Int, at: Double)?
    private weak var host: SyncHost?
    private var stopped = false
    private let log: (String) -> Void

    public init(address: SocketAddress, options: RedisBoardLog.Options, loop: EventLoop) {
        self.address = address
        var options = options
        options.redisName = "Redis at \(address)"
        self.boardLog = RedisBoardLog(options: options)
        self.loop = loop
        self.log = options.log
    }

    /// Replicates every board `host` (a server) has open or opens from now on, and connects.
    public func attach(to host: SyncHost) {
        self.host = host
        let endpoint = host.endpoint
        host.replication = self
        endpoint.boardsShareALog = true
        endpoint.boardsShareAuthorship = boardLog.options.sharesAuthorship
        for (name, board) in endpoint.boards.sorted(by: { $0.key < $1.key }) {
            boardLog.attach(name, hub: board.hub, now: EventLoop.now())
        }
        for link in RedisBoardLog.Link.allCases { connect(link) }
    }

    /// The host's boards opened and closed and what their hubs ask of the shared log, as the
    /// host drains its endpoint. Queued commands are written at once, and the timer re-armed:
    /// a ticket with nothing to append completes at the log's next deadline (now), not at the
    /// next reply from Redis.
    public func handle(_ event: SyncEndpoint.Event, on host: SyncHost) {
        switch event {
        case .boardOpened(let board): boardLog.attach(board.name, hub: board.hub, now: EventLoop.now())
        case .boardClosed(let name): boardLog.detach(name)
        case .sharedLog(let board, let request): boardLog.handle(request, on: board, now: EventLoop.now())
        case .boardChanged, .presence, .saveView, .historyRequested, .historyAnswered: return
        }
        pump()
    }

    /// After the log took something from Redis (or lost a link): writes what it queued, and the
    /// host hands on what the hubs it touched have (acknowledgements, merged operations).
    private func pumpAndRefresh() {
        pump()
        closeDeletedBoards()
        host?.refresh()
    }

    /// Boards the log found deleted (a tombstone in Redis, a deletion notice): closed here
    /// with `boardDeleted`, this server's copy removed (`SyncHost.boardDeletedElsewhere`).
    func closeDeletedBoards() {
        let deleted = boardLog.takeDeletedBoards()
        guard let host, !deleted.isEmpty else { return }
        for (board, at) in deleted { host.boardDeletedElsewhere(board, deletedAt: at) }
        pump()
    }

    /// Links lost or not connected (each retried after a backoff), for metrics.
    public private(set) var linkFailures = 0

    /// Whether every link (commands, tail, presence) is connected.
    public var isConnected: Bool { connected.count == RedisBoardLog.Link.allCases.count }

    public func stop() {
        stopped = true
        revocationLink?.stop()
        if let timer { loop.cancelTimer(timer.id) }
        for connection in connections.values { connection.close(immediately: true) }
        connections = [:]
    }

    private func connect(_ link: RedisBoardLog.Link) {
        guard !stopped else { return }
        let connection: TCPConnection
        do {
            connection = try TCPConnection.connect(to: address, on: loop)
        } catch {
            lost(link, "\(error)")
            return
        }
        connections[link] = connection
        connection.onConnect = { [weak self] in
            guard let self else { return }
            self.connected.insert(link)
            self.connectedAt[link] = EventLoop.now()
            self.log("Redis \(link) link connected to \(self.address)")
            self.boardLog.linkUp(link, now: EventLoop.now())
            self.pumpAndRefresh()
        }
        connection.onData = { [weak self] bytes in
            guard let self else { return }
            do {
                try self.boardLog.receive(link, bytes, now: EventLoop.now())
            } catch {
                connection.close(immediately: true)
                self.lost(link, "\(error)")
                return
            }
            self.pumpAndRefresh()
        }
        connection.onClose = { [weak self, weak connection] error in
            guard let self, let connection, self.connections[link] === connection else { return }
            self.lost(link, error ?? "closed by Redis", refused: connection.failureCode == ECONNREFUSED)
        }
    }

    /// A link closed, or could not be connected: it is dialed again after the backoff. A
    /// failed connect is the board log's storage trouble (logged once, told to clients).
    private func lost(_ link: RedisBoardLog.Link, _ reason: String, refused: Bool = false) {
        linkFailures += 1
        connections[link] = nil
        let wasUp = connected.remove(link) != nil
        boardLog.linkDown(link, now: EventLoop.now(), reason: reason)
        guard !stopped else { return }
        if wasUp, let at = connectedAt[link], EventLoop.now() - at >= 1 { backoff[link]?.reset() }
        let delay = backoff[link, default: Backoff(first: 0.1, max: 2)].next()
        if !wasUp {
            let refused = refused || reason.hasSuffix(String(cString: strerror(ECONNREFUSED)))
            let prefix = "cannot connect to \(address): "
            let why = reason.hasPrefix(prefix) ? String(reason.dropFirst(prefix.count)) : reason
            boardLog.connectFailed(link, because: refused ? "refused the connection" : "cannot be reached (\(why))", now: EventLoop.now())
        }
        _ = loop.schedule(after: delay) { [weak self] in self?.connect(link) }
        pumpAndRefresh()
    }

    /// Writes what the log queued (an admin's call, from outside the log's own events).
    func flushCommands() { pump() }

    /// Writes what the log queued on each link and re-arms the timer at its next deadline
    /// (appends are pipelined: writing each board's as it comes adds no round trip).
    private func pump() {
        for (link, connection) in connections where connected.contains(link) {
            let bytes = boardLog.takeOutput(link)
            if !bytes.isEmpty { connection.send(bytes) }
        }
        guard !stopped else { return }
        guard let deadline = boardLog.nextDeadline else {
            if let timer { loop.cancelTimer(timer.id); self.timer = nil }
            return
        }
        if let timer {
            if timer.at <= deadline { return }
            loop.cancelTimer(timer.id)
        }
        let id = loop.schedule(after: max(0, deadline - EventLoop.now())) { [weak self] in
            guard let self else { return }
            self.timer = nil
            for link in self.boardLog.handleTimers(now: EventLoop.now()) {
                self.log("Redis \(link) link stopped answering; reconnecting")
                self.connections[link]?.close(immediately: true)
                self.lost(link, "no reply in time")
            }
            self.pumpAndRefresh()
        }
        timer = (id, deadline)
    }
}
