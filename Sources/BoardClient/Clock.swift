import BoardNet
import Foundation

/// Where a `LiveBoard` gets its time: every deadline it keeps (backoff, keep-alives, timeouts,
/// `close(within:)`, `syncOnce(within:)`, presence throttling) is read from and slept on through
/// this. `SystemBoardClock` (the default) is the real one; BoardClientTesting's `TestClock` is
/// virtual time a test advances.
public protocol BoardClock: Sendable {
    /// Monotonic seconds (any origin; only differences matter).
    func now() -> Double
    /// The wall-clock time now (what `LiveStatus.State.offline`'s `retryAt` is told in, and the
    /// origin of the presence clock).
    func wallClock() -> Date
    /// Returns once `now()` has reached `deadline`; throws `CancellationError` as soon as the
    /// task is cancelled.
    func sleep(until deadline: Double) async throws
}

/// The real clock: the monotonic clock for deadlines, the system's wall clock for dates.
public struct SystemBoardClock: BoardClock {
    public init() {}

    public func now() -> Double { EventLoop.now() }

    public func wallClock() -> Date { Date() }

    public func sleep(until deadline: Double) async throws {
        let delay = max(0, deadline - now())
        try await Task.sleep(nanoseconds: UInt64(min(delay, 86_400) * 1e9) + 1)
    }
}

/// Where a `LiveBoard` draws its reconnect jitter (`Sync.firstDelay`: each backoff delay is
/// spread by a factor of 0.5 + `nextUnit()`). `SystemJitter` (the default) draws from the
/// system's generator; BoardClientTesting's `SeededJitter` from a seed.
public protocol BoardJitter: Sendable {
    /// A uniform value in [0, 1).
    func nextUnit() -> Double
}

/// Jitter from `SystemRandomNumberGenerator`.
public struct SystemJitter: BoardJitter {
    public init() {}

    public func nextUnit() -> Double {
        var generator = SystemRandomNumberGenerator()
        return Double.random(in: 0..<1, using: &generator)
    }
}
