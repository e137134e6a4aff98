import BoardModel
import BoardStore
@_spi(Mutations) import BoardCRDT
@_spi(Mutations) import BoardSync
import Foundation

extension World {
    // MARK: Hosts

    var serverHost: Host { hosts[plan.server] }

    /// The server's token authority when the plan turns access control on.
    static let authority = try! TokenAuthority(secret: Array("board-sim secret, not for real use".utf8))

    func endpointOptions(_ host: String, index: Int) -> SyncEndpoint.Options {
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
        options.jitter = { [unowned self] delay in delay * Double.random(in: 0.5...1.5, using: &self.net.rng) }
        if log != nil {
            options.log = { [unowned self] line in self.say("\(host): \(line)") }
        }
        return options
    }

    func wrap(_ package: BoardPackage, server: Bool) -> any HostedStore {
        // History times come from the virtual clock: the simulation reads no real one.
        package.historyClock = { [weak self] in self.map { Int64($0.now * 1000) } }
        configurePackage?(package)
        return switch plan.mutation {
        case .acknowledgeBeforeLogging where server: LateLoggingStore(package)
        case .acknowledgeBeforeSync where server: UnsyncedStore(package)
        case .imagesNeverServed where !server: ImagelessStore(package)
        case .tieBreakByArrival: ArrivalOrderStore(package)
        default: package
        }
    }

    /// The replica a host serves (nil while it is down or, for the server, without the board).
    func replica(_ host: Host) -> Replica? {
        host.endpoint?.boards[board]?.store.replica
    }

    /// Brings a host up from its disk (first start or restart after a crash).
    func start(_ host: Host) {
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
            startClient(host)
        }
        flush(host)
    }

    func isReachable(_ host: Int) -> Bool {
        hosts[host].endpoint != nil && now >= hosts[host].offlineUntil
    }

    func blockedUntil(from: Int, to: Int) -> Double? {
        net.blockedUntil(from: from, to: to)
    }

    // MARK: Links

    /// Dials the targets the host's endpoint says are due (its own backoff decides when).
    func dialDue(_ host: Host) {
        guard let endpoint = host.endpoint else { return }
        for target in endpoint.dueDials(now: now) { dial(host, target) }
    }

    func dial(_ host: Host, _ target: Int) {
        guard let endpoint = host.endpoint else { return }
        let peer = host.index, acceptor = host.dialTargets[target]
        guard isReachable(peer), isReachable(acceptor),
              blockedUntil(from: peer, to: acceptor) == nil, blockedUntil(from: acceptor, to: peer) == nil else {
            endpoint.dialFailed(target, now: now)
            clientDialed(host, target: target, session: nil)
            return
        }
        let index = net.connect(peer, to: acceptor, latency: plan.latency, bandwidth: plan.bandwidth[peer])
        let link = net.links[index]
        endpoint.dialing(target, as: link.sessions.0)
        clientDialed(host, target: target, session: link.sessions.0)
        hosts[acceptor].endpoint!.accept(link.sessions.1, now: now)
        endpoint.dialed(link.sessions.0, now: now)
        flush(host)
        flush(hosts[acceptor])
    }

    func linksTouching(_ host: Int) -> [Int] {
        net.linksTouching(host)
    }

    /// Moves a host's output onto its links, closes finished sessions, dials what is due and
    /// re-arms its timer.
    func flush(_ host: Host) {
        guard host.endpoint != nil else { return }
        net.flush(host.index)
        dialDue(host)
        rescheduleTimer(host)
        observeClient(host)
    }

    /// A chunk due on a link: delivered (or held back by the network), then the receiver reacts.
    func deliver(_ index: Int, _ direction: Int, generation: Int) {
        guard let delivery = net.deliver(index, direction, generation: generation) else { return }
        flush(hosts[delivery.to])
    }

    func rescheduleTimer(_ host: Host) {
        let deadline = host.endpoint?.nextDeadline.map { max($0, now + 0.000_1) }
        guard deadline != host.timerAt else { return }
        host.timerAt = deadline
        host.timerGeneration += 1
        if let deadline { net.schedule(.timer(host: host.index, generation: host.timerGeneration), at: deadline) }
    }
}

/// A host is a node of the network: its endpoint, while it is up.
extension World.Host: NetworkNode {
    func output(for session: SessionID, now: Double) -> [UInt8] {
        endpoint?.output(for: session, now: now) ?? []
    }

    func receive(_ session: SessionID, _ bytes: [UInt8], from: Int, now: Double) -> Int? {
        guard let endpoint else { return nil }
        var operations = 0
        for event in endpoint.receive(session, bytes, now: now) {
            if case .operations(let batch) = event { operations += batch.operations.count }
        }
        // What the sender acknowledged on this link (it must survive the sender's crash).
        if let vector = endpoint.boards[world.board]?.hub.acknowledged(by: session) {
            world.hosts[from].acknowledged = world.hosts[from].acknowledged.merged(with: vector)
        }
        return operations
    }

    func isFinished(_ session: SessionID) -> Bool {
        endpoint?.isFinished(session) ?? false
    }

    /// Both ends see a connection close; the dialer redials with backoff.
    func closed(_ session: SessionID, now: Double) {
        world.clientLinkClosing(self, session)
        endpoint?.closed(session, now: now)
        world.rescheduleTimer(self)
    }
}
