import BoardClient
import Foundation
import Synchronization

/// One connection through a `FaultTransport`: the client's side of it (`send`, `receive`), and
/// two pumps between it and the wrapped connection, one per direction, each through a
/// `DelayLine` that holds every chunk until its delivery time.
final class FaultLink: BoardConnection, Sendable {
    enum Direction: UInt64 { case send = 0, receive = 1 }

    let number: Int
    private let transport: FaultTransport
    /// Client to server, and server to client.
    private let outbound: DelayLine
    private let inbound: DelayLine
    private let sendRandom: Mutex<SplitMix64>
    private let receiveRandom: Mutex<SplitMix64>
    private let killed = Mutex(false)

    init(transport: FaultTransport, number: Int, seed: UInt64) {
        self.transport = transport
        self.number = number
        outbound = DelayLine(clock: transport.clock)
        inbound = DelayLine(clock: transport.clock)
        sendRandom = Mutex(SplitMix64(seed: Self.seed(seed, number, .send)))
        receiveRandom = Mutex(SplitMix64(seed: Self.seed(seed, number, .receive)))
    }

    /// The seed of one direction of connection `number`.
    static func seed(_ seed: UInt64, _ number: Int, _ direction: Direction) -> UInt64 {
        SplitMix64.mix(seed ^ SplitMix64.mix(UInt64(number) << 1 | direction.rawValue &+ 0x9E37_79B9_7F4A_7C15))
    }

    /// The fault for the next chunk in `direction`: killed, or the delay before it is delivered.
    /// Two draws per chunk, whatever the knobs, so a schedule does not shift when they change.
    private func decide(_ direction: Direction) -> (kill: Bool, delay: Double) {
        let faults = transport.faults
        func draw(_ random: inout SplitMix64) -> (Double, Double) { (random.nextUnit(), random.nextUnit()) }
        let (drop, spread) = direction == .send ? sendRandom.withLock { draw(&$0) } : receiveRandom.withLock { draw(&$0) }
        return (drop < faults.dropProbability, max(0, faults.latency) + max(0, faults.jitter) * spread)
    }

    /// Marks the link dead and ends both directions; false when it already was.
    func kill(_ reason: String) -> Bool {
        let first = killed.withLock { killed in
            defer { killed = true }
            return !killed
        }
        guard first else { return false }
        outbound.kill(reason)
        inbound.kill(reason)
        return true
    }

    // MARK: The client's side

    func send(_ bytes: [UInt8]) async throws {
        try outbound.checkAlive()
        let (kill, delay) = decide(.send)
        if kill {
            transport.cut(self, "FaultTransport: the link dropped (connection \(number))", drop: true)
            try outbound.checkAlive()
        }
        try await outbound.put(.bytes(bytes), delay: delay)
    }

    func receive() async throws -> [UInt8]? {
        switch try await inbound.take() {
        case .bytes(let bytes):
            transport.count(sent: false)
            return bytes
        case .end:
            return nil
        case .failed(let reason):
            throw TransportError(reason)
        }
    }

    // MARK: The pumps

    private enum Pump { case outbound, inbound }

    /// Runs `body` with this link while the pumps move chunks between it and `connection`;
    /// then delivers what was sent (unless the link died) and stops the pumps.
    func run<T: Sendable>(over connection: any BoardConnection, _ body: @Sendable (any BoardConnection) async throws -> T) async throws -> T {
        let result = await withTaskGroup(of: Pump.self) { group -> Result<T, any Error> in
            group.addTask { await self.pumpOutbound(connection); return .outbound }
            group.addTask { await self.pumpInbound(connection); return .inbound }
            let result: Result<T, any Error>
            do {
                result = .success(try await body(self))
            } catch {
                result = .failure(error)
            }
            // The closing flush: what the body sent goes out (after its latency) before the
            // wrapped connection closes. Cancellation (a closing board's bound) cuts it short.
            outbound.finish()
            while let pump = await group.next(), pump != .outbound {}
            group.cancelAll()
            return result
        }
        return try result.get()
    }

    private func pumpOutbound(_ connection: any BoardConnection) async {
        do {
            while case .bytes(let bytes) = try await outbound.take() {
                try await connection.send(bytes)
                transport.count(sent: true)
            }
        } catch is CancellationError {
        } catch {
            // The wrapped connection failed (or the link was killed: then this changes
            // nothing): the client's next send says so.
            outbound.kill("\(error)")
        }
    }

    private func pumpInbound(_ connection: any BoardConnection) async {
        do {
            while let bytes = try await connection.receive() {
                let (kill, delay) = decide(.receive)
                if kill {
                    transport.cut(self, "FaultTransport: the link dropped (connection \(number))", drop: true)
                    return
                }
                try await inbound.put(.bytes(bytes), delay: delay)
            }
            try await inbound.put(.end, delay: 0)
        } catch is CancellationError {
        } catch {
            try? await inbound.put(.failed("\(error)"), delay: 0)
        }
    }
}

/// Chunks in order, each held until its delivery time (never before the one ahead of it);
/// one writer and one reader at a time. Bounded: a writer waits while a mebibyte is queued.
final class DelayLine: Sendable {
    enum Item: Sendable {
        case bytes([UInt8])
        case end
        case failed(String)
    }

    static let capacity = 1 << 20

    private struct State {
        var queue: [(due: Double, item: Item)] = []
        var head = 0
        var queuedBytes = 0
        var lastDue = -Double.infinity
        var finished = false
        var killed: String?
        var nextWaiter = 0
        var waiters: [Int: CheckedContinuation<Void, any Error>] = [:]
    }
    private let state = Mutex(State())
    /// The transport's clock: delivery times are read and slept on through it.
    private let clock: any BoardClock

    init(clock: any BoardClock = SystemBoardClock()) {
        self.clock = clock
    }

    func checkAlive() throws {
        if let reason = state.withLock({ $0.killed }) { throw TransportError(reason) }
    }

    /// Queues `item` to be delivered `delay` seconds from now (or after the item ahead of it).
    func put(_ item: Item, delay: Double) async throws {
        let size: Int
        if case .bytes(let bytes) = item { size = bytes.count } else { size = 0 }
        while true {
            let done = try state.withLock { state -> Bool in
                if let reason = state.killed { throw TransportError(reason) }
                guard state.queuedBytes == 0 || state.queuedBytes + size <= Self.capacity else { return false }
                let due = max(state.lastDue, clock.now() + delay)
                state.lastDue = due
                state.queue.append((due, item))
                state.queuedBytes += size
                return true
            }
            if done { break }
            try await wait { $0.killed != nil || $0.queuedBytes + size <= Self.capacity }
        }
        notify()
    }

    /// The writer is done: the reader gets `.end` after what is queued.
    func finish() {
        let queued = state.withLock { state -> Bool in
            guard !state.finished, state.killed == nil else { return false }
            state.finished = true
            state.queue.append((state.lastDue, .end))
            return true
        }
        if queued { notify() }
    }

    /// Ends the line now: what is queued is lost, the reader and the writer throw `reason`.
    func kill(_ reason: String) {
        state.withLock { state in
            guard state.killed == nil else { return }
            state.killed = reason
            state.queue = []
            state.head = 0
            state.queuedBytes = 0
        }
        notify()
    }

    /// The next item, once its time has come.
    func take() async throws -> Item {
        while true {
            let next = try state.withLock { state -> (due: Double, item: Item)? in
                if let reason = state.killed { throw TransportError(reason) }
                return state.head < state.queue.count ? state.queue[state.head] : nil
            }
            guard let (due, item) = next else {
                try await wait { $0.killed != nil || $0.head < $0.queue.count }
                continue
            }
            if due > clock.now() {
                try await clock.sleep(until: due)
                continue
            }
            try state.withLock { state in
                if let reason = state.killed { throw TransportError(reason) }
                state.head += 1
                if case .bytes(let bytes) = item { state.queuedBytes -= bytes.count }
                if state.head > 64 && state.head * 2 > state.queue.count {
                    state.queue.removeFirst(state.head)
                    state.head = 0
                }
            }
            notify()
            return item
        }
    }

    /// Waits until `ready` holds (checked under the lock, then after every change that
    /// `notify` reports); throws `CancellationError` when the task is cancelled.
    private func wait(until ready: (State) -> Bool) async throws {
        do {
            let id = state.withLock { state -> Int in
                state.nextWaiter += 1
                return state.nextWaiter
            }
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                    let now: Result<Void, any Error>? = state.withLock { state in
                        if Task.isCancelled { return .failure(CancellationError()) }
                        if ready(state) { return .success(()) }
                        state.waiters[id] = continuation
                        return nil
                    }
                    if let now { continuation.resume(with: now) }
                }
            } onCancel: {
                let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
                waiter?.resume(throwing: CancellationError())
            }
        }
    }

    private func notify() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }
}
