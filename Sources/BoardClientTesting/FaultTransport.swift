import BoardClient
import Foundation
import Synchronization

/// A `BoardTransport` that wraps another (`MemoryTransport`, `TCPTransport`, your own) and
/// injects the network's faults, seeded: latency and jitter on every chunk, link drops,
/// partitions and kills. For testing how an app's boards behave when the network misbehaves.
///
/// ```swift
/// let faults = FaultTransport(wrapping: MemoryTransport(server: MemoryServer()), seed: 42,
///                             faults: .init(latency: 0.005, jitter: 0.010, dropProbability: 0.02))
/// let board = try LiveBoard.open(storage: .memory, sync: sync, transport: faults)
/// faults.partition()          // connects fail, open connections are cut
/// faults.heal()
/// print(faults.counters)      // connections made, killed, refused
/// ```
///
/// The sync protocol runs over a reliable byte stream, so a fault here is never a lost or
/// reordered byte: a dropped link is a dead connection (`receive` and `send` throw a
/// `TransportError`), after which nothing more passes in either direction. Bytes already on
/// their way when a connection dies are lost with it, as on a real network: the other side sees
/// a prefix of the stream, then the end.
///
/// Deterministic: each connection draws its faults from a generator of its own, seeded by
/// `seed` and the connection's number (0, 1, 2, ... in the order connections are made), one
/// generator per direction. The faults a connection meets are therefore a function of the seed,
/// its number and the chunks it carries (two draws per chunk, whatever the knobs are set to).
/// Which connection gets which number, and when chunks arrive, is up to the boards' tasks and
/// the clock: runs of the same seed see the same faults only as far as they make the same
/// connections and chunks.
///
/// A class so that a test can hold it and flip its knobs while boards run: `faults`, and the
/// controls `partition()`, `partition(for:)`, `heal()`, `killConnections()`, are thread-safe.
/// As `BoardTransport` requires, a connection exists only inside `withConnection`'s body: the
/// wrapped transport's connection is closed when it returns, after the chunks sent so far are
/// delivered (unless the connection was killed).
public final class FaultTransport: BoardTransport, Sendable {
    /// The knobs. All default to "no fault": `FaultTransport(wrapping:seed:)` alone passes
    /// everything through unchanged (except that each chunk goes through a queue).
    public struct Faults: Sendable, Equatable {
        /// Seconds added to every chunk, in both directions (client to server at `send`,
        /// server to client at `receive`). Default 0.
        public var latency: Double
        /// Up to this many more seconds, uniformly drawn per chunk. Chunks never overtake each
        /// other: a chunk is delivered no earlier than the one before it in its direction.
        /// Default 0.
        public var jitter: Double
        /// The probability, per chunk (sent or received), that the connection is killed at that
        /// chunk: that chunk and everything after it are lost, `send` and `receive` throw.
        /// Default 0.
        public var dropProbability: Double

        public init(latency: Double = 0, jitter: Double = 0, dropProbability: Double = 0) {
            self.latency = latency
            self.jitter = jitter
            self.dropProbability = dropProbability
        }
    }

    /// What has happened so far (for a test's assertions).
    public struct Counters: Sendable, Equatable {
        /// Connections the wrapped transport made and this one let through.
        public var connectionsMade = 0
        /// Connections cut by this transport: drops, partitions and `killConnections()`.
        public var connectionsKilled = 0
        /// Of `connectionsKilled`, those cut by `dropProbability`.
        public var drops = 0
        /// Connects refused because the network was partitioned.
        public var connectionsRefused = 0
        /// Chunks delivered to the wrapped connection (client to server) and to the client
        /// (server to client).
        public var chunksSent = 0
        public var chunksReceived = 0

        public init() {}
    }

    public let inner: any BoardTransport
    public let seed: UInt64
    /// Where latency is measured and waited out, and `partition(for:)`'s time (a test's
    /// `TestClock`: chunks with latency then arrive only as the test advances it).
    public let clock: any BoardClock

    struct State {
        var faults: Faults
        var partitioned = false
        var partitionGeneration = 0
        var nextNumber = 0
        var links: [Int: FaultLink] = [:]
        var counters = Counters()
    }
    let state: Mutex<State>

    /// Wraps `inner`; the faults are drawn from generators seeded by `seed`, delivery times
    /// kept on `clock`.
    public init(wrapping inner: any BoardTransport, seed: UInt64, faults: Faults = Faults(),
                clock: any BoardClock = SystemBoardClock()) {
        self.inner = inner
        self.seed = seed
        self.clock = clock
        state = Mutex(State(faults: faults))
    }

    /// The knobs now; a change applies to the next chunk of every connection.
    public var faults: Faults {
        get { state.withLock { $0.faults } }
        set { state.withLock { $0.faults = newValue } }
    }

    public var counters: Counters { state.withLock { $0.counters } }

    /// Connections open now.
    public var openConnections: Int { state.withLock { $0.links.count } }

    public var isPartitioned: Bool { state.withLock { $0.partitioned } }

    // MARK: Controls

    /// Partitions the network until `heal()`: open connections are cut now, and every connect
    /// fails with a `TransportError` ("partitioned") until then. Returns how many connections
    /// it cut (those already dead are not counted).
    @discardableResult
    public func partition() -> Int {
        let links = state.withLock { state -> [FaultLink] in
            state.partitioned = true
            state.partitionGeneration += 1
            return Array(state.links.values)
        }
        return links.count { cut($0, "FaultTransport: the network is partitioned", drop: false) }
    }

    /// Partitions the network now and heals it `seconds` later (on `clock`), unless `heal()`
    /// or another `partition` came first.
    public func partition(for seconds: Double) {
        _ = partition()
        let generation = state.withLock { $0.partitionGeneration }
        let clock = self.clock
        Task { [weak self] in
            try? await clock.sleep(until: clock.now() + max(0, seconds))
            self?.heal(ifStill: generation)
        }
    }

    /// Ends a partition: connects succeed again (connections cut by it stay dead; the boards
    /// dial again on their own backoff).
    public func heal() {
        state.withLock { state in
            state.partitioned = false
            state.partitionGeneration += 1
        }
    }

    private func heal(ifStill generation: Int) {
        state.withLock { state in
            guard state.partitionGeneration == generation else { return }
            state.partitioned = false
            state.partitionGeneration += 1
        }
    }

    /// Cuts every open connection now (new connects are not affected). Returns how many it cut.
    @discardableResult
    public func killConnections() -> Int {
        let links = state.withLock { Array($0.links.values) }
        return links.count { cut($0, "FaultTransport: the connection was killed", drop: false) }
    }

    // MARK: BoardTransport

    public func withConnection<T: Sendable>(to address: String, _ body: @Sendable (any BoardConnection) async throws -> T) async throws -> T {
        try refuseIfPartitioned(address)
        return try await inner.withConnection(to: address) { connection in
            // Partitioned while the wrapped transport was connecting: refused all the same.
            let link = try self.open(address)
            defer { self.closed(link) }
            return try await link.run(over: connection, body)
        }
    }

    private func refuseIfPartitioned(_ address: String) throws {
        try state.withLock { state in
            guard state.partitioned else { return }
            state.counters.connectionsRefused += 1
            throw Self.refusal(address)
        }
    }

    private static func refusal(_ address: String) -> TransportError {
        TransportError("FaultTransport: the network is partitioned: cannot connect to \(address)")
    }

    private func open(_ address: String) throws -> FaultLink {
        try state.withLock { state in
            if state.partitioned {
                state.counters.connectionsRefused += 1
                throw Self.refusal(address)
            }
            let number = state.nextNumber
            state.nextNumber += 1
            state.counters.connectionsMade += 1
            let link = FaultLink(transport: self, number: number, seed: seed)
            state.links[number] = link
            return link
        }
    }

    private func closed(_ link: FaultLink) {
        state.withLock { _ = $0.links.removeValue(forKey: link.number) }
    }

    /// Kills `link` (counted once, however many causes reach it); false when it was dead already.
    @discardableResult
    func cut(_ link: FaultLink, _ reason: String, drop: Bool) -> Bool {
        guard link.kill(reason) else { return false }
        state.withLock { state in
            state.counters.connectionsKilled += 1
            if drop { state.counters.drops += 1 }
        }
        return true
    }

    func count(sent: Bool) {
        state.withLock { state in
            if sent { state.counters.chunksSent += 1 } else { state.counters.chunksReceived += 1 }
        }
    }
}
