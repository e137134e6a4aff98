import BoardModel
import BoardStore
@_spi(Mutations) import BoardCRDT
@_spi(Mutations) import BoardSync
import Dispatch
import Foundation
import Synchronization

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

        init(index: Int, name: String) {
            self.index = index
            self.name = name
        }
    }

    /// A TCP connection from a peer (the dialer) to another host (the acceptor).
    struct Link {
        let dialer: Int
        let acceptor: Int
        /// The dialer's and the acceptor's session ids.
        let sessions: (SessionID, SessionID)
        let latency: Double
        let bandwidth: Double?
        var up = true
        /// In flight, per direction (0: dialer → acceptor, 1: back): (arrival time, bytes).
        var queues: [[(Double, [UInt8])]] = [[], []]
        var queueHeads = [0, 0]
        var lastArrival = [0.0, 0.0]
        var wireFree = [0.0, 0.0]
        var deliveryGeneration = [0, 0]
        var corruptNext = false
        var resetNext = false
        /// A clog: nothing moves until then.
        var heldUntil = 0.0

        func sender(_ direction: Int) -> Int { direction == 0 ? dialer : acceptor }
        func receiver(_ direction: Int) -> Int { direction == 0 ? acceptor : dialer }
        func session(of host: Int) -> SessionID { host == dialer ? sessions.0 : sessions.1 }
        func touches(_ host: Int) -> Bool { dialer == host || acceptor == host }
    }

    enum Happening {
        case plan(Int)
        case deliver(link: Int, direction: Int, generation: Int)
        case timer(host: Int, generation: Int)
        case restart(host: Int)
        case diskOK(host: Int)
        case online(peer: Int)
        case heal
        case check
        /// After convergence: every peer announced itself; each must see all the others.
        case presenceCheck
    }

    /// The images peers put on stickers and backgrounds: small real PNGs in five colours, so
    /// pictures of simulated boards (`board-sim run --svg`) show them.
    public static let images: [Data] = [(230, 60, 50), (40, 160, 80), (50, 90, 220), (240, 190, 40), (140, 70, 170)].map {
        Data(PNGEncoder.solid(width: 24, height: 16, red: $0.0, green: $0.1, blue: $0.2))
    }
    static let imageHashes = images.map { AssetHash.of($0) }

    public let plan: Plan
    public private(set) var report: Report
    /// The world's reactions (backoff, where corruption lands): not the plan's decisions.
    private var rng: SeededRandom
    private var now = 0.0
    private var hosts: [Host] = []
    private var links: [Link] = []
    private var activeLinks: [Int] = []
    private var nextSession: SessionID = 0
    private var queue = EventQueue<Happening>()
    private var partitions: [(cut: Plan.Cut, until: Double)] = []
    private var hash: UInt64 = 0xCBF2_9CE4_8422_2325
    private let board = "sim"
    private let log: (@Sendable (String) -> Void)?
    /// Past this many events a run is reported as an event storm (a livelock in the code).
    public var eventLimit = 5_000_000

    public init(_ plan: Plan, log: (@Sendable (String) -> Void)? = nil) throws {
        self.plan = plan
        self.log = log
        rng = SeededRandom(seed: plan.seed ^ 0x5EED_0F_3011D)
        report = Report(seed: plan.seed)
        var kinds: [String: Int] = [:]
        for event in plan.events { kinds[String(plan.describe(event.action).prefix { $0 != " " }), default: 0] += 1 }
        report.planned = kinds.sorted { ($1.value, $0.key) < ($0.value, $1.key) }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
        report.topology = "\(plan.topology): " + plan.dials.enumerated().map { "\(plan.name($0.offset))→" + $0.element.map(plan.name).joined(separator: ",") }.joined(separator: " ")
        for index in 0..<plan.peers {
            let peer = Host(index: index, name: plan.name(index))
            try peer.fs.createDirectory("/p")
            let package = try BoardPackage.create(at: "/p/board.boardpkg", fileSystem: peer.fs,
                                                  replicaID: ReplicaID(UInt64(index + 1) << 32 | (plan.seed & 0xFFFF_FFFF)))
            for data in World.images { try package.addAsset(data) }
            peer.package = package
            hosts.append(peer)
        }
        let server = Host(index: plan.server, name: "server")
        try server.fs.createDirectory("/data")
        hosts.append(server)
        // The server first, so peers find it up when they first dial.
        for host in [server] + hosts.dropLast() { start(host) }
        if !plan.bandwidth.isEmpty { hit("slow link") }
        if plan.access { hit("access control") }
        if !plan.releases.isEmpty { hit("mixed releases") }
    }

    // MARK: Decisions

    private func note(_ words: String) {
        for byte in words.utf8 { mix(UInt64(byte)) }
    }

    private func mix(_ value: UInt64) {
        hash ^= value
        hash = hash &* 0x100_0000_01B3
    }

    private func say(_ line: @autoclosure () -> String) {
        guard let log else { return }
        log(String(format: "%8.3f ", now) + line())
    }

    private func hit(_ fault: String) {
        report.faultsHit[fault, default: 0] += 1
    }

    private func fail(_ kind: String, _ message: String) {
        if report.failureKind == nil { report.failureKind = kind }
        report.failures.append(message)
        say("FAILED: \(message)")
    }

    // MARK: Hosts

    private var serverHost: Host { hosts[plan.server] }

    /// The server's token authority when the plan turns access control on.
    static let authority = try! TokenAuthority(secret: Array("board-sim secret, not for real use".utf8))

    private func endpointOptions(_ host: String, index: Int) -> SyncEndpoint.Options {
        var options = SyncEndpoint.Options()
        // As deployed (SyncHost): merges synced once per turn, acknowledged after the sync.
        options.groupCommit = true
        options.dropsRelayedPresence = plan.mutation == .presenceNotRelayed
        if let release = plan.releases[index] { options.capabilities = release.capabilities }
        // As SyncHost does with the wall clock: a restarted peer's presence clock starts above
        // where it was, or the others' copies of its old presence would shadow the new one
        // until they expired (found by this simulator's presence oracle).
        options.presenceClockStart = UInt64(now * 1000) + 1
        if plan.access {
            if index == plan.server {
                options.access = SyncEndpoint.AccessControl(authority: World.authority, wallClock: { 1_800_000_000 })
            } else {
                let relays = plan.dials.contains { $0.contains(index) }
                // A fixed token id: a seed replays byte for byte (a random id would differ per run).
                let token = try? World.authority.mint(board: board, role: relays ? .peer : .write, expires: nil, subject: host, tokenID: "sim-\(index)")
                options.credentials = Array((token ?? "").utf8)
            }
        }
        // Reconnect backoff is the endpoint's; its jitter comes from the world's generator.
        options.jitter = { [unowned self] delay in delay * Double.random(in: 0.5...1.5, using: &self.rng) }
        if log != nil {
            options.log = { [unowned self] line in self.say("\(host): \(line)") }
        }
        return options
    }

    private func wrap(_ package: BoardPackage, server: Bool) -> any HostedStore {
        switch plan.mutation {
        case .acknowledgeBeforeLogging where server: LateLoggingStore(package)
        case .acknowledgeBeforeSync where server: UnsyncedStore(package)
        case .imagesNeverServed where !server: ImagelessStore(package)
        case .tieBreakByArrival: ArrivalOrderStore(package)
        default: package
        }
    }

    /// The replica a host serves (nil while it is down or, for the server, without the board).
    private func replica(_ host: Host) -> Replica? {
        host.endpoint?.boards[board]?.store.replica
    }

    /// Brings a host up from its disk (first start or restart after a crash).
    private func start(_ host: Host) {
        if host.index == plan.server {
            let fs = host.fs
            let seed = plan.seed
            var counter: UInt64 = 0
            host.endpoint = SyncEndpoint(opener: { [unowned self] name in
                let path = "/data/\(name).boardpkg"
                counter += 1
                let id = ReplicaID(0xFFFF_0000_0000 | seed << 8 | counter)
                let package = fs.isDirectory(path)
                    ? try BoardPackage.open(at: path, fileSystem: fs, newReplicaID: { id })
                    : try BoardPackage.create(at: path, fileSystem: fs, replicaID: id)
                return self.wrap(package, server: true)
            }, options: endpointOptions("server", index: plan.server), now: now)
            host.endpoint?.preload(board: board)
        } else {
            guard let package = host.package else { return }
            let endpoint = SyncEndpoint(board: board, store: wrap(package, server: false), options: endpointOptions(host.name, index: host.index), now: now)
            host.endpoint = endpoint
            host.dialTargets = plan.dials[host.index]
            for _ in host.dialTargets { _ = endpoint.addDialTarget(now: now) }
            if now < host.offlineUntil { endpoint.setReconnecting(false, now: now) }
        }
        flush(host)
    }

    private func isReachable(_ host: Int) -> Bool {
        hosts[host].endpoint != nil && now >= hosts[host].offlineUntil
    }

    private func blockedUntil(from: Int, to: Int) -> Double? {
        partitions.filter { $0.until > now && $0.cut.blocks(from: from, to: to) }.map(\.until).max()
    }

    // MARK: Links

    /// Dials the targets the host's endpoint says are due (its own backoff decides when).
    private func dialDue(_ host: Host) {
        guard let endpoint = host.endpoint else { return }
        for target in endpoint.dueDials(now: now) { dial(host, target) }
    }

    private func dial(_ host: Host, _ target: Int) {
        guard let endpoint = host.endpoint else { return }
        let peer = host.index, acceptor = host.dialTargets[target]
        guard isReachable(peer), isReachable(acceptor),
              blockedUntil(from: peer, to: acceptor) == nil, blockedUntil(from: acceptor, to: peer) == nil else {
            endpoint.dialFailed(target, now: now)
            return
        }
        nextSession += 2
        let latency = Double.random(in: plan.latency, using: &rng)
        let link = Link(dialer: peer, acceptor: acceptor, sessions: (nextSession - 1, nextSession), latency: latency,
                        bandwidth: plan.bandwidth[peer])
        links.append(link)
        activeLinks.append(links.count - 1)
        endpoint.dialing(target, as: link.sessions.0)
        hosts[acceptor].endpoint!.accept(link.sessions.1, now: now)
        endpoint.dialed(link.sessions.0, now: now)
        note("connect \(peer) \(acceptor) \(latency)")
        flush(host)
        flush(hosts[acceptor])
    }

    /// Both ends see the connection close; the dialer redials with backoff.
    private func cut(_ index: Int) {
        guard links[index].up else { return }
        links[index].up = false
        activeLinks.removeAll { $0 == index }
        let link = links[index]
        for host in [link.dialer, link.acceptor] {
            hosts[host].endpoint?.closed(link.session(of: host), now: now)
            rescheduleTimer(hosts[host])
        }
        note("cut \(index)")
    }

    private func linksTouching(_ host: Int) -> [Int] {
        activeLinks.filter { links[$0].touches(host) }
    }

    /// Moves a host's output onto its links, closes finished sessions and re-arms its timer.
    private func flush(_ host: Host) {
        guard let endpoint = host.endpoint else { return }
        for index in linksTouching(host.index) {
            let session = links[index].session(of: host.index)
            let direction = links[index].dialer == host.index ? 0 : 1
            let bytes = endpoint.output(for: session, now: now)
            if !bytes.isEmpty {
                // In place: a copy of the link would copy its queues on every write.
                var sent = now
                if let bandwidth = links[index].bandwidth {
                    sent = max(now, links[index].wireFree[direction]) + Double(bytes.count) / bandwidth
                    links[index].wireFree[direction] = sent
                }
                let arrival = max(sent + links[index].latency, links[index].lastArrival[direction])
                links[index].lastArrival[direction] = arrival
                let idle = links[index].queueHeads[direction] == links[index].queues[direction].count
                links[index].queues[direction].append((arrival, bytes))
                if idle { scheduleDelivery(index, direction, at: arrival) }
            }
            if endpoint.isFinished(session) { cut(index) }
        }
        dialDue(host)
        rescheduleTimer(host)
    }

    private func scheduleDelivery(_ index: Int, _ direction: Int, at time: Double) {
        links[index].deliveryGeneration[direction] += 1
        queue.push(max(time, now), .deliver(link: index, direction: direction, generation: links[index].deliveryGeneration[direction]))
    }

    private func deliver(_ index: Int, _ direction: Int) {
        guard links[index].up, links[index].queueHeads[direction] < links[index].queues[direction].count else { return }
        let head = links[index].queueHeads[direction]
        let arrival = links[index].queues[direction][head].0
        if arrival > now { return scheduleDelivery(index, direction, at: arrival) }
        let from = links[index].sender(direction), to = links[index].receiver(direction)
        if links[index].heldUntil > now { return scheduleDelivery(index, direction, at: links[index].heldUntil) }
        if let until = blockedUntil(from: from, to: to) { return scheduleDelivery(index, direction, at: until) }
        // Taken out in place (a copy of the link would copy every chunk queued behind it).
        var bytes = links[index].queues[direction][head].1
        links[index].queues[direction][head].1 = []
        links[index].queueHeads[direction] += 1
        if links[index].queueHeads[direction] == links[index].queues[direction].count {
            links[index].queues[direction].removeAll(keepingCapacity: true)
            links[index].queueHeads[direction] = 0
        }
        if links[index].corruptNext {
            links[index].corruptNext = false
            bytes[Int.random(in: 0..<bytes.count, using: &rng)] ^= 0x5A
            note("corrupted \(index)")
        }
        var reset = false
        if links[index].resetNext, bytes.count >= 2 {
            links[index].resetNext = false
            bytes = Array(bytes[..<Int.random(in: 1..<bytes.count, using: &rng)])
            reset = true
        }
        let link = links[index]
        guard let receiver = hosts[to].endpoint else { return }
        let session = link.session(of: to)
        for event in receiver.receive(session, bytes, now: now) {
            if case .operations(let batch) = event { report.operationsDelivered += batch.operations.count }
        }
        report.deliveries += 1
        mix(UInt64(bytes.count) << 20 ^ UInt64(index))
        // What the sender acknowledged on this link (it must survive the sender's crash).
        if let vector = receiver.boards[board]?.hub.acknowledged(by: session) {
            hosts[from].acknowledged = hosts[from].acknowledged.merged(with: vector)
        }
        if reset {
            note("reset \(index)")
            cut(index)
        } else if links[index].queueHeads[direction] < links[index].queues[direction].count {
            scheduleDelivery(index, direction, at: links[index].queues[direction][links[index].queueHeads[direction]].0)
        }
        flush(hosts[to])
    }

    private func rescheduleTimer(_ host: Host) {
        let deadline = host.endpoint?.nextDeadline.map { max($0, now + 0.000_1) }
        guard deadline != host.timerAt else { return }
        host.timerAt = deadline
        host.timerGeneration += 1
        if let deadline { queue.push(deadline, .timer(host: host.index, generation: host.timerGeneration)) }
    }

    // MARK: Running

    public func run() -> Report {
        for (index, event) in plan.events.enumerated() { queue.push(event.time, .plan(index)) }
        queue.push(plan.faultyPhase, .heal)
        let deadline = plan.faultyPhase + plan.settleLimit
        while let (time, happening) = queue.pop() {
            guard time <= deadline else { break }
            now = time
            report.events += 1
            guard report.events <= eventLimit else {
                fail("event storm", "more than \(eventLimit) events by \(now) s: a livelock")
                break
            }
            switch happening {
            case .plan(let index): perform(plan.events[index].action)
            case .deliver(let link, let direction, let generation):
                if links[link].deliveryGeneration[direction] == generation { deliver(link, direction) }
            case .timer(let index, let generation):
                let host = hosts[index]
                guard host.timerGeneration == generation, let endpoint = host.endpoint else { continue }
                host.timerAt = nil
                endpoint.handleTimers(now: now)
                flush(host)
            case .restart(let index): restart(hosts[index])
            case .diskOK(let index):
                let host = hosts[index]
                if host.diskFullUntil <= now, host.diskFull {
                    host.diskFull = false
                    host.fs.setCapacity(nil)
                    if host.reopenPending { restart(host) }
                }
            case .online(let index):
                let host = hosts[index]
                if host.offlineUntil <= now, let endpoint = host.endpoint {
                    endpoint.setReconnecting(true, now: now)
                    flush(host)
                }
            case .heal: heal()
            case .check:
                if converged() {
                    report.convergedAfter = now - plan.faultyPhase
                    announcePresence()
                    queue.push(now + 1, .presenceCheck)
                }
                queue.push(now + 0.25, .check)
                continue
            case .presenceCheck:
                checkPresence()
                presenceChecked = true
            }
            if presenceChecked { break }
        }
        report.simulatedSeconds = now
        check()
        report.decisionHash = hash
        return report
    }

    private func perform(_ action: Plan.Action) {
        note(plan.describe(action))
        say("EVENT \(plan.describe(action))")
        switch action {
        case .edit(let peer): edit(hosts[peer])
        case .cut(let peer):
            let touching = linksTouching(peer)
            guard !touching.isEmpty else { return }
            hit("cut")
            cut(rng.pick(touching))
        case .reset(let peer):
            let touching = linksTouching(peer)
            guard !touching.isEmpty else { return }
            hit("reset")
            links[rng.pick(touching)].resetNext = true
        case .corrupt(let peer):
            let touching = linksTouching(peer)
            guard !touching.isEmpty else { return }
            hit("corrupt")
            links[rng.pick(touching)].corruptNext = true
        case .crash(let index, let kind, let down):
            let host = hosts[index]
            guard host.endpoint != nil else { return }
            hit(index == plan.server ? "server crash" : "peer crash")
            if kind == .tornWrite { hit("torn write") }
            for link in linksTouching(index) { cut(link) }
            host.fs.restart(kind.memoryKind)
            // The dead process's objects go (their lock is gone with it).
            host.endpoint = nil
            host.package = nil
            host.timerAt = nil
            queue.push(now + down, .restart(host: index))
        case .diskFull(let index, let seconds):
            hit("disk full")
            hosts[index].diskFullUntil = max(hosts[index].diskFullUntil, now + seconds)
            hosts[index].diskFull = true
            hosts[index].fs.setCapacity(0)
            queue.push(now + seconds, .diskOK(host: index))
        case .offline(let peer, let seconds):
            hit(seconds >= 30 ? "long offline" : "offline")
            hosts[peer].offlineUntil = max(hosts[peer].offlineUntil, now + seconds)
            hosts[peer].endpoint?.setReconnecting(false, now: now)
            for link in linksTouching(peer) { cut(link) }
            queue.push(now + seconds, .online(peer: peer))
        case .partition(let cut, let seconds):
            if case .between = cut { hit("partition") } else { hit("one-way partition") }
            partitions.append((cut, now + seconds))
        case .clog(let peer, let seconds):
            let touching = linksTouching(peer)
            guard !touching.isEmpty else { return }
            hit("clog")
            for index in touching { links[index].heldUntil = max(links[index].heldUntil, now + seconds) }
        }
    }

    private func edit(_ host: Host) {
        // Only the vector: a copy of the replica held across the edit would make the edit copy
        // the whole board (copy-on-write).
        guard let endpoint = host.endpoint, let before = replica(host)?.versionVector else { return }
        do {
            // Each edit draws from its own generator (the plan's seed, the peer, the time), so
            // removing one edit while shrinking leaves the others as they were.
            var editor = RandomEditor(rng: SeededRandom(seed: plan.seed &* 0x9E37_79B9_7F4A_7C15 ^ UInt64(host.index) << 56 ^ now.bitPattern),
                                      images: World.imageHashes)
            let edit = try endpoint.edit(board, now: now) { replica in
                LocalEdit(operations: editor.edit(&replica))
            }
            report.operationsMade += edit.operations.count
            if let replica = replica(host) {
                host.saved = replica.versionVector
                // Where this peer is working, shown to the others while links fail and heal.
                endpoint.setPresence(Presence(replica: replica.id, name: host.name, color: .black,
                                              pointer: GridPoint(x: Int64(report.operationsMade), y: Int64(host.index)), ttl: 3),
                                     on: board, now: now)
            }
            note("edit \(host.index) \(edit.operations.count)")
        } catch {
            // A full disk refuses the edit, and the edit must change nothing.
            if host.diskFull {
                if replica(host)?.versionVector != before {
                    fail("failed edit", "\(host.name): an edit refused on a full disk at \(now) changed the replica")
                }
            } else {
                fail("failed edit", "\(host.name): a local edit failed at \(now): \(error)")
            }
        }
        flush(host)
    }

    /// Brings a crashed host back from its disk and checks what it reopened with. On a full
    /// disk opening may fail (a torn log's new identity, say, must be written first): the host
    /// tries again once the disk has room, as a person or a supervisor would.
    private func restart(_ host: Host) {
        guard host.endpoint == nil || host.reopenPending else { return }
        if host.endpoint == nil {
            host.restarts += 1
            note("restart \(host.index)")
            if host.index != plan.server {
                do {
                    let index = host.index
                    let restarts = host.restarts
                    host.package = try BoardPackage.open(at: "/p/board.boardpkg", fileSystem: host.fs,
                                                         newReplicaID: { ReplicaID(UInt64(index + 1) << 40 | restarts) })
                } catch {
                    if host.diskFull {
                        say("\(host.name) cannot reopen on a full disk (\(error)); retrying when it has room")
                        queue.push(host.diskFullUntil, .restart(host: host.index))
                    } else {
                        fail("restart", "\(host.name) could not reopen its package after a crash at \(now): \(error)")
                    }
                    return
                }
            }
            start(host)
        } else {
            host.endpoint?.preload(board: board)
        }
        host.reopenPending = false
        guard let replica = replica(host) else {
            if host.diskFull {
                host.reopenPending = true
            } else {
                fail("restart", "\(host.name) could not reopen the board after a crash at \(now)")
            }
            return
        }
        // Checked at once: peers would resend what was lost, hiding the loss by the end.
        if !replica.versionVector.dominates(host.acknowledged) {
            fail("acknowledged loss", "\(host.name) lost acknowledged operations in a crash at \(now): holds \(replica.versionVector), acknowledged \(host.acknowledged)")
        }
        if !replica.versionVector.dominates(host.saved) {
            fail("saved loss", "\(host.name) lost operations it had saved before a crash at \(now)")
        }
        host.saved = replica.versionVector
        // A restarted replica equals one that never crashed holding the same operations.
        var fresh = Replica(id: ReplicaID(0xFEED_FACE))
        fresh.assets = replica.assets
        do {
            try fresh.apply(replica.fullState())
            let same = try fresh.snapshot().canonicalJSON() == replica.snapshot().canonicalJSON()
            if fresh.versionVector != replica.versionVector || !same {
                fail("restart differs", "\(host.name) reopened at \(now) with a board that differs from a replica that never crashed holding the same operations")
            }
        } catch {
            fail("restart differs", "\(host.name)'s reopened operations do not apply to a fresh replica: \(error)")
        }
    }

    private func heal() {
        note("heal")
        say("HEAL")
        partitions = []
        for host in hosts {
            host.fs.setCapacity(nil)
            host.diskFullUntil = 0
            host.diskFull = false
            host.offlineUntil = 0
        }
        restart(serverHost)
        for host in hosts where host.endpoint == nil || host.reopenPending { restart(host) }
        for index in activeLinks {
            links[index].heldUntil = 0
            for direction in 0..<2 where links[index].queueHeads[direction] < links[index].queues[direction].count {
                scheduleDelivery(index, direction, at: now)
            }
        }
        for host in hosts.dropLast() {
            host.endpoint?.setReconnecting(true, now: now)
            flush(host)
        }
        queue.push(now + 0.25, .check)
    }

    // MARK: Oracles

    /// Set once the presence oracle ran (the run ends there).
    private var presenceChecked = false

    /// Every live peer says who it is (a long time-to-live: the check comes a second later).
    private func announcePresence() {
        for host in hosts where host.index != plan.server {
            guard let endpoint = host.endpoint, let replica = replica(host) else { continue }
            endpoint.setPresence(Presence(replica: replica.id, name: host.name, color: .black, ttl: Presence.maxTTL), on: board, now: now)
            flush(host)
        }
    }

    /// A second after convergence, every peer sees every other peer on the board (presence
    /// relayed through the server and across peers, never stored).
    private func checkPresence() {
        let peers = hosts.filter { $0.index != plan.server && $0.endpoint != nil }
        for host in peers {
            let seen = Set(host.endpoint!.presences(on: board).map(\.name))
            let missing = peers.filter { $0 !== host && !seen.contains($0.name) }.map(\.name)
            if !missing.isEmpty {
                fail("presence", "\(host.name) does not see \(missing.joined(separator: ", ")) on the board a second after convergence (sees \(seen.sorted().joined(separator: ", ")))")
            }
        }
    }

    private func converged() -> Bool {
        guard let reference = replica(serverHost), reference.missingAssets.isEmpty else { return false }
        for host in hosts {
            guard let replica = replica(host), replica.versionVector == reference.versionVector,
                  replica.missingAssets.isEmpty else { return false }
        }
        return true
    }

    private func check() {
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
            // The reference model of the conflict contract, applied to what the server holds.
            let model = try ContractModel.board(from: reference.fullState().operations).canonicalJSON()
            if try ContractModel.withoutImageBytes(reference.snapshot()).canonicalJSON() != model {
                fail("contract", "the converged board differs from the reference model of the conflict contract")
            }
        } catch {
            fail("snapshot", "snapshot failed: \(error)")
        }
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

/// A priority queue of timed happenings; equal times come out in the order they went in.
struct EventQueue<Element> {
    private var heap: [(time: Double, order: Int, element: Element)] = []
    private var pushed = 0

    var isEmpty: Bool { heap.isEmpty }

    private func less(_ a: Int, _ b: Int) -> Bool {
        (heap[a].time, heap[a].order) < (heap[b].time, heap[b].order)
    }

    mutating func push(_ time: Double, _ element: Element) {
        pushed += 1
        heap.append((time, pushed, element))
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard less(child, parent) else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    mutating func pop() -> (Double, Element)? {
        guard !heap.isEmpty else { return nil }
        heap.swapAt(0, heap.count - 1)
        let top = heap.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1, right = left + 1
            var smallest = parent
            if left < heap.count, less(left, smallest) { smallest = left }
            if right < heap.count, less(right, smallest) { smallest = right }
            guard smallest != parent else { break }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
        return (top.time, top.element)
    }
}

// MARK: Planted bugs (mutation testing of the oracles)

/// Acknowledges merges before they are durable: they are logged only at the next view save.
/// The planted `acknowledge-before-sync` bug: merges are deferred (appended, not fsynced) and
/// the group commit's sync does nothing.
final class UnsyncedStore: HostedStore {
    let package: BoardPackage
    init(_ package: BoardPackage) { self.package = package }
    var replica: Replica { package.replica }
    func merge(_ batch: OperationBatch) throws -> Int { try package.merge(batch, deferringSync: true) }
    func merge(_ batch: OperationBatch, deferringSync: Bool) throws -> Int { try package.merge(batch, deferringSync: true) }
    func syncMerges() throws {}
    func addReceivedAsset(_ data: Data, claimedHash: AssetHash?) throws -> AssetHash { try package.addReceivedAsset(data, claimedHash: claimedHash) }
    func loadAuthors() throws -> [ReplicaID: String] { try package.loadAuthors() }
    func bindAuthor(_ replica: ReplicaID, to subject: String) throws { try package.bindAuthor(replica, to: subject) }
    func commitEdit(_ body: (inout Replica) throws -> LocalEdit) throws -> LocalEdit { try package.commit(body) }
    func saveView() throws { try package.save() }
    func closeStore() {}
}

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
    // Authorship is kept in the package like the real store does (a restart that forgot it
    // left replica ids with operations and no owner, refused to their own writers).
    func loadAuthors() throws -> [ReplicaID: String] { try package.loadAuthors() }
    func bindAuthor(_ replica: ReplicaID, to subject: String) throws { try package.bindAuthor(replica, to: subject) }
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
    // Authorship is kept in the package like the real store does (a restart that forgot it
    // left replica ids with operations and no owner, refused to their own writers).
    func loadAuthors() throws -> [ReplicaID: String] { try package.loadAuthors() }
    func bindAuthor(_ replica: ReplicaID, to subject: String) throws { try package.bindAuthor(replica, to: subject) }
}

/// Merges with registers that break Lamport ties by arrival order (the package underneath logs
/// durably as usual; the hub serves this store's replica).
final class ArrivalOrderStore: HostedStore {
    let package: BoardPackage
    private(set) var replica: Replica

    init(_ package: BoardPackage) {
        self.package = package
        replica = package.replica
        replica.breaksTiesByArrival = true
    }

    func merge(_ batch: OperationBatch) throws -> Int {
        try package.merge(batch)
        return try replica.apply(batch)
    }

    func addReceivedAsset(_ data: Data, claimedHash: AssetHash?) throws -> AssetHash {
        let hash = try package.addReceivedAsset(data, claimedHash: claimedHash)
        replica.assets.insert(data)
        return hash
    }

    func commitEdit(_ body: (inout Replica) throws -> LocalEdit) throws -> LocalEdit {
        let edit = try package.commit(body)
        try replica.apply(OperationBatch(operations: edit.operations), from: .ownLog)
        return edit
    }

    func saveView() throws { try package.save() }
    func closeStore() { package.close() }
    // Authorship is kept in the package like the real store does (a restart that forgot it
    // left replica ids with operations and no owner, refused to their own writers).
    func loadAuthors() throws -> [ReplicaID: String] { try package.loadAuthors() }
    func bindAuthor(_ replica: ReplicaID, to subject: String) throws { try package.bindAuthor(replica, to: subject) }
}
