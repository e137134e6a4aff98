import BoardStore
import BoardSync
import Foundation

/// Everything one simulated run does, decided before it starts: the world's shape (peers, who
/// dials whom, link latency and speed) and a timeline of edits and faults. A seed draws a plan
/// (`Plan.draw`); a plan is also a text a person can read, edit and run (`board-sim run FILE`:
/// docs/SIMULATION.md, "World scenarios"), and what shrinking reduces a failing run to.
///
/// The world's own reactions (reconnect backoff, where a corrupted byte lands, which chunk a
/// reset cuts) come from a second generator seeded by `seed`, so a plan with events removed
/// still runs deterministically.
public struct Plan: Sendable, Equatable {
    /// How a host dies (`MemoryFileSystem.CrashKind`).
    public enum CrashKind: String, Sendable, CaseIterable {
        /// The process dies; the kernel keeps every write.
        case process
        /// Power fails: writes not yet synced are lost.
        case powerLoss = "power-loss"
        /// Power fails in the middle of a write: the file's unsynced tail is torn.
        case tornWrite = "torn-write"

        var memoryKind: MemoryFileSystem.CrashKind {
            switch self {
            case .process: .processCrash
            case .powerLoss: .powerLoss(tornTail: false)
            case .tornWrite: .powerLoss(tornTail: true)
            }
        }
    }

    /// Which traffic a partition holds back (the network's: host indices are its nodes).
    public typealias Cut = NetworkCut

    public enum Action: Sendable, Equatable {
        /// A peer makes one random local edit.
        case edit(peer: Int)
        /// A peer's links drop (both sides see them close); it reconnects with backoff.
        case cut(peer: Int)
        /// The next chunk on one of a peer's links is cut short: part of a frame arrives, then
        /// the connection resets.
        case reset(peer: Int)
        /// One byte of the next chunk on one of a peer's links is flipped.
        case corrupt(peer: Int)
        /// A host dies and comes back `down` seconds later from its disk.
        case crash(host: Int, CrashKind, down: Double)
        /// A host's disk takes no more bytes for a while.
        case diskFull(host: Int, seconds: Double)
        /// A peer leaves the network for a while (it keeps editing).
        case offline(peer: Int, seconds: Double)
        /// A network partition for a while.
        case partition(Cut, seconds: Double)
        /// A peer's links stop moving bytes for a while (a clogged link), then deliver it all.
        case clog(peer: Int, seconds: Double)
    }

    public struct Event: Sendable, Equatable {
        public var time: Double
        public var action: Action
    }

    public var seed: UInt64
    public var peers: Int
    /// Whom each peer dials (host indices; `peers` is the server).
    public var dials: [[Int]]
    /// "star", "chain", "mixed" or "mesh" (for reports; `dials` is what counts).
    public var topology: String
    public var latency: ClosedRange<Double>
    /// Bytes per second on the links a peer dials (slow links); absent: unlimited.
    public var bandwidth: [Int: Double] = [:]
    /// Editing with faults, then the heal and up to `settleLimit` seconds to converge.
    public var faultyPhase: Double
    public var settleLimit: Double = 120
    public var mutation: World.Mutation = .none
    /// The server requires tokens: each peer presents a write token of its own subject (a peer
    /// token when other peers dial it, since it relays their edits).
    public var access = false
    /// Hosts running an older release (what their sessions announce): the rest run this one.
    public var releases: [Int: Release] = [:]
    /// Peers also name versions: about one edit in twenty writes a label (a new one, a rename
    /// or a delete). Never drawn at random (plans of earlier seeds edit as before); set by tests
    /// and by `labels on` in a scenario.
    public var labels = false

    /// Earlier releases a host may run, by the capabilities their sessions announce.
    public enum Release: String, CaseIterable, Sendable {
        /// Before batch format 2: presence only (gets and sends format 1).
        case beforePackedPoints = "before-packed-points"
        /// Before linked batches: presence and format 2.
        case beforeLinkedBatches = "before-linked-batches"

        public var capabilities: UInt64 {
            switch self {
            case .beforePackedPoints: return Capabilities.presence
            case .beforeLinkedBatches: return Capabilities.presence | Capabilities.packedPoints
            }
        }
    }
    public var events: [Event]

    public var server: Int { peers }

    public func name(_ host: Int) -> String { host == peers ? "server" : "peer\(host)" }

    /// A plan with no events (for building one by hand).
    public init(seed: UInt64, peers: Int, dials: [[Int]]? = nil, topology: String = "star",
                latency: ClosedRange<Double> = 0.001...0.05, faultyPhase: Double = 20, events: [Event] = []) {
        self.seed = seed
        self.peers = peers
        self.dials = dials ?? Array(repeating: [peers], count: peers)
        self.topology = topology
        self.latency = latency
        self.faultyPhase = faultyPhase
        self.events = events
    }

    // MARK: Drawing a plan from a seed

    /// Fault rates of one seed (swarm testing: each seed draws its own mix and intensity).
    public struct Faults: Sendable, CustomStringConvertible {
        public var rates: [String: Double] = [:]

        /// Every kind a seed can draw, with its base rate per second (per peer for peer faults).
        public static let kinds: [(name: String, rate: Double)] = [
            ("cut", 0.05), ("reset", 0.03), ("corrupt", 0.02), ("server crash", 0.02), ("peer crash", 0.01),
            ("disk full", 0.02), ("offline", 0.01), ("long offline", 0.003), ("partition", 0.02),
            ("one-way partition", 0.02), ("clog", 0.02),
        ]

        public static func draw(_ rng: inout SeededRandom) -> Faults {
            var faults = Faults()
            for (name, rate) in kinds where rng.chance(0.5) {
                faults.rates[name] = rate * Double(Int.random(in: 1...4, using: &rng))
            }
            return faults
        }

        public var description: String {
            rates.isEmpty ? "no faults" : rates.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)/s" }.joined(separator: ", ")
        }
    }

    /// The plan seed `seed` stands for: its topology, links, edits and faults.
    public static func draw(seed: UInt64, peers: Int = 3, editsPerSecond: Double = 20, faultyPhase: Double = 20) -> Plan {
        var rng = SeededRandom(seed: seed)
        var faultRNG = SeededRandom(seed: seed ^ 0xFA17)
        let faults = Faults.draw(&faultRNG)
        let server = peers
        let topology = ["star", "chain", "mixed", "mesh"][Int.random(in: 0..<4, using: &rng)]
        var dials: [[Int]] = []
        for index in 0..<peers {
            switch topology {
            case "chain": dials.append([index == 0 ? server : index - 1])
            case "mixed": dials.append([index == 0 || rng.chance(0.5) ? server : Int.random(in: 0..<index, using: &rng)])
            case "mesh": dials.append(index == 0 ? [server] : [server, Int.random(in: 0..<index, using: &rng)])
            default: dials.append([server])
            }
        }
        let slow = Double(Int.random(in: 1...200, using: &rng)) / 1000
        var plan = Plan(seed: seed, peers: peers, dials: dials, topology: topology,
                        latency: (slow / 4 * 1000).rounded() / 1000...slow, faultyPhase: faultyPhase)
        // Drawn from the fault generator so that the plans of earlier seeds stay as they were.
        plan.access = faultRNG.chance(0.5)
        // Mixed releases, from a generator of their own (earlier seeds' plans unchanged): a
        // quarter of the seeds draw them, each host (the server included) then running an
        // older release with probability 0.4.
        var releaseRNG = SeededRandom(seed: seed ^ 0x2E1E)
        if releaseRNG.chance(0.25) {
            for index in 0...peers where releaseRNG.chance(0.4) {
                plan.releases[index] = releaseRNG.pick(Release.allCases)
            }
        }
        if rng.chance(0.3) {
            for index in 0..<peers where rng.chance(0.5) {
                plan.bandwidth[index] = Double(Int.random(in: 2...64, using: &rng) * 1024)
            }
        }

        // Times in whole milliseconds, so the plan's text reads back exactly.
        func milliseconds(_ value: Double) -> Double { (value * 1000).rounded() / 1000 }
        var events: [Event] = []
        var edit = 1
        while milliseconds(Double(edit) / editsPerSecond) < faultyPhase {
            events.append(Event(time: milliseconds(Double(edit) / editsPerSecond), action: .edit(peer: Int.random(in: 0..<peers, using: &rng))))
            edit += 1
        }
        func someHosts() -> Set<Int> {
            switch Int.random(in: 0..<3, using: &rng) {
            case 0: return [server]
            case 1: return [Int.random(in: 0..<peers, using: &rng)]
            default: return Set((0...server).filter { _ in rng.chance(0.5) })
            }
        }
        for (name, _) in Faults.kinds {
            guard let rate = faults.rates[name] else { continue }
            let perPeer = !["server crash", "disk full", "partition", "one-way partition"].contains(name)
            let total = perPeer ? rate * Double(peers) : rate
            var at = 0.0
            while true {
                at += -log(1 - Double.random(in: 0..<1, using: &rng)) / total
                guard at < faultyPhase else { break }
                let peer = Int.random(in: 0..<peers, using: &rng)
                let action: Action
                switch name {
                case "cut": action = .cut(peer: peer)
                case "reset": action = .reset(peer: peer)
                case "corrupt": action = .corrupt(peer: peer)
                case "server crash":
                    action = .crash(host: server, rng.pick(CrashKind.allCases), down: Double(Int.random(in: 1...4, using: &rng)))
                case "peer crash":
                    action = .crash(host: peer, rng.pick(CrashKind.allCases), down: Double(Int.random(in: 0...2, using: &rng)))
                case "disk full":
                    action = .diskFull(host: rng.chance(0.7) ? server : peer, seconds: Double(Int.random(in: 1...5, using: &rng)))
                case "offline": action = .offline(peer: peer, seconds: Double(Int.random(in: 2...10, using: &rng)))
                case "long offline": action = .offline(peer: peer, seconds: Double(Int.random(in: 30...120, using: &rng)))
                case "partition": action = .partition(.between(someHosts()), seconds: Double(Int.random(in: 1...25, using: &rng)))
                case "one-way partition":
                    let hosts = someHosts()
                    action = .partition(rng.chance(0.5) ? .outOf(hosts) : .into(hosts), seconds: Double(Int.random(in: 1...25, using: &rng)))
                default: action = .clog(peer: peer, seconds: Double(Int.random(in: 1...8, using: &rng)) / 2)
                }
                events.append(Event(time: milliseconds(at), action: action))
            }
        }
        // In time order; equal times keep the order they were drawn in.
        plan.events = events.enumerated().sorted { ($0.element.time, $0.offset) < ($1.element.time, $1.offset) }.map(\.element)
        return plan
    }

    // MARK: Text

    /// The plan as a world scenario (docs/SIMULATION.md); `Plan(text:)` reads it back.
    public var text: String {
        var lines = ["world seed \(seed) peers \(peers) phase \(format(faultyPhase)) topology \(topology)"]
        lines.append("dials " + dials.enumerated().map { "\(name($0.offset))>" + $0.element.map(name).joined(separator: ",") }.joined(separator: " "))
        lines.append("latency \(format(latency.lowerBound))-\(format(latency.upperBound))")
        for (peer, speed) in bandwidth.sorted(by: { $0.key < $1.key }) { lines.append("slow \(name(peer)) \(Int(speed))") }
        if access { lines.append("access on") }
        if labels { lines.append("labels on") }
        for (host, release) in releases.sorted(by: { $0.key < $1.key }) { lines.append("release \(name(host)) \(release.rawValue)") }
        if mutation != .none { lines.append("plant \(mutation.rawValue)") }
        for event in events { lines.append("at \(format(event.time)) \(describe(event.action))") }
        return lines.joined(separator: "\n") + "\n"
    }

    func hosts(_ set: Set<Int>) -> String { set.sorted().map(name).joined(separator: ",") }

    public func describe(_ action: Action) -> String {
        switch action {
        case .edit(let peer): "edit \(name(peer))"
        case .cut(let peer): "cut \(name(peer))"
        case .reset(let peer): "reset \(name(peer))"
        case .corrupt(let peer): "corrupt \(name(peer))"
        case .crash(let host, let kind, let down): "crash \(name(host)) \(kind.rawValue) for \(format(down))"
        case .diskFull(let host, let seconds): "disk-full \(name(host)) for \(format(seconds))"
        case .offline(let peer, let seconds): "offline \(name(peer)) for \(format(seconds))"
        case .partition(.between(let set), let seconds): "partition \(hosts(set)) for \(format(seconds))"
        case .partition(.outOf(let set), let seconds): "one-way out \(hosts(set)) for \(format(seconds))"
        case .partition(.into(let set), let seconds): "one-way in \(hosts(set)) for \(format(seconds))"
        case .clog(let peer, let seconds): "clog \(name(peer)) for \(format(seconds))"
        }
    }

    func format(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(format: "%.3f", value).replacingOccurrences(of: #"0+$"#, with: "", options: .regularExpression)
    }

    public struct ParseError: Error, CustomStringConvertible {
        public var line: Int
        public var message: String
        public var description: String { "line \(line): \(message)" }
    }

    /// Reads a world scenario (the text `text` writes; `#` comments and blank lines ignored).
    public init(text: String) throws {
        var plan: Plan?
        for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let number = index + 1
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            func fail(_ message: String) -> ParseError { ParseError(line: number, message: message) }
            var words = line.split(separator: " ").map(String.init)
            let head = words.removeFirst()
            if head == "world" {
                guard plan == nil else { throw fail("`world` comes once, first") }
                var seed: UInt64 = 0, peers = 3, phase = 20.0, topology = "star"
                var rest = words[...]
                while let key = rest.popFirst() {
                    guard let value = rest.popFirst() else { throw fail("`\(key)` needs a value") }
                    switch key {
                    case "seed": guard let number = UInt64(value) else { throw fail("seed `\(value)` is not a whole number") }; seed = number
                    case "peers":
                        guard let number = Int(value), (1...16).contains(number) else { throw fail("peers must be 1 to 16") }
                        peers = number
                    case "phase": guard let number = Double(value), number > 0, number <= 3600 else { throw fail("phase must be 0 to 3600 seconds") }; phase = number
                    case "topology": topology = value
                    default: throw fail("unknown world setting `\(key)` (seed, peers, phase, topology)")
                    }
                }
                plan = Plan(seed: seed, peers: peers, topology: topology, faultyPhase: phase)
                continue
            }
            guard var current = plan else { throw fail("a world scenario starts with `world seed N peers P`") }
            func host(_ word: String) throws -> Int {
                if word == "server" { return current.peers }
                guard word.hasPrefix("peer"), let index = Int(word.dropFirst(4)), (0..<current.peers).contains(index) else {
                    throw fail("no host named `\(word)` (server, peer0...peer\(current.peers - 1))")
                }
                return index
            }
            func peer(_ word: String?) throws -> Int {
                let index = try host(word ?? "")
                guard index != current.peers else { throw fail("`\(word ?? "")` must be a peer") }
                return index
            }
            func seconds(_ words: ArraySlice<String>) throws -> Double {
                guard words.count == 2, words.first == "for", let value = Double(words.last!), value >= 0, value <= 3600 else {
                    throw fail("expected `for SECONDS` (0 to 3600)")
                }
                return value
            }
            switch head {
            case "dials":
                for word in words {
                    let parts = word.split(separator: ">").map(String.init)
                    guard parts.count == 2 else { throw fail("`dials PEER>HOST[,HOST]...`") }
                    let from = try peer(parts[0])
                    let targets = try parts[1].split(separator: ",").map { try host(String($0)) }
                    guard !targets.contains(from) else { throw fail("\(parts[0]) cannot dial itself") }
                    current.dials[from] = targets
                }
            case "latency":
                let bounds = (words.first ?? "").split(separator: "-").compactMap { Double($0) }
                guard bounds.count == 2, bounds[0] >= 0, bounds[0] <= bounds[1], bounds[1] <= 10 else { throw fail("`latency LOW-HIGH` in seconds, at most 10") }
                current.latency = bounds[0]...bounds[1]
            case "slow":
                guard words.count == 2, let speed = Double(words[1]), speed >= 100 else { throw fail("`slow PEER BYTES-PER-SECOND` (at least 100)") }
                current.bandwidth[try peer(words[0])] = speed
            case "access":
                guard words == ["on"] || words == ["off"] else { throw fail("`access on` or `access off`") }
                current.access = words == ["on"]
            case "labels":
                guard words == ["on"] || words == ["off"] else { throw fail("`labels on` or `labels off`") }
                current.labels = words == ["on"]
            case "release":
                guard words.count == 2, let release = Release(rawValue: words[1]) else {
                    throw fail("`release HOST RELEASE`, one of \(Release.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                current.releases[try host(words[0])] = release
            case "plant":
                guard let mutation = World.Mutation(rawValue: words.first ?? "") else {
                    throw fail("`plant BUG`, one of \(World.Mutation.allCases.filter { $0 != .none }.map(\.rawValue).joined(separator: ", "))")
                }
                current.mutation = mutation
            case "at":
                guard words.count >= 2, let time = Double(words[0]), time >= 0, time < current.faultyPhase else {
                    throw fail("`at SECONDS ACTION`, with SECONDS inside the phase (0 to \(current.format(current.faultyPhase)))")
                }
                guard current.events.last.map({ $0.time <= time }) ?? true else { throw fail("events must be in time order") }
                let verb = words[1]
                let args = words.dropFirst(2)
                let action: Action
                switch verb {
                case "edit": action = .edit(peer: try peer(args.first))
                case "cut": action = .cut(peer: try peer(args.first))
                case "reset": action = .reset(peer: try peer(args.first))
                case "corrupt": action = .corrupt(peer: try peer(args.first))
                case "crash":
                    guard args.count == 4, let kind = CrashKind(rawValue: args[args.startIndex + 1]) else {
                        throw fail("`crash HOST process|power-loss|torn-write for SECONDS`")
                    }
                    action = .crash(host: try host(args.first!), kind, down: try seconds(args.dropFirst(2)))
                case "disk-full": action = .diskFull(host: try host(args.first ?? ""), seconds: try seconds(args.dropFirst()))
                case "offline": action = .offline(peer: try peer(args.first), seconds: try seconds(args.dropFirst()))
                case "clog": action = .clog(peer: try peer(args.first), seconds: try seconds(args.dropFirst()))
                case "partition", "one-way":
                    var args = args
                    let direction = verb == "one-way" ? args.popFirst() : nil
                    guard let list = args.popFirst() else { throw fail("`\(verb)` needs hosts") }
                    let set = Set(try list.split(separator: ",").map { try host(String($0)) })
                    let duration = try seconds(args)
                    switch direction {
                    case nil: action = .partition(.between(set), seconds: duration)
                    case "out": action = .partition(.outOf(set), seconds: duration)
                    case "in": action = .partition(.into(set), seconds: duration)
                    default: throw fail("`one-way out|in HOSTS for SECONDS`")
                    }
                default:
                    throw fail("unknown action `\(verb)` (edit, cut, reset, corrupt, crash, disk-full, offline, partition, one-way, clog)")
                }
                current.events.append(Event(time: time, action: action))
            default:
                throw fail("unknown line `\(line)` (world, dials, latency, slow, access, labels, release, plant, at)")
            }
            plan = current
        }
        guard let plan else { throw ParseError(line: 1, message: "a world scenario starts with `world seed N peers P`") }
        self = plan
    }
}
