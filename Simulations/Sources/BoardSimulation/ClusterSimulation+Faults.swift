import BoardCRDT
import BoardModel
import BoardRedis
import BoardSync
import Dispatch
import Foundation
import Synchronization

extension ClusterSimulation {
    // MARK: Edits and faults

    func perform(_ action: ClusterPlan.Action) {
        net.note(plan.describe(action))
        say("EVENT \(plan.describe(action))")
        func links(of client: Int) -> [Int] { net.linksTouching(plan.client(client)) }
        func redisLinks(of server: Int) -> [Int] {
            net.linksTouching(server).filter { net.links[$0].touches(plan.redis) }
        }
        switch action {
        case .edit(let client): edit(clients[client])
        case .cut(let client):
            guard !links(of: client).isEmpty else { return }
            net.cut(net.rng.pick(links(of: client)))
            report.cuts += 1
        case .reset(let client):
            guard !links(of: client).isEmpty else { return }
            net.resetNext(net.rng.pick(links(of: client)))
            hit("reset")
        case .corrupt(let client):
            guard !links(of: client).isEmpty else { return }
            net.corruptNext(net.rng.pick(links(of: client)))
            hit("corrupt")
        case .clog(let client, let seconds):
            guard !links(of: client).isEmpty else { return }
            for link in links(of: client) { net.clog(link, until: now + seconds) }
            hit("clog")
        case .crash(let server, let down):
            guard servers[server].endpoint != nil else { return }
            crash(server)
            net.schedule(.restart(server: server), at: now + down)
        case .redisRestart(let down):
            for link in net.linksTouching(plan.redis) { net.cut(link) }
            redis.restart()
            redis.downUntil = now + down
            report.redisRestarts += 1
        case .dropRedisLink(let index, let link):
            let server = servers[index]
            guard server.log != nil else { return }
            dropRedisLink(server, RedisBoardLog.Link.allCases[link], reason: "simulated cut")
        case .resetRedisLink(let index, let link):
            guard let link = servers[index].redisLinks[RedisBoardLog.Link.allCases[link]] else { return }
            net.resetNext(link)
            hit("redis reset")
        case .clogRedis(let server, let seconds):
            guard !redisLinks(of: server).isEmpty else { return }
            for link in redisLinks(of: server) { net.clog(link, until: now + seconds) }
            hit("redis clog")
        case .partition(let cut, let seconds):
            net.partition(cut, until: now + seconds)
            if case .between = cut { hit("partition") } else { hit("one-way partition") }
        case .depart(let index):
            let client = clients[index]
            // A client leaves for good once a server acknowledged everything it made.
            guard !client.departed, clients.filter({ !$0.departed }).count > 1, acknowledgedAll(client) else { return }
            client.departed = true
            client.leftWith = client.store.replica.versionVector[client.store.replica.id]
            client.endpoint.setReconnecting(false, now: now)
            for link in links(of: index) { net.cut(link) }
            report.departures += 1
        }
    }

    func edit(_ client: ClientNode) {
        guard !client.departed else { return }
        let replica = client.store.replica
        // Each edit draws from its own generator (the seed, the client, the time), so dropping
        // an edit while shrinking leaves the others as they were.
        var rng = SeededRandom(seed: plan.seed &* 0x9E37_79B9_7F4A_7C15 ^ UInt64(client.index) << 56 ^ now.bitPattern)
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
            net.note("edit \(client.index) \(made.operations.count)")
        } catch {
            fail("edit", "client \(client.index - plan.servers) could not edit: \(error)")
        }
        flush(client)
    }

    /// Every fault off: partitions and clogs end, Redis and every server come up; nothing more
    /// breaks, and everyone must converge.
    func heal() {
        net.note("heal")
        say("HEAL")
        net.endPartitions()
        redis.downUntil = 0
        for (index, server) in servers.enumerated() where server.endpoint == nil { start(index) }
        net.unclog()
        net.schedule(.check, at: now + 0.25)
    }

    // MARK: Oracles

    func versions() -> [(String, VersionVector, BoardSnapshot)] {
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

    /// Every live client and every server holding the board at one vector, nothing unconfirmed
    /// (vectors only: snapshots are for the final check).
    func converged() -> Bool {
        var vectors = clients.filter { !$0.departed }.map(\.store.replica.versionVector)
        vectors += servers.compactMap { $0.endpoint?.boards["sim"]?.store.replica.versionVector }
        guard let first = vectors.first else { return true }
        guard vectors.allSatisfy({ $0 == first }) else { return false }
        // And they hold what Redis holds: with no server holding the board open, a client that
        // was partitioned away is not converged just because nobody else is left to compare
        // with (seed 1764: it was checked before it reconnected, and a departed client's
        // acknowledged operation, safe in Redis, looked lost).
        guard first.merged(with: redis.durableVersion(board: "sim")) == first else { return false }
        return servers.allSatisfy { ($0.log?.unconfirmedAppends ?? 0) == 0 }
    }

    func check() {
        let all = versions()
        if report.convergedAfter == nil {
            fail("liveness", "no convergence within the settle limit: " + all.map { "\($0.0) \($0.1)" }.joined(separator: "; "))
            return
        }
        if let first = all.first {
            let reference = (try? first.2.canonicalJSON()) ?? Data()
            for other in all.dropFirst() where (try? other.2.canonicalJSON()) != reference {
                fail("divergence", "\(other.0) holds another board than \(first.0)")
            }
        }
        let final = all.first?.1 ?? .empty
        for (index, client) in clients.enumerated() where client.departed {
            let id = client.store.replica.id
            if final[id] < client.leftWith {
                fail("acknowledged loss", "client \(index) left after its \(client.leftWith) operations were acknowledged; the board holds \(final[id])")
            }
        }
        report.checkpoints = redis.checkpointCommits
        if plan.access {
            // One binding per client that edited, to its own subject, and nothing else.
            var expected: [String: String] = [:]
            for (index, client) in clients.enumerated() where client.store.replica.versionVector[client.store.replica.id] > 0 {
                expected[String(client.store.replica.id.rawValue, radix: 16)] = "client-\(index)"
            }
            let bound = redis.hash("bs:{sim}:authors").mapValues { String(decoding: $0, as: UTF8.self) }
            if bound != expected {
                fail("authorship", "Redis binds \(bound.sorted { $0.key < $1.key }), expected \(expected.sorted { $0.key < $1.key })")
            }
        }
    }

    // MARK: Shrinking

    /// The result of shrinking a failing cluster plan.
    public struct Shrunk: Sendable {
        public var plan: ClusterPlan
        public var report: Report
        public var runs: Int
        public var originalEvents: Int

        /// The shrunk plan as a cluster scenario file, with a header saying where it came from.
        public var scenario: String {
            let lines = [
                "# Shrunk by board-sim cluster from seed \(plan.seed): \(originalEvents) events -> \(plan.events.count) (\(runs) runs).",
                "# It still fails (\(report.failureKind ?? "?")): \(report.failures.first ?? "")",
                "# Replay: bin/board-sim run FILE",
            ].map { $0.replacingOccurrences(of: "\n", with: " ") }
            return lines.joined(separator: "\n") + "\n" + plan.text
        }
    }

    /// Reduces a failing plan to a short one that fails the same way (the same kind of
    /// failure), as `World.shrink` does: delta debugging over the events, then slow links and
    /// latency. Every candidate is a full deterministic run (a cluster run is cheap), at most `budget`.
    public static func shrink(_ plan: ClusterPlan, budget: Int = 1500, progress: (Int, Int) -> Void = { _, _ in }) -> Shrunk? {
        let shrinker = Shrinker<ClusterPlan, ClusterPlan.Event, Report>(
            events: \.events, run: { ClusterSimulation($0).run() }, failureKind: \.failureKind,
            shapes: { best in
                // The cluster's shape: slow links, then latency.
                let slow: [(ClusterPlan) -> ClusterPlan?] = best.bandwidth.keys.sorted().map { client in
                    { plan in
                        var candidate = plan
                        candidate.bandwidth[client] = nil
                        return candidate
                    }
                }
                let latency: (ClusterPlan) -> ClusterPlan? = { plan in
                    guard plan.latency != 0.005...0.005 else { return nil }
                    var candidate = plan
                    candidate.latency = 0.005...0.005
                    return candidate
                }
                return slow + [latency]
            },
            budget: budget)
        guard let (best, report, runs) = shrinker.shrink(plan, progress: progress) else { return nil }
        return Shrunk(plan: best, report: report, runs: runs, originalEvents: plan.events.count)
    }
}

extension ClusterSimulation {
    /// Runs many seeds on every core; reports come back in seed order.
    public static func swarm(seeds: Range<UInt64>, plantAckBeforeRedis: Bool = false) -> [Report] {
        let results = Mutex<[Report]>([])
        DispatchQueue.concurrentPerform(iterations: seeds.count) { index in
            let report = ClusterSimulation(seed: seeds.lowerBound + UInt64(index), plantAckBeforeRedis: plantAckBeforeRedis).run()
            results.withLock { $0.append(report) }
        }
        return results.withLock { $0 }.sorted { $0.seed < $1.seed }
    }
}
