import BoardCRDT
import BoardModel
@testable import BoardSimulation
@testable import BoardStore
import Foundation
import Testing

/// Issue 27's simulator oracle: in seeded runs of the deterministic simulator (virtual time, the
/// plan's random faults, crashes of every kind, a small compaction threshold and compactions
/// forced mid-run so the archive is used, a prune in the middle), every version a host's
/// history lists shows exactly the board of a fresh replica given the operations up to it,
/// taken from the union of every operation any host recorded.
///
/// Versions a history lists, not arbitrary vectors: a peer's catch-up carries only surviving
/// operations, so a host never holds a write that was overwritten before it heard of it, and its
/// view of a vector between two of its versions may rightly differ from the union's (that case
/// is checked against what the package itself received in `HistoryTests`).
@Suite struct HistoryOracleTests {
    /// 1...8, or the one in BOARDSYNC_SEED.
    static var seeds: [UInt64] {
        if let pinned = ProcessInfo.processInfo.environment["BOARDSYNC_SEED"].flatMap({ UInt64($0) }) { return [pinned] }
        return Array(1...8)
    }

    /// Views checked per host and run, besides the first and the last.
    static let versionsPerHost = 12

    static func oracle(_ union: [OpID: Op], at version: VersionVector, images: Bool) throws -> BoardSnapshot {
        var replica = Replica(id: ReplicaID(0))
        if images { for image in World.images { replica.assets.insert(image) } }
        let operations = union.values.filter { version.covers($0.id) }.sorted { ($0.id.replica, $0.id.seq) < ($1.id.replica, $1.id.seq) }
        try replica.apply(OperationBatch(operations: operations), from: .ownLog)
        return replica.snapshot()
    }

    /// Every operation any host recorded: archives (every record that checks out), op logs and
    /// the live replicas.
    static func union(of world: World) throws -> [OpID: Op] {
        var union: [OpID: Op] = [:]
        func add(_ operations: [Op]) { for op in operations where union[op.id] == nil { union[op.id] = op } }
        for index in 0..<world.hostCount {
            let (fs, path) = world.disk(ofHost: index)
            if let archive = try? fs.readFile(path + "/" + PackageLayout.history) {
                for record in HistoryArchive.salvage(archive).records { add(record.batch.operations) }
            }
            if let log = try? fs.readFile(path + "/" + PackageLayout.opLog) {
                for (_, batch) in OpLog.records(in: log) { add(batch.operations) }
            }
            if let package = world.package(ofHost: index) { add(package.replica.fullState().operations) }
        }
        return union
    }

    @Test(arguments: seeds)
    func everyVersionOfAFaultedRunIsAFreshReplicaWithExactlyTheOperationsUpToIt(seed: UInt64) throws {
        let rerun = "seed \(seed) (re-run: BOARDSYNC_SEED=\(seed) swift test --skip-build --filter HistoryOracleTests)"
        var plan = Plan.draw(seed: seed, peers: 3, editsPerSecond: 15)
        let phase = plan.faultyPhase
        var random = SeededRandom(seed: seed ^ 0x4157_0C1E)
        // Crashes in every run, whatever the plan drew: the server's torn write, a peer's power loss
        // and another's process crash.
        plan.events.append(Plan.Event(time: phase * 0.2, action: .crash(host: plan.server, .tornWrite, down: 2)))
        plan.events.append(Plan.Event(time: phase * 0.45, action: .crash(host: Int.random(in: 0..<3, using: &random), .powerLoss, down: 1)))
        plan.events.append(Plan.Event(time: phase * 0.75, action: .crash(host: Int.random(in: 0..<3, using: &random), .process, down: 1)))
        let world = try World(plan, configurePackage: { package in
            package.compactionRecordThreshold = 4
            package.checkpointInterval = 6
        })
        var problems: [String] = []
        var compactions = 0
        // Compactions forced on every host that is up, now and then.
        for share in [0.15, 0.35, 0.55, 0.85] {
            world.interludes.append((at: phase * share, body: { world in
                for index in 0..<world.hostCount {
                    guard let package = world.package(ofHost: index) else { continue }
                    do {
                        try package.compactLog()
                        compactions += 1
                    } catch {
                        // A full disk is one of the plan's faults: the compaction fails whole and
                        // a later one archives the records (checked at the end).
                        if !world.hosts[index].diskFull { problems.append("compacting \(world.hostName(index)) at \(world.virtualTime): \(error)") }
                    }
                }
            }))
        }
        // A prune in the middle, on a peer that is up (one on a full disk must fail whole and
        // leave its history as it was; the next peer is tried).
        var pruned: (host: Int, horizon: VersionVector, earlier: VersionVector)?
        var failedPrunes: [Int] = []
        let prunedPeer = Int(seed % 3)
        world.interludes.append((at: phase * 0.6, body: { world in
            for index in [prunedPeer, (prunedPeer + 1) % 3, (prunedPeer + 2) % 3] {
                guard let package = world.package(ofHost: index) else { continue }
                do {
                    let history = try package.history()
                    guard history.versions.count >= 4 else { problems.append("\(world.hostName(index)) has \(history.versions.count) versions at the prune"); return }
                    let horizon = history.versions[history.versions.count / 2].vector
                    let earlier = history.versions[0].vector
                    do {
                        try package.pruneHistory(before: horizon)
                    } catch where world.hosts[index].diskFull {
                        failedPrunes.append(index)
                        if try package.history().versions.map(\.vector) != history.versions.map(\.vector) {
                            problems.append("a prune that failed on \(world.hostName(index))'s full disk changed its history")
                        }
                        continue
                    }
                    pruned = (index, horizon, earlier)
                } catch {
                    problems.append("pruning \(world.hostName(index)): \(error)")
                }
                return
            }
        }))
        let report = world.run()
        #expect(report.passed, "\(rerun): \(report.failures)")
        #expect(problems.isEmpty, "\(rerun): \(problems)")
        #expect(compactions >= 3, "\(rerun): \(compactions) compactions")
        #expect(pruned != nil, "\(rerun): no peer was up for the prune")

        let union = try Self.union(of: world)
        // What survives of every operation anyone recorded: a write not in it was overwritten.
        var everything = Replica(id: ReplicaID(0))
        try everything.apply(OperationBatch(operations: union.values.sorted { ($0.id.replica, $0.id.seq) < ($1.id.replica, $1.id.seq) }), from: .ownLog)
        let survivors = Set(everything.fullState().operations.map(\.id))
        var archived = 0, checked = 0, relayedGaps = 0
        for index in 0..<world.hostCount {
            let name = world.hostName(index)
            guard let package = world.package(ofHost: index) else {
                Issue.record("\(rerun): \(name) is down at the end")
                continue
            }
            let history = try package.history()
            let held = Set(history.entries.flatMap { $0.operations.map(\.id) })
            archived += history.archivedRecords
            #expect(history.latest == package.replica.versionVector, "\(rerun): \(name)'s last version is its replica's")
            #expect(try history.snapshot(at: history.latest).canonicalJSON() == package.replica.snapshot().canonicalJSON(),
                    "\(rerun): \(name)'s latest view is its board")
            var numbers = Set([1, history.versions.count])
            for _ in 0..<Self.versionsPerHost { numbers.insert(Int.random(in: 1...max(1, history.versions.count), using: &random)) }
            for number in numbers.sorted() {
                guard let version = history.version(number) else { continue }
                checked += 1
                let view = try history.replica(at: version.vector).snapshot().canonicalJSON()
                // Operations up to the version that this host never received: only ones another
                // replica overwrote (dead in the union's final state), left out of a delta that was
                // computed against a relay's vector and relayed on before their overwriter reached
                // this host. The host's board then showed them neither, and neither does its view.
                let missing = union.values.filter { version.vector.covers($0.id) && !held.contains($0.id) }
                var expected = union
                if !missing.isEmpty {
                    relayedGaps += 1
                    let dead = missing.filter { !survivors.contains($0.id) }
                    #expect(dead.count == missing.count,
                            "\(rerun): \(name) version \(number) lacks operations that still matter: \(missing.filter { survivors.contains($0.id) }.map(\.id))")
                    for op in missing { expected[op.id] = nil }
                }
                #expect(try view == Self.oracle(expected, at: version.vector, images: false).canonicalJSON(),
                        "\(rerun): \(name) version \(number) of \(history.versions.count) \(version.vector)\(missing.isEmpty ? "" : " (\(missing.count) overwritten operations it never received)")")
                if index != plan.server {
                    // Peers hold every image from the start: the view with its images.
                    #expect(try history.snapshot(at: version.vector).canonicalJSON() == Self.oracle(expected, at: version.vector, images: true).canonicalJSON(),
                            "\(rerun): \(name) version \(number) with images")
                }
            }
            if failedPrunes.contains(index) {
                #expect(history.horizon == nil, "\(rerun): \(name)'s prune failed on a full disk and pruned nothing")
            }
            if let pruned, pruned.host == index {
                #expect(history.horizon == pruned.horizon, "\(rerun): \(name) keeps its horizon through the rest of the run")
                #expect(history.versions.first?.vector == pruned.horizon, "\(rerun)")
                #expect(history.versions.allSatisfy { $0.vector.dominates(pruned.horizon) }, "\(rerun)")
                #expect(throws: HistoryError.self, "\(rerun): a view before the horizon is refused") { try history.heldSnapshot(at: pruned.earlier) }
                #expect(throws: HistoryError.self, "\(rerun): a restore before the horizon is refused") { try package.restore(to: pruned.earlier) }
                #expect(try history.heldSnapshot(at: pruned.horizon).canonicalJSON() == Self.oracle(union, at: pruned.horizon, images: true).canonicalJSON(),
                        "\(rerun): the view at the horizon")
            }
        }
        #expect(archived > 0, "\(rerun): compaction archived records")
        print("HistoryOracleTests: \(rerun): \(report.planned); \(report.faultsHit.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")); \(compactions) forced compactions, \(archived) archived records, \(checked) views checked (\(relayedGaps) lacking overwritten operations never received), pruned \(pruned.map { world.hostName($0.host) } ?? "none")\(failedPrunes.isEmpty ? "" : " after a prune failed on a full disk")")
    }
}
