import BoardModel
import BoardStore
@_spi(Mutations) import BoardCRDT
@_spi(Mutations) import BoardSync
import Foundation

/// A deterministic network simulation: a sync server and peers running the real `SyncEndpoint`,
/// `BoardHub` and `BoardPackage` code over simulated links, a virtual clock and simulated disks
/// (`MemoryFileSystem`), following a `Plan` of edits and faults. Everything follows from the
/// plan (and a seed draws the plan): one plan is one run, bit for bit, and `decisionHash`
/// fingerprints every decision it made.
///
/// The clock jumps from event to event (a discrete-event simulation): byte chunks arriving,
/// endpoint timers at their `nextDeadline`, planned edits and faults, reconnect attempts.
///
/// A run has two phases: the plan's `faultyPhase` of editing under faults, then a heal (every
/// fault off, every host up, every link reconnected) and up to `settleLimit` seconds for
/// everyone to converge. The oracles then check liveness, convergence, the conflict contract,
/// and that nothing acknowledged or saved was lost.
public final class World {
    /// Bugs the simulator can plant in the hosts it runs, each of which an oracle must catch.
    public enum Mutation: String, Sendable, CaseIterable {
        case none
        /// The server acknowledges operations before they are in its op log (they reach the log
        /// only at the next view save), so a crash loses acknowledged operations.
        case acknowledgeBeforeLogging = "acknowledge-before-logging"
        /// Group commit that forgets its sync: the server's merges are appended to its log but
        /// never fsynced before they are acknowledged, so a power loss loses acknowledged
        /// operations.
        case acknowledgeBeforeSync = "acknowledge-before-sync"
        /// Peers never serve image bytes (every WANT is answered "no"): a liveness bug.
        case imagesNeverServed = "images-never-served"
        /// Registers break Lamport ties by arrival order (the first to arrive wins) instead of
        /// by replica id: a broken merge rule.
        case tieBreakByArrival = "tie-break-by-arrival"
        /// Hubs keep peers' presences but never pass them on: nobody behind a hub sees anyone.
        case presenceNotRelayed = "presence-not-relayed"
        /// Clients lose every other typed change (a broken change stream: an app's view drifts
        /// from the board).
        case changesDropped = "changes-dropped"
        /// Clients never look at their upstream session: never live, acknowledgements unseen.
        case acknowledgementsUnseen = "acknowledgements-unseen"
    }

    /// What happened, and what the oracles found.
    public struct Report: Sendable {
        public var seed: UInt64
        /// The plan in brief: planned events by kind ("400 edit, 3 cut, 1 crash").
        public var planned: String = ""
        public var faultsHit: [String: Int] = [:]
        /// The topology and whom each peer dials.
        public var topology = ""
        public var events = 0
        public var operationsMade = 0
        /// Byte chunks that arrived at a host (each carries any number of frames).
        public var deliveries = 0
        /// Operations that arrived at a replica in those chunks (new or not).
        public var operationsDelivered = 0
        public var simulatedSeconds = 0.0
        public var convergedAfter: Double?
        public var failures: [String] = []
        /// The kind of the first failure ("liveness", "acknowledged loss", ...): what shrinking keeps.
        public var failureKind: String?
        public var decisionHash: UInt64 = 0

        public var passed: Bool { failures.isEmpty }

        public init(seed: UInt64) {
            self.seed = seed
        }
    }

    final class Host {
        let index: Int
        let name: String
        let fs = MemoryFileSystem()
        /// Nil while the host is down.
        var endpoint: SyncEndpoint?
        /// Peers: their package.
        var package: BoardPackage?
        /// Peers: operations saved locally (a crash must not lose them).
        var saved = VersionVector.empty
        /// What this host acknowledged to anyone (it must survive a crash).
        var acknowledged = VersionVector.empty
        var offlineUntil = 0.0
        var diskFullUntil = 0.0
        /// Whether the disk is full right now (until the episode's end is handled).
        var diskFull = false
        /// The server restarted on a full disk and could not open the board yet: check what
        /// it reopens with once it can.
        var reopenPending = false
        var timerAt: Double?
        var timerGeneration = 0
        var restarts: UInt64 = 0
        /// Peers: the host each of the endpoint's dial targets stands for.
        var dialTargets: [Int] = []
        /// Peers: the live client's engine over the link to the first dial target (World+Clients.swift).
        var client: Client?

        unowned let world: World

        init(index: Int, name: String, world: World) {
            self.index = index
            self.name = name
            self.world = world
        }
    }

    enum Happening {
        case plan(Int)
        case timer(host: Int, generation: Int)
        case restart(host: Int)
        case diskOK(host: Int)
        case online(peer: Int)
        case heal
        case check
        /// After convergence: every peer announced itself; each must see all the others.
        case presenceCheck
        /// A test's own step at a planned time (`interludes`).
        case interlude(Int)
    }

    /// The images peers put on stickers and backgrounds: small real PNGs in five colours, so
    /// pictures of simulated boards (`board-sim run --svg`) show them.
    public static let images: [Data] = [(230, 60, 50), (40, 160, 80), (50, 90, 220), (240, 190, 40), (140, 70, 170)].map {
        Data(PNGEncoder.solid(width: 24, height: 16, red: $0.0, green: $0.1, blue: $0.2))
    }
    static let imageHashes = images.map { AssetHash.of($0) }

    public let plan: Plan
    public internal(set) var report: Report
    /// The simulated network: links, the virtual clock and event queue, byte-level faults, and
    /// the generator of the world's reactions (latency, backoff jitter, where corruption
    /// lands): not the plan's decisions. Host indices are its node indices.
    let net: Network<Happening>
    var now: Double { net.now }
    var hosts: [Host] = []
    let board = "sim"
    let log: (@Sendable (String) -> Void)?
    /// Set once the presence oracle ran (the run ends there).
    var presenceChecked = false
    /// Past this many events a run is reported as an event storm (a livelock in the code).
    public var eventLimit = 5_000_000
    /// Each client's typed changes are folded after every step and compared with its replica's
    /// board every this many steps that changed it, and at the end (1: after every step).
    public var typedChangesCheckEvery = 16
    /// Called with every package a host creates or opens, before it serves (tests set knobs
    /// such as a small compaction threshold here; World+History.swift).
    let configurePackage: ((BoardPackage) -> Void)?
    /// Tests' own steps, each run once when the virtual clock reaches its time (set before
    /// `run()`; World+History.swift).
    public var interludes: [(at: Double, body: (World) -> Void)] = []

    public init(_ plan: Plan, log: (@Sendable (String) -> Void)? = nil, configurePackage: ((BoardPackage) -> Void)? = nil) throws {
        self.plan = plan
        self.log = log
        self.configurePackage = configurePackage
        net = Network(seed: plan.seed ^ 0x5EED_0F_3011D)
        report = Report(seed: plan.seed)
        var kinds: [String: Int] = [:]
        for event in plan.events { kinds[String(plan.describe(event.action).prefix { $0 != " " }), default: 0] += 1 }
        report.planned = kinds.sorted { ($1.value, $0.key) < ($0.value, $1.key) }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
        report.topology = "\(plan.topology): " + plan.dials.enumerated().map { "\(plan.name($0.offset))→" + $0.element.map(plan.name).joined(separator: ",") }.joined(separator: " ")
        for index in 0..<plan.peers {
            let peer = Host(index: index, name: plan.name(index), world: self)
            try peer.fs.createDirectory("/p")
            let package = try BoardPackage.create(at: "/p/board.boardpkg", fileSystem: peer.fs,
                                                  replicaID: ReplicaID(UInt64(index + 1) << 32 | (plan.seed & 0xFFFF_FFFF)))
            for data in World.images { try package.addAsset(data) }
            peer.package = package
            hosts.append(peer)
        }
        let server = Host(index: plan.server, name: "server", world: self)
        try server.fs.createDirectory("/data")
        hosts.append(server)
        for host in hosts { net.add(host) }
        // The server first, so peers find it up when they first dial.
        for host in [server] + hosts.dropLast() { start(host) }
        if !plan.bandwidth.isEmpty { hit("slow link") }
        if plan.access { hit("access control") }
        if !plan.releases.isEmpty { hit("mixed releases") }
    }

    // MARK: Decisions

    func note(_ words: String) {
        net.note(words)
    }

    func say(_ line: @autoclosure () -> String) {
        guard let log else { return }
        log(String(format: "%8.3f ", now) + line())
    }

    func hit(_ fault: String) {
        report.faultsHit[fault, default: 0] += 1
    }

    func fail(_ kind: String, _ message: String) {
        if report.failureKind == nil { report.failureKind = kind }
        report.failures.append(message)
        say("FAILED: \(message)")
    }}
