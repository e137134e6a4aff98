import BoardNet
import Testing

/// `board.changed` timing: 2 s of quiet, at most one per 10 s per board, at least one per 10 s
/// while a board keeps changing.
@Suite struct WebhookDebounceTests {
    @Test func aBurstIsReportedOnceAfterItsQuietPeriod() {
        var debounce = WebhookDebounce(quiet: 2, interval: 10)
        #expect(debounce.due == nil)
        #expect(debounce.changed(at: 100) == 102)
        #expect(debounce.changed(at: 100.5) == 102.5)
        #expect(debounce.changed(at: 101) == 103)
        debounce.sent(at: 103)
        #expect(debounce.due == nil)
    }

    @Test func theNextOneWaitsForTheInterval() {
        var debounce = WebhookDebounce(quiet: 2, interval: 10)
        _ = debounce.changed(at: 0)
        debounce.sent(at: 2)
        // A change right after: quiet would say 5, the interval says 12.
        #expect(debounce.changed(at: 3) == 12)
        debounce.sent(at: 12)
        // Long after: the quiet period alone.
        #expect(debounce.changed(at: 100) == 102)
    }

    @Test func aBoardThatNeverRestsIsStillReportedEveryInterval() {
        var debounce = WebhookDebounce(quiet: 2, interval: 10)
        var now = 50.0
        var sent: [Double] = []
        // A change every half second for a minute (never 2 s of quiet): an event about every
        // 10 s (10 s after the first change that waited), never two within 10 s.
        while now < 110 {
            let due = debounce.changed(at: now)
            if due <= now { debounce.sent(at: now); sent.append(now) }
            now += 0.5
        }
        #expect(sent.first == 60, "\(sent)")
        #expect(sent.count >= 5, "\(sent)")
        for (earlier, later) in zip(sent, sent.dropFirst()) {
            #expect(later - earlier >= 10 && later - earlier <= 11, "at most one per 10 s, yet about every 10 s: \(sent)")
        }
    }
}
