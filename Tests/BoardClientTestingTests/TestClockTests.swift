import BoardClient
import BoardClientTesting
import BoardCRDT
import BoardModel
import BoardSync
import Foundation
import Synchronization
import Testing

/// LiveBoard on virtual time (`TestClock`, `SeededJitter`): exact schedules, minutes of them,
/// each test running in (real) milliseconds. Waits on real time are bounds, never assertions.
@Suite struct TestClockTests {
    /// The backoff a board's `Sync` describes: `first`, doubling to `maximum`, `reset` to `first`.
    struct Schedule {
        let first: Double, maximum: Double
        var current: Double
        init(first: Double, maximum: Double) { self.first = first; self.maximum = maximum; current = first }
        mutating func next() -> Double { defer { current = min(current * 2, maximum) }; return current }
        mutating func reset() { current = first }
    }

    /// What the board says while its server is down, checked against the exact time it went
    /// offline, its attempt, the delay drawn and the deadline it sleeps until.
    static func expectOffline(_ board: LiveBoard, _ clock: TestClock, attempt: Int, wait: Double, error: String,
                              sourceLocation: SourceLocation = #_sourceLocation) async throws {
        try await eventually("the board offline and waiting (attempt \(attempt))") {
            if case .offline = board.currentStatus.state { return clock.sleeperCount >= 1 }
            return false
        }
        let now = clock.now()
        guard case .offline(let retryAt, let seen, let lastError) = board.currentStatus.state else {
            Issue.record("not offline at \(now): \(board.currentStatus.state)", sourceLocation: sourceLocation)
            throw GaveUp(description: "offline")
        }
        #expect(seen == attempt, "attempt at \(now)", sourceLocation: sourceLocation)
        #expect(abs(retryAt.timeIntervalSince(clock.wallStart) - (now + wait)) < 1e-6,
                "retryAt \(retryAt.timeIntervalSince(clock.wallStart)) at \(now), expected \(now + wait)", sourceLocation: sourceLocation)
        #expect(lastError.contains(error), "\(lastError)", sourceLocation: sourceLocation)
        let deadline = try #require(clock.nextDeadline, sourceLocation: sourceLocation)
        #expect(abs(deadline - (now + wait)) < 1e-9, "sleeps until \(deadline), expected \(now + wait)", sourceLocation: sourceLocation)
    }

    @Test func theBackoffScheduleDoublesToItsMaximumWithSeededJitterAndResetsOnlyAfterALongLiveLink() async throws {
        let clock = TestClock()
        let seed: UInt64 = 2026
        let jitter = SeededJitter.values(seed: seed, count: 32)
        var drawn = 0
        let network = FaultTransport(wrapping: MemoryTransport(server: MemoryServer(clock: clock)), seed: 1, clock: clock)
        var sync = LiveBoard.Sync(server: "memory", board: "backoff")
        sync.firstDelay = 1
        sync.maximumDelay = 30
        sync.backoffResetAfter = 10
        let board = try LiveBoard.open(storage: .memory, sync: sync, transport: network, clock: clock, jitter: SeededJitter(seed: seed))
        // (No edit before the run: an edit signals the run loop, and a signal ends a backoff wait early.)
        var schedule = Schedule(first: 1, maximum: 30)
        network.partition()
        let run = Running(board)

        // The server is down: 1, 2, 4, 8, 16, 30, 30, 30 seconds, each times 0.5 + a seeded draw.
        for attempt in 1...8 {
            try await Self.expectOffline(board, clock, attempt: attempt, wait: schedule.next() * (0.5 + jitter[drawn]), error: "partitioned")
            drawn += 1
            if attempt < 8 { clock.advanceToNextDeadline() }
        }
        #expect(clock.now() > 60, "minutes of virtual time: \(clock.now())")
        #expect(network.counters.connectionsRefused == 8)

        // The server is back: the ninth attempt goes live and stays so for 10 s (the reset's bound).
        network.heal()
        clock.advanceToNextDeadline()
        try await eventually("the board to go live") { board.currentStatus.state == .live }
        #expect(board.currentStatus.unacknowledgedOperations == 0)
        let liveAt = clock.now()
        while clock.now() < liveAt + 10.5 {
            try await bounded("the live board to sleep") { try await clock.sleepers(atLeast: 1) }
            clock.advance(by: 1)
        }
        #expect(board.currentStatus.state == .live, "keep-alives kept it live on virtual time")
        // Cut after a long live link: the backoff starts again from the first delay (attempt 0).
        #expect(network.partition() == 1)
        schedule.reset()
        try await Self.expectOffline(board, clock, attempt: 0, wait: schedule.next() * (0.5 + jitter[drawn]), error: "partitioned")
        drawn += 1
        clock.advanceToNextDeadline()
        try await Self.expectOffline(board, clock, attempt: 1, wait: schedule.next() * (0.5 + jitter[drawn]), error: "partitioned")
        drawn += 1

        // A link that goes live and is cut at once does not reset it: the delays keep doubling.
        network.heal()
        clock.advanceToNextDeadline()
        try await eventually("the board to go live again") { board.currentStatus.state == .live }
        #expect(network.killConnections() == 1)
        try await Self.expectOffline(board, clock, attempt: 2, wait: schedule.next() * (0.5 + jitter[drawn]), error: "killed")

        run.task.cancel()
        try await expectReturned(run)
        #expect(board.currentStatus.state == .closed)
        clock.advance(by: 3600)  // what is left asleep (timers of cancelled attempts) ends
    }

    @Test func closeWithinItsBoundReturnsWhenTheVirtualBoundPasses() async throws {
        let clock = TestClock()
        var sync = LiveBoard.Sync(server: "nobody-answers", board: "bound")
        sync.handshakeTimeout = 15
        // A server that accepts and never answers HELLO: the board dials, waits, redials.
        let board = try LiveBoard.open(storage: .memory, sync: sync, transport: TestTransport(.sink), clock: clock,
                                       jitter: SeededJitter(seed: 3))
        try await board.edit { try $0.beginStroke(color: .black, width: 2, points: [CodablePoint(x: 5, y: 5)]) }
        let run = Running(board)
        try await bounded("the board to wait for HELLO") { try await clock.sleepers(atLeast: 1) }
        let closing = Task { await board.close(within: 90) }
        // Advance from deadline to deadline (HELLO timeouts, backoffs, the bound) until close returns.
        // Each step waits for the board to sleep again or to close, whichever comes first: a
        // board past its bound may be closing (no sleeper) when it is looked at, and under load
        // it used to be looked at just then and waited for a sleeper that never came.
        var steps = 0
        while try await bounded("the board to sleep again or close", {
            while true {
                if board.currentStatus.state == .closed { return false }
                if clock.sleeperCount >= 1 { return true }
                try await Task.sleep(nanoseconds: 1_000_000)
            }
        }) {
            clock.advanceToNextDeadline()
            steps += 1
            if steps > 1000 { Issue.record("close did not return after 1000 deadlines"); break }
        }
        let report = await closing.value
        #expect(report == CloseReport(allAcknowledged: false, unacknowledgedOperations: 1))
        #expect(clock.now() >= 90 && clock.now() <= 90 + LiveBoard.abandonGrace, "closed at \(clock.now())")
        try await expectReturned(run)
        clock.advance(by: 3600)
    }

    @Test func syncOnceTimesOutAtItsVirtualBound() async throws {
        let clock = TestClock()
        var sync = LiveBoard.Sync(server: "nobody-answers", board: "once")
        sync.handshakeTimeout = 600
        sync.idleTimeout = 600
        let board = try LiveBoard.open(storage: .memory, sync: sync, transport: TestTransport(.sink), clock: clock)
        let syncing = Task { try await board.syncOnce(within: 30) }
        var steps = 0
        // As in the close test: wait for a sleeper or the end, whichever comes first.
        while try await bounded("the sync to sleep again or end", {
            while true {
                if board.currentStatus.state == .idle, clock.now() > 0 { return false }
                if clock.sleeperCount >= 1 { return true }
                try await Task.sleep(nanoseconds: 1_000_000)
            }
        }) {
            clock.advanceToNextDeadline()
            steps += 1
            if steps > 1000 { Issue.record("syncOnce did not end after 1000 deadlines"); break }
        }
        let error = await thrown { _ = try await syncing.value }
        #expect(error as? SyncOnceError == .timedOut(30, waitingFor: "the server's answer to the handshake"), "\(String(describing: error))")
        #expect(clock.now() >= 30 && clock.now() <= 30 + LiveBoard.abandonGrace, "gave up at \(clock.now())")
        _ = await board.close()
        clock.advance(by: 3600)
    }

    @Test func presenceIsThrottledToItsIntervalAndRefreshedAtHalfItsLifetime() async throws {
        let clock = TestClock()
        let server = MemoryServer(clock: clock)
        var sync = LiveBoard.Sync(server: "memory", board: "presence")
        sync.presenceInterval = 1
        let alice = try LiveBoard.open(storage: .memory, sync: sync, identity: LiveBoard.Identity(name: "Alice"),
                                       transport: MemoryTransport(server: server), clock: clock)
        let bob = try LiveBoard.open(storage: .memory, sync: sync, transport: MemoryTransport(server: server), clock: clock)
        let runs = [Running(alice), Running(bob)]
        try await eventually("both boards live") { alice.currentStatus.isLive && bob.currentStatus.isLive }
        func pointer(_ x: Int64) -> GridPoint { GridPoint(x: x, y: 1) }

        // The first update goes at once (time stands still)...
        let sentAt = clock.now()
        await alice.updatePresence(pointer: pointer(1))
        try await eventually("bob to see alice's first pointer") { bob.currentPeers.first?.pointer == pointer(1) }
        // ... the next ones wait for the interval, the latest winning: alice's board sleeps until then.
        for x in 2...10 { await alice.updatePresence(pointer: pointer(Int64(x))) }
        try await eventually("alice to sleep until the interval passes") { clock.deadlines.contains(sentAt + 1) }
        #expect(bob.currentPeers.first?.pointer == pointer(1))
        clock.advance(to: sentAt + 1)
        try await eventually("bob to see alice's latest pointer") { bob.currentPeers.first?.pointer == pointer(10) }
        // Unchanged, it is said again half way to its expiry (Presence.defaultTTL): bob still
        // sees it three lifetimes later (unrefreshed, it would expire and never come back).
        while clock.now() < sentAt + 1 + 3 * Presence.defaultTTL {
            try await bounded("both boards asleep") { try await clock.sleepers(atLeast: 2) }
            clock.advance(by: 0.5)
        }
        try await eventually("bob to see alice's presence, refreshed") { bob.currentPeers.first?.pointer == pointer(10) }
        #expect(alice.currentStatus.isLive && bob.currentStatus.isLive)

        for board in [alice, bob] { _ = await board.close(within: 0) }
        for run in runs { try await expectReturned(run) }
        clock.advance(by: 3600)
    }

    @Test func theClockWakesSleepersInDeadlineOrderAtTheirDeadlines() async throws {
        let clock = TestClock()
        let woke = WakeLog()
        let sleepers = [3.0, 1.0, 2.0, 2.0].enumerated().map { index, deadline in
            Task {
                try await clock.sleep(until: deadline)
                woke.append(index, at: clock.now())
            }
        }
        try await bounded("four sleepers") { try await clock.sleepers(atLeast: 4) }
        #expect(clock.deadlines == [1, 2, 2, 3])
        clock.advance(by: 2.5)
        try await eventually("three to wake") { woke.entries.count == 3 }
        #expect(Set(woke.entries.map(\.index)) == [1, 2, 3] && clock.now() == 2.5 && clock.deadlines == [3])
        #expect(clock.advanceToNextDeadline() == 3)
        for sleeper in sleepers { try await sleeper.value }
        #expect(woke.entries.last?.index == 0 && clock.wokenCount == 4 && clock.sleeperCount == 0)
        // A cancelled sleeper leaves at once; a deadline already passed does not sleep.
        let cancelled = Task { try await clock.sleep(until: 100) }
        try await bounded("a sleeper") { try await clock.sleepers(atLeast: 1) }
        cancelled.cancel()
        #expect(await thrown { try await cancelled.value } is CancellationError)
        #expect(clock.sleeperCount == 0)
        try await clock.sleep(until: 1)
        #expect(SeededJitter(seed: 9).nextUnit() == SeededJitter.values(seed: 9, count: 1)[0])
    }
}

func expectReturned(_ run: Running, sourceLocation: SourceLocation = #_sourceLocation) async throws {
    guard case .returned = try await run.ended() else {
        Issue.record("run() threw: \(String(describing: run.outcome))", sourceLocation: sourceLocation)
        return
    }
}

final class WakeLog: Sendable {
    private let state = Mutex<[(index: Int, at: Double)]>([])
    func append(_ index: Int, at time: Double) { state.withLock { $0.append((index, time)) } }
    var entries: [(index: Int, at: Double)] { state.withLock { $0 } }
}

/// Runs `body`, giving up (a recorded issue) after `seconds` of real time: a bound on waiting
/// for the boards' tasks, never an assertion about speed.
func bounded<T: Sendable>(_ what: String, seconds: Double = 30, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    let result = try await withThrowingTaskGroup(of: T?.self) { group -> T? in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
            return nil
        }
        let first = try await group.next()!
        group.cancelAll()
        return first
    }
    guard let result else {
        Issue.record("gave up after \(seconds) s waiting for \(what)")
        throw GaveUp(description: what)
    }
    return result
}
