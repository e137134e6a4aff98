import BoardClient
import BoardCRDT
import BoardModel
import Foundation
import Testing

@Suite struct UndoGroupTests {
    @Test func editsInAGroupUndoAndRedoAsOneStep() async throws {
        let board = try LiveBoard.open(storage: .memory)
        try await board.edit { try $0.beginStroke(color: .black, width: 2, points: line(10)) }
        let sticker = try await board.edit { try $0.addSticker(imagePNG: redPNG, at: CodablePoint(x: 10, y: 10)) }.item!
        // A drag: many moves, then a stroke drawn in the same gesture; nested groups make one step.
        try await board.undoGroup { board in
            for x in stride(from: 20.0, through: 100, by: 20) {
                try board.edit { try $0.move(sticker, to: CodablePoint(x: x, y: 10)) }
            }
            try await board.undoGroup { board in
                try board.edit { try $0.beginStroke(color: .black, width: 2, points: line(40)) }
            }
        }
        #expect(board.snapshot.stickers[0].position == CodablePoint(x: 100, y: 10))
        #expect(board.snapshot.strokes.count == 2)

        #expect(try await board.undo())
        #expect(board.snapshot.stickers[0].position == CodablePoint(x: 10, y: 10))
        #expect(board.snapshot.strokes.count == 1)
        #expect(try await board.redo())
        #expect(board.snapshot.stickers[0].position == CodablePoint(x: 100, y: 10))
        #expect(board.snapshot.strokes.count == 2)
        // The step before the group is still its own.
        #expect(try await board.undo())
        #expect(try await board.undo())
        #expect(board.snapshot.stickers.isEmpty)
        #expect(board.snapshot.strokes.count == 1)
        _ = await board.close()
    }

    @Test func aGroupThatThrowsKeepsItsEarlierEditsAsOneStep() async throws {
        struct Stop: Error {}
        let board = try LiveBoard.open(storage: .memory)
        let sticker = try await board.edit { try $0.addSticker(imagePNG: redPNG, at: CodablePoint(x: 10, y: 10)) }.item!
        await #expect(throws: Stop.self) {
            try await board.undoGroup { board in
                try board.edit { try $0.move(sticker, to: CodablePoint(x: 50, y: 50)) }
                try board.edit { try $0.move(sticker, to: CodablePoint(x: 60, y: 60)) }
                throw Stop()
            }
        }
        #expect(board.snapshot.stickers[0].position == CodablePoint(x: 60, y: 60))
        // The group closed: a later edit is a step of its own.
        try await board.edit { try $0.move(sticker, to: CodablePoint(x: 70, y: 70)) }
        #expect(try await board.undo())
        #expect(board.snapshot.stickers[0].position == CodablePoint(x: 60, y: 60))
        #expect(try await board.undo())
        #expect(board.snapshot.stickers[0].position == CodablePoint(x: 10, y: 10))
        _ = await board.close()
        await #expect(throws: LiveBoardError.closed) { try await board.undoGroup { _ in 1 } }
    }

    @Test func anotherReplicasEditDuringAGroupIsNotUndone() async throws {
        let server = MemoryServer()
        let sync = LiveBoard.Sync(server: "memory", board: "groups")
        let alice = try LiveBoard.open(storage: .memory, sync: sync, transport: MemoryTransport(server: server))
        let bob = try LiveBoard.open(storage: .memory, sync: sync, transport: MemoryTransport(server: server))
        let runs = [Running(alice), Running(bob)]
        try await live(alice, "alice")
        try await live(bob, "bob")
        let sticker = try await alice.edit { try $0.addSticker(imagePNG: redPNG, at: CodablePoint(x: 10, y: 10)) }.item!
        try await alice.undoGroup { alice in
            try alice.edit { try $0.move(sticker, to: CodablePoint(x: 30, y: 30)) }
            // Bob draws while alice's gesture is open; his stroke arrives inside her group.
            try await bob.edit { try $0.beginStroke(color: .black, width: 2, points: line(80)) }
            _ = try await first("alice to hold bob's stroke", of: alice.updates) { $0.snapshot.strokes.count == 1 }
            try alice.edit { try $0.move(sticker, to: CodablePoint(x: 90, y: 90)) }
        }
        #expect(try await alice.undo())
        #expect(alice.snapshot.stickers[0].position == CodablePoint(x: 10, y: 10))
        #expect(alice.snapshot.strokes.count == 1, "bob's stroke is not alice's to undo")
        _ = try await first("bob to see alice's undo", of: bob.updates) {
            $0.snapshot.stickers.first?.position == CodablePoint(x: 10, y: 10)
        }
        #expect(bob.snapshot.strokes.count == 1)
        for board in [alice, bob] { #expect(await board.close().allAcknowledged) }
        for run in runs { _ = try await run.ended() }
    }
}

@Suite struct ImageStatusTests {
    @Test func imagesCountAsWaitingUntilTheServerHasThem() async throws {
        let dir = TempDirectory()
        let path = dir.path + "/images.boardpkg"
        let server = try LocalSyncServer(dataDirectory: dir.path + "/server")
        let sync = LiveBoard.Sync(server: server.address, board: "images")
        let alice = try LiveBoard.open(storage: .package(path: path), sync: sync)
        try await alice.edit { try $0.addSticker(imagePNG: redPNG, at: CodablePoint(x: 10, y: 10)) }
        try await alice.edit { try $0.addSticker(imagePNG: bluePNG, at: CodablePoint(x: 30, y: 10)) }
        try await alice.edit { try $0.addSticker(imagePNG: redPNG, at: CodablePoint(x: 50, y: 10)) }  // the same image again
        #expect(alice.currentStatus.unacknowledgedImages == 2)
        #expect(alice.currentStatus.unacknowledgedOperations == 3)
        #expect(!alice.currentStatus.isAllAcknowledged)
        #expect(await alice.close() == CloseReport(allAcknowledged: false, unacknowledgedOperations: 3, unacknowledgedImages: 2))

        // Opened again, nothing recorded says the server has them: they count until a server says so.
        let again = try LiveBoard.open(storage: .package(path: path), sync: sync)
        #expect(again.currentStatus.unacknowledgedImages == 2)
        let run = Running(again)
        try await eventually("the images to reach the server") { again.currentStatus.isAllAcknowledged }
        #expect(again.currentStatus.unacknowledgedImages == 0)
        #expect(await again.close() == CloseReport(allAcknowledged: true, unacknowledgedOperations: 0, unacknowledgedImages: 0))
        _ = try await run.ended()

        // A fresh replica gets both images from the server alone.
        let bob = try LiveBoard.open(storage: .memory, sync: sync)
        let bobRun = Running(bob)
        let seen = try await first("bob to hold both images", of: bob.updates) {
            $0.snapshot.stickers.count == 3 && $0.snapshot.stickers.allSatisfy { !$0.isPending }
        }
        #expect(Set(seen.snapshot.stickers.map(\.imagePNG)) == [redPNG, bluePNG])
        _ = await bob.close()
        _ = try await bobRun.ended()
        await server.stop()
    }
}
