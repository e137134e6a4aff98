import Foundation

/// What one run of the cluster simulation does (`ClusterSimulation`): how many servers and
/// clients, the links' latencies and speeds, and a timeline of edits and faults. A seed draws
/// one (`draw`); `text` writes it as a cluster scenario and `init(text:)` reads one back, so a
/// shrunk failure can be kept as a file. Nodes of the network: servers `0..<servers`, then the
/// clients, then Redis (`redis`).
public struct ClusterPlan: Sendable, Equatable {
    public enum Action: Sendable, Equatable {
        /// A client makes one random edit.
        case edit(client: Int)
        /// One of a client's connections drops; it dials a server again with backoff.
        case cut(client: Int)
        /// The next chunk on one of a client's connections arrives cut short, then it resets.
        case reset(client: Int)
        /// A byte of the next chunk on one of a client's connections is flipped.
        case corrupt(client: Int)
        /// A client's connections move nothing for a while, then everything.
        case clog(client: Int, seconds: Double)
        /// A server dies (its cache with it) and starts again, empty, `down` seconds later.
        case crash(server: Int, down: Double)
        /// Redis restarts (its data kept, every connection dropped), refusing connections for `down` s.
        case redisRestart(down: Double)
        /// One of a server's Redis links drops (`RedisBoardLog.Link.allCases` index).
        case dropRedisLink(server: Int, link: Int)
        /// The next chunk on one of a server's Redis links is cut short, then the link resets.
        case resetRedisLink(server: Int, link: Int)
        /// A server's Redis links move nothing for a while.
        case clogRedis(server: Int, seconds: Double)
        /// Nodes cannot reach each other (or one way) for a while; bytes in flight wait.
        case partition(NetworkCut, seconds: Double)
        /// A client leaves for good, if a server acknowledged everything it made.
        case depart(client: Int)
    }

    public struct Event: Sendable, Equatable {
        public var time: Double
        public var action: Action
    }

    public var seed: UInt64
    public var servers: Int
    public var clients: Int
    public var access = false
    /// The planted bug: servers acknowledge before Redis holds what they acknowledge.
    public var plantAckBeforeRedis = false
    public var faultyPhase: Double
    /// Client links' latency (drawn per connection) and Redis links'.
    public var latency: ClosedRange<Double> = 0.001...0.01
    public var redisLatency: ClosedRange<Double> = 0.0002...0.002
    /// Slow client links: bytes per second of the links a client dials.
    public var bandwidth: [Int: Double] = [:]
    public var events: [Event] = []

    public var redis: Int { servers + clients }
    public func client(_ index: Int) -> Int { servers + index }

    public init(seed: UInt64, servers: Int, clients: Int, faultyPhase: Double = 8) {
        self.seed = seed
        self.servers = servers
        self.clients = clients
        self.faultyPhase = faultyPhase
    }

    // MARK: Drawing

    /// Base rates per second of the faults a seed may draw (swarm style: each kind on in about
    /// half the seeds, at 1-4x). Cuts, crashes, Redis restarts, dropped Redis links and
    /// departures are in every seed, at the rates of the simulation's first version.
    static let swarmKinds: [(name: String, rate: Double)] = [
        ("reset", 0.2), ("corrupt", 0.2), ("clog", 0.1), ("redis reset", 0.1), ("redis clog", 0.1),
        ("partition", 0.1), ("one-way partition", 0.1),
    ]

    /// The plan seed `seed` stands for (`servers`/`clients` fixed instead of drawn when given).
    public static func draw(seed: UInt64, servers serverCount: Int? = nil, clients clientCount: Int? = nil,
                            faultyPhase: Double = 8, access: Bool? = nil) -> ClusterPlan {
        var rng = SeededRandom(seed: seed)
        let servers = serverCount ?? Int.random(in: 2...3, using: &rng)
        let clients = clientCount ?? Int.random(in: 2...5, using: &rng)
        var plan = ClusterPlan(seed: seed, servers: servers, clients: clients, faultyPhase: faultyPhase)
        // Access from a generator of its own, as in the first version (half the seeds).
        var accessRNG = SeededRandom(seed: seed ^ 0xACCE55)
        plan.access = access ?? accessRNG.chance(0.5)
        var faultRNG = SeededRandom(seed: seed ^ 0xC1FA17)
        let high = Double(Int.random(in: 2...40, using: &faultRNG)) / 1000
        plan.latency = ((high / 4 * 1000).rounded() / 1000)...high
        if faultRNG.chance(0.3) {
            for index in 0..<clients where faultRNG.chance(0.5) {
                plan.bandwidth[index] = Double(Int.random(in: 2...64, using: &faultRNG) * 1024)
            }
        }
        func milliseconds(_ value: Double) -> Double { (value * 1000).rounded() / 1000 }
        var events: [Event] = []
        func poisson(_ total: Double, _ rng: inout SeededRandom, _ action: (inout SeededRandom) -> Action) {
            var at = 0.0
            while true {
                at += -log(1 - Double.random(in: 0..<1, using: &rng)) / total
                guard milliseconds(at) < faultyPhase else { return }
                events.append(Event(time: milliseconds(at), action: action(&rng)))
            }
        }
        let links = 3  // RedisBoardLog.Link.allCases.count
        poisson(8 * Double(clients), &rng) { .edit(client: Int.random(in: 0..<clients, using: &$0)) }
        poisson(0.8, &rng) { .cut(client: Int.random(in: 0..<clients, using: &$0)) }
        poisson(0.3, &rng) { .crash(server: Int.random(in: 0..<servers, using: &$0), down: milliseconds(Double.random(in: 0.2...1.5, using: &$0))) }
        poisson(0.16, &rng) { .redisRestart(down: milliseconds(Double.random(in: 0...1, using: &$0))) }
        poisson(0.4, &rng) { .dropRedisLink(server: Int.random(in: 0..<servers, using: &$0), link: Int.random(in: 0..<links, using: &$0)) }
        poisson(0.16, &rng) { .depart(client: Int.random(in: 0..<clients, using: &$0)) }
        func someNodes(_ rng: inout SeededRandom) -> Set<Int> {
            switch Int.random(in: 0..<3, using: &rng) {
            case 0: return [Int.random(in: 0..<servers, using: &rng)]  // a server (from Redis and clients)
            case 1: return [servers + Int.random(in: 0..<clients, using: &rng)]  // a client
            default: return Set((0..<(servers + clients)).filter { _ in rng.chance(0.5) })
            }
        }
        for (name, rate) in swarmKinds where faultRNG.chance(0.5) {
            let total = rate * Double(Int.random(in: 1...4, using: &faultRNG))
            poisson(total, &faultRNG) { rng in
                let client = Int.random(in: 0..<clients, using: &rng), server = Int.random(in: 0..<servers, using: &rng)
                let seconds = milliseconds(Double.random(in: 0.5...3, using: &rng))
                switch name {
                case "reset": return .reset(client: client)
                case "corrupt": return .corrupt(client: client)
                case "clog": return .clog(client: client, seconds: seconds)
                case "redis reset": return .resetRedisLink(server: server, link: Int.random(in: 0..<links, using: &rng))
                case "redis clog": return .clogRedis(server: server, seconds: seconds)
                case "partition": return .partition(.between(someNodes(&rng)), seconds: milliseconds(seconds * 2))
                default:
                    let nodes = someNodes(&rng)
                    return .partition(rng.chance(0.5) ? .outOf(nodes) : .into(nodes), seconds: milliseconds(seconds * 2))
                }
            }
        }
        plan.events = events.enumerated().sorted { ($0.element.time, $0.offset) < ($1.element.time, $1.offset) }.map(\.element)
        return plan
    }

    // MARK: Text

    public func name(_ node: Int) -> String {
        node < servers ? "server\(node)" : node < redis ? "client\(node - servers)" : "redis"
    }

    static let linkNames = ["commands", "tail", "presence"]

    public func describe(_ action: Action) -> String {
        func nodes(_ set: Set<Int>) -> String { set.sorted().map(name).joined(separator: ",") }
        return switch action {
        case .edit(let client): "edit client\(client)"
        case .cut(let client): "cut client\(client)"
        case .reset(let client): "reset client\(client)"
        case .corrupt(let client): "corrupt client\(client)"
        case .clog(let client, let seconds): "clog client\(client) for \(format(seconds))"
        case .crash(let server, let down): "crash server\(server) for \(format(down))"
        case .redisRestart(let down): "redis-restart for \(format(down))"
        case .dropRedisLink(let server, let link): "drop server\(server) \(Self.linkNames[link])"
        case .resetRedisLink(let server, let link): "reset server\(server) \(Self.linkNames[link])"
        case .clogRedis(let server, let seconds): "clog-redis server\(server) for \(format(seconds))"
        case .partition(.between(let set), let seconds): "partition \(nodes(set)) for \(format(seconds))"
        case .partition(.outOf(let set), let seconds): "one-way out \(nodes(set)) for \(format(seconds))"
        case .partition(.into(let set), let seconds): "one-way in \(nodes(set)) for \(format(seconds))"
        case .depart(let client): "depart client\(client)"
        }
    }

    func format(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(format: "%.4f", value).replacingOccurrences(of: #"0+$"#, with: "", options: .regularExpression)
    }

    /// The plan as a cluster scenario (docs/SCALE-OUT.md, "Simulation"); `init(text:)` reads it.
    public var text: String {
        var lines = ["cluster seed \(seed) servers \(servers) clients \(clients) phase \(format(faultyPhase))"]
        lines.append("latency \(format(latency.lowerBound))-\(format(latency.upperBound))")
        lines.append("redis-latency \(format(redisLatency.lowerBound))-\(format(redisLatency.upperBound))")
        for (client, speed) in bandwidth.sorted(by: { $0.key < $1.key }) { lines.append("slow client\(client) \(Int(speed))") }
        if access { lines.append("access on") }
        if plantAckBeforeRedis { lines.append("plant ack-before-redis") }
        for event in events { lines.append("at \(format(event.time)) \(describe(event.action))") }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Whether a scenario file's first line (past comments) is a cluster scenario's.
    public static func isCluster(_ text: String) -> Bool {
        text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
            .first { !$0.isEmpty && !$0.hasPrefix("#") }?.hasPrefix("cluster ") ?? false
    }

    /// Reads a cluster scenario (what `text` writes; `#` comments and blank lines ignored).
    public init(text: String) throws {
        var plan: ClusterPlan?
        for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            func fail(_ message: String) -> Plan.ParseError { Plan.ParseError(line: index + 1, message: message) }
            var words = line.split(separator: " ").map(String.init)[...]
            let head = words.removeFirst()
            if head == "cluster" {
                guard plan == nil else { throw fail("`cluster` comes once, first") }
                var seed: UInt64 = 0, servers = 2, clients = 2, phase = 8.0
                while let key = words.popFirst() {
                    guard let value = words.popFirst() else { throw fail("`\(key)` needs a value") }
                    switch key {
                    case "seed": guard let number = UInt64(value) else { throw fail("seed `\(value)` is not a whole number") }; seed = number
                    case "servers": guard let number = Int(value), (1...8).contains(number) else { throw fail("servers must be 1 to 8") }; servers = number
                    case "clients": guard let number = Int(value), (1...16).contains(number) else { throw fail("clients must be 1 to 16") }; clients = number
                    case "phase": guard let number = Double(value), number > 0, number <= 3600 else { throw fail("phase must be 0 to 3600 seconds") }; phase = number
                    default: throw fail("unknown cluster setting `\(key)` (seed, servers, clients, phase)")
                    }
                }
                plan = ClusterPlan(seed: seed, servers: servers, clients: clients, faultyPhase: phase)
                continue
            }
            guard var current = plan else { throw fail("a cluster scenario starts with `cluster seed N servers S clients C`") }
            func node(_ word: String?, _ kinds: String = "server, client") throws -> Int {
                let word = word ?? ""
                if kinds.contains("server"), word.hasPrefix("server"), let n = Int(word.dropFirst(6)), (0..<current.servers).contains(n) { return n }
                if kinds.contains("client"), word.hasPrefix("client"), let n = Int(word.dropFirst(6)), (0..<current.clients).contains(n) { return current.servers + n }
                throw fail("no \(kinds) named `\(word)` (server0...server\(current.servers - 1), client0...client\(current.clients - 1))")
            }
            func client(_ word: String?) throws -> Int { try node(word, "client") - current.servers }
            func seconds(_ words: ArraySlice<String>) throws -> Double {
                guard words.count == 2, words.first == "for", let value = Double(words.last!), value >= 0, value <= 3600 else {
                    throw fail("expected `for SECONDS` (0 to 3600)")
                }
                return value
            }
            func range(_ word: String?) throws -> ClosedRange<Double> {
                let bounds = (word ?? "").split(separator: "-").compactMap { Double($0) }
                guard bounds.count == 2, bounds[0] >= 0, bounds[0] <= bounds[1], bounds[1] <= 10 else { throw fail("`\(head) LOW-HIGH` in seconds, at most 10") }
                return bounds[0]...bounds[1]
            }
            func link(_ word: String?) throws -> Int {
                guard let index = Self.linkNames.firstIndex(of: word ?? "") else { throw fail("a Redis link is one of \(Self.linkNames.joined(separator: ", "))") }
                return index
            }
            switch head {
            case "latency": current.latency = try range(words.first)
            case "redis-latency": current.redisLatency = try range(words.first)
            case "slow":
                guard words.count == 2, let speed = Double(words.last!), speed >= 100 else { throw fail("`slow CLIENT BYTES-PER-SECOND` (at least 100)") }
                current.bandwidth[try client(words.first)] = speed
            case "access":
                guard words == ["on"] || words == ["off"] else { throw fail("`access on` or `access off`") }
                current.access = words == ["on"]
            case "plant":
                guard words == ["ack-before-redis"] else { throw fail("`plant ack-before-redis`") }
                current.plantAckBeforeRedis = true
            case "at":
                guard words.count >= 2, let time = Double(words.first!), time >= 0, time < current.faultyPhase else {
                    throw fail("`at SECONDS ACTION`, with SECONDS inside the phase (0 to \(current.format(current.faultyPhase)))")
                }
                guard current.events.last.map({ $0.time <= time }) ?? true else { throw fail("events must be in time order") }
                let verb = words.dropFirst().first!
                let args = words.dropFirst(2)
                let action: Action
                switch verb {
                case "edit": action = .edit(client: try client(args.first))
                case "cut": action = .cut(client: try client(args.first))
                case "corrupt": action = .corrupt(client: try client(args.first))
                case "depart": action = .depart(client: try client(args.first))
                case "reset" where args.count == 2: action = .resetRedisLink(server: try node(args.first, "server"), link: try link(args.last))
                case "reset": action = .reset(client: try client(args.first))
                case "drop": action = .dropRedisLink(server: try node(args.first, "server"), link: try link(args.dropFirst().first))
                case "clog": action = .clog(client: try client(args.first), seconds: try seconds(args.dropFirst()))
                case "clog-redis": action = .clogRedis(server: try node(args.first, "server"), seconds: try seconds(args.dropFirst()))
                case "crash": action = .crash(server: try node(args.first, "server"), down: try seconds(args.dropFirst()))
                case "redis-restart": action = .redisRestart(down: try seconds(args))
                case "partition", "one-way":
                    var args = args
                    let direction = verb == "one-way" ? args.popFirst() : nil
                    guard let list = args.popFirst() else { throw fail("`\(verb)` needs nodes") }
                    let set = Set(try list.split(separator: ",").map { try node(String($0)) })
                    let duration = try seconds(args)
                    switch direction {
                    case nil: action = .partition(.between(set), seconds: duration)
                    case "out": action = .partition(.outOf(set), seconds: duration)
                    case "in": action = .partition(.into(set), seconds: duration)
                    default: throw fail("`one-way out|in NODES for SECONDS`")
                    }
                default:
                    throw fail("unknown action `\(verb)` (edit, cut, reset, corrupt, clog, crash, redis-restart, drop, clog-redis, partition, one-way, depart)")
                }
                current.events.append(Event(time: time, action: action))
            default:
                throw fail("unknown line `\(line)` (cluster, latency, redis-latency, slow, access, plant, at)")
            }
            plan = current
        }
        guard let plan else { throw Plan.ParseError(line: 1, message: "a cluster scenario starts with `cluster seed N servers S clients C`") }
        self = plan
    }
}
