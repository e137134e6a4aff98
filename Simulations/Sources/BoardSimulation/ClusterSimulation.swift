import BoardCRDT
import BoardModel
@_spi(Mutations) import BoardRedis
import BoardSync
import Foundation

/// A seeded, deterministic simulation of scale-out (docs/SCALE-OUT.md): several sync servers
/// (the real `SyncEndpoint`, `BoardHub` and `RedisBoardLog`) sharing a simulated Redis
/// (`SimulatedRedis`), with clients (real peer endpoints) editing one board through whichever
/// server they reach, on the simulated `Network` the world runs on, in virtual time. A
/// `ClusterPlan` (drawn from the seed) says what happens: edits, client links cut, reset or
/// with a flipped byte, clogged or slow, partitions between any servers and clients (and so
/// between a server and Redis), servers crashing with their cache lost and restarting, Redis
/// restarting (its data kept, every connection dropped), Redis links dropped, reset or clogged,
/// and clients leaving for good once a server acknowledged all they made. Compaction runs often.
///
/// Half the seeds run with access control: every client presents a write token of its own
/// subject, and the servers decide authorship through Redis (each client's first operation
/// waits for the binding).
///
/// Oracles after the faults heal: every client and every server holding the board converge to
/// the same board; everything a departed client was told is saved is on it; what a server
/// acknowledged is in Redis when it crashes; with access control, Redis binds exactly the
/// replica ids of the clients that edited, each to its client's subject. `decisionHash`
/// fingerprints every decision (the same plan, the same hash).
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
        /// Byte-level faults that hit a link: resets, flipped bytes, clogs, partitions (by kind).
        public var faultsHit: [String: Int] = [:]
        /// Whether the servers required tokens (authorship shared through Redis).
        public var access = false
        public var events = 0
        public var deliveries = 0
        public var operationsDelivered = 0
        public var simulatedSeconds = 0.0
        public var convergedAfter: Double?
        public var failures: [String] = []
        /// The kind of the first failure ("liveness", "divergence", ...): what shrinking keeps.
        public var failureKind: String?
        public var decisionHash: UInt64 = 0
        public var passed: Bool { failures.isEmpty }
        public init(seed: UInt64) { self.seed = seed }
    }

    enum Happening {
        case plan(Int)
        case timer(node: Int, generation: Int)
        case restart(server: Int)
        case heal
        case check
    }

    public let plan: ClusterPlan
    let net: Network<Happening>
    var now: Double { net.now }
    let redis = SimulatedRedis()
    var servers: [ServerNode] = []
    var clients: [ClientNode] = []
    var redisNode: RedisNode!
    var report: Report
    let log: (@Sendable (String) -> Void)?
    var settled = false
    /// Past this many events a run is reported as an event storm (a livelock in the code).
    public var eventLimit = 5_000_000

    public convenience init(seed: UInt64, servers: Int? = nil, clients: Int? = nil, faultyPhase: Double = 8,
                            plantAckBeforeRedis: Bool = false, access: Bool? = nil) {
        var plan = ClusterPlan.draw(seed: seed, servers: servers, clients: clients, faultyPhase: faultyPhase, access: access)
        plan.plantAckBeforeRedis = plantAckBeforeRedis
        self.init(plan)
    }

    public init(_ plan: ClusterPlan, log: (@Sendable (String) -> Void)? = nil) {
        self.plan = plan
        self.log = log
        net = Network(seed: plan.seed ^ 0xC1_0057E2)
        report = Report(seed: plan.seed)
        report.access = plan.access
        report.servers = plan.servers
        report.clients = plan.clients
        for index in 0..<plan.servers { servers.append(ServerNode(index: index, sim: self)) }
        for index in 0..<plan.clients {
            let store = MemoryReplicaStore(replica: Replica(id: ReplicaID(0xC000 + UInt64(index))))
            var options = Self.clientOptions(index, token: plan.access)
            options.jitter = { [unowned self] delay in delay * Double.random(in: 0.5...1.5, using: &self.net.rng) }
            if log != nil { options.log = { [unowned self] line in self.say("client\(index): \(line)") } }
            let endpoint = SyncEndpoint(board: "sim", store: store, options: options, now: 0)
            _ = endpoint.addDialTarget(now: 0)
            clients.append(ClientNode(index: plan.client(index), endpoint: endpoint, store: store, sim: self))
        }
        redisNode = RedisNode(index: plan.redis, sim: self)
        for node in servers as [any NetworkNode] + clients as [any NetworkNode] + [redisNode!] as [any NetworkNode] { net.add(node) }
        for index in 0..<plan.servers { start(index) }
        for client in clients { rescheduleTimer(client) }
        if !plan.bandwidth.isEmpty { hit("slow link") }
    }

    /// A client's options; with `token`, a write token of its own subject, `client-INDEX`.
    /// (Out of line: inlined into `init`, Swift 6.3.1's optimizer crashed on it.)
    @inline(never)
    static func clientOptions(_ index: Int, token: Bool) -> SyncEndpoint.Options {
        var options = SyncEndpoint.Options()
        options.reconnectDelay = (0.05, 0.5)
        if token {
            options.credentials = Array(((try? World.authority.mint(board: "sim", role: .write, expires: nil, subject: "client-\(index)")) ?? "").utf8)
        }
        return options
    }

    // MARK: Decisions

    func say(_ line: @autoclosure () -> String) {
        guard let log else { return }
        log(String(format: "%8.3f ", now) + line())
    }

    func hit(_ fault: String) { report.faultsHit[fault, default: 0] += 1 }

    func fail(_ kind: String, _ message: String) {
        if report.failureKind == nil { report.failureKind = kind }
        report.failures.append("\(kind): \(message)")
        say("FAILED: \(kind): \(message)")
    }

    // MARK: Running

    public func run(settleLimit: Double = 60) -> Report {
        for (index, event) in plan.events.enumerated() { net.schedule(.plan(index), at: event.time) }
        net.schedule(.heal, at: plan.faultyPhase)
        while !settled, let event = net.next(until: plan.faultyPhase + settleLimit) {
            guard net.events <= eventLimit else {
                fail("event storm", "more than \(eventLimit) events by \(now) s: a livelock")
                break
            }
            switch event {
            case .deliver(let link, let direction, let generation):
                guard let delivery = net.deliver(link, direction, generation: generation) else { continue }
                afterDelivery(to: delivery.to)
            case .happening(.plan(let index)): perform(plan.events[index].action)
            case .happening(.timer(let node, let generation)): timer(node, generation: generation)
            case .happening(.restart(let index)):
                if servers[index].endpoint == nil, now < plan.faultyPhase { start(index) }
            case .happening(.heal): heal()
            case .happening(.check):
                if converged() {
                    report.convergedAfter = now - plan.faultyPhase
                    settled = true
                } else {
                    net.schedule(.check, at: now + 0.25)
                }
            }
        }
        report.events = net.events
        report.deliveries = net.deliveries
        report.operationsDelivered = net.operationsDelivered
        report.simulatedSeconds = now
        report.redisCommands = redis.commands
        check()
        report.decisionHash = net.hash
        return report
    }

    /// After bytes arrive, the node that took them answers (a server's log may have had a
    /// Redis link fail on them; Redis may now answer other connections too).
    func afterDelivery(to node: Int) {
        if node == plan.redis {
            flush(redisNode)
        } else if node < plan.servers {
            let server = servers[node]
            for (link, reason) in server.failedLinks { dropRedisLink(server, link, reason: reason) }
            server.failedLinks = []
            flush(server)
        } else {
            flush(clients[node - plan.servers])
        }
    }

    func node(_ index: Int) -> any TimedNode {
        if index < plan.servers { return servers[index] }
        if index < plan.redis { return clients[index - plan.servers] }
        return redisNode
    }

    func timer(_ index: Int, generation: Int) {
        let target = node(index)
        guard target.timerGeneration == generation else { return }
        target.timerAt = nil
        if let server = target as? ServerNode {
            guard let endpoint = server.endpoint, let log = server.log else { return }
            endpoint.handleTimers(now: now)
            for dead in log.handleTimers(now: now) { dropRedisLink(server, dead, reason: "no reply in time") }
            for link in RedisBoardLog.Link.allCases {
                if let at = server.reconnectAt[link], at <= now { connectRedis(server, link) }
            }
            flush(server)
        } else if let client = target as? ClientNode {
            guard !client.departed else { return }
            client.endpoint.handleTimers(now: now)
            flush(client)
        } else {
            redis.now = now
            redis.tick()
            flush(redisNode)
        }
    }

    /// Moves a node's output onto its links, dials what is due, re-arms its timer.
    func flush(_ target: any TimedNode) {
        if let server = target as? ServerNode, let endpoint = server.endpoint, let log = server.log {
            handOn(endpoint, to: log)
        } else if let client = target as? ClientNode {
            while client.endpoint.pollEvent() != nil {}  // nothing here watches a client's events
        }
        net.flush(target.index)
        if let client = target as? ClientNode, !client.departed { dialDue(client) }
        rescheduleTimer(target)
    }

    /// What a server's endpoint has for its Redis log (boards opened and closed, appends,
    /// images, authorship, presence), as `SyncHost` hands it to `RedisCluster`.
    func handOn(_ endpoint: SyncEndpoint, to log: RedisBoardLog) {
        while let event = endpoint.pollEvent() {
            switch event {
            case .boardOpened(let board): log.attach(board.name, hub: board.hub, now: now)
            case .boardClosed(let name): log.detach(name)
            case .sharedLog(let board, let request):
                log.handle(request, on: board, now: now)
            case .boardChanged, .presence: continue
            case .saveView: continue  // the simulation's endpoints save in their own calls
            case .historyRequested, .historyAnswered: continue  // simulated peers ask for no history
            }
        }
    }

    func rescheduleTimer(_ target: any TimedNode) {
        let deadline = target.deadline.map { max($0, now + 0.000_1) }
        guard deadline != target.timerAt else { return }
        target.timerAt = deadline
        target.timerGeneration += 1
        if let deadline { net.schedule(.timer(node: target.index, generation: target.timerGeneration), at: deadline) }
    }

    // MARK: Servers

    /// (Out of line: inlined into `init`, Swift 6.3.1's optimizer crashed on it.)
    @inline(never)
    func serverOptions(_ index: Int) -> SyncEndpoint.Options {
        var options = SyncEndpoint.Options()
        options.groupCommit = true
        if plan.access { options.access = SyncEndpoint.AccessControl(authority: World.authority, wallClock: { 1_800_000_000 }) }
        if log != nil { options.log = { [unowned self] line in self.say("server\(index): \(line)") } }
        return options
    }

    func start(_ index: Int) {
        let server = servers[index]
        server.generation += 1
        let generation = server.generation
        var seq: UInt64 = 0
        let endpoint = SyncEndpoint(opener: { _ in
            seq += 1
            return MemoryReplicaStore(replica: Replica(id: ReplicaID(0x5E00_0000 + UInt64(index) << 16 + UInt64(generation) << 8 + seq)))
        }, options: serverOptions(index), now: now)
        var logOptions = RedisBoardLog.Options(node: "server-\(index)/\(generation)")
        logOptions.checkpointEvery = 12
        logOptions.leaseMilliseconds = 300
        logOptions.retentionMilliseconds = 200
        logOptions.replyTimeout = 2
        logOptions.blockMilliseconds = 200
        logOptions.sharesAuthorship = plan.access
        if log != nil { logOptions.log = { [unowned self] line in self.say("server\(index) log: \(line)") } }
        let boardLog = RedisBoardLog(options: logOptions)
        boardLog.acknowledgesBeforeRedis = plan.plantAckBeforeRedis
        endpoint.boardsShareALog = true
        endpoint.boardsShareAuthorship = logOptions.sharesAuthorship
        server.endpoint = endpoint
        server.log = boardLog
        net.note("start server\(index)")
        for link in RedisBoardLog.Link.allCases { server.reconnectAt[link] = now }
        rescheduleTimer(server)
    }

    func crash(_ index: Int) {
        let server = servers[index]
        guard server.endpoint != nil else { return }
        // What this server acknowledged to its clients must already be in Redis: it is the
        // only copy a crash leaves.
        let durable = redis.durableVersion(board: "sim")
        for link in net.linksTouching(index) where net.links[link].dialer != plan.redis && net.links[link].acceptor != plan.redis {
            let client = clients[net.links[link].dialer - plan.servers]
            let own = client.store.replica.id
            guard let acked = client.endpoint.boards["sim"]?.hub.acknowledged(by: net.links[link].sessions.0)?[own], acked > durable[own] else { continue }
            fail("acknowledged loss", "server \(index) crashed having acknowledged client \(client.index - plan.servers)'s operations up to \(acked); Redis holds \(durable[own])")
        }
        server.endpoint = nil
        server.log = nil
        for link in net.linksTouching(index) { net.cut(link) }
        server.redisLinks = [:]
        server.redisSessions = [:]
        server.reconnectAt = [:]
        server.failedLinks = []
        rescheduleTimer(server)
        report.crashes += 1
    }

    func connectRedis(_ server: ServerNode, _ link: RedisBoardLog.Link) {
        guard let log = server.log else { return }
        server.reconnectAt[link] = nil
        if now < redis.downUntil || net.blockedUntil(from: server.index, to: plan.redis) != nil || net.blockedUntil(from: plan.redis, to: server.index) != nil {
            log.connectFailed(link, because: now < redis.downUntil ? "refused the connection" : "cannot be reached", now: now)
            server.reconnectAt[link] = now + 0.05
            return
        }
        let index = net.connect(server.index, to: plan.redis, latency: plan.redisLatency)
        let sessions = net.links[index].sessions
        redis.now = now
        redisNode.connections[sessions.1] = redis.connect()
        server.redisLinks[link] = index
        server.redisSessions[sessions.0] = link
        log.linkUp(link, now: now)
    }

    /// Drops a server's Redis link; the server reconnects it shortly.
    func dropRedisLink(_ server: ServerNode, _ link: RedisBoardLog.Link, reason: String) {
        guard let index = server.redisLinks[link] else { return }
        server.closeReason = reason
        net.cut(index)
        server.closeReason = nil
    }

    // MARK: Clients

    func dialDue(_ client: ClientNode) {
        for target in client.endpoint.dueDials(now: now) {
            let live = servers.filter { $0.endpoint != nil }
            guard !live.isEmpty else {
                client.endpoint.dialFailed(target, now: now)
                continue
            }
            let server = live[Int.random(in: 0..<live.count, using: &net.rng)]
            guard net.blockedUntil(from: client.index, to: server.index) == nil, net.blockedUntil(from: server.index, to: client.index) == nil else {
                client.endpoint.dialFailed(target, now: now)
                continue
            }
            let index = net.connect(client.index, to: server.index, latency: plan.latency, bandwidth: plan.bandwidth[client.index - plan.servers])
            let sessions = net.links[index].sessions
            server.endpoint!.accept(sessions.1, now: now)
            client.endpoint.dialing(target, as: sessions.0)
            client.endpoint.dialed(sessions.0, now: now)
            net.flush(client.index)
            flush(server)
        }
    }

    func acknowledgedAll(_ client: ClientNode) -> Bool {
        let own = client.store.replica.id
        let made = client.store.replica.versionVector[own]
        guard let hub = client.endpoint.boards["sim"]?.hub else { return false }
        return hub.sessionIDs.contains { (hub.acknowledged(by: $0)?[own] ?? 0) >= made }
    }
}
