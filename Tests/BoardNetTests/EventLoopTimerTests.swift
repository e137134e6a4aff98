import BoardNet
import Foundation
import Testing

/// The loop's timers (a heap since the load generator's 1,000 hosts on one loop): order,
/// cancellation, timers armed from timers, and `discardTimers`. Each test runs a loop on its
/// own thread (the test's), scheduling before `run()` and stopping from a timer; nothing here
/// asserts how fast anything is.
@Suite struct EventLoopTimerTests {
    /// Records what ran, on the loop thread only.
    final class Trace: @unchecked Sendable {
        var ran: [String] = []
    }

    @Test func dueTimersRunEarliestFirstAndEqualDelaysInTheOrderScheduled() throws {
        let loop = try EventLoop()
        let trace = Trace()
        loop.schedule(after: 0.030) { trace.ran.append("c") }
        loop.schedule(after: 0.010) { trace.ran.append("a") }
        loop.schedule(after: 0.020) { trace.ran.append("b1") }
        loop.schedule(after: 0.020) { trace.ran.append("b2") }
        loop.schedule(after: 0.020) { trace.ran.append("b3") }
        loop.schedule(after: 0) { trace.ran.append("now") }
        loop.schedule(after: 0.1) { loop.stop() }
        loop.run()
        #expect(trace.ran == ["now", "a", "b1", "b2", "b3", "c"])
        #expect(loop.pendingTimerCount == 0)
    }

    @Test func aCancelledTimerNeverRunsEvenWhenDueInTheSameTurnAsItsCanceller() throws {
        let loop = try EventLoop()
        let trace = Trace()
        let early = loop.schedule(after: 0.005) { trace.ran.append("early") }
        loop.cancelTimer(early)
        var victim = 0
        // Both are due long before the loop first looks (it sleeps in epoll until the first).
        loop.schedule(after: 0.001) {
            trace.ran.append("canceller")
            loop.cancelTimer(victim)
        }
        victim = loop.schedule(after: 0.002) { trace.ran.append("victim") }
        loop.cancelTimer(12_345)  // unknown: nothing happens
        loop.cancelTimer(early)   // twice: nothing more happens
        loop.schedule(after: 0.003) { trace.ran.append("survivor") }
        Thread.sleep(forTimeInterval: 0.01)  // every timer above is due at the first turn
        loop.schedule(after: 0.05) { loop.stop() }
        loop.run()
        #expect(trace.ran == ["canceller", "survivor"])
    }

    @Test func aTimerScheduledByATimerRunsOnALaterTurnAndCancellingARunTimerDoesNothing() throws {
        let loop = try EventLoop()
        let trace = Trace()
        var first = 0
        first = loop.schedule(after: 0) {
            trace.ran.append("first")
            loop.schedule(after: 0) { trace.ran.append("nested") }
            trace.ran.append("first done")
        }
        loop.schedule(after: 0.03) {
            loop.cancelTimer(first)  // already ran
            trace.ran.append("later")
            loop.stop()
        }
        loop.run()
        #expect(trace.ran == ["first", "first done", "nested", "later"])
    }

    @Test func discardTimersDropsEveryTaskAndWhatItHolds() throws {
        final class Held {}
        let loop = try EventLoop()
        weak var held: Held?
        do {
            let object = Held()
            held = object
            for delay in [10.0, 20, 30] { loop.schedule(after: delay) { _ = object } }
        }
        let id = loop.schedule(after: 40) {}
        #expect(held != nil, "the timers' tasks hold it")
        #expect(loop.pendingTimerCount == 4)
        loop.discardTimers()
        #expect(held == nil, "discarding the timers released their tasks")
        #expect(loop.pendingTimerCount == 0)
        loop.cancelTimer(id)  // after a discard: nothing happens
        // The loop still takes timers afterwards; their ids never repeat one handed out before.
        let trace = Trace()
        let next = loop.schedule(after: 0) { trace.ran.append("after discard") }
        #expect(next > id)
        loop.schedule(after: 0.02) { loop.stop() }
        loop.run()
        #expect(trace.ran == ["after discard"])
    }

    @Test func manyTimersWithCancellationsRunExactlyTheUncancelledInDeadlineOrder() throws {
        let loop = try EventLoop()
        let trace = Trace()
        var generator = SystemRandomNumberGenerator()
        var ids: [(id: Int, delay: Double, name: String)] = []
        for index in 0..<3_000 {
            // Delays in whole milliseconds, so many share one and their order is the scheduling order.
            let delay = Double(Int.random(in: 0...40, using: &generator)) / 1000
            let name = "t\(index)"
            ids.append((loop.schedule(after: delay) { trace.ran.append(name) }, delay, name))
        }
        var cancelled = Set<String>()
        for entry in ids where Bool.random(using: &generator) {
            loop.cancelTimer(entry.id)
            cancelled.insert(entry.name)
        }
        #expect(loop.pendingTimerCount == ids.count - cancelled.count)
        loop.schedule(after: 0.2) { loop.stop() }
        loop.run()
        // Scheduling took a while, so deadlines are delay + when each was scheduled: a later one
        // with the same delay is later still. Expected order: by delay, then by scheduling order.
        let expected = ids.enumerated()
            .filter { !cancelled.contains($0.element.name) }
            .sorted { ($0.element.delay, $0.offset) < ($1.element.delay, $1.offset) }
            .map(\.element.name)
        #expect(Set(trace.ran) == Set(expected), "exactly the uncancelled timers ran, once each")
        #expect(trace.ran.count == expected.count)
        // Within a delay the order is the scheduling order whatever else interleaves.
        let position = Dictionary(uniqueKeysWithValues: trace.ran.enumerated().map { ($1, $0) })
        for (a, b) in zip(expected, expected.dropFirst()) {
            let (da, db) = (ids[Int(a.dropFirst())!].delay, ids[Int(b.dropFirst())!].delay)
            if da == db { #expect(position[a]! < position[b]!, "\(a) before \(b)") }
        }
        #expect(loop.pendingTimerCount == 0)
    }
}
