import BoardClient
import BoardCRDT
import BoardModel
import BoardStore
import Foundation
import Testing

@Suite struct LiveBoardHistoryTests {
    /// Items' ids, to compare boards by what they hold.
    private func ids(_ snapshot: BoardSnapshot) -> Set<ItemID> {
        Set(snapshot.strokes.map { ItemID(uuid: $0.id) } + snapshot.stickers.map { ItemID(uuid: $0.id) })
    }

    @Test func versionsSnapshotsDiffAndARestoreThatOneUndoTakesBack() async throws {
        let dir = TempDirectory()
        let board = try LiveBoard.open(storage: .package(path: dir.path + "/h.boardpkg"))
        let stroke = try await board.edit { try $0.beginStroke(color: .black, width: 2, points: line(10)) }.item!
        let sticker = try await board.edit { try $0.addSticker(imagePNG: redPNG, at: CodablePoint(x: 50, y: 50)) }.item!
        try await board.edit { try $0.move(sticker, to: CodablePoint(x: 300, y: 200)) }
        try await board.edit { try $0.delete(stroke) }

        let history = try await board.history()
        #expect(history.versions.count == 4)
        #expect(history.versions.map(\.number) == [1, 2, 3, 4])
        #expect(history.versions.allSatisfy { $0.authors == [board.replicaID] && $0.operationCount > 0 && $0.time != nil })
        #expect(history.sessions().count == 1)
        #expect(history.snapshot(at: history.latest) == board.snapshot)
        let second = history.versions[1].vector
        let then = history.snapshot(at: second)
        #expect(ids(then) == [stroke, sticker])
        #expect(then.stickers.first?.position == CodablePoint(x: 50, y: 50))
        #expect(then.stickers.first?.imagePNG == redPNG)
        let diff = history.diff(from: second, to: history.latest)
        #expect(diff.removed.map(ItemID.init(uuid:)) == [stroke])
        #expect(diff.changed.map { ItemID(uuid: $0.id) } == [sticker])

        let before = board.snapshot
        try await board.restore(to: second)
        #expect(ids(board.snapshot) == [stroke, sticker])
        #expect(board.snapshot.stickers.first?.position == CodablePoint(x: 50, y: 50))
        // History stays linear: the restore is a new version after the others.
        let after = try await board.history()
        #expect(after.versions.count == 5)
        #expect(after.snapshot(at: after.latest) == board.snapshot)
        #expect(try await board.undo())
        #expect(board.snapshot == before)
        _ = await board.close()
    }

    @Test func aRestoreReachesAnotherBoardOverLoopbackTCP() async throws {
        let dir = TempDirectory()
        let server = try LocalSyncServer(dataDirectory: dir.path + "/server")
        let sync = LiveBoard.Sync(server: server.address, board: "restored")
        let alice = try LiveBoard.open(storage: .package(path: dir.path + "/alice.boardpkg"), sync: sync)
        let bob = try LiveBoard.open(storage: .memory, sync: sync)
        let runs = [Running(alice), Running(bob)]
        try await live(alice, "alice")
        try await live(bob, "bob")
        let firstStroke = try await alice.edit { try $0.beginStroke(color: .black, width: 2, points: line(10)) }.item!
        let early = try await alice.history().latest
        _ = try await BoardClientTests.first("bob to see alice's stroke", of: bob.updates) { $0.snapshot.strokes.count == 1 }
        let bobs = try await bob.edit { try $0.beginStroke(color: .black, width: 2, points: line(40)) }.item!
        try await eventually("alice to see bob's stroke") { self.ids(alice.snapshot) == [firstStroke, bobs] }
        try await alice.edit { try $0.delete(firstStroke) }
        try await eventually("bob to see the delete") { self.ids(bob.snapshot) == [bobs] }
        // Bob's stroke came after `early`: the restore removes it and brings the first back,
        // as alice's operations, which reach bob like any edit.
        // Bob's updates are subscribed to before the restore (a subscription made after it could
        // begin with the restored board itself, origin `.loaded`).
        let (updates, feed) = AsyncStream<BoardUpdate>.makeStream()
        let (subscribed, ready) = AsyncStream<Void>.makeStream()
        let feeder = Task {
            var iterator = bob.updates.makeAsyncIterator()
            _ = await iterator.next()  // the board at subscription
            ready.yield()
            while let update = await iterator.next() { feed.yield(update) }
            feed.finish()
        }
        for await _ in subscribed { break }
        try await alice.restore(to: early)
        #expect(ids(alice.snapshot) == [firstStroke])
        let seen = try await BoardClientTests.first("bob to see the restore", of: updates) { self.ids($0.snapshot) == [firstStroke] }
        feeder.cancel()
        #expect(seen.origins.contains(.remote(alice.replicaID)), "\(seen.origins)")
        try await alice.undo()
        _ = try await BoardClientTests.first("bob to see the restore undone", of: bob.updates) { self.ids($0.snapshot) == [bobs] }
        #expect(await alice.close().allAcknowledged)
        _ = await bob.close()
        for run in runs { _ = try await run.ended() }
        await server.stop()
    }

    @Test func historySpansCompactionsAndAForkOpensAsItsOwnBoard() async throws {
        let dir = TempDirectory()
        let fileSystem = PosixFileSystem()
        let package = try BoardPackage.create(at: dir.path + "/c.boardpkg", fileSystem: fileSystem, replicaID: ReplicaID(7))
        package.checkpointInterval = 2
        var items: [ItemID] = []
        for y in 0..<3 {
            items.append(try package.commit { try $0.beginStroke(color: .black, width: 2, points: line(Double(10 + 10 * y))) }.item!)
        }
        try package.compactLog()  // into the archive, with a checkpoint
        let board = try LiveBoard.open(package: package)
        try await board.edit { try $0.addSticker(imagePNG: bluePNG, at: CodablePoint(x: 20, y: 20)) }
        let history = try await board.history()
        #expect(history.versions.count == 4)
        #expect(history.checkpointCount == 1)
        #expect(ids(history.snapshot(at: history.versions[1].vector)) == Set(items.prefix(2)))

        let fork = dir.path + "/sub/fork.boardpkg"
        try await board.fork(at: history.versions[2].vector, to: fork)
        let forked = try LiveBoard.open(storage: .package(path: fork))
        #expect(ids(forked.snapshot) == Set(items))
        #expect(forked.replicaID != board.replicaID)
        #expect(try await forked.history().versions.count == 1)  // its history starts at the fork
        _ = await forked.close()
        await #expect(throws: (any Error).self) { try await board.fork(at: history.latest, to: fork) }  // exists
        _ = await board.close()
    }

    @Test func aReadingCapturedBeforeACompactionSeesTheHistoryAsItWas() throws {
        // What the live board relies on: the capture is taken on the actor, the read happens
        // later on another thread while the package goes on (here: edits and a compaction).
        let dir = TempDirectory()
        let package = try BoardPackage.create(at: dir.path + "/r.boardpkg", fileSystem: PosixFileSystem(), replicaID: ReplicaID(3))
        package.checkpointInterval = 1
        for y in 0..<3 { _ = try package.commit { try $0.beginStroke(color: .black, width: 2, points: line(Double(y))) } }
        try package.compactLog()
        _ = try package.commit { try $0.beginStroke(color: .black, width: 2, points: line(99)) }
        let expected = try package.history()
        let reading = try package.historyReading()
        for y in 0..<3 { _ = try package.commit { try $0.beginStroke(color: .black, width: 2, points: line(Double(200 + y))) } }
        try package.compactLog()
        _ = try package.commit { try $0.beginStroke(color: .black, width: 2, points: line(300)) }
        let read = try reading.read()
        #expect(read.versions == expected.versions)
        #expect(read.snapshot(at: read.latest) == expected.snapshot(at: expected.latest))
        #expect(try package.history().versions.count == expected.versions.count + 4)
        package.close()
    }

    @Test func historyReadWhileTheBoardIsEditedAndCompactedIsAPrefixOfTheLaterOne() async throws {
        // Reads off the actor race the edits (and the compactions the view saves make, every
        // few records here): each read must be the history as it was at some moment.
        let dir = TempDirectory()
        let package = try BoardPackage.create(at: dir.path + "/race.boardpkg", fileSystem: PosixFileSystem(), replicaID: ReplicaID(9))
        package.compactionRecordThreshold = 8
        package.checkpointInterval = 10
        let board = try LiveBoard.open(package: package)
        let model = await LiveBoardModel(board: board)
        let reads = Task {
            var seen: [BoardHistory] = []
            for _ in 0..<15 { seen.append(try await board.history()) }
            return seen
        }
        var strokes: [ItemID] = []
        for step in 0..<150 {
            strokes.append(try await board.edit { try $0.beginStroke(color: .black, width: 2, points: line(Double(step))) }.item!)
            if step % 3 == 2 {
                let gone = strokes.removeFirst()
                try await board.edit { try $0.delete(gone) }
            }
            // A view save now and then: it compacts the log (its records go to the archive).
            if step % 20 == 19 { try await model.saveView() }
        }
        let seen = try await reads.value
        let final = try await board.history()
        #expect(final.versions.count == 200)
        #expect(final.snapshot(at: final.latest) == board.snapshot)
        for history in seen {
            #expect(Array(final.versions.prefix(history.versions.count)) == history.versions)
            #expect(history.snapshot(at: history.latest) == final.snapshot(at: history.latest))
        }
        print("LiveBoardHistoryTests: \(seen.map(\.versions.count)) versions read while editing; \(final.archivedRecords) records archived by compactions, \(final.checkpointCount) checkpoints")
        #expect(final.archivedRecords > 0 && final.checkpointCount > 0, "the view saves compacted the log")
        _ = await board.close()
    }

    @Test func refusals() async throws {
        let memory = try LiveBoard.open(storage: .memory)
        await #expect(throws: HistoryError.self) { _ = try await memory.history() }
        _ = await memory.close()

        let dir = TempDirectory()
        let board = try LiveBoard.open(storage: .package(path: dir.path + "/x.boardpkg"))
        try await board.edit { try $0.beginStroke(color: .black, width: 2, points: line(10)) }
        let beyond = VersionVector([ReplicaID(99): 5])
        await #expect(throws: HistoryError.self) { try await board.restore(to: beyond) }
        await #expect(throws: HistoryError.self) { try await board.fork(at: beyond, to: dir.path + "/y.boardpkg") }
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/y.boardpkg"))
        _ = await board.close()
        await #expect(throws: LiveBoardError.closed) { _ = try await board.history() }
    }
}

// docs/CLIENT.md, "History": the function below holds that section's example line for line, so
// it compiles with the tests; the test runs it and checks the document still holds it.
@Sendable func clientDocHistorySnippet(_ dir: String) async throws -> (BoardSnapshot, BoardSnapshot, BoardChanges, BoardSnapshot) {
// CLIENT.md history snippet begins
let board = try LiveBoard.open(storage: .package(path: dir + "/notes.boardpkg"))
let points = [CodablePoint(x: 10, y: 10), CodablePoint(x: 60, y: 30)]
let png = Data(PNGEncoder.solid(width: 8, height: 8, red: 200, green: 40, blue: 40))
try await board.edit { try $0.beginStroke(color: .black, width: 2, points: points) }
let sticker = try await board.edit { try $0.addSticker(imagePNG: png, at: CodablePoint(x: 40, y: 40)) }.item!
try await board.edit { try $0.delete(sticker) }

let history = try await board.history()            // read off the board's actor: keep it
for session in history.sessions() { print(session.first...session.last, session.authors) }
let withSticker = history.versions[1].vector       // version 2: after the sticker was added
let then = history.snapshot(at: withSticker)       // the board as it was (images included)
let changes = history.diff(from: withSticker, to: history.latest)   // removed: the sticker
try await board.restore(to: withSticker)           // the sticker is back: one undo step, synced
try await board.fork(at: withSticker, to: dir + "/notes-then.boardpkg")  // a new package
let restored = board.snapshot
try await board.undo()                             // the restore taken back
_ = await board.close()
// CLIENT.md history snippet ends
    return (then, restored, changes, board.snapshot)
}

@Suite struct ClientHistoryDocSnippetTests {
    @Test func theHistoryExampleRunsAndIsTheOneInCLIENTmd() async throws {
        let dir = TempDirectory()
        let (then, restored, changes, now) = try await clientDocHistorySnippet(dir.path)
        #expect(then.stickers.count == 1 && !then.stickers[0].isPending && then.strokes.count == 1)
        #expect(changes.removed.count == 1 && changes.removed[0] == then.stickers[0].id)
        #expect(restored == then)
        #expect(now.stickers.isEmpty && now.strokes.count == 1)
        let fork = try LiveBoard.open(storage: .package(path: dir.path + "/notes-then.boardpkg"))
        #expect(fork.snapshot.stickers.map(\.id) == then.stickers.map(\.id))
        _ = await fork.close()

        let here = URL(fileURLWithPath: #filePath)
        let root = here.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let document = try String(contentsOf: root.appendingPathComponent("docs/CLIENT.md"), encoding: .utf8)
        let lines = try String(contentsOf: here, encoding: .utf8).components(separatedBy: "\n")
        let start = try #require(lines.firstIndex(of: "// CLIENT.md history snippet begins"))
        let end = try #require(lines.firstIndex(of: "// CLIENT.md history snippet ends"))
        let section = try #require(document.range(of: "## History"))
        let block = try #require(document.range(of: "```swift\n", range: section.upperBound..<document.endIndex))
        let close = try #require(document.range(of: "\n```", range: block.upperBound..<document.endIndex))
        #expect(String(document[block.upperBound..<close.lowerBound]) == lines[(start + 1)..<end].joined(separator: "\n"))
    }
}
