import BoardSync
import Testing

/// The one rate limiter and the one backoff every layer uses.
@Suite struct RateAndBackoffTests {
    @Test func aBucketAdmitsItsBurstThenItsRateAndNeverMoreThanItsBurst() {
        var bucket = TokenBucket(rate: 10, burst: 20, now: 100)
        func take(_ count: Double = 1, at now: Double) -> Bool { bucket.take(count, now: now) }
        var admitted = 0
        for _ in 0..<20 where take(at: 100) { admitted += 1 }
        #expect(admitted == 20, "a full burst at once")
        #expect(!take(at: 100), "then nothing until it refills")
        #expect(!take(at: 100.05), "half a token is not one")
        // A fifth of a second later it holds two and a half: two are admitted, not three.
        #expect(take(at: 100.25))
        #expect(take(at: 100.25))
        #expect(!take(at: 100.25))
        // An hour idle refills to the burst, not to 36,000.
        #expect(take(20, at: 3_700))
        #expect(!take(at: 3_700))
        // A count larger than the burst is never admitted, and takes nothing.
        var fresh = TokenBucket(rate: 1, burst: 5, now: 0)
        let tooMany = fresh.take(6, now: 0)
        #expect(!tooMany)
        #expect(fresh.tokens == 5)
    }

    @Test func aClockThatStepsBackRefillsNothing() {
        var bucket = TokenBucket(rate: 1, burst: 2, now: 50)
        func take(_ count: Double = 1, at now: Double) -> Bool { bucket.take(count, now: now) }
        #expect(take(2, at: 50))
        #expect(!take(at: 10), "back in time: no tokens appear")
        #expect(!take(at: 50.5), "and the refill still counts from 50, not from 10")
        #expect(take(at: 51))
    }

    @Test func aBackoffDoublesToItsCapAndStartsOverWhenReset() {
        var backoff = Backoff(first: 0.2, max: 5)
        var delays: [Double] = []
        for _ in 0..<7 { delays.append(backoff.next()) }
        #expect(delays == [0.2, 0.4, 0.8, 1.6, 3.2, 5, 5])
        backoff.reset()
        let again = backoff.next()
        #expect(again == 0.2)
        #expect(backoff.current == 0.4)
    }
}
