import BoardCRDT
import BoardModel
import BoardStore
import BoardSync
import Dispatch
import Foundation
import Synchronization

/// A deterministic network simulation: a sync server and peers running the real `SyncEndpoint`,
/// `BoardHub` and `BoardPackage` code over simulated links, a virtual clock and simulated disks
/// (`MemoryFileSystem`), with seeded faults. Everything follows from the seed: one seed is one
/// run, bit for bit, and `decisionHash` fingerprints every decision it made.
///
/// A run has two phases: `faultyPhase` seconds of editing under the seed's faults, then a heal
/// (faults off, every host up, every link reconnected) and up to `settleLimit` seconds for
/// everyone to converge. The oracles then check convergence (liveness) and that nothing
/// acknowledged or saved was lost (safety).
public final class World {
    /// Bugs the simulator can plant in the hosts it runs, each of which an oracle must catch.
    public enum Mutation: Sendable {
        case none
        /// The server acknowledges operations before they are in its op log (they reach the log
        /// only at the next view save), so a crash loses acknowledged operations.
        case acknowledgeBeforeLogging
        /// Peers never serve image bytes (every WANT is answered "no"), so images never spread.
        case imagesNeverServed
    }

    /// The mix of faults one seed draws (swarm testing: each seed its own mix and intensity).
    public struct Faults: Sendable, CustomStringConvertible {
        public var latency: ClosedRange<Double> = 0.001...0.05
        public var cutRate = 0.0           // link cuts per link-second
        public var corruptRate = 0.0       // corrupted chunks per link-second
        public var serverCrashRate = 0.0   // per second
        public var peerCrashRate = 0.0     // per peer-second
        public var diskFullRate = 0.0      // server disk-full episodes per second
        public var offlineRate = 0.0       // peers going offline for a while, per peer-second

        public init() {}

        public static func draw(_ rng: inout SeededRandom) -> Faults {
            var faults = Faults()
            let slow = Double(Int.random(in: 1...200, using: &rng)) / 1000
            faults.latency = (slow / 4)...slow
            func maybe(_ rate: Double) -> Double { rng.chance(0.5) ? rate * Double(Int.random(in: 1...4, using: &rng)) : 0 }
            faults.cutRate = maybe(0.05)
            faults.corruptRate = maybe(0.02)
            faults.serverCrashRate = maybe(0.02)
            faults.peerCrashRate = maybe(0.01)
            faults.diskFullRate = maybe(0.01)
            faults.offlineRate = maybe(0.01)
            return faults
        }

        public var description: String {
            "latency \(latency.lowerBound)-\(latency.upperBound) s, cuts \(cutRate), corruption \(corruptRate), server crashes \(serverCrashRate), peer crashes \(peerCrashRate), disk full \(diskFullRate), offline \(offlineRate)"
        }
    }

    public struct Config: Sendable {
        public var seed: UInt64
        public var peers = 3
        public var editsPerSecond = 20.0
        public var faultyPhase = 20.0
        public var settleLimit = 120.0
        public var faults: Faults
        /// Every host's log lines, prefixed with the simulated time (nil: quiet).
        public var log: (@Sendable (String) -> Void)?
        /// A deliberate bug, to prove the oracles catch it (mutation testing).
        public var mutation: Mutation = .none

        public init(seed: UInt64, peers: Int = 3, faults: Faults? = nil) {
            self.seed = seed
            self.peers = peers
            var rng = SeededRandom(seed: seed ^ 0xFA17)
            self.faults = faults ?? Faults.draw(&rng)
        }
    }

    /// What happened, and what the oracles found.
    public struct Report: Sendable {
        public var seed: UInt64
        public var faults: Faults
        public var faultsHit: [String: Int] = [:]
        /// "star", "chain" or "mixed", and whom each peer dials ("s" = the server).
        public var topology = ""
        public var operationsMade = 0
        public var deliveries = 0
        public var simulatedSeconds = 0.0
        public var convergedAfter: Double?
        public var failures: [String] = []
        public var decisionHash: UInt64 = 0

        public var passed: Bool { failures.isEmpty }

        public init(seed: UInt64, faults: Faults) {
            self.seed = seed
            self.faults = faults
        }
    }

    final class Host {
        let name: String
        let fs = MemoryFileSystem()
        var endpoint: SyncEndpoint!
        var up = true
        /// Peers: the package; servers find theirs through the endpoint.
        var package: BoardPackage?
        /// Peers: operations saved locally (a crash must not lose them).
        var saved = VersionVector.empty
        var offlineUntil = 0.0
        var editor: RandomEditor

        init(name: String, editor: RandomEditor) {
            self.name = name
            self.editor = editor
        }
    }

    /// A connection from a peer (the dialer) to the server or to another peer (the acceptor).
    struct Link {
        var peer: Int
        var peerID: SessionID
        /// `World.serverIndex` for the server, else a peer's index.
        var acceptor: Int
        var acceptorID: SessionID
        var latency: Double
        /// In flight, per direction: (arrival time, bytes), in order.
        var toAcceptor: [(Double, [UInt8])] = []
        var toPeer: [(Double, [UInt8])] = []
        var up = true
    }

    static let serverIndex = -1

    /// Whom each peer dials: the server (a star), or another peer (chains and meshes, where
    /// peers relay for each other). Drawn per seed.
    public enum Topology: String, Sendable {
        case star, chain, mixed
    }

    public let config: Config
    public private(set) var report: Report
    private var rng: SeededRandom
    private var now = 0.0
    private var server: Host
    private var peers: [Host] = []
    private var links: [Link] = []
    private var nextID: SessionID = 0
    private var serverDiskFullUntil = 0.0
    private var serverDownUntil = 0.0
    private var targets: [Int] = []
    public private(set) var topology: Topology = .star
    /// Operations the server acknowledged to some peer (they must survive anything).
    private var acknowledged = VersionVector.empty
    private var hash: UInt64 = 0xCBF2_9CE4_8422_2325
    private let board = "sim"

    public init(_ config: Config) throws {
        self.config = config
        rng = SeededRandom(seed: config.seed)
        report = Report(seed: config.seed, faults: config.faults)
        server = Host(name: "server", editor: RandomEditor(rng: SeededRandom(seed: config.seed &+ 1)))
        try server.fs.createDirectory("/data")
        startServer()
        topology = [Topology.star, .chain, .mixed][Int.random(in: 0..<3, using: &rng)]
        for index in 0..<config.peers {
            switch topology {
            case .star: targets.append(World.serverIndex)
            case .chain: targets.append(index == 0 ? World.serverIndex : index - 1)
            case .mixed: targets.append(index == 0 || rng.chance(0.5) ? World.serverIndex : Int.random(in: 0..<index, using: &rng))
            }
        }
        note("topology \(topology.rawValue) \(targets)")
        report.topology = "\(topology.rawValue): " + targets.enumerated().map { "peer\($0.offset)→\($0.element == World.serverIndex ? "server" : "peer\($0.element)")" }.joined(separator: " ")
        for index in 0..<config.peers {
            let peer = Host(name: "peer\(index)", editor: RandomEditor(rng: SeededRandom(seed: config.seed &* 31 &+ UInt64(index))))
            try peer.fs.createDirectory("/p")
            let package = try BoardPackage.create(at: "/p/board.boardpkg", fileSystem: peer.fs, replicaID: ReplicaID(UInt64(index + 1) << 32 | (config.seed & 0xFFFF_FFFF)))
            for data in HistoryGenerator.assetPool { try package.addAsset(data) }
            peer.package = package
            peer.endpoint = SyncEndpoint(board: board, store: peerStore(package), options: endpointOptions(peer.name), now: now)
            peers.append(peer)
            connect(index)
        }
    }

    // MARK: Decisions

    private func note(_ words: String) {
        for byte in words.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01B3
        }
    }

    private func chance(_ rate: Double, over seconds: Double) -> Bool {
        rate > 0 && rng.chance(min(1, rate * seconds))
    }

    private func hit(_ fault: String) {
        config.log?(String(format: "%8.3f ", now) + "FAULT \(fault)")
        report.faultsHit[fault, default: 0] += 1
        note("fault \(fault) at \(now)")
    }

    // MARK: Hosts and links

    private func peerStore(_ package: BoardPackage) -> any HostedStore {
        config.mutation == .imagesNeverServed ? ImagelessStore(package) : package
    }

    private func endpointOptions(_ host: String) -> SyncEndpoint.Options {
        var options = SyncEndpoint.Options()
        if let log = config.log {
            options.log = { [unowned self] line in log(String(format: "%8.3f ", self.now) + "\(host): \(line)") }
        }
        return options
    }

    private func startServer() {
        let fs = server.fs
        let seed = config.seed
        var counter: UInt64 = 0
        let mutation = config.mutation
        server.endpoint = SyncEndpoint(opener: { name in
            let path = "/data/\(name).boardpkg"
            counter += 1
            let id = ReplicaID(0xFFFF_0000_0000 | seed << 8 | counter)
            let package = fs.isDirectory(path)
                ? try BoardPackage.open(at: path, fileSystem: fs, newReplicaID: { id })
                : try BoardPackage.create(at: path, fileSystem: fs, replicaID: id)
            return mutation == .acknowledgeBeforeLogging ? LateLoggingStore(package) as any HostedStore : package
        }, options: endpointOptions("server"), now: now)
        server.up = true
    }

    /// A host's endpoint while it is up (and, for peers, online).
    private func endpoint(_ host: Int) -> SyncEndpoint? {
        if host == World.serverIndex { return server.up ? server.endpoint : nil }
        return peers[host].up && now >= peers[host].offlineUntil ? peers[host].endpoint : nil
    }

    private func connect(_ peer: Int) {
        let target = targets[peer]
        guard endpoint(peer) != nil, let acceptor = endpoint(target) else { return }
        nextID += 1
        let peerID = nextID
        nextID += 1
        let acceptorID = nextID
        let latency = Double.random(in: config.faults.latency, using: &rng)
        acceptor.accept(acceptorID, now: now)
        peers[peer].endpoint.dialed(peerID, now: now)
        links.append(Link(peer: peer, peerID: peerID, acceptor: target, acceptorID: acceptorID, latency: latency))
        note("connect \(peer) \(target) \(latency)")
    }

    private func cut(_ index: Int) {
        guard links[index].up else { return }
        links[index].up = false
        let link = links[index]
        if peers[link.peer].up { peers[link.peer].endpoint.closed(link.peerID, now: now) }
        if link.acceptor == World.serverIndex {
            if server.up { server.endpoint.closed(link.acceptorID, now: now) }
        } else if peers[link.acceptor].up {
            peers[link.acceptor].endpoint.closed(link.acceptorID, now: now)
        }
        note("cut \(index)")
    }

    /// The peer's own outbound links that are up.
    private func linksUp(of peer: Int) -> [Int] {
        links.indices.filter { links[$0].up && links[$0].peer == peer }
    }

    /// Every link touching a host, either way.
    private func linksTouching(_ host: Int) -> [Int] {
        links.indices.filter { links[$0].up && (links[$0].peer == host || links[$0].acceptor == host) }
    }

    // MARK: Running

    public func run() -> Report {
        var lastEdit = 0.0
        let step = 0.01
        while now < config.faultyPhase {
            now += step
            inject(over: step)
            if now - lastEdit >= 1 / config.editsPerSecond {
                lastEdit = now
                edit()
            }
            pump()
        }
        heal()
        let settleStart = now
        while now < settleStart + config.settleLimit {
            now += step
            reconnect()
            pump()
            if converged() {
                report.convergedAfter = now - settleStart
                break
            }
        }
        report.simulatedSeconds = now
        check()
        report.decisionHash = hash
        return report
    }

    private func inject(over seconds: Double) {
        let faults = config.faults
        for index in links.indices where links[index].up {
            if chance(faults.cutRate, over: seconds) { hit("cut"); cut(index) }
            if chance(faults.corruptRate, over: seconds), !links[index].toAcceptor.isEmpty {
                hit("corrupt")
                var chunk = links[index].toAcceptor[0]
                let at = Int.random(in: 0..<chunk.1.count, using: &rng)
                chunk.1[at] ^= 0x5A
                links[index].toAcceptor[0] = chunk
            }
        }
        if server.up, chance(faults.serverCrashRate, over: seconds) {
            hit("server crash")
            crashServer()
        }
        if !server.up, now >= serverDownUntil {
            startServer()
            note("server restart")
            // Checked at once: peers would resend what was lost, hiding the loss by the end.
            server.endpoint.preload(board: board)
            if let replica = serverReplica, !replica.versionVector.dominates(acknowledged) {
                report.failures.append("the server lost acknowledged operations in a crash at \(now): holds \(replica.versionVector), acknowledged \(acknowledged)")
            }
        }
        if chance(faults.diskFullRate, over: seconds) {
            hit("disk full")
            serverDiskFullUntil = now + Double(Int.random(in: 1...5, using: &rng))
            server.fs.setCapacity(0)
        }
        if serverDiskFullUntil > 0, now >= serverDiskFullUntil {
            serverDiskFullUntil = 0
            server.fs.setCapacity(nil)
        }
        for index in peers.indices {
            if peers[index].up, chance(faults.peerCrashRate, over: seconds) {
                hit("peer crash")
                crashPeer(index)
            }
            if peers[index].up, chance(faults.offlineRate, over: seconds) {
                hit("offline")
                for link in linksTouching(index) { cut(link) }
                peers[index].offlineUntil = now + Double(Int.random(in: 2...10, using: &rng))
            }
        }
        reconnect()
    }

    /// Peers without a link dial again (a real peer backs off; here about every 0.2 s).
    private func reconnect() {
        for index in peers.indices where peers[index].up && linksUp(of: index).isEmpty && rng.chance(0.05) {
            connect(index)
        }
    }

    private func crashServer() {
        for index in linksTouching(World.serverIndex) { cut(index) }
        server.fs.restart(rng.chance(0.5) ? .processCrash : .powerLoss(tornTail: rng.chance(0.5)))
        server.up = false
        serverDownUntil = now + Double(Int.random(in: 1...4, using: &rng))
    }

    private func crashPeer(_ index: Int) {
        let peer = peers[index]
        for link in linksTouching(index) { cut(link) }
        peer.fs.restart(rng.chance(0.5) ? .processCrash : .powerLoss(tornTail: rng.chance(0.5)))
        // The dead process's objects go first (their lock is gone with it).
        peer.endpoint = nil
        peer.package = nil
        do {
            let package = try BoardPackage.open(at: "/p/board.boardpkg", fileSystem: peer.fs,
                                                newReplicaID: { ReplicaID(UInt64(index + 1) << 40 | UInt64(self.report.faultsHit["peer crash"] ?? 0)) })
            if !package.replica.versionVector.dominates(peer.saved) {
                report.failures.append("\(peer.name) lost operations it had saved before a crash at \(now)")
            }
            peer.package = package
            peer.saved = package.replica.versionVector
            peer.endpoint = SyncEndpoint(board: board, store: peerStore(package), options: endpointOptions(peer.name), now: now)
        } catch {
            report.failures.append("\(peer.name) could not reopen its package after a crash at \(now): \(error)")
            peer.up = false
        }
    }

    private func edit() {
        let index = Int.random(in: 0..<peers.count, using: &rng)
        let peer = peers[index]
        guard peer.up else { return }
        do {
            let edit = try peer.endpoint.edit(board, now: now) { replica in
                LocalEdit(operations: peer.editor.edit(&replica))
            }
            report.operationsMade += edit.operations.count
            if let package = peer.package { peer.saved = package.replica.versionVector }
            note("edit \(index) \(edit.operations.count)")
        } catch {
            report.failures.append("\(peer.name): a local edit failed at \(now): \(error)")
        }
    }

    /// Timers, output onto links, arrivals.
    private func pump() {
        if server.up { server.endpoint.handleTimers(now: now) }
        for peer in peers where peer.up { peer.endpoint.handleTimers(now: now) }
        for index in links.indices where links[index].up {
            let link = links[index]
            guard let dialer = endpoint(link.peer), let acceptor = endpoint(link.acceptor) else {
                cut(index)
                continue
            }
            let toAcceptor = dialer.output(for: link.peerID, now: now)
            if !toAcceptor.isEmpty {
                let at = max(now + link.latency, links[index].toAcceptor.last?.0 ?? 0)
                links[index].toAcceptor.append((at, toAcceptor))
            }
            let toPeer = acceptor.output(for: link.acceptorID, now: now)
            if !toPeer.isEmpty {
                let at = max(now + link.latency, links[index].toPeer.last?.0 ?? 0)
                links[index].toPeer.append((at, toPeer))
            }
            while let first = links[index].toAcceptor.first, first.0 <= now, links[index].up {
                links[index].toAcceptor.removeFirst()
                acceptor.receive(link.acceptorID, first.1, now: now)
                report.deliveries += 1
            }
            while let first = links[index].toPeer.first, first.0 <= now, links[index].up {
                links[index].toPeer.removeFirst()
                dialer.receive(link.peerID, first.1, now: now)
                report.deliveries += 1
                // What the server acknowledged must survive anything (peers' ACKs are theirs).
                if link.acceptor == World.serverIndex,
                   let vector = dialer.boards[board]?.hub.acknowledged[link.peerID] {
                    acknowledged = acknowledged.merged(with: vector)
                }
            }
            if acceptor.isFinished(link.acceptorID) || dialer.isFinished(link.peerID) {
                cut(index)
            }
        }
        links.removeAll { !$0.up }
    }

    private func heal() {
        note("heal")
        server.fs.setCapacity(nil)
        serverDiskFullUntil = 0
        if !server.up { startServer() }
        for index in peers.indices {
            peers[index].offlineUntil = 0
            if peers[index].up, linksUp(of: index).isEmpty { connect(index) }
        }
    }

    // MARK: Oracles

    private var serverReplica: Replica? { server.endpoint.boards[board]?.store.replica }

    private func converged() -> Bool {
        guard let reference = serverReplica else { return false }
        for peer in peers where peer.up {
            guard let replica = peer.package?.replica, replica.versionVector == reference.versionVector,
                  replica.missingAssets.isEmpty else { return false }
        }
        return reference.missingAssets.isEmpty
    }

    private func check() {
        guard report.convergedAfter != nil else {
            var state = ["server \(server.up ? "up" : "down") \(serverReplica.map { "\($0.versionVector) missing \($0.missingAssets.count) images" } ?? "without the board")"]
            for peer in peers {
                let replica = peer.package?.replica
                state.append("\(peer.name) \(peer.up ? "up" : "down"), \(linksUp(of: peers.firstIndex { $0 === peer }!).count) links, \(replica.map { "\($0.versionVector) missing \($0.missingAssets.count) images" } ?? "-")")
            }
            if let reference = serverReplica {
                for peer in peers {
                    guard let replica = peer.package?.replica else { continue }
                    for (author, seq) in reference.versionVector.entries where replica.versionVector[author] < seq {
                        let held = (replica.versionVector[author] + 1...seq).filter { replica.hasIntegrated(OpID(replica: author, seq: $0)) }
                        state.append("\(peer.name) lacks \(author) \(replica.versionVector[author] + 1)...\(seq) (holds \(held.count) of them ahead of a gap)")
                    }
                }
            }
            report.failures.append("no convergence within \(config.settleLimit) s after the heal: " + state.joined(separator: "; "))
            return
        }
        guard let reference = serverReplica else { return }
        if !reference.versionVector.dominates(acknowledged) {
            report.failures.append("the server lost acknowledged operations: holds \(reference.versionVector), acknowledged \(acknowledged)")
        }
        do {
            let expected = try reference.snapshot().canonicalJSON()
            for peer in peers where peer.up {
                guard let replica = peer.package?.replica else { continue }
                if try replica.snapshot().canonicalJSON() != expected {
                    report.failures.append("\(peer.name)'s board differs from the server's")
                }
                if !replica.versionVector.dominates(peer.saved) {
                    report.failures.append("\(peer.name) lost operations it had saved")
                }
            }
            // The reference model of the conflict contract, applied to what the server holds.
            let model = try ContractModel.board(from: reference.fullState().operations).canonicalJSON()
            if try ContractModel.withoutImageBytes(reference.snapshot()).canonicalJSON() != model {
                report.failures.append("the converged board differs from the reference model of the conflict contract")
            }
        } catch {
            report.failures.append("snapshot failed: \(error)")
        }
    }

    /// Runs one seed (a setup failure is reported as a failed run).
    public static func simulate(seed: UInt64, peers: Int = 3, mutation: Mutation = .none,
                                log: (@Sendable (String) -> Void)? = nil) -> Report {
        do {
            var config = Config(seed: seed, peers: peers)
            config.log = log
            config.mutation = mutation
            return try World(config).run()
        } catch {
            var report = Report(seed: seed, faults: Faults())
            report.failures = ["could not set up: \(error)"]
            return report
        }
    }

    /// Runs many seeds on every core; reports come back in seed order.
    public static func swarm(seeds: Range<UInt64>, peers: Int = 3, progress: @escaping @Sendable (Int) -> Void = { _ in }) -> [Report] {
        let results = Mutex<[Report]>([])
        DispatchQueue.concurrentPerform(iterations: seeds.count) { index in
            let report = simulate(seed: seeds.lowerBound + UInt64(index), peers: peers)
            let done = results.withLock { reports in
                reports.append(report)
                return reports.count
            }
            progress(done)
        }
        return results.withLock { $0 }.sorted { $0.seed < $1.seed }
    }

    /// The command that replays this run.
    public var replayCommand: String { "bin/board-sim --seed \(config.seed)" }
}

// MARK: Planted bugs (mutation testing of the oracles)

/// Acknowledges merges before they are durable: they are logged only at the next view save.
final class LateLoggingStore: HostedStore {
    let package: BoardPackage
    private var unlogged: [OperationBatch] = []
    private(set) var replica: Replica

    init(_ package: BoardPackage) {
        self.package = package
        self.replica = package.replica
    }

    func merge(_ batch: OperationBatch) throws -> Int {
        let count = try replica.apply(batch)
        unlogged.append(batch)
        return count
    }

    func addReceivedAsset(_ data: Data, claimedHash: AssetHash?) throws -> AssetHash {
        let hash = try package.addReceivedAsset(data, claimedHash: claimedHash)
        replica.assets.insert(data)
        return hash
    }

    func commitEdit(_ body: (inout Replica) throws -> LocalEdit) throws -> LocalEdit {
        try body(&replica)
    }

    func saveView() throws {
        for batch in unlogged { try package.merge(batch) }
        unlogged = []
        try package.save()
    }

    func closeStore() { package.close() }
}

/// Serves no image bytes: its replica, as the hub sees it, holds none.
final class ImagelessStore: HostedStore {
    let package: BoardPackage

    init(_ package: BoardPackage) {
        self.package = package
    }

    var replica: Replica {
        var replica = package.replica
        replica.assets = AssetStore()
        return replica
    }

    func merge(_ batch: OperationBatch) throws -> Int { try package.merge(batch) }

    func addReceivedAsset(_ data: Data, claimedHash: AssetHash?) throws -> AssetHash {
        try package.addReceivedAsset(data, claimedHash: claimedHash)
    }

    func commitEdit(_ body: (inout Replica) throws -> LocalEdit) throws -> LocalEdit { try package.commit(body) }
    func saveView() throws { try package.save() }
    func closeStore() { package.close() }
}
