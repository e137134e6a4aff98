import BoardNet
import BoardSync
import Foundation

/// Token revocations shared by every server of a cluster through one Redis set
/// (`bs:revocations`, each member a `Revocations` line), sans-IO: every `poll`, the lines of
/// this server's own revocation file not yet in Redis are added (`SADD`) and the whole set is
/// read back (`SMEMBERS`) into the list's "redis" part. One `board-sync token revoke` beside
/// any server's secret thus reaches every server within about two polls. A revocation is never
/// taken out of the set by a server; undoing one on a cluster means removing it from every
/// server's file and from Redis (`SREM`), docs/DEPLOYMENT.md.
///
/// It speaks over one link of its own that a driver owns (`RedisCluster.shareRevocations`).
public final class RedisRevocations {
    public let list: RevocationList
    public let key: String
    private let authCommand: [[UInt8]]?
    private var pipeline = RedisPipeline()
    private var requests: [RedisPipeline.Ticket: (kind: Kind, lines: [String], sentAt: Double)] = [:]
    private var up = false
    /// Lines Redis confirmed it holds.
    private var stored: Set<String> = []
    private let log: (String) -> Void
    /// The last error Redis answered (logged once until a command succeeds).
    private var lastRefusal: String?
    /// A reply later than this (s) means the link is dead: `poll` says so and the driver drops it.
    public var replyTimeout = 10.0

    private enum Kind { case auth, add, read }

    public init(list: RevocationList, keyPrefix: String = "bs", password: String? = nil, user: String? = nil,
                log: @escaping (String) -> Void = { _ in }) {
        self.list = list
        self.key = "\(keyPrefix):revocations"
        self.authCommand = password.map { password in
            [Array("AUTH".utf8)] + (user.map { [Array($0.utf8)] } ?? []) + [Array(password.utf8)]
        }
        self.log = log
    }

    public func linkUp(now: Double) {
        up = true
        if let authCommand { requests[pipeline.send(authCommand)] = (.auth, [], now) }
        poll(now: now)
    }

    public func linkDown() {
        up = false
        requests = [:]
        _ = pipeline.reset()
    }

    /// Queues this round's commands (nothing while the previous round is unanswered). Returns
    /// false when a command has waited longer than `replyTimeout` (drop the link).
    @discardableResult
    public func poll(now: Double) -> Bool {
        guard up else { return true }
        if let oldest = requests.values.map(\.sentAt).min() {
            return now - oldest < replyTimeout
        }
        let local = list.revocations(from: "file").lines.filter { !stored.contains($0) }
        if !local.isEmpty {
            requests[pipeline.send([Array("SADD".utf8), Array(key.utf8)] + local.map { Array($0.utf8) })] = (.add, local, now)
        }
        requests[pipeline.send("SMEMBERS", key)] = (.read, [], now)
        return true
    }

    public func takeOutput() -> [UInt8] { pipeline.takeOutput() }

    /// Bytes from Redis. Throws on bytes that cannot be replies (drop the link).
    public func receive(_ bytes: [UInt8]) throws {
        for (ticket, reply) in try pipeline.receive(bytes) {
            guard let request = requests.removeValue(forKey: ticket) else { continue }
            if case .error(let text) = reply {
                // Once per reason, not every poll (a Redis without this server's password).
                if text != lastRefusal { log("Redis refused a revocation command: \(text)") }
                lastRefusal = text
                continue
            }
            lastRefusal = nil
            switch request.kind {
            case .auth: break
            case .add: stored.formUnion(request.lines)
            case .read:
                let members: [RESPValue]
                switch reply {
                case .array(let values?): members = values
                case .set(let values): members = values
                default: continue
                }
                var revocations = Revocations()
                var lines: Set<String> = []
                for member in members {
                    guard let line = member.text, let revocation = Revocations(line: line) else { continue }
                    revocations.merge(revocation)
                    lines.insert(line)
                }
                stored = lines
                let before = list.revocations(from: "redis")
                list.set(revocations, from: "redis")
                if revocations != before {
                    log("revocations: \(revocations.subjects.count) subject(s) and \(revocations.tokenIDs.count) token id(s) shared through Redis")
                }
            }
        }
    }
}

extension RedisCluster {
    /// Shares `list`'s revocations with every server on this Redis (`RedisRevocations`), over a
    /// connection of its own, polled every `interval` seconds.
    public func shareRevocations(_ list: RevocationList, interval: Double = 0.5) {
        let options = boardLog.options
        let sync = RedisRevocations(list: list, keyPrefix: options.keyPrefix, password: options.password, user: options.user, log: options.log)
        let driver = RevocationLink(address: address, sync: sync, loop: loop, interval: interval)
        revocationLink = driver
        driver.connect()
        driver.tick()
    }
}

/// Drives a `RedisRevocations` over one TCP connection (reconnecting with backoff).
final class RevocationLink {
    let address: SocketAddress
    let sync: RedisRevocations
    private let loop: EventLoop
    private let interval: Double
    private var connection: TCPConnection?
    private var connected = false
    private var delay = 0.1
    var stopped = false

    init(address: SocketAddress, sync: RedisRevocations, loop: EventLoop, interval: Double) {
        self.address = address
        self.sync = sync
        self.loop = loop
        self.interval = interval
    }

    func connect() {
        guard !stopped else { return }
        let connection: TCPConnection
        do {
            connection = try TCPConnection.connect(to: address, on: loop)
        } catch {
            lost()
            return
        }
        self.connection = connection
        connection.onConnect = { [weak self] in
            guard let self else { return }
            self.connected = true
            self.delay = 0.1
            self.sync.linkUp(now: EventLoop.now())
            self.write()
        }
        connection.onData = { [weak self, weak connection] bytes in
            guard let self else { return }
            do {
                try self.sync.receive(bytes)
            } catch {
                connection?.close(immediately: true)
                self.lost()
                return
            }
            self.write()
        }
        connection.onClose = { [weak self, weak connection] _ in
            guard let self, let connection, self.connection === connection else { return }
            self.lost()
        }
    }

    private func lost() {
        connection = nil
        connected = false
        sync.linkDown()
        guard !stopped else { return }
        let wait = delay
        delay = min(delay * 2, 2)
        _ = loop.schedule(after: wait) { [weak self] in self?.connect() }
    }

    private func write() {
        guard connected, let connection else { return }
        let bytes = sync.takeOutput()
        if !bytes.isEmpty { connection.send(bytes) }
    }

    func tick() {
        guard !stopped else { return }
        if connected, !sync.poll(now: EventLoop.now()) {
            connection?.close(immediately: true)
            lost()
        }
        write()
        _ = loop.schedule(after: interval) { [weak self] in self?.tick() }
    }

    func stop() {
        stopped = true
        connection?.close(immediately: true)
        connection = nil
    }
}
