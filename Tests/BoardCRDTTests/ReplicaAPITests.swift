import BoardCRDT
import BoardModel
import Foundation
import Testing

/// The replica API gaps a multi-user trace replay found: several strokes in progress, points
/// appended to a named stroke, a stroke's undo step holding only that stroke, a combined
/// transform, typed reads of stickers and strokes.
@Suite struct ReplicaAPITests {
    /// One undo step that moves more stickers than a small step scans for (a selection of 12
    /// dragged three times): undo puts every one back where the step found it, redo where the
    /// step left it.
    @Test func anUndoStepOverManyItemsRestoresEachOne() throws {
        var (a, _, _) = makeReplicas()
        var stickers: [ItemID] = []
        for index in 0..<12 {
            stickers.append(try a.addSticker(imagePNG: imageA, at: pt(Double(index * 10), 0)).item!)
        }
        a.beginUndoGroup()
        for round in 1...3 {
            for (index, sticker) in stickers.enumerated() {
                _ = try a.move(sticker, to: pt(Double(index * 10), Double(round * 5)))
            }
        }
        a.endUndoGroup()
        _ = try a.undo()
        #expect(stickers.enumerated().allSatisfy { a.sticker($1)?.position == pt(Double($0 * 10), 0) })
        _ = try a.redo()
        #expect(stickers.enumerated().allSatisfy { a.sticker($1)?.position == pt(Double($0 * 10), 15) })
        _ = try a.undo()
        #expect(stickers.enumerated().allSatisfy { a.sticker($1)?.position == pt(Double($0 * 10), 0) })
    }

    @Test func severalStrokesInProgressEachGetTheirOwnPoints() throws {
        var (a, b, _) = makeReplicas()
        let left = try a.beginStroke(color: red, width: 2, points: [pt(0, 0)]).item!
        let right = try a.beginStroke(color: blue, width: 3, points: [pt(100, 0)]).item!
        #expect(a.openStrokes == [left, right])
        // Interleaved, as two fingers move at once.
        for step in 1...3 {
            _ = try a.appendPoints([pt(0, Double(step))], to: left)
            _ = try a.appendPoints([pt(100, Double(step))], to: right)
        }
        #expect(a.points(of: left) == [pt(0, 0), pt(0, 1), pt(0, 2), pt(0, 3)])
        #expect(a.points(of: right) == [pt(100, 0), pt(100, 1), pt(100, 2), pt(100, 3)])
        a.finishStroke(left)
        #expect(a.openStrokes == [right])
        #expect(throws: EditError.strokeNotInProgress(left)) { _ = try a.appendPoints([pt(5, 5)], to: left) }
        // Another replica's stroke cannot be extended here, nor a sticker, nor an unknown id.
        try sync(&a, &b)
        #expect(throws: EditError.strokeNotInProgress(right)) { _ = try b.appendPoints([pt(5, 5)], to: right) }
        let sticker = try a.addSticker(imagePNG: imageA, at: pt(1, 1)).item!
        #expect(throws: EditError.wrongKind(sticker, expected: .stroke)) { _ = try a.appendPoints([pt(5, 5)], to: sticker) }
        let unknown = ItemID(createdBy: OpID(replica: ReplicaID(0x99), seq: 1))
        #expect(throws: EditError.unknownItem(unknown)) { _ = try a.appendPoints([pt(5, 5)], to: unknown) }
        // The one-pen call extends the stroke begun last; finishing all ends every stroke.
        _ = try a.appendPoints([pt(100, 4)])
        #expect(a.points(of: right).last == pt(100, 4))
        a.finishStroke()
        #expect(a.openStrokes.isEmpty)
        #expect(throws: EditError.noStrokeInProgress) { _ = try a.appendPoints([pt(1, 1)]) }
        // Peers see both strokes whole.
        try sync(&a, &b)
        #expect(b.points(of: left).count == 4 && b.points(of: right).count == 5)
        #expect(try canonical(a) == canonical(b))
    }

    @Test func aStrokesUndoStepHoldsOnlyThatStroke() throws {
        var (a, _, _) = makeReplicas()
        let sticker = try a.addSticker(imagePNG: imageA, at: pt(10, 10)).item!
        let stroke = try a.beginStroke(color: red, width: 2, points: [pt(0, 0)]).item!
        // While the stroke is being drawn, another hand moves the sticker.
        _ = try a.move(sticker, to: pt(50, 50))
        _ = try a.appendPoints([pt(9, 9)], to: stroke)
        a.finishStroke(stroke)
        // Undo takes back the move alone (the most recent step), then the stroke alone.
        _ = try a.undo()
        #expect(a.sticker(sticker)?.position == pt(10, 10))
        #expect(a.snapshot().strokes.map(\.id) == [stroke.uuid], "the stroke is still there")
        _ = try a.undo()
        #expect(a.snapshot().strokes.isEmpty)
        #expect(a.sticker(sticker)?.position == pt(10, 10) && a.sticker(sticker)?.isDeleted == false)
        _ = try a.redo()
        #expect(a.snapshot().strokes.first?.points == [pt(0, 0), pt(9, 9)])
    }

    @Test func transformIsOneUndoStepOfTwoRegistersCheckedFirst() throws {
        var (a, b, _) = makeReplicas()
        let sticker = try a.addSticker(imagePNG: imageA, at: pt(10, 10), scale: 1, rotation: 0).item!
        let edit = try a.transform(sticker, scale: 2, rotation: 0.5)
        #expect(edit.operations.count == 2)
        #expect(a.sticker(sticker)?.scale == 2 && a.sticker(sticker)?.rotation == 0.5)
        _ = try a.undo()
        #expect(a.sticker(sticker)?.scale == 1 && a.sticker(sticker)?.rotation == 0, "one step undoes both")
        _ = try a.redo()
        #expect(a.sticker(sticker)?.scale == 2 && a.sticker(sticker)?.rotation == 0.5)
        // A bad value in either refuses the whole edit before anything changes.
        let before = a.versionVector
        #expect(throws: EditError.notFinite("sticker rotation")) { _ = try a.transform(sticker, scale: 3, rotation: .nan) }
        #expect(a.versionVector == before && a.sticker(sticker)?.scale == 2)
        // Two registers: a concurrent rotation elsewhere and this scale both survive.
        try sync(&a, &b)
        _ = try b.transform(sticker, rotation: 1.5)
        _ = try a.transform(sticker, scale: 4)
        try sync(&a, &b)
        #expect(a.sticker(sticker)?.scale == 4 && a.sticker(sticker)?.rotation == 1.5)
        #expect(try canonical(a) == canonical(b))
    }

    @Test func typedReadsOfStickersAndStrokes() throws {
        var (a, _, _) = makeReplicas()
        let sticker = try a.addSticker(imagePNG: imageA, at: pt(12.5, 7), scale: 1.5, rotation: 0.25).item!
        let stroke = try a.beginStroke(color: blue, width: 4, points: [pt(1, 1), pt(2, 2)]).item!
        a.finishStroke(stroke)
        let state = try #require(a.sticker(sticker))
        #expect(state.position == pt(12.5, 7) && state.scale == 1.5 && state.rotation == 0.25)
        #expect(state.asset == AssetHash.of(imageA) && !state.isDeleted)
        let style = try #require(a.strokeStyle(stroke))
        #expect(style.color == blue && style.width == 4 && !style.isErased)
        #expect(a.sticker(stroke) == nil && a.strokeStyle(sticker) == nil)
        _ = try a.delete(sticker)
        _ = try a.delete(stroke)
        #expect(a.sticker(sticker)?.isDeleted == true && a.strokeStyle(stroke)?.isErased == true)
    }
}

/// `VersionVector.totalCount` is what logs, listings, webhooks and history use to count a
/// board's operations: a damaged package naming huge sequence numbers must not trap it.
@Suite struct VersionVectorTotalTests {
    @Test func totalCountSaturatesInsteadOfOverflowing() {
        let huge = UInt64(1) << 62
        let vector = VersionVector([ReplicaID(1): huge, ReplicaID(2): huge, ReplicaID(3): huge, ReplicaID(4): huge, ReplicaID(5): 7])
        #expect(vector.totalCount == UInt64.max)
        #expect(Int(clamping: vector.totalCount) == Int.max)
        #expect(VersionVector([ReplicaID(1): 3, ReplicaID(2): 4]).totalCount == 7)
        #expect(VersionVector.empty.totalCount == 0)
    }
}
