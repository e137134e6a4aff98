import BoardSync

/// One end of the simulated network: whatever speaks bytes on connections (a `SyncEndpoint`, a
/// `BoardHub`, a Redis client or server). The network pulls its output, hands it what arrives
/// and tells it when a connection closes; a node that is down (crashed) says so by returning
/// nil from `receive` and empty output.
public protocol NetworkNode: AnyObject {
    /// Bytes waiting to go out on `session`.
    func output(for session: SessionID, now: Double) -> [UInt8]
    /// Bytes that arrived on `session` from node `from`: how many operations they carried
    /// (for the figures), or nil when the node is down and nothing was received.
    func receive(_ session: SessionID, _ bytes: [UInt8], from: Int, now: Double) -> Int?
    /// Whether this side closed `session` (the network then drops the connection).
    func isFinished(_ session: SessionID) -> Bool
    /// The connection `session` is gone (cut, reset, or closed by the other side).
    func closed(_ session: SessionID, now: Double)
}

/// Which traffic a partition holds back (TCP keeps retrying; the bytes arrive when it heals,
/// unless a session gives up first). Nodes are the network's node indices.
public enum NetworkCut: Sendable, Equatable {
    /// Nodes in the set and the rest cannot reach each other.
    case between(Set<Int>)
    /// Nothing the nodes in the set send arrives (they still hear everyone).
    case outOf(Set<Int>)
    /// Nothing reaches the nodes in the set (they still send).
    case into(Set<Int>)

    public func blocks(from: Int, to: Int) -> Bool {
        switch self {
        case .between(let nodes): nodes.contains(from) != nodes.contains(to)
        case .outOf(let nodes): nodes.contains(from) && !nodes.contains(to)
        case .into(let nodes): nodes.contains(to) && !nodes.contains(from)
        }
    }
}

/// How a link hands a chunk to its receiver: whole, or cut into segments (TCP may deliver a
/// write in any number of reads).
public enum Segmentation: Sendable, Equatable {
    case whole
    /// Every read at most this many bytes.
    case bytes(Int)
    /// Reads of a size drawn from the network's generator.
    case random(ClosedRange<Int>)
}

/// The simulated network every simulation runs on (modelled on quinn-proto's test `Pair`,
/// grown to many nodes): nodes joined by TCP-like links (byte streams in order, a latency per
/// link, optionally a bandwidth), one virtual-time event queue that carries the network's
/// deliveries and the simulation's own happenings (`Happening`), and byte-level faults:
/// a cut, a reset (the next chunk arrives cut short, then the connection drops), a flipped
/// byte, a clog (nothing moves for a while, then everything), partitions (symmetric or one-way;
/// bytes in flight wait), slow links, segmented reads. Deterministic from a seed: its one
/// generator (`rng`, which the simulation may share for its own reactions) decides latencies
/// and where faults land, and `hash` fingerprints every decision (the replay hash).
public final class Network<Happening> {
    /// A connection from a dialer to an acceptor.
    public struct Link {
        public let dialer: Int
        public let acceptor: Int
        /// The dialer's and the acceptor's session ids.
        public let sessions: (SessionID, SessionID)
        public let latency: Double
        public let bandwidth: Double?
        public var segmentation: Segmentation = .whole
        public internal(set) var up = true
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
        /// A side finished its session (graceful close): the link drops once what it carries arrived.
        var closing = false

        public func sender(_ direction: Int) -> Int { direction == 0 ? dialer : acceptor }
        public func receiver(_ direction: Int) -> Int { direction == 0 ? acceptor : dialer }
        public func session(of node: Int) -> SessionID { node == dialer ? sessions.0 : sessions.1 }
        public func touches(_ node: Int) -> Bool { dialer == node || acceptor == node }
        /// Bytes written and not yet delivered, both ways.
        public var inFlight: Bool { queueHeads[0] < queues[0].count || queueHeads[1] < queues[1].count }
    }

    public enum Event {
        /// The network's own: the head chunk of a link's direction may be due.
        case deliver(link: Int, direction: Int, generation: Int)
        case happening(Happening)
    }

    /// A chunk that reached a node that was up.
    public struct Delivery {
        public let link: Int
        public let from: Int
        public let to: Int
        public let bytes: Int
        /// The chunk was cut short and the connection then reset.
        public let reset: Bool
    }

    /// The nodes, by index; links name nodes by these indices.
    public var nodes: [any NetworkNode] = []
    /// The one seeded generator of the network's decisions (latency, where a flipped byte or a
    /// reset lands); simulations draw their own reactions from it too.
    public var rng: SeededRandom
    public private(set) var now = 0.0
    /// The replay hash: every decision mixed in, in order (FNV-1a).
    public private(set) var hash: UInt64 = 0xCBF2_9CE4_8422_2325
    public private(set) var links: [Link] = []
    /// Indices of the links that are up, oldest first.
    public private(set) var activeLinks: [Int] = []
    private var nextSession: SessionID = 0
    private var queue = EventQueue<Event>()
    private var partitions: [(cut: NetworkCut, until: Double)] = []
    /// How a link ends when one side finishes its session: at once, dropping what it still
    /// carries (false: an abortive close, as the world has always simulated), or once the
    /// bytes in flight arrived (true: TCP's orderly close, so a last error frame is read).
    public var closesGracefully = false
    /// Events popped, chunks delivered to a node that was up, and the operations they carried.
    public private(set) var events = 0
    public private(set) var deliveries = 0
    public private(set) var operationsDelivered = 0

    public init(seed: UInt64) {
        rng = SeededRandom(seed: seed)
    }

    @discardableResult
    public func add(_ node: any NetworkNode) -> Int {
        nodes.append(node)
        return nodes.count - 1
    }

    // MARK: Decisions

    public func note(_ words: String) {
        for byte in words.utf8 { mix(UInt64(byte)) }
    }

    public func mix(_ value: UInt64) {
        hash ^= value
        hash = hash &* 0x100_0000_01B3
    }

    // MARK: Time

    /// Schedules one of the simulation's happenings; equal times come out in the order pushed.
    public func schedule(_ happening: Happening, at time: Double) {
        queue.push(time, .happening(happening))
    }

    /// The next event at or before `deadline` (the clock moves to it), or nil when there is
    /// none. Deliveries are the caller's to perform (`deliver`), so it can react in between.
    public func next(until deadline: Double) -> Event? {
        guard let time = queue.peekTime, time <= deadline, let (at, event) = queue.pop() else { return nil }
        now = at
        events += 1
        return event
    }

    /// Moves the clock forward without an event (a simulation that steps on its own).
    public func advance(to time: Double) {
        now = max(now, time)
    }

    // MARK: Links

    /// Opens a link (its latency drawn from `latency`); the caller tells the two nodes.
    public func connect(_ dialer: Int, to acceptor: Int, latency: ClosedRange<Double>, bandwidth: Double? = nil,
                        segmentation: Segmentation = .whole) -> Int {
        nextSession += 2
        let drawn = Double.random(in: latency, using: &rng)
        var link = Link(dialer: dialer, acceptor: acceptor, sessions: (nextSession - 1, nextSession), latency: drawn, bandwidth: bandwidth)
        link.segmentation = segmentation
        links.append(link)
        activeLinks.append(links.count - 1)
        note("connect \(dialer) \(acceptor) \(drawn)")
        return links.count - 1
    }

    /// Both ends see the connection close.
    public func cut(_ index: Int) {
        guard links[index].up else { return }
        links[index].up = false
        activeLinks.removeAll { $0 == index }
        let link = links[index]
        for node in [link.dialer, link.acceptor] { nodes[node].closed(link.session(of: node), now: now) }
        note("cut \(index)")
    }

    public func linksTouching(_ node: Int) -> [Int] {
        activeLinks.filter { links[$0].touches(node) }
    }

    /// Moves a node's output onto its links and drops the links whose session it finished.
    public func flush(_ node: Int) {
        for index in linksTouching(node) {
            let session = links[index].session(of: node)
            let bytes = nodes[node].output(for: session, now: now)
            if !bytes.isEmpty { send(bytes, on: index, from: node) }
            if nodes[node].isFinished(session) {
                if closesGracefully && links[index].inFlight { links[index].closing = true } else { cut(index) }
            }
        }
    }

    /// Puts bytes a node wrote on a link: they arrive after the link's latency, in order, behind
    /// what the link is still carrying.
    public func send(_ bytes: [UInt8], on index: Int, from node: Int) {
        let direction = links[index].dialer == node ? 0 : 1
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

    private func scheduleDelivery(_ index: Int, _ direction: Int, at time: Double) {
        links[index].deliveryGeneration[direction] += 1
        queue.push(max(time, now), .deliver(link: index, direction: direction, generation: links[index].deliveryGeneration[direction]))
    }

    /// Performs a delivery event: the head chunk, unless it is not due yet, the link is clogged
    /// or a partition holds it (then it waits). Nil when nothing reached a node that was up.
    public func deliver(_ index: Int, _ direction: Int, generation: Int) -> Delivery? {
        guard links[index].deliveryGeneration[direction] == generation else { return nil }
        guard links[index].up, links[index].queueHeads[direction] < links[index].queues[direction].count else { return nil }
        let head = links[index].queueHeads[direction]
        let arrival = links[index].queues[direction][head].0
        if arrival > now {
            scheduleDelivery(index, direction, at: arrival)
            return nil
        }
        let from = links[index].sender(direction), to = links[index].receiver(direction)
        if links[index].heldUntil > now {
            scheduleDelivery(index, direction, at: links[index].heldUntil)
            return nil
        }
        if let until = blockedUntil(from: from, to: to) {
            scheduleDelivery(index, direction, at: until)
            return nil
        }
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
        let session = links[index].session(of: to)
        guard let carried = receive(bytes, at: to, on: session, from: from, segmentation: links[index].segmentation) else { return nil }
        operationsDelivered += carried
        deliveries += 1
        mix(UInt64(bytes.count) << 20 ^ UInt64(index))
        if reset {
            note("reset \(index)")
            cut(index)
        } else if links[index].queueHeads[direction] < links[index].queues[direction].count {
            scheduleDelivery(index, direction, at: links[index].queues[direction][links[index].queueHeads[direction]].0)
        } else if links[index].closing, !links[index].inFlight {
            cut(index)
        }
        return Delivery(link: index, from: from, to: to, bytes: bytes.count, reset: reset)
    }

    private func receive(_ bytes: [UInt8], at node: Int, on session: SessionID, from: Int, segmentation: Segmentation) -> Int? {
        let size: () -> Int
        switch segmentation {
        case .whole: return nodes[node].receive(session, bytes, from: from, now: now)
        case .bytes(let count): size = { max(1, count) }
        case .random(let range): size = { [unowned self] in Int.random(in: range, using: &self.rng) }
        }
        var carried: Int?
        var offset = 0
        while offset < bytes.count {
            let end = min(bytes.count, offset + size())
            guard let count = nodes[node].receive(session, Array(bytes[offset..<end]), from: from, now: now) else { return carried }
            carried = (carried ?? 0) + count
            offset = end
        }
        return carried
    }

    // MARK: Faults

    /// The next chunk on the link has one byte flipped.
    public func corruptNext(_ index: Int) { links[index].corruptNext = true }
    /// The next chunk on the link arrives cut short, then the connection resets.
    public func resetNext(_ index: Int) { links[index].resetNext = true }
    /// The link moves nothing until `until`, then everything it holds.
    public func clog(_ index: Int, until: Double) { links[index].heldUntil = max(links[index].heldUntil, until) }

    public func partition(_ cut: NetworkCut, until: Double) {
        partitions.append((cut, until))
    }

    /// When the partition that holds traffic from one node to another ends (nil: none does).
    public func blockedUntil(from: Int, to: Int) -> Double? {
        partitions.filter { $0.until > now && $0.cut.blocks(from: from, to: to) }.map(\.until).max()
    }

    /// Every partition ends (what they held moves at its next delivery event: `unclog`).
    public func endPartitions() {
        partitions = []
    }

    /// Every clog ends, and everything links hold is due now.
    public func unclog() {
        for index in activeLinks {
            links[index].heldUntil = 0
            for direction in 0..<2 where links[index].queueHeads[direction] < links[index].queues[direction].count {
                scheduleDelivery(index, direction, at: now)
            }
        }
    }
}

/// A priority queue of timed events; equal times come out in the order they went in.
struct EventQueue<Element> {
    private var heap: [(time: Double, order: Int, element: Element)] = []
    private var pushed = 0

    var isEmpty: Bool { heap.isEmpty }
    var peekTime: Double? { heap.first?.time }

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
