import BoardCRDT
import BoardModel
@_spi(Mutations) import BoardRedis
import BoardSync
import Foundation

/// A seeded, deterministic simulation of scale-out (docs/SCALE-OUT.md): several sync servers
/// (the real `SyncEndpoint`, `BoardHub` and `RedisBoardLog`) sharing a simulated Redis
/// (`SimulatedRedis`), with clients (real peer endpoints) editing one board through whichever
/// server they reach, in virtual time. Faults, drawn from the seed: client links cut (the client
/// dials a server at random again), servers crashing with their cache lost and restarting,
/// Redis restarting (its data kept, every connection dropped), single Redis links dropped, and
/// clients leaving for good once a server acknowledged all they made. Compaction runs often.
///
/// Half the seeds (a generator of their own, so the other seeds' histories stay as they were)
/// run with access control: every client presents a write token of its own subject, and the
/// servers decide authorship through Redis (each client's first operation waits for the
/// binding).
///
/// Oracles after the faults heal: every client and every server holding the board converge to
/// the same board; everything a departed client was told is saved is on it; with access
/// control, Redis binds exactly the replica ids of the clients that edited, each to its
/// client's subject.
public final class ClusterSimulation {
    public struct Report: Sendable {
        public var seed: UInt64
        public var servers = 0
        public var clients = 0
        public var operationsMade = 0
        public var crashes = 0
        public var redisRestarts = 0
        public var cuts = 0
        public var departures = 0
        public var checkpoints = 0
        public var redisCommands = 0
        /// Whether the servers required tokens (authorship shared through Redis).
        public var access = false
        public var convergedAfter: Double?
        public var failures: [String] = []
        public var passed: Bool { failures.isEmpty }
        public init(seed: UInt64) { self.seed = seed }
    }

    private final class Server {
        var endpoint: SyncEndpoint?
        var log: RedisBoardLog?
        var connections: [RedisBoardLog.Link: SimulatedRedis.Connection] = [:]
        var reconnectAt: [RedisBoardLog.Link: Double] = [:]
        var downUntil = 0.0
        var generation = 0
    }

    private final class Client {
        let endpoint: SyncEndpoint
        let store: MemoryReplicaStore
        var departed = false
        /// At departure: what this client made, every bit of it acknowledged by a server.
        var leftWith: UInt64 = 0
        init(endpoint: SyncEndpoint, store: MemoryReplicaStore) {
            self.endpoint = endpoint
            self.store = store
        }
    }

    private struct Link {
        let client: Int
        let clientSession: SessionID
        let server: Int
        let serverSession: SessionID
        let generation: Int
        var up = true
    }

    private var rng: SeededRandom
    private let redis = SimulatedRedis()
    private var servers: [Server] = []
    private var clients: [Client] = []
    private var links: [Link] = []
    private var nextSession: SessionID = 0
    private var now = 0.0
    private var report: Report
    private let faultyPhase: Double
    private let step = 0.005
    private let plantAckBeforeRedis: Bool
    private let access: Bool

    /// `plantAckBeforeRedis`: servers acknowledge before Redis holds what they acknowledge (a
    /// planted bug the acknowledged-loss oracle must catch).
    public init(seed: UInt64, servers serverCount: Int? = nil, clients clientCount: Int? = nil, faultyPhase: Double = 8,
                plantAckBeforeRedis: Bool = false, access: Bool? = nil) {
        rng = SeededRandom(seed: seed)
        self.plantAckBeforeRedis = plantAckBeforeRedis
        let tokens = access ?? Self.drawsAccess(seed: seed)
        self.access = tokens
        report = Report(seed: seed)
        report.access = tokens
        self.faultyPhase = faultyPhase
        let serverCount = serverCount ?? Int.random(in: 2...3, using: &rng)
        let clientCount = clientCount ?? Int.random(in: 2...5, using: &rng)
        report.servers = serverCount
        report.clients = clientCount
        for _ in 0..<serverCount { servers.append(Server()) }
        for index in 0..<serverCount { start(index) }
        for index in 0..<clientCount {
            let store = MemoryReplicaStore(replica: Replica(id: ReplicaID(0xC000 + UInt64(index))))
            let endpoint = SyncEndpoint(board: "sim", store: store, options: Self.clientOptions(index, token: tokens), now: 0)
            _ = endpoint.addDialTarget(now: 0)
            clients.append(Client(endpoint: endpoint, store: store))
        }
    }

    /// Whether a seed runs with access control (a generator of its own: the other draws stay).
    private static func drawsAccess(seed: UInt64) -> Bool {
        var generator = SeededRandom(seed: seed ^ 0xACCE55)
        return generator.chance(0.5)
    }

    /// A client's options; with `token`, a write token of its own subject, `client-INDEX`.
    /// (Out of line: inlined into `init`, Swift 6.3.1's optimizer crashed on it.)
    @inline(never)
    private static func clientOptions(_ index: Int, token: Bool) -> SyncEndpoint.Options {
        var options = SyncEndpoint.Options()
        options.reconnectDelay = (0.05, 0.5)
        if token {
            options.credentials = Array(((try? World.authority.mint(board: "sim", role: .write, expires: nil, subject: "client-\(index)")) ?? "").utf8)
        }
        return options
    }

    // MARK: Servers

    /// (Out of line: inlined into `init`, Swift 6.3.1's optimizer crashed on it.)
    @inline(never)
    private func serverOptions() -> SyncEndpoint.Options {
        var options = SyncEndpoint.Options()
        options.groupCommit = true
        if access { options.access = SyncEndpoint.AccessControl(authority: World.authority, wallClock: { 1_800_000_000 }) }
        return options
    }

    private func start(_ index: Int) {
        let server = servers[index]
        server.generation += 1
        let generation = server.generation
        let options = serverOptions()
        var seq: UInt64 = 0
        let endpoint = SyncEndpoint(opener: { _ in
            seq += 1
            return MemoryReplicaStore(replica: Replica(id: ReplicaID(0x5E00_0000 + UInt64(index) << 16 + UInt64(generation) << 8 + seq)))
        }, options: options, now: now)
        var logOptions = RedisBoardLog.Options(node: "server-\(index)/\(generation)")
        logOptions.checkpointEvery = 12
        logOptions.leaseMilliseconds = 300
        logOptions.retentionMilliseconds = 200
        logOptions.replyTimeout = 2
        logOptions.blockMilliseconds = 200
        logOptions.sharesAuthorship = access
        let log = RedisBoardLog(options: logOptions)
        log.acknowledgesBeforeRedis = plantAckBeforeRedis
        endpoint.boardsShareALog = true
        endpoint.boardsShareAuthorship = logOptions.sharesAuthorship
        server.endpoint = endpoint
        server.log = log
        server.connections = [:]
        for link in RedisBoardLog.Link.allCases { server.reconnectAt[link] = now }
    }

    private func crash(_ index: Int) {
        let server = servers[index]
        guard server.endpoint != nil else { return }
        // What this server acknowledged to its clients must already be in Redis: it is the
        // only copy a crash leaves.
        let durable = redis.durableVersion(board: "sim")
        for link in links where link.up && link.server == index && link.generation == server.generation {
            let client = clients[link.client]
            let own = client.store.replica.id
            guard let acked = client.endpoint.boards["sim"]?.hub.acknowledged(by: link.clientSession)?[own], acked > durable[own] else { continue }
            report.failures.append("acknowledged loss: server \(index) crashed having acknowledged client \(link.client)'s operations up to \(acked); Redis holds \(durable[own])")
        }
        for (_, connection) in server.connections { redis.disconnect(connection) }
        server.connections = [:]
        server.endpoint = nil
        server.log = nil
        server.downUntil = now + Double.random(in: 0.2...1.5, using: &rng)
        for index in links.indices where links[index].up && links[index].server == servers.firstIndex(where: { $0 === server })! {
            cutLink(index, serverGone: true)
        }
        report.crashes += 1
    }

    private func dropRedisLink(_ server: Server, _ link: RedisBoardLog.Link, reason: String) {
        if let connection = server.connections.removeValue(forKey: link) { redis.disconnect(connection) }
        server.log?.linkDown(link, now: now, reason: reason)
        server.reconnectAt[link] = now + 0.05
    }

    // MARK: Links

    private func cutLink(_ index: Int, serverGone: Bool = false) {
        guard links[index].up else { return }
        links[index].up = false
        clients[links[index].client].endpoint.closed(links[index].clientSession, now: now)
        if !serverGone, servers[links[index].server].generation == links[index].generation {
            servers[links[index].server].endpoint?.closed(links[index].serverSession, now: now)
        }
    }

    private func dial() {
        for (index, client) in clients.enumerated() where !client.departed {
            for target in client.endpoint.dueDials(now: now) {
                let live = servers.indices.filter { servers[$0].endpoint != nil }
                guard let serverIndex = live.isEmpty ? nil : live[Int.random(in: 0..<live.count, using: &rng)] else {
                    client.endpoint.dialFailed(target, now: now)
                    continue
                }
                nextSession += 1
                let clientSession = nextSession
                nextSession += 1
                let serverSession = nextSession
                servers[serverIndex].endpoint!.accept(serverSession, now: now)
                client.endpoint.dialing(target, as: clientSession)
                client.endpoint.dialed(clientSession, now: now)
                links.append(Link(client: index, clientSession: clientSession, server: serverIndex, serverSession: serverSession,
                                  generation: servers[serverIndex].generation))
            }
        }
    }

    /// Moves every byte waiting on client links and Redis links once.
    private func exchange() {
        for index in links.indices where links[index].up {
            let link = links[index]
            guard let server = servers[link.server].endpoint, servers[link.server].generation == link.generation else {
                cutLink(index, serverGone: true)
                continue
            }
            let client = clients[link.client].endpoint
            let up = client.output(for: link.clientSession, now: now)
            if !up.isEmpty { server.receive(link.serverSession, up, now: now) }
            let down = server.output(for: link.serverSession, now: now)
            if !down.isEmpty { client.receive(link.clientSession, down, now: now) }
            if client.isFinished(link.clientSession) || server.isFinished(link.serverSession) { cutLink(index) }
        }
        for client in clients { while client.endpoint.pollEvent() != nil {} }  // nothing here watches them
        for server in servers {
            guard let log = server.log else { continue }
            if let endpoint = server.endpoint { handOn(endpoint, to: log) }
            for link in RedisBoardLog.Link.allCases {
                if server.connections[link] == nil, let at = server.reconnectAt[link], now >= at {
                    server.connections[link] = redis.connect()
                    server.reconnectAt[link] = nil
                    log.linkUp(link, now: now)
                }
                guard let connection = server.connections[link] else { continue }
                guard connection.open else {
                    dropRedisLink(server, link, reason: "Redis closed the connection")
                    continue
                }
                let bytes = log.takeOutput(link)
                if !bytes.isEmpty { redis.receive(connection, bytes) }
            }
        }
        redis.now = now
        redis.tick()
        for server in servers {
            guard let log = server.log else { continue }
            for link in RedisBoardLog.Link.allCases {
                guard let connection = server.connections[link], !connection.output.isEmpty else { continue }
                let bytes = connection.output
                connection.output = []
                do { try log.receive(link, bytes, now: now) } catch { dropRedisLink(server, link, reason: "\(error)") }
            }
        }
    }

    /// What a server's endpoint has for its Redis log (boards opened and closed, appends,
    /// images, authorship, presence), as `SyncHost` hands it to `RedisCluster`.
    private func handOn(_ endpoint: SyncEndpoint, to log: RedisBoardLog) {
        while let event = endpoint.pollEvent() {
            switch event {
            case .boardOpened(let board): log.attach(board.name, hub: board.hub, now: now)
            case .boardClosed(let name): log.detach(name)
            case .sharedLog(let board, let request): log.handle(request, on: board, now: now)
            case .boardChanged, .presence: continue
            }
        }
    }

    private func timers() {
        for client in clients where !client.departed {
            if let deadline = client.endpoint.nextDeadline, deadline <= now { _ = client.endpoint.handleTimers(now: now) }
        }
        for server in servers {
            if let endpoint = server.endpoint, let deadline = endpoint.nextDeadline, deadline <= now { _ = endpoint.handleTimers(now: now) }
            if let log = server.log, let deadline = log.nextDeadline, deadline <= now {
                for dead in log.handleTimers(now: now) { dropRedisLink(server, dead, reason: "no reply in time") }
            }
        }
    }

    // MARK: Edits and faults

    private func edit(_ client: Client) {
        let replica = client.store.replica
        let strokes = replica.itemIDs.filter { replica.kind(of: $0) == .stroke && replica.isVisible($0) }
        let color = RGBAColor(red: Double.random(in: 0...1, using: &rng), green: 0.3, blue: 0.6)
        do {
            let choice = Int.random(in: 0..<10, using: &rng)
            let made: LocalEdit
            if choice < 5 || strokes.isEmpty {
                let x = Double(Int.random(in: 0...400, using: &rng))
                made = try client.endpoint.edit(now: now) { replica in
                    let edit = try replica.beginStroke(color: color, width: 2, points: [CodablePoint(x: x, y: 1), CodablePoint(x: x + 3, y: 7)])
                    replica.finishStroke()
                    return edit
                }
            } else if choice < 7 {
                let stroke = strokes[Int.random(in: 0..<strokes.count, using: &rng)]
                made = try client.endpoint.edit(now: now) { try $0.setColor(stroke, to: color) }
            } else if choice < 8 {
                let stroke = strokes[Int.random(in: 0..<strokes.count, using: &rng)]
                made = try client.endpoint.edit(now: now) { try $0.delete(stroke) }
            } else {
                let width = Double(Int.random(in: 800...1600, using: &rng))
                made = try client.endpoint.edit(now: now) { try $0.setCanvasSize(CodableSize(width: width, height: 900)) }
            }
            report.operationsMade += made.operations.count
        } catch {
            report.failures.append("a client could not edit: \(error)")
        }
    }

    private func acknowledgedAll(_ client: Client) -> Bool {
        let own = client.store.replica.id
        let made = client.store.replica.versionVector[own]
        guard let hub = client.endpoint.boards["sim"]?.hub else { return false }
        return hub.sessionIDs.contains { (hub.acknowledged(by: $0)?[own] ?? 0) >= made }
    }

    private func faults() {
        let live = clients.filter { !$0.departed }
        if Double.random(in: 0..<1, using: &rng) < 0.004, let index = links.indices.filter({ links[$0].up }).randomElement(using: &rng) {
            cutLink(index)
            report.cuts += 1
        }
        if Double.random(in: 0..<1, using: &rng) < 0.0015, servers.contains(where: { $0.endpoint != nil }) {
            let index = servers.indices.filter { servers[$0].endpoint != nil }.randomElement(using: &rng)!
            // Keep one server up most of the time; several down at once is allowed too.
            crash(index)
        }
        if Double.random(in: 0..<1, using: &rng) < 0.0008 {
            // Redis restarts, taking up to a second to come back (its data kept).
            redis.restart()
            redis.downUntil = now + Double.random(in: 0...1, using: &rng)
            report.redisRestarts += 1
        }
        if Double.random(in: 0..<1, using: &rng) < 0.002, let server = servers.filter({ !$0.connections.isEmpty }).randomElement(using: &rng) {
            let link = RedisBoardLog.Link.allCases.randomElement(using: &rng)!
            dropRedisLink(server, link, reason: "simulated cut")
        }
        // A client leaves for good once a server acknowledged everything it made.
        if live.count > 1, Double.random(in: 0..<1, using: &rng) < 0.0008, let client = live.randomElement(using: &rng), acknowledgedAll(client) {
            client.departed = true
            client.leftWith = client.store.replica.versionVector[client.store.replica.id]
            client.endpoint.setReconnecting(false, now: now)
            for index in links.indices where links[index].up && clients[links[index].client] === client { cutLink(index) }
            report.departures += 1
        }
    }

    // MARK: Running

    public func run(settleLimit: Double = 60) -> Report {
        while now < faultyPhase {
            now += step
            faults()
            for client in clients where !client.departed && Double.random(in: 0..<1, using: &rng) < 0.04 { edit(client) }
            for (index, server) in servers.enumerated() where server.endpoint == nil && now >= server.downUntil { start(index) }
            redis.now = now
            dial()
            exchange()
            exchange()
            timers()
        }
        // Heal: every server up, Redis up, nothing more breaks; wait for convergence.
        redis.downUntil = 0
        for (index, server) in servers.enumerated() where server.endpoint == nil { start(index) }
        let healedAt = now
        while now < healedAt + settleLimit {
            now += step
            redis.now = now
            dial()
            exchange()
            exchange()
            timers()
            if converged() {
                report.convergedAfter = now - healedAt
                break
            }
        }
        report.redisCommands = redis.commands
        check()
        return report
    }

    private func versions() -> [(String, VersionVector, BoardSnapshot)] {
        var result: [(String, VersionVector, BoardSnapshot)] = []
        for (index, client) in clients.enumerated() where !client.departed {
            result.append(("client \(index)", client.store.replica.versionVector, client.store.replica.snapshot()))
        }
        for (index, server) in servers.enumerated() {
            if let board = server.endpoint?.boards["sim"] {
                result.append(("server \(index)", board.store.replica.versionVector, board.store.replica.snapshot()))
            }
        }
        return result
    }

    private func converged() -> Bool {
        let all = versions()
        guard let first = all.first else { return true }
        guard all.allSatisfy({ $0.1 == first.1 }) else { return false }
        return servers.allSatisfy { ($0.log?.unconfirmedAppends ?? 0) == 0 }
    }

    private func check() {
        let all = versions()
        if report.convergedAfter == nil {
            report.failures.append("liveness: no convergence within the settle limit: "
                                   + all.map { "\($0.0) \($0.1)" }.joined(separator: "; "))
            return
        }
        if let first = all.first {
            let reference = (try? first.2.canonicalJSON()) ?? Data()
            for other in all.dropFirst() where (try? other.2.canonicalJSON()) != reference {
                report.failures.append("divergence: \(other.0) holds another board than \(first.0)")
            }
        }
        let final = all.first?.1 ?? .empty
        for (index, client) in clients.enumerated() where client.departed {
            let id = client.store.replica.id
            if final[id] < client.leftWith {
                report.failures.append("acknowledged loss: client \(index) left after its \(client.leftWith) operations were acknowledged; the board holds \(final[id])")
            }
        }
        report.checkpoints = redis.checkpointCommits
        if access {
            // One binding per client that edited, to its own subject, and nothing else.
            var expected: [String: String] = [:]
            for (index, client) in clients.enumerated() where client.store.replica.versionVector[client.store.replica.id] > 0 {
                expected[String(client.store.replica.id.rawValue, radix: 16)] = "client-\(index)"
            }
            let bound = redis.hash("bs:{sim}:authors").mapValues { String(decoding: $0, as: UTF8.self) }
            if bound != expected {
                report.failures.append("authorship: Redis binds \(bound.sorted { $0.key < $1.key }), expected \(expected.sorted { $0.key < $1.key })")
            }
        }
    }
}
