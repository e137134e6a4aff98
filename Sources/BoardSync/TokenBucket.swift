/// A rate limit as a token bucket on the caller's clock (sans-IO: `now` comes in): it holds up
/// to `burst` tokens, refills at `rate` per second, and each admitted unit takes one. The one
/// limiter of the project: a session's live operations (`BoardHub.maxOperationsPerSecond`),
/// its presences (`SessionLimits.presencePerSecond`) and a web page's messages.
package struct TokenBucket: Sendable, Equatable {
    package let rate: Double
    package let burst: Double
    package private(set) var tokens: Double
    private var refilledAt: Double

    /// A full bucket at `now`.
    package init(rate: Double, burst: Double, now: Double) {
        self.rate = rate
        self.burst = burst
        tokens = burst
        refilledAt = now
    }

    /// Refills for the time since the last call, then takes `count` tokens if it has them.
    /// False (nothing taken) when it has fewer. A clock that steps back refills nothing.
    package mutating func take(_ count: Double = 1, now: Double) -> Bool {
        tokens = min(burst, tokens + rate * max(0, now - refilledAt))
        refilledAt = max(refilledAt, now)
        guard count <= tokens else { return false }
        tokens -= count
        return true
    }
}

/// Exponential backoff for redialing: `first`, doubling after each failure up to `max`, and
/// back to `first` once a connection proved it works (`reset`). The one backoff of the
/// project: a peer's dial targets (`SyncEndpoint.Options.reconnectDelay`) and the Redis links
/// (`RedisCluster`), and `LiveBoard`'s reconnects (reset only after `Sync.backoffResetAfter`
/// live). Jitter is the caller's (sans-IO: no randomness here).
package struct Backoff: Sendable, Equatable {
    package let first: Double
    package let max: Double
    /// The delay the next failure waits.
    package private(set) var current: Double

    package init(first: Double, max: Double) {
        self.first = first
        self.max = max
        current = first
    }

    /// The delay to wait after a failure; the one after it doubles (up to `max`).
    package mutating func next() -> Double {
        let delay = current
        current = Swift.min(current * 2, max)
        return delay
    }

    package mutating func reset() { current = first }
}
