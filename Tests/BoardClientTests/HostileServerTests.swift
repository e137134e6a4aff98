import BoardClient
import BoardCRDT
import BoardModel
import BoardNet
import BoardStore
import BoardSync
import Foundation
import Synchronization
import Testing

/// Issue 25's attacker's review of `LiveBoard`: what a hostile server (or a hung credentials
/// provider) could make the client hold, and the bounds that now hold instead. Real loopback
/// sockets throughout; the bounds asserted are bounds on hangs, never performance.
@Suite(.serialized) struct HostileServerTests {
    /// A server that answers HELLO, asks for an 8 MiB image and never reads (its receive buffer
    /// is 4 KiB; the transport's high-water mark 1 MiB): the upload fills the socket buffers and
    /// `send` waits. `close(within:)` still ends `run()` in time and frees the package lock, and
    /// so does cancelling `run()` (a memory board: the same upload without a second package).
    @Test func aServerThatStopsReadingAnUploadCannotHoldCloseOrCancellation() async throws {
        let image = await offPool { incompressibleImage(bytes: 8 << 20, seed: 25_001) }
        let server = try HostileServer(.handshakeThenStopReading(wants: [AssetHash.of(image)]))
        defer { server.stop() }
        let dir = TempDirectory()
        let path = dir.path + "/upload.boardpkg"
        let sync = LiveBoard.Sync(server: server.address, board: "upload")

        let board = try LiveBoard.open(storage: .package(path: path), sync: sync)
        try await board.edit { try $0.addSticker(imagePNG: image, at: CodablePoint(x: 10, y: 10)) }
        let run = Running(board)
        try await eventually("the board to be past the handshake") { board.currentStatus.state == .catchingUp }
        try await Task.sleep(nanoseconds: 500_000_000)  // the upload fills the buffers meanwhile
        let report = try await finishes("close(within: 1) with a stalled upload", within: 6) { await board.close(within: 1) }
        #expect(!report.allAcknowledged)
        _ = try await run.ended(within: 5)
        _ = try LiveBoard.open(storage: .package(path: path))  // the lock is free

        let again = try LiveBoard.open(storage: .memory, sync: sync)
        try await again.edit { try $0.addSticker(imagePNG: image, at: CodablePoint(x: 10, y: 10)) }
        let second = Running(again)
        try await eventually("the second board to be past the handshake") { again.currentStatus.state == .catchingUp }
        try await Task.sleep(nanoseconds: 500_000_000)
        second.task.cancel()
        _ = try await second.ended(within: 5)
    }

    /// A credentials provider that never returns (and ignores cancellation): close and
    /// cancellation leave it behind.
    @Test func aHungCredentialsProviderCannotHoldCloseOrCancellation() async throws {
        let dir = TempDirectory()
        let path = dir.path + "/creds.boardpkg"
        let gate = Gate()
        defer { gate.open() }
        let credentials = LiveBoard.Credentials.provider {
            await gate.wait()  // deaf to cancellation
            return "late"
        }
        let server = try HostileServer(.silent)
        defer { server.stop() }
        let sync = LiveBoard.Sync(server: server.address, board: "creds")

        let board = try LiveBoard.open(storage: .package(path: path), sync: sync, credentials: credentials)
        try await board.edit { try $0.beginStroke(color: .black, width: 2, points: line(10)) }
        let run = Running(board)
        try await eventually("the board to be connecting") { board.currentStatus.state == .connecting(attempt: 1) }
        let report = try await finishes("close(within: 0.5) with a hung provider", within: 5) { await board.close(within: 0.5) }
        #expect(report == CloseReport(allAcknowledged: false, unacknowledgedOperations: 1))
        _ = try await run.ended(within: 5)

        let again = try LiveBoard.open(storage: .package(path: path), sync: sync, credentials: credentials)
        let second = Running(again)
        try await eventually("the reopened board to be connecting") { again.currentStatus.state == .connecting(attempt: 1) }
        second.task.cancel()
        _ = try await second.ended(within: 5)
        _ = try LiveBoard.open(storage: .package(path: path))
        #expect(server.accepted == 0, "no attempt got past the credentials")
    }

    /// A server that accepts and never says HELLO: the dialer gives the attempt up after
    /// `handshakeTimeout` (keep-alives do not extend it), goes offline and dials again.
    @Test func aServerThatNeverAnswersHelloIsGivenUp() async throws {
        let server = try HostileServer(.silent)
        defer { server.stop() }
        var sync = LiveBoard.Sync(server: server.address, board: "mute")
        sync.handshakeTimeout = 1
        sync.idleTimeout = 120  // not what ends it
        let board = try LiveBoard.open(storage: .memory, sync: sync)
        let run = Running(board)
        let offline = try await first("the board to give the handshake up", of: board.status, within: 15) {
            if case .offline = $0.state { return true } else { return false }
        }
        if case .offline(_, _, let error) = offline.state { #expect(error.contains("HELLO"), "\(error)") }
        try await eventually("a second attempt", within: 15) { server.accepted >= 2 }
        _ = try await finishes("close", within: 5) { await board.close(within: 0) }
        _ = try await run.ended()
    }

    /// A server that completes the handshake (the board goes live) and drops at once, every
    /// time: the backoff keeps growing (it resets only after `backoffResetAfter` seconds live).
    /// With `backoffResetAfter` 0 (the old behaviour) the attempt count falls back to 0 after
    /// every session, which shows the sessions did go live.
    @Test func aServerThatDropsEveryLiveSessionAtOnceIsRedialledEverMoreSlowly() async throws {
        func offlineStatuses(backoffResetAfter: Double?) async throws -> [(attempt: Int, wait: Double)] {
            let server = try HostileServer(.handshakeThenDrop)
            defer { server.stop() }
            var sync = LiveBoard.Sync(server: server.address, board: "flaky")
            if let backoffResetAfter { sync.backoffResetAfter = backoffResetAfter }
            let board = try LiveBoard.open(storage: .memory, sync: sync)
            let seen = Mutex<[(attempt: Int, wait: Double)]>([])
            let watcher = Task {
                for await status in board.status {
                    if case .offline(let retryAt, let attempt, _) = status.state {
                        seen.withLock { $0.append((attempt, retryAt.timeIntervalSinceNow)) }
                    }
                }
            }
            let run = Running(board)
            try await eventually("five sessions", within: 30) { server.accepted >= 5 && seen.withLock { $0.count } >= 4 }
            _ = await board.close(within: 0)
            _ = try await run.ended()
            await watcher.value
            return seen.withLock { $0 }
        }
        let old = try await offlineStatuses(backoffResetAfter: 0)
        #expect(old.allSatisfy { $0.attempt == 0 }, "every session went live and reset the count: \(old.map(\.attempt))")

        let offline = try await offlineStatuses(backoffResetAfter: nil)
        // The attempt count goes on rising and the scheduled waits grow past the first delay's
        // jitter range (0.1-0.3 s).
        #expect(offline.map(\.attempt).max() ?? 0 >= 4, "attempts \(offline.map(\.attempt))")
        #expect(offline.map(\.wait).max() ?? 0 > 0.5, "waits \(offline.map(\.wait))")
    }

    /// A package edited offline and closed, then opened again and closed without ever reaching a
    /// server: its edit was never acknowledged, and the report says so (nothing persisted claims
    /// otherwise). Once a server has it, the report says acknowledged.
    @Test func aRelaunchThatNeverConnectedDoesNotClaimAcknowledgement() async throws {
        let dir = TempDirectory()
        let path = dir.path + "/relaunch.boardpkg"
        let first = try LiveBoard.open(storage: .package(path: path))
        try await first.edit { try $0.beginStroke(color: .black, width: 2, points: line(10)) }
        #expect(await first.close() == CloseReport(allAcknowledged: false, unacknowledgedOperations: 1))

        let relaunched = try LiveBoard.open(storage: .package(path: path))
        #expect(relaunched.currentStatus.unacknowledgedOperations == 1)
        #expect(await relaunched.close() == CloseReport(allAcknowledged: false, unacknowledgedOperations: 1))

        let unreachable = try TCPTransportTests.closedPort()
        let offline = try LiveBoard.open(storage: .package(path: path), sync: .init(server: "127.0.0.1:\(unreachable)", board: "relaunch"))
        let offlineRun = Running(offline)
        #expect(await offline.close(within: 0.3) == CloseReport(allAcknowledged: false, unacknowledgedOperations: 1))
        _ = try await offlineRun.ended()

        let server = try LocalSyncServer(dataDirectory: dir.path + "/server")
        let online = try LiveBoard.open(storage: .package(path: path), sync: .init(server: server.address, board: "relaunch"))
        let onlineRun = Running(online)
        try await live(online, "the board on a real server")
        try await eventually("the edit to be acknowledged") { online.currentStatus.unacknowledgedOperations == 0 }
        #expect(await online.close() == CloseReport(allAcknowledged: true, unacknowledgedOperations: 0))
        _ = try await onlineRun.ended()
        await server.stop()
    }

    /// A server holding more or larger images than this board allows (`Sync.maxImages`,
    /// `Sync.maxImageBytes`): the run stops with the limit named, and the board holds no more
    /// than the limit.
    @Test func aServerCannotPushMoreOrLargerImagesThanTheLimits() async throws {
        let dir = TempDirectory()
        let server = try LocalSyncServer(dataDirectory: dir.path + "/server")
        let sync = LiveBoard.Sync(server: server.address, board: "images")
        let bob = try LiveBoard.open(storage: .memory, sync: sync)
        let bobRun = Running(bob)
        for index in 0..<3 {
            let image = incompressibleImage(bytes: 4096, seed: 25_070 + UInt64(index))
            try await bob.edit { try $0.addSticker(imagePNG: image, at: CodablePoint(x: 10 * Double(index), y: 10)) }
        }
        try await live(bob, "bob")
        #expect(await bob.close().allAcknowledged)
        _ = try await bobRun.ended()

        var few = sync
        few.maxImages = 2
        let alice = try LiveBoard.open(storage: .memory, sync: few)
        guard case .threw(let error) = try await Running(alice).ended() else { Issue.record("run() returned"); return }
        #expect((error as? Refusal)?.code == .limitReached, "\(error)")
        #expect(alice.snapshot.stickers.filter { !$0.isPending }.count <= 2)

        var small = sync
        small.maxImageBytes = 1000
        let carol = try LiveBoard.open(storage: .memory, sync: small)
        guard case .threw(let tooLarge) = try await Running(carol).ended() else { Issue.record("run() returned"); return }
        #expect((tooLarge as? Refusal)?.code == .assetTooLarge, "\(tooLarge)")
        #expect(carol.snapshot.stickers.allSatisfy { $0.isPending })
        await server.stop()
    }
}

/// Opened once, from any thread; `wait()` returns once it is open and ignores cancellation (a
/// call that hangs the way a network request without cancellation support does).
final class Gate: Sendable {
    private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))
    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let open = state.withLock { state -> Bool in
                if !state.open { state.waiters.append(continuation) }
                return state.open
            }
            if open { continuation.resume() }
        }
    }
    func open() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }
}
