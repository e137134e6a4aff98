import BoardCRDT
import BoardModel
import Foundation
import Testing

/// Authors editing through a replica they do not own (`Replica.draft(as:_:)`: a server's web
/// pages): a draft leaves the replica as it was; merged, it is the edit the author's own
/// replica would have made; each author's undo touches only its own edits; sequences never
/// skip or repeat a number.
@Suite struct AuthorTests {
    /// A board with a stroke and a sticker by the host's own replica.
    static func board() throws -> (Replica, stroke: ItemID, sticker: ItemID) {
        var host = Replica(id: ReplicaID(0x5))
        let stroke = try #require(try host.beginStroke(color: red, width: 2, points: [pt(1, 1), pt(5, 5)]).item)
        host.finishStroke(stroke)
        let sticker = try #require(try host.addSticker(imagePNG: imageA, at: pt(10, 10)).item)
        return (host, stroke, sticker)
    }

    static func merge(_ draft: Draft, into replica: inout Replica) throws {
        for (_, data) in draft.images { replica.assets.insert(data) }
        try replica.apply(OperationBatch(operations: draft.edit.operations))
    }

    @Test func aDraftLeavesTheReplicaAsItWasAndMergedIsTheAuthorsOwnEdit() throws {
        var (host, _, placed) = try Self.board()
        let before = try canonical(host)
        let vector = host.versionVector
        let operations = host.storedOperationCount
        let author = Author(id: ReplicaID(0x77))
        // The same edits made by a replica of the author's own, holding the same board.
        var own = Replica(id: ReplicaID(0x77))
        try own.apply(host.fullState())
        own.assets = host.assets

        let draft = try host.draft(as: author) { try $0.addSticker(imagePNG: imageB, at: pt(40, 40)) }
        #expect(try canonical(host) == before, "the replica is unchanged")
        #expect(host.versionVector == vector && host.storedOperationCount == operations)
        #expect(!host.assets.contains(AssetHash.of(imageB)), "the image is not kept either")
        #expect(draft.images[AssetHash.of(imageB)] == imageB, "the draft carries the image the replica lacked")
        #expect(draft.edit.operations.allSatisfy { $0.id.replica == ReplicaID(0x77) })
        #expect(draft.edit.operations.map(\.id.seq) == Array(1...UInt64(draft.edit.operations.count)))
        #expect(author.lastSeq == 0, "the author moves on only when the caller keeps the draft")

        try Self.merge(draft, into: &host)
        _ = try own.addSticker(imagePNG: imageB, at: pt(40, 40))
        #expect(try canonical(host) == canonical(own))
        // The host's own edits keep its own id and sequence.
        let next = try host.move(placed, to: pt(0, 0))
        #expect(next.operations.map(\.id) == [OpID(replica: ReplicaID(0x5), seq: 3)])
    }

    @Test func eachAuthorUndoesOnlyItsOwnEdits() throws {
        var (host, stroke, placed) = try Self.board()
        var alice = Author(id: ReplicaID(0xA11CE))
        var bob = Author(id: ReplicaID(0xB0B))
        func edit(_ author: inout Author, _ body: (inout Replica) throws -> LocalEdit) throws {
            let draft = try host.draft(as: author, body)
            try Self.merge(draft, into: &host)
            author = draft.author
        }
        try edit(&alice) { try $0.move(placed, to: pt(100, 100)) }
        try edit(&bob) { try $0.delete(stroke) }
        #expect(alice.canUndo && bob.canUndo && !alice.canRedo)
        #expect(host.canUndo, "the host's own history is its own")
        try edit(&alice) { try $0.undo() }
        #expect(sticker(host, placed)?.position == pt(10, 10), "alice's move is undone")
        #expect(!host.isVisible(stroke), "bob's delete stays")
        #expect(alice.canRedo && !alice.canUndo)
        try edit(&bob) { try $0.undo() }
        #expect(host.isVisible(stroke))
        try edit(&alice) { try $0.redo() }
        #expect(sticker(host, placed)?.position == pt(100, 100))
        // The host's undo still undoes its own last edit (the sticker it added), not theirs.
        _ = try host.undo()
        #expect(!host.isVisible(placed) && host.isVisible(stroke))
    }

    @Test func aDraftNotKeptIsMadeAgainWithTheSameNumbers() throws {
        var (host, _, placed) = try Self.board()
        let author = Author(id: ReplicaID(0x42))
        let lost = try host.draft(as: author) { try $0.move(placed, to: pt(1, 2)) }
        let again = try host.draft(as: author) { try $0.move(placed, to: pt(3, 4)) }
        #expect(lost.edit.operations.map(\.id) == again.edit.operations.map(\.id), "no number is skipped")
        // An author whose kept state fell behind what the board holds of it (a merge that went
        // through after all) continues after the board's operations, never repeating one.
        try Self.merge(again, into: &host)
        let next = try host.draft(as: author) { try $0.move(placed, to: pt(5, 6)) }
        #expect(next.edit.operations.map(\.id.seq) == [2])
    }

    @Test func aRefusedEditChangesNothing() throws {
        var (host, stroke, _) = try Self.board()
        let before = try canonical(host)
        let author = Author(id: ReplicaID(0x9))
        #expect(throws: EditError.self) { try host.draft(as: author) { try $0.move(stroke, to: pt(1, 1)) } }
        #expect(try canonical(host) == before)
        let draft = try host.draft(as: author) { try $0.bringToFront(stroke) }
        #expect(draft.edit.operations.first?.id == OpID(replica: ReplicaID(0x9), seq: 1))
    }
}
