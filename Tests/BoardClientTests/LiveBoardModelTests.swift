import BoardClient
import BoardCRDT
import BoardModel
import BoardSync
import Foundation
import Observation
import Synchronization
import Testing

/// `LiveBoardModel`: the observable main-actor mirror of a `LiveBoard`, its synchronous edits.
@MainActor @Suite struct LiveBoardModelTests {
    @Test func aLocalEditShowsAndFiresObservation() async throws {
        let board = try LiveBoard.open(storage: .memory)
        let model = LiveBoardModel(board: board)
        #expect(model.snapshot == board.snapshot && model.lastOrigins == [.loaded] && !model.canUndo)
        let snapshotChanged = Fired()
        let undoChanged = Fired()
        withObservationTracking { _ = model.snapshot } onChange: { snapshotChanged.fire() }
        withObservationTracking { _ = model.canUndo } onChange: { undoChanged.fire() }

        model.edit { replica in
            let edit = try replica.beginStroke(color: .black, width: 2, points: line(10))
            replica.finishStroke()
            return edit
        }
        #expect(model.pendingEdits == 1, "edit returns at once, the edit queued")
        try await until("the model to show the stroke") { model.snapshot.strokes.count == 1 && model.canUndo }
        #expect(snapshotChanged.count == 1 && undoChanged.count == 1, "observers of snapshot and canUndo were told")
        #expect(model.lastOrigins == [.local])
        #expect(model.snapshot == board.snapshot)
        #expect(model.pendingEdits == 0)
        #expect(model.isDirty)

        let redoChanged = Fired()
        withObservationTracking { _ = model.canRedo } onChange: { redoChanged.fire() }
        model.undo()
        await model.flush()
        #expect(model.snapshot.strokes.isEmpty && !model.canUndo && model.canRedo)
        #expect(model.lastOrigins == [.undo])
        #expect(redoChanged.count == 1)
        model.redo()
        await model.flush()
        #expect(model.snapshot.strokes.count == 1 && model.lastOrigins == [.redo])
        _ = await board.close()
    }

    @Test func aRemoteEditShowsWhileObserving() async throws {
        let server = MemoryServer()
        let sync = LiveBoard.Sync(server: "memory", board: "remote")
        let alice = try LiveBoard.open(storage: .memory, sync: sync, transport: MemoryTransport(server: server))
        let bob = try LiveBoard.open(storage: .memory, sync: sync, transport: MemoryTransport(server: server))
        let runs = [Running(alice), Running(bob)]
        let model = LiveBoardModel(board: bob)
        let observing = Task { await model.observe() }
        try await until("bob's model to show it is live") { model.status.state == .live }
        try await live(alice, "alice")

        let snapshotChanged = Fired()
        withObservationTracking { _ = model.snapshot } onChange: { snapshotChanged.fire() }
        try await alice.edit { @Sendable in try $0.beginStroke(color: .black, width: 2, points: line(30)) }
        try await until("bob's model to show alice's stroke") { model.snapshot.strokes.count == 1 }
        #expect(snapshotChanged.count >= 1)
        #expect(model.lastOrigins.contains(.remote(alice.replicaID)))
        #expect(!model.canUndo, "others' edits are not this replica's to undo")
        #expect(model.isDirty)

        // And back: the model's edit reaches alice.
        model.edit { try $0.addSticker(imagePNG: redPNG, at: CodablePoint(x: 9, y: 9)) }
        _ = try await first("alice to see the model's sticker", of: alice.updates) { $0.snapshot.stickers.count == 1 }

        _ = await alice.close()
        _ = await bob.close()
        try await until("the model to show bob closed") { model.status.state == .closed }
        await observing.value  // observe() returns once the board's streams end
        for run in runs { _ = try await run.ended() }
    }

    @Test func editsInQuickSuccessionApplyInOrder() async throws {
        let board = try LiveBoard.open(storage: .memory)
        let model = LiveBoardModel(board: board)
        let count = 30
        for index in 0..<count {
            let y = Double(index)
            model.edit { replica in
                let edit = try replica.beginStroke(color: .black, width: 2, points: line(y))
                replica.finishStroke()
                return edit
            }
            model.edit { try $0.setCanvasSize(CodableSize(width: 100 + y, height: 100)) }
        }
        model.undo()  // after every edit above: takes the last canvas size back
        #expect(model.pendingEdits == 2 * count + 1, "nothing applied before the main actor yields")
        await model.flush()
        #expect(model.pendingEdits == 0)
        let ys = model.snapshot.strokes.map { $0.points.first!.y }
        #expect(ys == (0..<count).map { Double($0) }, "strokes painted in the order they were made")
        #expect(model.snapshot.canvasSize == CodableSize(width: 100 + Double(count - 2), height: 100),
                "the last size set was undone, the one before it stands")
        #expect(model.lastError == nil)
        _ = await board.close()
    }

    @Test func aThrowingEditSetsLastErrorAndChangesNothing() async throws {
        let board = try LiveBoard.open(storage: .memory)
        let model = LiveBoardModel(board: board)
        model.edit { try $0.beginStroke(color: .black, width: 2, points: line(1)) }
        await model.flush()
        let before = model.snapshot
        let version = model.version
        let errorChanged = Fired()
        withObservationTracking { _ = model.lastError } onChange: { errorChanged.fire() }

        model.edit { replica in
            _ = try replica.addSticker(imagePNG: redPNG, at: CodablePoint(x: 1, y: 1))
            throw Refused()
        }
        model.edit { _ in throw Refused() }
        await model.flush()
        #expect(model.lastError is Refused)
        #expect(errorChanged.count == 1)
        #expect(model.snapshot == before && board.snapshot == before, "the sticker added before the throw is not there")
        #expect(model.version == version)
        #expect(model.pendingEdits == 0)

        // The queue goes on: a later edit applies, and lastError stays until cleared.
        model.edit { try $0.beginStroke(color: .black, width: 2, points: line(2)) }
        await model.flush()
        #expect(model.snapshot.strokes.count == 2)
        #expect(model.lastError is Refused)
        model.lastError = nil

        // Edits to a closed board fail the same way.
        _ = await board.close()
        model.edit { try $0.beginStroke(color: .black, width: 2, points: line(3)) }
        await model.flush()
        #expect(model.lastError as? LiveBoardError == .closed)
        #expect(model.snapshot.strokes.count == 2)
    }

    @Test func theModelGoesAwayWithItsLastReference() async throws {
        let board = try LiveBoard.open(storage: .memory)
        weak var released: LiveBoardModel?
        do {
            let model = LiveBoardModel(board: board)
            model.edit { try $0.beginStroke(color: .black, width: 2, points: line(4)) }
            await model.flush()
            released = model
        }
        // Its queue's task holds it weakly (a SwiftUI view's @State can let it go).
        try await until("the model to be released") { released == nil }
        #expect(board.snapshot.strokes.count == 1)
        _ = await board.close()
    }

    @Test func peersAndStatusMirror() async throws {
        let server = MemoryServer()
        let sync = LiveBoard.Sync(server: "memory", board: "peers")
        let alice = try LiveBoard.open(storage: .memory, sync: sync, identity: LiveBoard.Identity(name: "Alice"),
                                       transport: MemoryTransport(server: server))
        let bob = try LiveBoard.open(storage: .memory, sync: sync, identity: LiveBoard.Identity(name: "Bob"),
                                     transport: MemoryTransport(server: server))
        let aliceModel = LiveBoardModel(board: alice)
        let bobModel = LiveBoardModel(board: bob)
        #expect(aliceModel.status.state == .idle && aliceModel.peers.isEmpty)
        let observing = [Task { await aliceModel.observe() }, Task { await bobModel.observe() }]
        let statusChanged = Fired()
        withObservationTracking { _ = aliceModel.status } onChange: { statusChanged.fire() }
        let runs = [Running(alice), Running(bob)]
        try await until("both models to show live") { aliceModel.status.state == .live && bobModel.status.state == .live }
        #expect(statusChanged.count == 1)

        let peersChanged = Fired()
        withObservationTracking { _ = bobModel.peers } onChange: { peersChanged.fire() }
        for x in 0..<10 { aliceModel.updatePresence(pointer: GridPoint(x: Int64(x), y: 5)) }
        try await until("bob's model to show alice's latest pointer") { bobModel.peers.first?.pointer == GridPoint(x: 9, y: 5) }
        #expect(peersChanged.count == 1)
        #expect(bobModel.peers.count == 1 && bobModel.peers[0].name == "Alice" && bobModel.peers[0].replica == alice.replicaID)
        #expect(bobModel.peers == bob.currentPeers)
        aliceModel.clearPresence()
        try await until("alice to leave bob's model's peers") { bobModel.peers.isEmpty }

        _ = await alice.close()
        try await until("alice's model to show closed") { aliceModel.status.state == .closed }
        _ = await bob.close()
        for task in observing { await task.value }
        for run in runs { _ = try await run.ended() }
    }
}

private struct Refused: Error {}

/// Counts `withObservationTracking` change calls (which may come from any thread).
private final class Fired: Sendable {
    private let calls = Mutex(0)
    func fire() { calls.withLock { $0 += 1 } }
    var count: Int { calls.withLock { $0 } }
}

/// Waits (polling, on the main actor) until `condition` holds; fails naming `what` after
/// `seconds` (generous: a bound, never a timing assertion).
@MainActor
private func until(_ what: String, within seconds: Double = 20, _ condition: () -> Bool) async throws {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return }
        try await Task.sleep(nanoseconds: 10_000_000)
    }
    Issue.record("gave up after \(seconds) s waiting for \(what)")
    throw GaveUp(description: what)
}
