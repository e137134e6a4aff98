import BoardModel
import BoardStore
@_spi(Mutations) import BoardCRDT
@_spi(Mutations) import BoardSync
import Foundation
import Dispatch
import Synchronization

extension World {
    // MARK: Oracles

    /// Every live peer says who it is (a long time-to-live: the check comes a second later).
    func announcePresence() {
        for host in hosts where host.index != plan.server {
            guard let endpoint = host.endpoint, let replica = replica(host) else { continue }
            endpoint.setPresence(Presence(replica: replica.id, name: host.name, color: .black, ttl: Presence.maxTTL), on: board, now: now)
            flush(host)
        }
    }

    /// A second after convergence, every peer sees every other peer on the board (presence
    /// relayed through the server and across peers, never stored).
    func checkPresence() {
        let peers = hosts.filter { $0.index != plan.server && $0.endpoint != nil }
        for host in peers {
            let seen = Set(host.endpoint!.presences(on: board).map(\.name))
            let missing = peers.filter { $0 !== host && !seen.contains($0.name) }.map(\.name)
            if !missing.isEmpty {
                fail("presence", "\(host.name) does not see \(missing.joined(separator: ", ")) on the board a second after convergence (sees \(seen.sorted().joined(separator: ", ")))")
            }
        }
    }

    func converged() -> Bool {
        guard let reference = replica(serverHost), reference.missingAssets.isEmpty else { return false }
        for host in hosts {
            guard let replica = replica(host), replica.versionVector == reference.versionVector,
                  replica.missingAssets.isEmpty else { return false }
        }
        // Quiet: every client live, with nothing of its own unacknowledged.
        return clientsNotQuiet() == nil
    }

    func check() {
        guard report.convergedAfter != nil else {
            var state: [String] = []
            let reference = replica(serverHost)
            for host in hosts {
                let replica = replica(host)
                state.append("\(host.name) \(host.endpoint == nil ? "down" : "up"), \(linksTouching(host.index).count) links, \(replica.map { "\($0.versionVector) missing \($0.missingAssets.count) images" } ?? "without the board")")
                if let reference, let replica {
                    for (author, seq) in reference.versionVector.entries where replica.versionVector[author] < seq {
                        let held = (replica.versionVector[author] + 1...seq).filter { replica.hasIntegrated(OpID(replica: author, seq: $0)) }
                        state.append("\(host.name) lacks \(author) \(replica.versionVector[author] + 1)...\(seq) (holds \(held.count) of them ahead of a gap)")
                    }
                }
            }
            if let trouble = clientsNotQuiet() { state.append("clients: \(trouble)") }
            fail("liveness", "no convergence within \(plan.settleLimit) s after the heal: " + state.joined(separator: "; "))
            return
        }
        guard let reference = replica(serverHost) else { return }
        do {
            let expected = try reference.snapshot().canonicalJSON()
            for host in hosts {
                guard let replica = replica(host) else { continue }
                if host !== serverHost, try replica.snapshot().canonicalJSON() != expected {
                    fail("divergence", "\(host.name)'s board differs from the server's")
                }
                if !replica.versionVector.dominates(host.acknowledged) {
                    fail("acknowledged loss", "\(host.name) lost acknowledged operations: holds \(replica.versionVector), acknowledged \(host.acknowledged)")
                }
                if !replica.versionVector.dominates(host.saved) {
                    fail("saved loss", "\(host.name) lost operations it had saved")
                }
                // Every image a live sticker or the background shows is present everywhere.
                if let missing = replica.missingAssets.first {
                    fail("missing image", "\(host.name) lacks image \(missing.hex.prefix(12)) that the board shows")
                }
            }
            // Named versions: where every host reads labels, every host shows the server's.
            if plan.labels, plan.releases.isEmpty {
                let labels = reference.labels
                for host in hosts where replica(host)?.labels != labels {
                    fail("label divergence", "\(host.name)'s labels differ from the server's")
                }
            }
            // The reference model of the conflict contract, applied to what the server holds.
            let model = try ContractModel.board(from: reference.fullState().operations).canonicalJSON()
            if try ContractModel.withoutImageBytes(reference.snapshot()).canonicalJSON() != model {
                fail("contract", "the converged board differs from the reference model of the conflict contract")
            }
        } catch {
            fail("snapshot", "snapshot failed: \(error)")
        }
        checkClients()
    }

    /// Each host's final board (for transcripts), server first.
    public var finalBoards: [(host: String, board: BoardSnapshot?)] {
        [(serverHost.name, replica(serverHost)?.snapshot())] + hosts.dropLast().map { ($0.name, replica($0)?.snapshot()) }
    }

    // MARK: Entry points

    /// Runs a plan (a setup failure is reported as a failed run).
    public static func simulate(_ plan: Plan, log: (@Sendable (String) -> Void)? = nil) -> Report {
        do {
            return try World(plan, log: log).run()
        } catch {
            var report = Report(seed: plan.seed)
            report.failures = ["could not set up: \(error)"]
            report.failureKind = "setup"
            return report
        }
    }

    /// Runs one seed's plan.
    public static func simulate(seed: UInt64, peers: Int = 3, mutation: Mutation = .none,
                                log: (@Sendable (String) -> Void)? = nil) -> Report {
        var plan = Plan.draw(seed: seed, peers: peers)
        plan.mutation = mutation
        return simulate(plan, log: log)
    }

    /// Runs many seeds on every core; reports come back in seed order.
    public static func swarm(seeds: Range<UInt64>, peers: Int = 3, editsPerSecond: Double = 20, mutation: Mutation = .none,
                             progress: @escaping @Sendable (Int) -> Void = { _ in }) -> [Report] {
        let results = Mutex<[Report]>([])
        DispatchQueue.concurrentPerform(iterations: seeds.count) { index in
            var plan = Plan.draw(seed: seeds.lowerBound + UInt64(index), peers: peers, editsPerSecond: editsPerSecond)
            plan.mutation = mutation
            let report = simulate(plan)
            let done = results.withLock { reports in
                reports.append(report)
                return reports.count
            }
            progress(done)
        }
        return results.withLock { $0 }.sorted { $0.seed < $1.seed }
    }
}
