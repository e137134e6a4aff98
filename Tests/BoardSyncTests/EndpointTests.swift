import BoardCRDT
import BoardModel
import BoardSimulation
import BoardStore
import BoardSync
import Foundation
import Testing

/// The same `SyncEndpoint` that `SyncHost` drives over TCP, driven here over the simulator's
/// `Network` (links without latency) with a virtual clock that jumps to the endpoints' next
/// deadline: a server whose boards are packages on a `MemoryFileSystem`, and peers. No
/// sockets, no sleeping. A thin use of the network: it keeps the endpoints by index (its node
/// indices) and leaves timers to `advance`.
final class VirtualNet {
    /// An endpoint as a node of the network.
    final class Node: NetworkNode {
        var endpoint: SyncEndpoint
        init(_ endpoint: SyncEndpoint) { self.endpoint = endpoint }
        func output(for session: SessionID, now: Double) -> [UInt8] { endpoint.output(for: session, now: now) }
        func receive(_ session: SessionID, _ bytes: [UInt8], from: Int, now: Double) -> Int? {
            endpoint.receive(session, bytes, now: now).reduce(0) { count, event in
                if case .operations(let batch) = event { return count + batch.operations.count }
                return count
            }
        }
        func isFinished(_ session: SessionID) -> Bool { endpoint.isFinished(session) }
        func closed(_ session: SessionID, now: Double) { endpoint.closed(session, now: now) }
    }

    let net: Network<Never> = {
        let net = Network<Never>(seed: 0)
        net.closesGracefully = true  // a closing side's last frame (its reason) arrives
        return net
    }()
    private var nodes: [Node] = []
    /// The endpoints by index; setting one replaces it (a restarted server).
    var endpoints: [SyncEndpoint] {
        get { nodes.map(\.endpoint) }
        set { for (node, endpoint) in zip(nodes, newValue) { node.endpoint = endpoint } }
    }
    var links: [Network<Never>.Link] { net.links }
    /// The virtual clock (it only moves forward).
    var now: Double {
        get { net.now }
        set { net.advance(to: newValue) }
    }

    func add(_ endpoint: SyncEndpoint) -> Int {
        nodes.append(Node(endpoint))
        return net.add(nodes.last!)
    }

    /// A partition around a link's dialer: nothing crosses until `heal` (bytes wait).
    func hold(_ index: Int) {
        net.partition(.between([net.links[index].dialer]), until: .infinity)
    }

    func heal() {
        net.endPartitions()
        net.unclog()
    }

    /// Connects a dialing peer endpoint to an accepting one.
    @discardableResult
    func connect(_ dialer: Int, to acceptor: Int) -> Int {
        let index = net.connect(dialer, to: acceptor, latency: 0...0)
        let (dialID, acceptID) = net.links[index].sessions
        endpoints[acceptor].accept(acceptID, now: now)
        endpoints[dialer].dialed(dialID, now: now)
        return index
    }

    /// Moves bytes until every link is quiet; false if it never quiets (livelock).
    @discardableResult
    func deliver(maxRounds: Int = 10_000) -> Bool {
        var deliveries = 0
        while true {
            for node in nodes.indices { net.flush(node) }
            guard net.activeLinks.contains(where: { net.links[$0].inFlight }) else { return true }
            while let event = net.next(until: now) {
                guard case .deliver(let link, let direction, let generation) = event else { continue }
                guard let delivery = net.deliver(link, direction, generation: generation) else { continue }
                net.flush(delivery.to)
                deliveries += 1
                if deliveries > maxRounds * max(1, net.links.count) { return false }
            }
        }
    }

    /// Drops a link (both sides see it close).
    func cut(_ index: Int) {
        net.cut(index)
    }

    /// Advances the clock to the earliest deadline (at most `until`), fires timers, delivers.
    /// Timers that fire at one instant without moving any deadline are a failure (recorded),
    /// not a hang.
    func advance(until limit: Double) {
        var firedAtThisInstant = 0
        while true {
            deliver()
            guard let next = endpoints.compactMap(\.nextDeadline).min(), next <= limit else {
                now = limit
                return
            }
            firedAtThisInstant = next <= now ? firedAtThisInstant + 1 : 0
            if firedAtThisInstant > 1_000 {
                Issue.record("timers at \(now) s fired 1,000 times without moving the next deadline (\(next))")
                return
            }
            now = max(now, next)
            for endpoint in endpoints { endpoint.handleTimers(now: now) }
        }
    }
}

@Suite struct EndpointTests {
    static func serverEndpoint(_ fs: MemoryFileSystem, ids: SeededIDs, options: SyncEndpoint.Options = SyncEndpoint.Options()) -> SyncEndpoint {
        SyncEndpoint(opener: { name in
            let path = "/data/\(name).boardpkg"
            return fs.isDirectory(path)
                ? try BoardPackage.open(at: path, fileSystem: fs, newReplicaID: ids.next)
                : try BoardPackage.create(at: path, fileSystem: fs, replicaID: ids.next())
        }, options: options, now: 0)
    }

    /// A server endpoint whose packages live on a fresh simulated disk, on a fresh `VirtualNet`.
    static func serverOnSimulatedDisk(ids: SeededIDs = SeededIDs(), options: SyncEndpoint.Options = SyncEndpoint.Options()) throws -> (MemoryFileSystem, VirtualNet, server: Int) {
        let fs = MemoryFileSystem()
        try fs.createDirectory("/data")
        let net = VirtualNet()
        return (fs, net, net.add(serverEndpoint(fs, ids: ids, options: options)))
    }

    /// A server on a simulated disk and two in-memory peers, alice (replica 0xA) and bob (0xB),
    /// each connected to it for board "team".
    static func aliceAndBobOnAServer(options: SyncEndpoint.Options = SyncEndpoint.Options()) throws
        -> (MemoryFileSystem, VirtualNet, server: Int, alice: MemoryReplicaStore, bob: MemoryReplicaStore, a: Int, b: Int) {
        let (fs, net, server) = try serverOnSimulatedDisk(options: options)
        let alice = MemoryReplicaStore(replica: Replica(id: ReplicaID(0xA)))
        let bob = MemoryReplicaStore(replica: Replica(id: ReplicaID(0xB)))
        let a = net.add(SyncEndpoint(board: "team", store: alice, now: 0))
        let b = net.add(SyncEndpoint(board: "team", store: bob, now: 0))
        net.connect(a, to: server)
        net.connect(b, to: server)
        return (fs, net, server, alice, bob, a, b)
    }

    final class SeededIDs: @unchecked Sendable {  // used on the test's thread only
        var value: UInt64 = 0x5E00
        func next() -> ReplicaID {
            value += 1
            return ReplicaID(value)
        }
    }

    @Test func peersConvergeThroughAServerEndpointOnASimulatedDisk() throws {
        let (fs, net, server, alice, bob, a, b) = try Self.aliceAndBobOnAServer()
        #expect(net.deliver())
        let png = Data(PNGEncoder.solid(width: 3, height: 3, red: 9, green: 8, blue: 7))
        let sticker = try net.endpoints[a].edit(now: net.now) { try $0.addSticker(imagePNG: png, at: CodablePoint(x: 5, y: 5)) }.item!
        try net.endpoints[b].edit(now: net.now) { replica in
            let edit = try replica.beginStroke(color: RGBAColor(red: 0, green: 0, blue: 1), width: 2, points: [CodablePoint(x: 0, y: 0)])
            replica.finishStroke()
            return edit
        }
        net.advance(until: 2)
        try net.endpoints[b].edit(now: net.now) { try $0.move(sticker, to: CodablePoint(x: 40, y: 40)) }
        net.advance(until: 4)
        let serverStore = try #require(net.endpoints[server].boards["team"]?.store)
        let expected = try alice.replica.snapshot().canonicalJSON()
        #expect(try bob.replica.snapshot().canonicalJSON() == expected)
        #expect(try serverStore.replica.snapshot().canonicalJSON() == expected)
        #expect(bob.replica.snapshot().stickers.first?.imagePNG == png, "the image crossed both links")
        // The server's view was saved by its scheduler's deadline (virtual time, no polling).
        let view = try PackageReader(fileSystem: fs).read("/data/team.boardpkg")
        #expect(view.stickers.first?.position == CodablePoint(x: 40, y: 40))
    }

    /// Group commit: merged frames are relayed at once but acknowledged only after the next
    /// sync of the log (the endpoint's deadline); what a power loss takes before it was never
    /// acknowledged, and nothing acknowledged is lost.
    @Test(arguments: [false, true])
    func groupCommitAcknowledgesOnlyWhatASyncMadeDurable(syncFirst: Bool) throws {
        var options = SyncEndpoint.Options()
        options.groupCommit = true
        let (fs, net, server, _, bob, a, _) = try Self.aliceAndBobOnAServer(options: options)
        net.advance(until: 1)
        let own = ReplicaID(0xA)
        func acknowledgedToAlice() -> UInt64 {
            net.endpoints[a].boards["team"]!.hub.sessionIDs.compactMap { net.endpoints[a].boards["team"]!.hub.acknowledged(by: $0)?[own] }.max() ?? 0
        }
        for step in 0..<3 {
            try net.endpoints[a].edit(now: net.now) { try $0.addSticker(asset: AssetHash.of([UInt8(step)]), at: CodablePoint(x: 1, y: 1)) }
        }
        // Bytes only, no timers: merged and relayed, not yet acknowledged.
        #expect(net.deliver())
        let serverHub = try #require(net.endpoints[server].boards["team"]?.hub)
        #expect(serverHub.store.replica.versionVector[own] == 3)
        #expect(bob.replica.versionVector[own] == 3, "relayed before the sync")
        #expect(acknowledgedToAlice() == 0, "no ACK before the sync")
        #expect(serverHub.syncPendingSince == net.now && net.endpoints[server].nextDeadline! <= net.now)
        if syncFirst {
            // The deadline fires: one sync, then the ACK.
            net.advance(until: net.now + 0.001)
            #expect(acknowledgedToAlice() == 3)
        }
        // A power loss now: the server's disk keeps only what was synced.
        fs.restart(.powerLoss(tornTail: false))
        let package = try BoardPackage.open(at: "/data/team.boardpkg", fileSystem: fs, newReplicaID: { ReplicaID(0x77) })
        defer { package.close() }
        #expect(package.replica.versionVector[own] == (syncFirst ? 3 : 0),
                syncFirst ? "acknowledged, so durable" : "never acknowledged, so allowed to be lost")
    }

    @Test func keepAlivesIdleTimeoutsAndIdleBoardsRunOnVirtualTime() throws {
        var options = SyncEndpoint.Options()
        options.idleBoardTimeout = 60
        let (fs, net, server) = try Self.serverOnSimulatedDisk(options: options)
        let a = net.add(SyncEndpoint(board: "quiet", store: MemoryReplicaStore(replica: Replica(id: ReplicaID(0xA))), now: 0))
        let link = net.connect(a, to: server)
        net.deliver()
        // Keep-alives hold an idle link open for as long as it delivers.
        net.advance(until: 100)
        #expect(net.links[link].up)
        #expect(net.endpoints[server].boards["quiet"] != nil)
        // A partition: nothing arrives; both sides time out after 20 s of silence.
        net.hold(link)
        let cutAt = net.now
        while net.endpoints[server].session(net.links[link].sessions.1)?.isClosed != true, net.now < cutAt + 60 {
            net.now = net.endpoints.compactMap(\.nextDeadline).min() ?? net.now + 1
            for endpoint in net.endpoints { endpoint.handleTimers(now: net.now) }
        }
        #expect(net.now - cutAt >= 20 && net.now - cutAt < 21, "idle timeout after 20 s, at \(net.now - cutAt)")
        net.heal()
        net.cut(link)
        // With nobody connected, the board closes 60 s later and its package is unlocked.
        net.advance(until: net.now + 61)
        #expect(net.endpoints[server].boards["quiet"] == nil)
        let reopened = try BoardPackage.open(at: "/data/quiet.boardpkg", fileSystem: fs, newReplicaID: { ReplicaID(1) })
        reopened.close()
    }

    @Test(arguments: [3, 11, 29] as [UInt64])
    func aServerCrashOnTheSimulatedDiskLosesNothingAcknowledged(seed: UInt64) throws {
        let ids = SeededIDs()
        let (fs, net, server) = try Self.serverOnSimulatedDisk(ids: ids)
        let store = MemoryReplicaStore(replica: Replica(id: ReplicaID(0xA)))
        let a = net.add(SyncEndpoint(board: "crash", store: store, now: 0))
        var link = net.connect(a, to: server)
        var rng = SeededRandom(seed: seed)
        var acknowledged = VersionVector.empty
        for step in 0..<40 {
            try net.endpoints[a].edit(now: net.now) { try $0.setCanvasSize(CodableSize(width: Double(100 + step), height: 50)) }
            net.advance(until: net.now + 0.1)
            if let session = net.endpoints[a].boards["crash"]?.hub, let id = session.sessionIDs.first,
               let vector = session.acknowledged(by: id) {
                acknowledged = vector
            }
            if rng.chance(0.15) {
                // The server process dies (unsynced writes survive a process crash; then power
                // loss with torn tails on some seeds) and restarts from its disk.
                fs.restart(rng.chance(0.5) ? .processCrash : .powerLoss(tornTail: true))
                net.cut(link)
                net.endpoints[server] = Self.serverEndpoint(fs, ids: ids)
                link = net.connect(a, to: server)
                net.deliver()
            }
        }
        net.advance(until: net.now + 5)
        let serverReplica = try #require(net.endpoints[server].boards["crash"]?.store.replica, "seed \(seed)")
        #expect(serverReplica.versionVector.dominates(acknowledged), "seed \(seed): an acknowledged operation was lost")
        #expect(serverReplica.versionVector == store.replica.versionVector, "seed \(seed): the client resent the rest")
    }
}

/// The network simulator (`World`, `bin/board-sim`): seeded plans of edits and faults over the
/// real endpoint code; every seed must converge to the contract's board with nothing
/// acknowledged or saved lost. A failing seed prints the command that replays it.
@Suite struct SimulationTests {
    static let seedsPerSlice: UInt64 = 50
    /// Every fault kind a seed can draw, plus the ones a draw implies.
    static let faultKinds = Plan.Faults.kinds.map(\.name) + ["torn write", "slow link", "access control", "mixed releases"]

    /// 300 seeds in six slices of 50 (bounded by count; both cores take slices). `.ci/run`
    /// runs 1,000 more in a release build (`bin/board-sim --seeds 1000`).
    @Test(arguments: 0..<6 as Range<UInt64>)
    func seededFaultRunsConvergeWithNothingLost(slice: UInt64) {
        let start = 10_000 + slice * Self.seedsPerSlice
        var seedsHitting: [String: Int] = [:]
        var topologies: Set<String> = []
        for seed in start..<(start + Self.seedsPerSlice) {
            let report = World.simulate(seed: seed)
            #expect(report.passed, "seed \(seed): \(report.failures.joined(separator: "; ")) — replay: bin/board-sim --seed \(seed) --shrink")
            #expect(report.operationsMade > 100, "seed \(seed)")
            for kind in report.faultsHit.keys { seedsHitting[kind, default: 0] += 1 }
            topologies.insert(String(report.topology.prefix { $0 != ":" }))
        }
        // Swarm: each fault kind is hit in at least 5% of the slice's seeds.
        for kind in Self.faultKinds {
            #expect(Double(seedsHitting[kind] ?? 0) >= 0.05 * Double(Self.seedsPerSlice),
                    "slice \(slice): \(kind) hit in \(seedsHitting[kind] ?? 0) of \(Self.seedsPerSlice) seeds")
        }
        #expect(topologies == ["star", "chain", "mixed", "mesh"], "slice \(slice): \(topologies)")
    }

    /// Seeds that found problems in the 10,000-seed run, kept: 548 (an edit on a disk whose
    /// full spell ended that very instant), 4443 (a server restarting on a full disk could not
    /// open its board; `FullDiskOpenTests` has the package side).
    @Test(arguments: [548, 4443] as [UInt64])
    func seedsThatFoundBugsStayFixed(seed: UInt64) {
        let report = World.simulate(seed: seed)
        #expect(report.passed, "seed \(seed): \(report.failures.joined(separator: "; "))")
    }

    /// The clients' typed changes compared with their boards after every step (the swarm
    /// compares every 16th step, for speed), on seeds of every topology.
    @Test(arguments: [1, 2, 3, 5] as [UInt64])
    func typedChangesMatchTheBoardAfterEveryStep(seed: UInt64) throws {
        let world = try World(Plan.draw(seed: seed))
        world.typedChangesCheckEvery = 1
        let report = world.run()
        #expect(report.passed, "seed \(seed): \(report.failures.joined(separator: "; "))")
    }

    @Test func oneSeedReplaysExactly() throws {
        let first = World.simulate(seed: 77)
        let second = World.simulate(seed: 77)
        #expect(first.decisionHash == second.decisionHash)
        #expect(first.deliveries == second.deliveries)
        #expect(World.simulate(seed: 78).decisionHash != first.decisionHash)
        // The plan's text reads back as the same plan, and runs the same.
        let plan = Plan.draw(seed: 77)
        let reread = try Plan(text: plan.text)
        #expect(reread == plan)
        #expect(World.simulate(reread).decisionHash == first.decisionHash)
    }

    /// A seed whose server and one peer run the release before batch format 2, beside current
    /// peers: its plan says so in its text, reads back the same, and converges with nothing lost.
    @Test func mixedReleasesConverge() throws {
        let plan = Plan.draw(seed: 2)
        #expect(plan.releases == [plan.server: .beforePackedPoints, 1: .beforePackedPoints], "seed 2's draw changed: pick another")
        #expect(plan.text.contains("release server before-packed-points"))
        #expect(try Plan(text: plan.text) == plan)
        let report = World.simulate(plan)
        #expect(report.passed, "\(report.failures.joined(separator: "; "))")
    }

    /// The oracles catch planted bugs (mutation testing), each as the failure it is: a tie broken
    /// by arrival order (replicas diverge), an ACK sent before the log append (acknowledged
    /// operations lost in a crash), a WANT nobody answers (no convergence: images missing), and
    /// hubs that never pass presence on (peers do not see each other).
    @Test(arguments: [
        (World.Mutation.tieBreakByArrival, ["divergence", "contract"]),
        (.acknowledgeBeforeLogging, ["acknowledged loss"]),
        // Caught as acknowledged operations missing after a power loss, or as a restart that
        // refuses a view ahead of the log it lost.
        (.acknowledgeBeforeSync, ["acknowledged loss", "restart"]),
        (.imagesNeverServed, ["liveness"]),
        (.presenceNotRelayed, ["presence"]),
        // The client engine's oracles: typed changes folded from the start give the board;
        // a client that never sees its acknowledgements never quiets (no convergence).
        (.changesDropped, ["typed changes"]),
        (.acknowledgementsUnseen, ["liveness"]),
    ])
    func theOraclesCatchPlantedBugs(mutation: World.Mutation, kinds: [String]) {
        var caught: World.Report?
        for seed in 0..<60 as Range<UInt64> {
            let report = World.simulate(seed: seed, mutation: mutation)
            if let kind = report.failureKind {
                #expect(kinds.contains(kind), "seed \(seed) with \(mutation): \(report.failures)")
                caught = report
                break
            }
        }
        #expect(caught != nil, "no seed in 0..<60 caught \(mutation)")
        if let report = caught {
            #expect(World.simulate(seed: report.seed).passed, "seed \(report.seed) passes without the bug")
        }
    }

    /// A failing run shrinks to a few events, printed as a world scenario that still fails the
    /// same way when run as a file, and passes without the planted bug.
    @Test func aFailingRunShrinksToAScenarioThatStillFails() throws {
        let seed = try #require((0..<60 as Range<UInt64>).first {
            World.simulate(seed: $0, mutation: .acknowledgeBeforeLogging).failureKind == "acknowledged loss"
        })
        var plan = Plan.draw(seed: seed)
        plan.mutation = .acknowledgeBeforeLogging
        let shrunk = try #require(World.shrink(plan, budget: 200))
        #expect(shrunk.report.failureKind == "acknowledged loss")
        #expect(shrunk.plan.events.count <= 10, "\(shrunk.plan.events.count) events left of \(plan.events.count)")
        #expect(shrunk.plan.events.contains { if case .crash = $0.action { true } else { false } }, "a crash is needed to lose anything")
        let outcome = try Scenario(name: "shrunk", text: shrunk.scenario).run()
        #expect(!outcome.passed, "\(shrunk.scenario)")
        #expect(outcome.failures.first?.contains("acknowledged") == true, "\(outcome.failures)")
        let healthy = try Scenario(name: "healthy", text: shrunk.scenario.replacingOccurrences(of: "plant acknowledge-before-logging\n", with: "")).run()
        #expect(healthy.passed, "\(healthy.failures)")
        #expect(World.shrink(Plan.draw(seed: seed)) == nil, "a passing plan has nothing to shrink")
    }

    @Test func aMalformedWorldScenarioNamesItsLine() {
        for (text, words) in [
            ("world seed 1 peers 2\n# comment\nat 1 edit peer7\n", ["line 3", "peer7"]),
            ("world seed 1 peers 2\nat 30 edit peer0\n", ["line 2", "inside the phase"]),
            ("world seed 1 peers 2\nat 2 edit peer0\nat 1 edit peer1\n", ["line 3", "time order"]),
            ("world seed 1 peers 2\nat 1 crash server melt for 2\n", ["line 2", "crash HOST"]),
            ("world seed 1 peers 2\nplant nothing\n", ["line 2", "plant BUG"]),
            ("world seed 1 peers 99\n", ["line 1", "peers"]),
        ] {
            #expect(throws: (any Error).self, "\(text)") { _ = try Scenario(name: "bad", text: text).run() }
            do {
                _ = try Scenario(name: "bad", text: text).run()
            } catch {
                #expect(words.allSatisfy { "\(error)".contains($0) }, "\(error)")
            }
        }
    }
}

/// The conflict scenarios users can run (`bin/board-sim run FILE`): every file in
/// `Simulations/Scenarios/` passes, and a wrong expectation or a malformed line is caught.
@Suite struct ScenarioTests {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Simulations/Scenarios").path

    @Test func everyScenarioFilePasses() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: Self.directory).filter { $0.hasSuffix(".board") }.sorted()
        #expect(files.count >= 22, "one scenario per contract row and fault kind")
        var faultsInWorlds: Set<String> = []
        for file in files {
            let text = try String(contentsOfFile: Self.directory + "/" + file, encoding: .utf8)
            let scenario = Scenario(name: file, text: text)
            let outcome = try scenario.run()
            #expect(outcome.passed, "\(file): \(outcome.failures.joined(separator: "; "))")
            if scenario.isWorld {
                let faults = outcome.transcript.first { $0.hasPrefix("faults hit: ") }?.dropFirst(12) ?? ""
                #expect(!faults.isEmpty, "\(file) hits a fault")
                for part in faults.split(separator: ",") {
                    faultsInWorlds.insert(part.trimmingCharacters(in: .whitespaces).split(separator: " ").dropLast().joined(separator: " "))
                }
            } else {
                #expect(outcome.transcript.contains { $0.contains("— ok") }, "\(file) checks something")
            }
        }
        // Faults the conflict scenarios cannot express each have a world scenario.
        for kind in ["reset", "partition", "one-way partition", "clog", "slow link", "torn write", "long offline", "disk full"] {
            #expect(faultsInWorlds.contains(kind), "a world scenario hits \(kind): \(faultsInWorlds.sorted())")
        }
    }

    @Test func aWrongExpectationFailsAndSaysWhatItSaw() throws {
        let text = """
        peers alice bob
        alice: sticker S at 0,0
        sync
        partition alice bob
        alice: move S 100,0
        bob: move S 0,200
        heal
        # the contract says bob's move wins whole; expecting alice's must fail
        expect S at 100,0
        """
        let outcome = try Scenario(name: "wrong", text: text).run()
        #expect(!outcome.passed)
        #expect(outcome.failures.first?.contains("S is at 0.0,200.0") == true, "\(outcome.failures)")
    }

    @Test func aMalformedLineIsAnErrorNamingItsLine() {
        #expect {
            _ = try Scenario(name: "bad", text: "peers alice\nalice: move Nobody 1,1\n").run()
        } throws: { error in
            "\(error)".contains("line 2") && "\(error)".contains("Nobody")
        }
    }
}
