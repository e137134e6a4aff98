import BoardCRDT
import BoardModel
import BoardStore
import BoardSync
import Foundation

extension BoardPackage: ReplicaStore {}

/// Runs `BoardHub`s over real TCP on an `EventLoop`: the sync server (many boards, each a package
/// in a data directory, created on first use) and live peers (one package, listening and/or
/// dialing other peers with reconnect and backoff). Loop thread only, apart from `execute`.
public final class SyncHost {
    public struct Options {
        public var limits = SessionLimits()
        public var timing = SessionTiming()
        /// Operator log lines (connections, boards, errors).
        public var log: (String) -> Void = { _ in }
        /// Where new replica ids come from (packages created by the server, copies detected).
        public var newReplicaID: () -> ReplicaID = {
            var generator = SystemRandomNumberGenerator()
            return ReplicaID(UInt64.random(in: 1...UInt64.max, using: &generator))
        }
        /// Reconnect backoff for dialed peers: first delay and cap, in seconds.
        public var reconnectDelay: (first: Double, max: Double) = (0.2, 5)
        public var reconnect = true
        /// Server: boards open at once (each holds its package and a lock descriptor). Opening
        /// one more first closes boards nobody is connected to; with none to close, the client
        /// is told the server is busy.
        public var maxOpenBoards = 1024
        /// Server: a board nobody has been connected to for this long is saved and closed.
        public var idleBoardTimeout: Double = 60

        public init() {}
    }

    /// One hosted board.
    public final class HostedBoard {
        public let hub: BoardHub
        public let package: BoardPackage?
        var scheduler = SaveScheduler()
        /// When the board last had a session (for closing idle boards).
        var lastActive = EventLoop.now()

        init(hub: BoardHub, package: BoardPackage?) {
            self.hub = hub
            self.package = package
        }
    }

    private struct Link {
        var connection: TCPConnection
        var board: String?
        var pending: SyncSession?
        var dialTarget: Int?
    }

    private struct DialTarget {
        var address: SocketAddress
        var delay: Double
        var link: SessionID?
    }

    public let loop: EventLoop
    public private(set) var options: Options
    public private(set) var boards: [String: HostedBoard] = [:]
    private let dataDirectory: String?
    private var links: [SessionID: Link] = [:]
    private var dialTargets: [DialTarget] = []
    private var nextID: SessionID = 0
    private var listener: TCPListener?
    private var tickTimer: Int?
    private var stopped = false
    private var retiredBytes = (sent: 0, received: 0)
    private var flushScheduled: Set<String> = []
    /// Called after every event, so one-shot clients can check whether they are done.
    public var onProgress: (() -> Void)?
    /// Why the most recent link closed, as the session knew it (a peer's ERROR text, or the
    /// violation this side found), so a one-shot client can say what happened.
    public private(set) var lastCloseReason: SessionError?
    /// Why each board that failed to open did (sent to clients asking for it).
    private var openFailures: [String: String] = [:]

    /// The address the host listens on, if it listens.
    public var listenAddress: SocketAddress? { listener?.address }

    // MARK: Construction

    /// A sync server hosting every board in `dataDirectory` (created if missing).
    public init(serverDataDirectory: String, listen: SocketAddress, loop: EventLoop, options: Options = Options()) throws {
        self.loop = loop
        self.options = options
        self.dataDirectory = serverDataDirectory
        try PosixFileSystem().createDirectories(serverDataDirectory)
        try startListening(listen)
        startTicking()
    }

    /// A host for one board held in `store` (a live peer, a one-shot client, a test replica).
    public init(board: String, store: ReplicaStore, package: BoardPackage? = nil, listen: SocketAddress?,
                loop: EventLoop, options: Options = Options()) throws {
        self.loop = loop
        self.options = options
        self.dataDirectory = nil
        let hub = BoardHub(board: board, store: store)
        hub.acceptsAnyBoard = true
        install(HostedBoard(hub: hub, package: package), as: board)
        if let listen { try startListening(listen) }
        startTicking()
    }

    private func install(_ hosted: HostedBoard, as name: String) {
        hosted.hub.log = { [options] line in options.log("board '\(name)': \(line)") }
        hosted.hub.onChange = { [weak hosted] in hosted?.scheduler.noteChange(now: EventLoop.now()) }
        hosted.hub.queuedInTransport = { [weak self] in
            self?.links.values.reduce(0) { $0 + ($1.board == name ? $1.connection.queuedBytes : 0) } ?? 0
        }
        boards[name] = hosted
    }

    private func startListening(_ address: SocketAddress) throws {
        let listener = try TCPListener(address: address, on: loop)
        listener.onAccept = { [weak self] connection in self?.accepted(connection) }
        listener.onError = { [options] line in options.log(line) }
        self.listener = listener
        options.log("listening on \(listener.address)")
    }

    private func startTicking() {
        tickTimer = loop.schedule(after: 0.05) { [weak self] in self?.tick() }
    }

    // MARK: Dialing

    /// Dials `address` for this host's board, reconnecting with backoff when the link drops.
    public func connect(to address: SocketAddress) {
        dialTargets.append(DialTarget(address: address, delay: options.reconnectDelay.first, link: nil))
        dial(dialTargets.count - 1)
    }

    private func dial(_ index: Int) {
        guard !stopped, let (name, hosted) = boards.first else { return }
        let target = dialTargets[index]
        let connection: TCPConnection
        do {
            connection = try TCPConnection.connect(to: target.address, on: loop)
        } catch {
            options.log("cannot connect to \(target.address): \(error)")
            scheduleRedial(index)
            return
        }
        let id = newLink(connection, board: name, dialTarget: index)
        dialTargets[index].link = id
        connection.onConnect = { [weak self] in
            guard let self else { return }
            self.options.log("connected to \(target.address)")
            self.dialTargets[index].delay = self.options.reconnectDelay.first
            hosted.hub.addDialer(id, self.makeSession(.dialer, hosted.hub.store.replica.id), now: EventLoop.now())
            self.flush(name)
        }
    }

    private func scheduleRedial(_ index: Int) {
        guard options.reconnect, !stopped else { return }
        let delay = dialTargets[index].delay
        dialTargets[index].delay = min(delay * 2, options.reconnectDelay.max)
        loop.schedule(after: delay) { [weak self] in self?.dial(index) }
    }

    // MARK: Connections

    private func makeSession(_ role: SyncSession.Role, _ replica: ReplicaID) -> SyncSession {
        SyncSession(role: role, localReplica: replica, limits: options.limits, timing: options.timing)
    }

    private func newLink(_ connection: TCPConnection, board: String?, dialTarget: Int?) -> SessionID {
        nextID += 1
        let id = nextID
        connection.maxQueuedBytes = options.limits.maxQueuedBytes
        links[id] = Link(connection: connection, board: board, pending: nil, dialTarget: dialTarget)
        connection.onData = { [weak self] bytes in self?.received(id, bytes) }
        connection.onWritable = { [weak self] in
            guard let self, let board = self.links[id]?.board else { return }
            self.flush(board)
        }
        connection.onClose = { [weak self] error in self?.closed(id, error) }
        return id
    }

    private func accepted(_ connection: TCPConnection) {
        guard !stopped else { connection.close(immediately: true); return }
        options.log("connection from \(connection.remote)")
        if dataDirectory == nil, let (name, hosted) = boards.first {
            let id = newLink(connection, board: name, dialTarget: nil)
            hosted.hub.addAcceptor(id, makeSession(.acceptor, hosted.hub.store.replica.id), now: EventLoop.now())
        } else {
            let id = newLink(connection, board: nil, dialTarget: nil)
            var session = makeSession(.acceptor, ReplicaID(0))
            session.listen(now: EventLoop.now())
            links[id]?.pending = session
        }
    }

    private func received(_ id: SessionID, _ bytes: [UInt8]) {
        guard let link = links[id] else { return }
        if let board = link.board, let hosted = boards[board] {
            hosted.hub.receive(id, bytes, now: EventLoop.now())
            flush(board)
        } else if var session = link.pending {
            // Out of the link while it grows: a copy of its buffer per read made a slow
            // handshake quadratic.
            links[id]?.pending = nil
            let events = session.receive(bytes, now: EventLoop.now())
            links[id]?.pending = session
            for event in events {
                if case .hello(let hello) = event {
                    attach(id, session, hello)
                    break
                }
            }
            if let pending = links[id]?.pending, pending.isClosed {
                link.connection.send(session.takeOutput())
                link.connection.close()
            }
        }
        onProgress?()
    }

    /// Server: route a handshake to its board, opening or creating the board's package.
    private func attach(_ id: SessionID, _ session: SyncSession, _ hello: Hello) {
        guard let link = links[id] else { return }
        guard let hosted = openBoard(hello.board) else {
            var refused = session
            let why = openFailures[hello.board].map { ": \($0)" } ?? ""
            refused.close(SessionError(.badBoardName, "board '\(hello.board)' cannot be opened here\(why)"))
            link.connection.send(refused.takeOutput())
            link.connection.close()
            links[id]?.pending = nil
            return
        }
        var adopted = session
        adopted.rebind(localReplica: hosted.hub.store.replica.id)
        links[id]?.pending = nil
        links[id]?.board = hello.board
        hosted.hub.attach(id, adopted, hello: hello)
        flush(hello.board)
    }

    /// Server: opens a board now instead of on the first HELLO naming it. Returns whether it is open.
    @discardableResult
    public func preload(board name: String) -> Bool {
        openBoard(name) != nil
    }

    private func openBoard(_ name: String) -> HostedBoard? {
        if let hosted = boards[name] { return hosted }
        guard let directory = dataDirectory, Hello.isValidBoardName(name) else { return nil }
        if boards.count >= options.maxOpenBoards {
            closeIdleBoards(olderThan: 0)
            guard boards.count < options.maxOpenBoards else {
                openFailures[name] = "the server has \(boards.count) boards open with peers connected (limit \(options.maxOpenBoards)); retry later"
                options.log("board '\(name)': not opened: \(boards.count) boards open, the limit")
                return nil
            }
        }
        let path = Path.join(directory, "\(name).boardpkg")
        do {
            let fileSystem = PosixFileSystem()
            let existed = fileSystem.isDirectory(path)
            let package = existed
                ? try BoardPackage.open(at: path, fileSystem: fileSystem, newReplicaID: options.newReplicaID)
                : try BoardPackage.create(at: path, fileSystem: fileSystem, replicaID: options.newReplicaID())
            for notice in package.notices { options.log("board '\(name)': \(notice)") }
            options.log("board '\(name)': \(existed ? "opened" : "created") \(path) (\(package.replica.versionVector.totalCount) operations)")
            let hosted = HostedBoard(hub: BoardHub(board: name, store: package), package: package)
            install(hosted, as: name)
            return hosted
        } catch {
            options.log("board '\(name)': cannot open \(path): \(error)")
            openFailures[name] = error is StoreError ? "\(error)" : "the server could not open it (see its log)"
            return nil
        }
    }

    private func closed(_ id: SessionID, _ error: String?) {
        guard let link = links.removeValue(forKey: id) else { return }
        if let board = link.board, let hosted = boards[board] {
            let reason = hosted.hub.sessions[id]?.closeReason
            if let reason { lastCloseReason = reason }
            if let session = hosted.hub.sessions[id] {
                retiredBytes.sent += session.bytesSent
                retiredBytes.received += session.bytesReceived
            }
            hosted.hub.remove(id)
            flush(board)
            options.log("connection \(link.connection.remote) closed\(error.map { ": \($0)" } ?? reason.map { ": \($0)" } ?? "")")
        } else {
            options.log("connection \(link.connection.remote) closed\(error.map { ": \($0)" } ?? "")")
        }
        if let index = link.dialTarget {
            dialTargets[index].link = nil
            scheduleRedial(index)
        }
        onProgress?()
    }

    /// Flushes `board` at the end of this loop iteration, once however many edits queue output
    /// before then (one write per burst instead of one per edit).
    private func flushSoon(_ board: String) {
        guard flushScheduled.insert(board).inserted else { return }
        loop.schedule(after: 0) { [weak self] in
            self?.flushScheduled.remove(board)
            self?.flush(board)
        }
    }

    /// Writes every session's pending output for a board; closes links whose session ended.
    public func flush(_ board: String) {
        guard let hosted = boards[board] else { return }
        let now = EventLoop.now()
        for id in hosted.hub.sessions.keys.sorted() {
            guard let link = links[id] else { continue }
            // Pull output while the socket keeps taking it; past the high-water mark, wait for
            // the connection's onWritable (asset chunks are cut lazily, so nothing piles up).
            let highWater = options.limits.assetChunk * 4
            while !link.connection.isClosed, link.connection.queuedBytes < highWater {
                let bytes = hosted.hub.output(for: id, maxBytes: highWater - link.connection.queuedBytes, now: now)
                if bytes.isEmpty { break }
                link.connection.send(bytes)
            }
            if hosted.hub.sessions[id]?.isClosed == true, hosted.hub.pendingOutput(for: id) == 0 {
                link.connection.close()
            }
        }
    }

    /// Server: saves and closes boards nobody has been connected to for `age` seconds, releasing
    /// their memory and file descriptors.
    private func closeIdleBoards(olderThan age: Double) {
        guard dataDirectory != nil else { return }
        let now = EventLoop.now()
        for (name, hosted) in boards where hosted.hub.sessions.isEmpty && now - hosted.lastActive >= age {
            if !links.values.contains(where: { $0.board == name }) {
                save(hosted, name)
                hosted.package?.close()
                boards[name] = nil
                options.log("board '\(name)': closed (no peers for \(Int(now - hosted.lastActive)) s)")
            }
        }
    }

    private func tick() {
        guard !stopped else { return }
        let now = EventLoop.now()
        for hosted in boards.values where !hosted.hub.sessions.isEmpty { hosted.lastActive = now }
        closeIdleBoards(olderThan: options.idleBoardTimeout)
        for (name, hosted) in boards {
            for (id, event) in hosted.hub.handleTimers(now: now) {
                if case .closed(let error?) = event { options.log("board '\(name)': session \(id) closed: \(error)") }
            }
            flush(name)
            if hosted.scheduler.isDue(now: now) { save(hosted, name) }
        }
        for (id, link) in links where link.pending != nil {
            var session = link.pending!
            _ = session.handleTimer(now: now)
            links[id]?.pending = session
            if session.isClosed { link.connection.send(session.takeOutput()); link.connection.close() }
        }
        onProgress?()
        tickTimer = loop.schedule(after: 0.05) { [weak self] in self?.tick() }
    }

    private func save(_ hosted: HostedBoard, _ name: String) {
        hosted.scheduler.didSave()
        guard let package = hosted.package else { return }
        do {
            try package.save()
        } catch {
            options.log("board '\(name)': save failed: \(error)")
        }
    }

    // MARK: Local edits and shutdown

    /// A local edit on a hosted board: saved durably (with a package), then streamed to peers.
    @discardableResult
    public func edit(_ board: String? = nil, _ body: (inout Replica) throws -> LocalEdit) throws -> LocalEdit {
        guard let name = board ?? boards.keys.first, let hosted = boards[name] else { return LocalEdit() }
        let edit: LocalEdit
        if let package = hosted.package {
            edit = try package.commit(body)
        } else if let store = hosted.hub.store as? MemoryReplicaStore {
            edit = try store.edit(body)
        } else {
            return LocalEdit()
        }
        hosted.hub.broadcast(edit.operations)
        hosted.scheduler.noteChange(now: EventLoop.now())
        flushSoon(name)
        return edit
    }

    /// Closes one board's links abruptly (a test's or demo's "go offline").
    public func dropConnections() {
        for link in links.values { link.connection.close(immediately: true) }
    }

    /// Stops at once, as a killed process would: no goodbyes, no saves (what was acknowledged is
    /// already in each package's log).
    public func abort() {
        guard !stopped else { return }
        stopped = true
        listener?.close()
        if let tickTimer { loop.cancelTimer(tickTimer) }
        for link in links.values { link.connection.close(immediately: true) }
    }

    /// Stops accepting, says goodbye to every peer, saves every board (unless `save` is false),
    /// and stops reconnecting.
    public func shutdown(save saving: Bool = true) {
        guard !stopped else { return }
        stopped = true
        listener?.close()
        if let tickTimer { loop.cancelTimer(tickTimer) }
        for (name, hosted) in boards {
            hosted.hub.closeAll(nil)
            flush(name)
            if saving { save(hosted, name) }
        }
        for link in links.values { link.connection.close() }
        options.log("stopped")
    }

    /// Open links (for statistics and tests).
    public var connectionCount: Int { links.count }

    /// True when nothing waits to be written on any link of `board`.
    public func isQuiet(_ board: String) -> Bool {
        guard let hosted = boards[board] else { return true }
        return links.allSatisfy { id, link in
            link.board != board || (link.connection.queuedBytes == 0 && hosted.hub.pendingOutput(for: id) == 0)
        }
    }

    /// Takes this host off the network (closing links, no redialing) or back on (dialing again).
    public func setOffline(_ offline: Bool) {
        if offline {
            options.reconnect = false
            for link in links.values { link.connection.close(immediately: true) }
        } else {
            options.reconnect = true
            for index in dialTargets.indices where dialTargets[index].link == nil { dial(index) }
        }
    }

    /// Bytes sent and received by every session this host has had.
    public var sessionBytes: (sent: Int, received: Int) {
        var sent = retiredBytes.sent
        var received = retiredBytes.received
        for hosted in boards.values {
            for session in hosted.hub.sessions.values {
                sent += session.bytesSent
                received += session.bytesReceived
            }
        }
        return (sent, received)
    }
}
