import BoardClient
import Foundation
import Synchronization

/// Virtual time for `LiveBoard`s (and a `MemoryServer`, a `FaultTransport`) in tests: nothing
/// moves until the test says so, so a test of minutes of backoff, timeouts and keep-alives runs
/// in milliseconds and sees exact times.
///
/// ```swift
/// let clock = TestClock()
/// let board = try LiveBoard.open(storage: .memory, sync: sync, transport: transport,
///                                clock: clock, jitter: SeededJitter(seed: 7))
/// let run = Task { try await board.run() }
/// await clock.sleepers(atLeast: 1)      // the board waits for its next attempt
/// clock.advanceToNextDeadline()         // ... which is due now
/// ```
///
/// `now()` starts at 0 and moves only by `advance(by:)`, `advance(to:)` and
/// `advanceToNextDeadline()`: each wakes the sleepers whose deadline it reaches, earliest first,
/// with the clock set to that sleeper's deadline as it wakes (sleepers due at the same time wake
/// in the order they went to sleep), then leaves the clock at the target. Waking a sleeper only
/// resumes its task: what that task does next happens concurrently, as it would after a real
/// sleep; `sleepers(atLeast:)` waits until the tasks being tested have gone back to sleep.
///
/// `wallClock()` is `wallStart` plus `now()` (what `LiveStatus`'s `retryAt` is told in).
/// Thread-safe; share one clock among every board, server and transport of a test.
public final class TestClock: BoardClock, Sendable {
    /// The wall-clock date at virtual time 0 (default: 2030-01-01 00:00:00 UTC).
    public let wallStart: Date

    private struct Sleeper {
        let id: Int
        let deadline: Double
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct Watcher {
        let id: Int
        let count: Int
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now = 0.0
        var nextID = 0
        var sleepers: [Sleeper] = []
        var watchers: [Watcher] = []
        var woken = 0
    }
    private let state = Mutex(State())

    public init(wallStart: Date = Date(timeIntervalSince1970: 1_893_456_000)) {
        self.wallStart = wallStart
    }

    // MARK: BoardClock

    public func now() -> Double { state.withLock { $0.now } }

    public func wallClock() -> Date { wallStart.addingTimeInterval(now()) }

    /// Returns once the test has advanced the clock to `deadline` (at once when it is there
    /// already); throws `CancellationError` when the task is cancelled.
    public func sleep(until deadline: Double) async throws {
        let id = state.withLock { state -> Int in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let (now, watchers) = state.withLock { state -> (Result<Void, any Error>?, [Watcher]) in
                    if Task.isCancelled { return (.failure(CancellationError()), []) }
                    if deadline <= state.now { return (.success(()), []) }
                    state.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: continuation))
                    return (nil, Self.satisfied(&state))
                }
                if let now { continuation.resume(with: now) }
                for watcher in watchers { watcher.continuation.resume() }
            }
        } onCancel: {
            let sleeper = state.withLock { state -> Sleeper? in
                guard let index = state.sleepers.firstIndex(where: { $0.id == id }) else { return nil }
                return state.sleepers.remove(at: index)
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    // MARK: The test's controls

    /// Tasks asleep on this clock now.
    public var sleeperCount: Int { state.withLock { $0.sleepers.count } }

    /// The earliest deadline a task sleeps until (nil: nobody sleeps).
    public var nextDeadline: Double? { state.withLock { $0.sleepers.map(\.deadline).min() } }

    /// Every deadline slept until now, earliest first.
    public var deadlines: [Double] { state.withLock { $0.sleepers.map(\.deadline).sorted() } }

    /// Sleepers woken so far (by advancing the clock; cancelled ones are not counted).
    public var wokenCount: Int { state.withLock { $0.woken } }

    /// Waits until at least `count` tasks sleep on this clock (at once when they do already).
    /// Throws `CancellationError` when the waiting task is cancelled (bound the wait in a test).
    public func sleepers(atLeast count: Int) async throws {
        let id = state.withLock { state -> Int in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let now = state.withLock { state -> Result<Void, any Error>? in
                    if Task.isCancelled { return .failure(CancellationError()) }
                    if state.sleepers.count >= count { return .success(()) }
                    state.watchers.append(Watcher(id: id, count: count, continuation: continuation))
                    return nil
                }
                if let now { continuation.resume(with: now) }
            }
        } onCancel: {
            let watcher = state.withLock { state -> Watcher? in
                guard let index = state.watchers.firstIndex(where: { $0.id == id }) else { return nil }
                return state.watchers.remove(at: index)
            }
            watcher?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves the clock `seconds` forward (negative: not at all), waking every sleeper due by then.
    public func advance(by seconds: Double) {
        let target = state.withLock { $0.now } + max(0, seconds)
        advance(to: target)
    }

    /// Moves the clock to `time` (not back: an earlier time leaves it where it is), waking every
    /// sleeper due by then, earliest first, the clock at each one's deadline as it wakes.
    public func advance(to time: Double) {
        while true {
            let next = state.withLock { state -> Sleeper? in
                let due = state.sleepers.enumerated().filter { $0.element.deadline <= time }
                guard let first = due.min(by: { ($0.element.deadline, $0.offset) < ($1.element.deadline, $1.offset) }) else {
                    state.now = max(state.now, time)
                    return nil
                }
                state.sleepers.remove(at: first.offset)
                state.now = max(state.now, first.element.deadline)
                state.woken += 1
                return first.element
            }
            guard let next else { return }
            next.continuation.resume()
        }
    }

    /// Moves the clock to the earliest deadline anyone sleeps until and wakes those due then;
    /// returns that time (nil, and the clock unmoved, when nobody sleeps).
    @discardableResult
    public func advanceToNextDeadline() -> Double? {
        guard let next = nextDeadline else { return nil }
        advance(to: next)
        return next
    }

    /// The watchers `state`'s sleepers now satisfy, removed.
    private static func satisfied(_ state: inout State) -> [Watcher] {
        let count = state.sleepers.count
        let ready = state.watchers.filter { $0.count <= count }
        state.watchers.removeAll { $0.count <= count }
        return ready
    }
}

/// Backoff jitter drawn from a seed (`SplitMix64`): the same seed gives the same delays, so a
/// test can compute the exact schedule (`LiveBoard.open`'s `jitter`). Thread-safe; draws are
/// taken in the order the boards ask, so give each board its own for a schedule per board.
public final class SeededJitter: BoardJitter, Sendable {
    public let seed: UInt64
    private let generator: Mutex<SplitMix64>

    public init(seed: UInt64) {
        self.seed = seed
        generator = Mutex(SplitMix64(seed: seed))
    }

    public func nextUnit() -> Double { generator.withLock { $0.nextUnit() } }

    /// The first `count` values a fresh `SeededJitter(seed:)` draws (what a test expects).
    public static func values(seed: UInt64, count: Int) -> [Double] {
        var generator = SplitMix64(seed: seed)
        return (0..<count).map { _ in generator.nextUnit() }
    }
}
