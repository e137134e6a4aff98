import BoardClient
import BoardCRDT
import BoardModel
import BoardNet
import BoardStore
import BoardSync
import Foundation
import Synchronization
import Testing

@Suite struct LiveBoardTests {
    @Test func twoBoardsConvergeOverLoopbackTCP() async throws {
        let dir = TempDirectory()
        let server = try LocalSyncServer(dataDirectory: dir.path + "/server")
        let sync = LiveBoard.Sync(server: server.address, board: "converge")
        let alice = try LiveBoard.open(storage: .package(path: dir.path + "/alice.boardpkg"), sync: sync)
        let bob = try LiveBoard.open(storage: .memory, sync: sync)
        let runs = [Running(alice), Running(bob)]
        try await live(alice, "alice")
        try await live(bob, "bob")

        try await alice.edit { try $0.beginStroke(color: .black, width: 2, points: line(50)) }
        let sticker = try await alice.edit { try $0.addSticker(imagePNG: redPNG, at: CodablePoint(x: 100, y: 100)) }.item!
        let seen = try await first("bob to hold the stroke and the sticker's image", of: bob.updates) {
            $0.snapshot.strokes.count == 1 && $0.snapshot.stickers.count == 1 && !$0.snapshot.stickers[0].isPending
        }
        #expect(seen.snapshot.stickers[0].imagePNG == redPNG)

        try await bob.edit { try $0.move(sticker, to: CodablePoint(x: 400, y: 300)) }
        let moved = try await first("alice to see bob's move", of: alice.updates) {
            $0.snapshot.stickers.first?.position == CodablePoint(x: 400, y: 300)
        }
        #expect(moved.origins.contains(.remote(bob.replicaID)))
        #expect(alice.snapshot == bob.snapshot)

        let bobReport = await bob.close()
        let aliceReport = await alice.close()
        #expect(bobReport == CloseReport(allAcknowledged: true, unacknowledgedOperations: 0))
        #expect(aliceReport == CloseReport(allAcknowledged: true, unacknowledgedOperations: 0))
        for run in runs {
            guard case .returned = try await run.ended() else { Issue.record("run() threw"); continue }
        }
        #expect(alice.currentStatus.state == .closed)
        await server.stop()
    }

    @Test func editsMadeOfflineAndDuringADropReachTheServer() async throws {
        let dir = TempDirectory()
        let server = try LocalSyncServer(dataDirectory: dir.path + "/server")
        let sync = LiveBoard.Sync(server: server.address, board: "drops")
        let alice = try LiveBoard.open(storage: .memory, sync: sync)
        let bob = try LiveBoard.open(storage: .memory, sync: sync)
        try await alice.edit { try $0.beginStroke(color: .black, width: 2, points: line(10)) }  // before run()
        #expect(alice.currentStatus.unacknowledgedOperations > 0)
        let runs = [Running(alice), Running(bob)]
        try await live(alice, "alice")
        try await eventually("alice's offline edit to be acknowledged") { alice.currentStatus.unacknowledgedOperations == 0 }
        server.dropConnections()
        try await alice.edit { try $0.beginStroke(color: .black, width: 2, points: line(20)) }
        _ = try await first("bob to hold both strokes after the drop", of: bob.updates) { $0.snapshot.strokes.count == 2 }
        let report = await alice.close()
        #expect(report.allAcknowledged)
        _ = await bob.close()
        for run in runs { _ = try await run.ended() }
        await server.stop()
    }

    @Test func aLateSubscriberGetsTheCurrentStateFirst() async throws {
        let board = try LiveBoard.open(storage: .memory)
        try await board.edit { try $0.beginStroke(color: .black, width: 2, points: line(10)) }
        try await board.edit { try $0.addSticker(imagePNG: redPNG, at: CodablePoint(x: 5, y: 5)) }
        var iterator = board.updates.makeAsyncIterator()
        let firstUpdate = await iterator.next()!
        #expect(firstUpdate.origins == [.loaded])
        #expect(firstUpdate.snapshot == board.snapshot)
        #expect(firstUpdate.changes.added.count == 2)
        #expect(firstUpdate.changes.applied(to: BoardSnapshot(paintOrder: [])) == board.snapshot)
        var statuses = board.status.makeAsyncIterator()
        #expect(await statuses.next()?.state == .idle)
        _ = await board.close()
        #expect(await iterator.next() == nil)  // the stream ends with the board
    }

    @Test func twoSubscribersEachGetEverything() async throws {
        let board = try LiveBoard.open(storage: .memory)
        let count = 40
        @Sendable func follow(_ iterator: LiveStream<BoardUpdate>.AsyncIterator, slow: Bool) async -> (BoardSnapshot, Int) {
            var iterator = iterator
            var snapshot = BoardSnapshot(paintOrder: [])
            var updates = 0
            while let update = await iterator.next() {
                snapshot = update.changes.applied(to: snapshot)
                #expect(snapshot == update.snapshot)
                updates += 1
                if slow { try? await Task.sleep(nanoseconds: 2_000_000) }
                if update.snapshot.strokes.count == count { break }
            }
            return (snapshot, updates)
        }
        // Both subscribe before the edits (each starts with the empty board).
        let fastIterator = board.updates.makeAsyncIterator()
        let slowIterator = board.updates.makeAsyncIterator()
        let fast = Task { await follow(fastIterator, slow: false) }
        let slow = Task { await follow(slowIterator, slow: true) }
        for index in 0..<count {
            try await board.edit { try $0.beginStroke(color: .black, width: 2, points: line(Double(index))) }
            try await board.edit { $0.finishStroke(); return LocalEdit() }
        }
        let results = try await withThrowingTaskGroup(of: (BoardSnapshot, Int).self) { group in
            group.addTask { await fast.value }
            group.addTask { await slow.value }
            group.addTask { try await Task.sleep(nanoseconds: 20_000_000_000); throw GaveUp(description: "subscribers to see every stroke") }
            var results: [(BoardSnapshot, Int)] = []
            while results.count < 2, let result = try await group.next() { results.append(result) }
            group.cancelAll()
            return results
        }
        for (snapshot, updates) in results {
            #expect(snapshot == board.snapshot)
            #expect(updates >= 1 && updates <= 2 * count + 1)  // folded: never more than one per edit, plus the first
        }
        _ = await board.close()
    }

    @Test func undoAndRedoTouchOnlyThisReplicasEdits() async throws {
        let board = try LiveBoard.open(storage: .memory)
        #expect(try await board.undo() == false)
        try await board.edit { try $0.beginStroke(color: .black, width: 2, points: line(10)) }
        #expect(board.snapshot.strokes.count == 1)
        var updates = board.updates.makeAsyncIterator()
        _ = await updates.next()
        #expect(try await board.undo())
        let undone = await updates.next()!
        #expect(undone.origins == [.undo])
        #expect(undone.changes.removed.count == 1)
        #expect(board.snapshot.strokes.isEmpty)
        #expect(try await board.redo())
        #expect(await updates.next()!.origins == [.redo])
        #expect(board.snapshot.strokes.count == 1)
        _ = await board.close()
    }

    @Test func cancellingRunReleasesThePackageLock() async throws {
        let dir = TempDirectory()
        let server = try LocalSyncServer(dataDirectory: dir.path + "/server")
        let path = dir.path + "/mine.boardpkg"
        let board = try LiveBoard.open(storage: .package(path: path), sync: .init(server: server.address, board: "lock"))
        try await board.edit { try $0.beginStroke(color: .black, width: 2, points: line(10)) }
        #expect(throws: StoreError.self) { _ = try LiveBoard.open(storage: .package(path: path)) }
        let run = Running(board)
        try await live(board, "the board")
        run.task.cancel()
        guard case .returned = try await run.ended() else { Issue.record("run() threw on cancellation"); return }
        let again = try LiveBoard.open(storage: .package(path: path))  // at once: the lock is free
        #expect(again.snapshot.strokes.count == 1)
        _ = await again.close()
        await server.stop()
    }

    @Test func cancellingRunWhileOfflineReleasesTheLockToo() async throws {
        let dir = TempDirectory()
        let path = dir.path + "/mine.boardpkg"
        // A port nothing listens on: a server started and stopped.
        let server = try LocalSyncServer(dataDirectory: dir.path + "/server")
        let address = server.address
        await server.stop()
        let board = try LiveBoard.open(storage: .package(path: path), sync: .init(server: address, board: "lock"))
        let run = Running(board)
        _ = try await first("the board to be offline", of: board.status) {
            if case .offline = $0.state { return true } else { return false }
        }
        run.task.cancel()
        _ = try await run.ended()
        _ = try BoardPackage.open(at: path, fileSystem: PosixFileSystem(), newReplicaID: { ReplicaID(7) })
    }

    @Test func closeSaysWhenEditsAreNotAcknowledged() async throws {
        let dir = TempDirectory()
        let server = try LocalSyncServer(dataDirectory: dir.path + "/server")
        let address = server.address
        await server.stop()
        let board = try LiveBoard.open(storage: .memory, sync: .init(server: address, board: "nobody"))
        let run = Running(board)
        try await board.edit { try $0.beginStroke(color: .black, width: 2, points: line(10)) }
        let report = await board.close(within: 0.3)
        #expect(!report.allAcknowledged)
        #expect(report.unacknowledgedOperations == 1)
        _ = try await run.ended()
    }

    @Test func terminalRefusalsStopRetrying() async throws {
        let dir = TempDirectory()
        let authority = try TokenAuthority(secret: Array(repeating: 7, count: 32))
        var options = SyncHost.Options()
        options.access = SyncEndpoint.AccessControl(authority: authority, wallClock: { Date().timeIntervalSince1970 })
        let server = try LocalSyncServer(dataDirectory: dir.path + "/server", options: options)

        // A token for another board: unauthorized.
        let elsewhere = try authority.mint(board: "other", role: .write, expires: nil, subject: "ann")
        let stranger = try LiveBoard.open(storage: .memory, sync: .init(server: server.address, board: "mine"), credentials: .token(elsewhere))
        guard case .threw(let error) = try await Running(stranger).ended() else { Issue.record("run() returned"); return }
        let refusal = try #require(error as? Refusal)
        #expect(refusal.code == .unauthorized && !refusal.isRetryable)
        #expect(stranger.currentStatus.state == .failed(refusal))

        // A read-only token with an edit to send: read-only.
        let reader = try authority.mint(board: "mine", role: .read, expires: nil, subject: "bob")
        let board = try LiveBoard.open(storage: .memory, sync: .init(server: server.address, board: "mine"), credentials: .token(reader))
        try await board.edit { try $0.beginStroke(color: .black, width: 2, points: line(10)) }
        guard case .threw(let readError) = try await Running(board).ended() else { Issue.record("run() returned"); return }
        #expect((readError as? Refusal)?.code == .readOnly)
        await server.stop()
    }

    @Test func aBoardTheServerCannotOpenFailsTheRun() async throws {
        let dir = TempDirectory()
        var options = SyncHost.Options()
        options.maxBoards = 0  // no board can be created: every new name is refused
        let server = try LocalSyncServer(dataDirectory: dir.path + "/server", options: options)
        let board = try LiveBoard.open(storage: .memory, sync: .init(server: server.address, board: "unknown"))
        guard case .threw(let error) = try await Running(board).ended() else { Issue.record("run() returned"); return }
        #expect((error as? Refusal)?.code == .limitReached)
        #expect((error as? Refusal)?.isRetryable == false)
        if case .failed = board.currentStatus.state {} else { Issue.record("status is \(board.currentStatus.state), not failed") }
        await server.stop()
    }

    @Test func anExpiredTokenIsAskedForAgain() async throws {
        let dir = TempDirectory()
        let authority = try TokenAuthority(secret: Array(repeating: 9, count: 32))
        var options = SyncHost.Options()
        options.access = SyncEndpoint.AccessControl(authority: authority, wallClock: { Date().timeIntervalSince1970 })
        let server = try LocalSyncServer(dataDirectory: dir.path + "/server", options: options)
        let asked = Counter()
        let credentials = LiveBoard.Credentials.provider {
            // The first token expired an hour ago; the next is fresh.
            let expires = asked.next() == 1 ? Date().timeIntervalSince1970 - 3600 : nil
            return try authority.mint(board: "fresh", role: .write, expires: expires, subject: "ann")
        }
        let board = try LiveBoard.open(storage: .memory, sync: .init(server: server.address, board: "fresh"), credentials: credentials)
        let run = Running(board)
        try await live(board, "the board")
        #expect(asked.value == 2)
        _ = await board.close()
        _ = try await run.ended()
        await server.stop()
    }
}

extension LiveBoardTests {
    /// Short-lived tokens rotated under a running board: each session goes live, the server
    /// closes it at its token's expiry, and the board asks for a fresh one and goes live again,
    /// expiry after expiry, without failing.
    @Test func tokensThatExpireWhileLiveAreRotated() async throws {
        let dir = TempDirectory()
        let authority = try TokenAuthority(secret: Array(repeating: 7, count: 32))
        var options = SyncHost.Options()
        options.access = SyncEndpoint.AccessControl(authority: authority, wallClock: { Date().timeIntervalSince1970 })
        let server = try LocalSyncServer(dataDirectory: dir.path + "/server", options: options)
        let asked = Counter()
        let credentials = LiveBoard.Credentials.provider {
            _ = asked.next()
            return try authority.mint(board: "rotating", role: .write, expires: Date().timeIntervalSince1970 + 2, subject: "ann")
        }
        let board = try LiveBoard.open(storage: .memory, sync: .init(server: server.address, board: "rotating"), credentials: credentials)
        let run = Running(board)
        try await eventually("three tokens to expire under the running board", within: 40) { asked.value >= 4 }
        if case .failed(let refusal) = board.currentStatus.state { Issue.record("the board gave up: \(refusal)") }
        try await live(board, "the board, on its latest token")
        _ = await board.close()
        _ = try await run.ended()
        await server.stop()
    }
}

final class Counter: Sendable {
    private let state = Mutex(0)
    func next() -> Int { state.withLock { $0 += 1; return $0 } }
    var value: Int { state.withLock { $0 } }
}

@Suite struct MemoryTransportTests {
    @Test func twoBoardsConvergeThroughAnInProcessServer() async throws {
        let server = MemoryServer()
        let sync = LiveBoard.Sync(server: "memory", board: "mem")
        let alice = try LiveBoard.open(storage: .memory, sync: sync, transport: MemoryTransport(server: server))
        let bob = try LiveBoard.open(storage: .memory, sync: sync, transport: MemoryTransport(server: server))
        let runs = [Running(alice), Running(bob)]
        try await live(alice, "alice")
        try await live(bob, "bob")
        try await alice.edit { try $0.beginStroke(color: .black, width: 2, points: line(50)) }
        let sticker = try await alice.edit { try $0.addSticker(imagePNG: redPNG, at: CodablePoint(x: 100, y: 100)) }.item!
        _ = try await first("bob to hold the stroke and the sticker's image", of: bob.updates) {
            $0.snapshot.strokes.count == 1 && $0.snapshot.stickers.count == 1 && !$0.snapshot.stickers[0].isPending
        }
        try await bob.edit { try $0.move(sticker, to: CodablePoint(x: 400, y: 300)) }
        _ = try await first("alice to see bob's move", of: alice.updates) {
            $0.snapshot.stickers.first?.position == CodablePoint(x: 400, y: 300)
        }
        #expect(await bob.close().allAcknowledged)
        #expect(await alice.close().allAcknowledged)
        for run in runs { _ = try await run.ended() }
    }
}
