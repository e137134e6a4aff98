import BoardCRDT
import BoardModel
import Foundation
import Testing

/// One test per row of the conflict contract (docs/SEMANTICS.md, DESIGN.md §2).
@Suite struct ContractTests {
    @Test func everyOpCarriesATimestampAndTheTotalOrderDecidesLWW() throws {
        var (a, b, _) = makeReplicas()
        let s = try a.addSticker(imagePNG: imageA, at: pt(0, 0)).item!
        try sync(&a, &b)
        // Equal Lamport counters: the higher replica id (b) wins on both replicas.
        let fromA = try a.move(s, to: pt(10, 10)).operations[0]
        let fromB = try b.move(s, to: pt(20, 20)).operations[0]
        #expect(fromA.lamport == fromB.lamport)
        try sync(&a, &b)
        #expect(sticker(a, s)?.position == pt(20, 20))
        #expect(sticker(b, s)?.position == pt(20, 20))
        // A higher Lamport counter wins whatever the replica ids: a edits twice more, so its
        // next move carries the larger counter even though b moves "later" in wall time.
        _ = try a.setScale(s, to: 2)
        _ = try a.move(s, to: pt(30, 30))
        _ = try b.move(s, to: pt(40, 40))
        try sync(&a, &b)
        #expect(sticker(a, s)?.position == pt(30, 30))
        #expect(try canonical(a) == canonical(b))
    }

    @Test func concurrentMovesOfOneStickerWinWholeNeverMixingXAndY() throws {
        var (a, b, _) = makeReplicas()
        let s = try a.addSticker(imagePNG: imageA, at: pt(0, 0)).item!
        try sync(&a, &b)
        _ = try a.move(s, to: pt(100, 0))
        _ = try b.move(s, to: pt(0, 200))
        try sync(&a, &b)
        let position = try #require(sticker(a, s)?.position)
        #expect(position == pt(0, 200), "b's move has the greater timestamp and wins whole")
        #expect(sticker(b, s)?.position == position)
    }

    @Test func oneScalesAnotherRotatesBothSurvive() throws {
        var (a, b, _) = makeReplicas()
        let s = try a.addSticker(imagePNG: imageA, at: pt(5, 5)).item!
        try sync(&a, &b)
        _ = try a.setScale(s, to: 3)
        _ = try b.setRotation(s, to: 1.25)
        try sync(&a, &b)
        for replica in [a, b] {
            #expect(sticker(replica, s)?.scale == 3)
            #expect(sticker(replica, s)?.rotationRadians == 1.25)
        }
    }

    @Test func concurrentEditsOfOtherPropertiesAreOneRegisterEach() throws {
        var (a, b, _) = makeReplicas()
        let line = try a.beginStroke(color: red, width: 2, points: [pt(0, 0), pt(1, 1)]).item!
        a.finishStroke()
        let s = try a.addSticker(imagePNG: imageA, at: pt(0, 0)).item!
        try sync(&a, &b)
        // a changes colour and canvas; b changes width, asset and background: all survive.
        _ = try a.setColor(line, to: blue)
        _ = try b.setWidth(line, to: 7.5)
        _ = try b.replaceImage(s, withPNG: imageB)
        _ = try a.setCanvasSize(CodableSize(width: 640, height: 480))
        _ = try b.setBackground(imagePNG: imageA)
        try sync(&a, &b)
        // Same register concurrently: the greater timestamp wins (b, by replica id).
        _ = try a.setColor(line, to: red)
        _ = try b.setColor(line, to: RGBAColor(red: 0, green: 1, blue: 0))
        try sync(&a, &b)
        for replica in [a, b] {
            let board = replica.snapshot()
            #expect(stroke(replica, line)?.color == RGBAColor(red: 0, green: 1, blue: 0))
            #expect(stroke(replica, line)?.width == 7.5)
            #expect(sticker(replica, s)?.imagePNG == imageB)
            #expect(board.canvasSize == CodableSize(width: 640, height: 480))
            #expect(board.backgroundPNG == imageA)
        }
    }

    @Test func deleteVersusConcurrentEditStaysDeletedAndKeepsTheEdit() throws {
        var (a, b, _) = makeReplicas()
        let s = try a.addSticker(imagePNG: imageA, at: pt(0, 0)).item!
        try sync(&a, &b)
        _ = try a.delete(s)
        _ = try b.move(s, to: pt(50, 60))
        _ = try b.setScale(s, to: 4)
        try sync(&a, &b)
        #expect(sticker(a, s) == nil)
        #expect(sticker(b, s) == nil)
        _ = try a.restore(s)
        try sync(&a, &b)
        #expect(sticker(b, s)?.position == pt(50, 60), "the concurrent move was kept")
        #expect(sticker(b, s)?.scale == 4)
    }

    @Test func eraseOfAStrokeItsAuthorIsStillDrawingStaysErased() throws {
        var (a, b, _) = makeReplicas()
        let line = try a.beginStroke(color: red, width: 1, points: [pt(0, 0)]).item!
        _ = try a.appendPoints([pt(1, 1)])
        try sync(&a, &b)
        _ = try b.delete(line)
        _ = try a.appendPoints([pt(2, 2), pt(3, 3)])
        a.finishStroke()
        try sync(&a, &b)
        #expect(stroke(a, line) == nil)
        #expect(stroke(b, line) == nil)
        // The appends were kept: restoring shows all four points on both.
        _ = try b.restore(line)
        try sync(&a, &b)
        #expect(stroke(a, line)?.points == [pt(0, 0), pt(1, 1), pt(2, 2), pt(3, 3)])
        #expect(try canonical(a) == canonical(b))
    }

    @Test func restoreReturnsTheItemWithEveryMergedEdit() throws {
        var (a, b, c) = makeReplicas()
        let s = try a.addSticker(imagePNG: imageA, at: pt(0, 0)).item!
        try sync(&a, &b)
        try sync(&a, &c)
        let delete = try a.delete(s).operations[0]
        _ = try b.setRotation(s, to: 0.5)
        _ = try c.replaceImage(s, withPNG: imageB)
        try sync(&a, &b)
        try sync(&a, &c)
        try sync(&a, &b)
        #expect(sticker(a, s) == nil)
        let restore = try b.restore(s).operations
        #expect(restore.count == 1)
        #expect(restore[0].timestamp > delete.timestamp, "a restore writes existence with a new timestamp")
        try sync(&a, &b)
        try sync(&a, &c)
        for replica in [a, b, c] {
            #expect(sticker(replica, s)?.rotationRadians == 0.5)
            #expect(sticker(replica, s)?.imagePNG == imageB)
        }
    }

    @Test func strokePointsAreAppendedOnlyByTheCreatorInOrder() throws {
        var (a, b, c) = makeReplicas()
        let line = try a.beginStroke(color: red, width: 1, points: [pt(0, 0)]).item!
        var appends: [Op] = []
        for index in 1...5 {
            appends += try a.appendPoints([pt(Double(index), 0)]).operations
        }
        a.finishStroke()
        // Appends delivered before the stroke's creation and in reverse order still line up.
        try b.apply(Array(appends.reversed()))
        #expect(stroke(b, line) == nil, "nothing shows before the creation arrives")
        try sync(&a, &b)
        #expect(stroke(b, line)?.points.map(\.x) == [0, 1, 2, 3, 4, 5])
        // Another replica cannot append to a's stroke: not through the API...
        #expect(throws: EditError.noStrokeInProgress) { try b.appendPoints([pt(9, 9)]) }
        // ...and a forged append from c is kept but never shown.
        let forged = Op(id: OpID(replica: c.id, seq: 1), lamport: b.lamport + 1,
                        payload: .appendPoints(line, [GridPoint(x: 999, y: 999)]))
        try b.apply([forged])
        try a.apply([forged])
        #expect(stroke(a, line)?.points.count == 6)
        #expect(stroke(b, line)?.points.count == 6)
    }

    @Test func stickerPositionsAndStrokePointsKeepOneSixteenthPointPrecision() throws {
        var (a, b, _) = makeReplicas()
        let line = try a.beginStroke(color: red, width: 1.03, points: [pt(0.0625, 10.04)]).item!
        a.finishStroke()
        try sync(&a, &b)
        // 10.04 rounds to 10.0625 (the nearest 1/16) on the author as on the peer.
        #expect(stroke(a, line)?.points == [pt(0.0625, 10.0625)])
        #expect(stroke(b, line) == stroke(a, line))
        #expect(stroke(a, line)?.width == 1.0)
    }

    @Test func paintOrderIsOneOrderByZKeyThenItemID() throws {
        var (a, b, _) = makeReplicas()
        let s1 = try a.addSticker(imagePNG: imageA, at: pt(0, 0)).item!
        let s2 = try a.addSticker(imagePNG: imageA, at: pt(0, 0)).item!
        let line = try a.beginStroke(color: red, width: 1, points: [pt(0, 0)]).item!
        a.finishStroke()
        #expect(order(a) == [s1.uuid, s2.uuid, line.uuid])
        _ = try a.sendToBack(line)
        #expect(order(a) == [line.uuid, s1.uuid, s2.uuid])
        _ = try a.bringToFront(s1)
        #expect(order(a) == [line.uuid, s2.uuid, s1.uuid])
        _ = try a.put(s1, between: line, and: s2)
        #expect(order(a) == [line.uuid, s1.uuid, s2.uuid])
        try sync(&a, &b)
        // Concurrent reorders of different items both apply.
        _ = try a.bringToFront(line)
        _ = try b.sendToBack(s2)
        try sync(&a, &b)
        #expect(order(a) == [s2.uuid, s1.uuid, line.uuid])
        #expect(order(b) == order(a))
        // Concurrent bring-to-front of two items computes the same key: the tie breaks by id.
        _ = try a.bringToFront(s1)
        _ = try b.bringToFront(s2)
        try sync(&a, &b)
        let top2 = Array(order(a).suffix(2))
        #expect(top2 == [s1, s2].sorted().map(\.uuid))
        #expect(order(b) == order(a))
        // Putting an item between the two tied ones still lands between them.
        _ = try a.put(line, between: s1, and: s2)
        #expect(order(a) == [s1, line, s2].map(\.uuid))
    }

    @Test func undoAndRedoTouchOnlyThisReplicasOwnEdits() throws {
        var (a, b, _) = makeReplicas()
        let s = try a.addSticker(imagePNG: imageA, at: pt(0, 0)).item!
        try sync(&a, &b)
        // a drags (one undo step of three moves); b rotates.
        a.beginUndoGroup()
        for x in [10.0, 20, 30] { _ = try a.move(s, to: pt(x, x)) }
        a.endUndoGroup()
        _ = try b.setRotation(s, to: 2)
        try sync(&a, &b)
        let undo = try a.undo()
        #expect(undo.operations.count == 1)
        try sync(&a, &b)
        for replica in [a, b] {
            #expect(sticker(replica, s)?.position == pt(0, 0), "the whole drag is undone")
            #expect(sticker(replica, s)?.rotationRadians == 2, "b's rotation is untouched")
        }
        _ = try a.redo()
        try sync(&a, &b)
        #expect(sticker(b, s)?.position == pt(30, 30))
        // A stroke is one undo step: undo erases it, redo brings it back with every point.
        let line = try a.beginStroke(color: red, width: 1, points: [pt(0, 0)]).item!
        _ = try a.appendPoints([pt(1, 1)])
        _ = try a.appendPoints([pt(2, 2)])
        a.finishStroke()
        _ = try a.undo()
        #expect(stroke(a, line) == nil)
        _ = try a.redo()
        #expect(stroke(a, line)?.points.count == 3)
        // b has nothing of its own to undo but the rotation.
        _ = try b.undo()
        _ = try b.undo()
        #expect(try b.undo().operations.isEmpty)
        try sync(&a, &b)
        #expect(sticker(a, s)?.rotationRadians == 0)
        #expect(sticker(a, s)?.position == pt(30, 30))
    }

    @Test func anOpForAnItemNotSeenYetAppliesOnceTheCreationArrives() throws {
        var (a, b, c) = makeReplicas()
        let create = try a.addSticker(imagePNG: imageA, at: pt(0, 0))
        try sync(&a, &b)
        let move = try b.move(create.item!, to: pt(7, 7)).operations
        let scale = try b.setScale(create.item!, to: 2).operations
        // c hears of b's edits before the sticker exists; the result is the same either way.
        try c.apply(move + scale)
        #expect(c.snapshot().stickers.isEmpty)
        try c.apply(create.operations)
        c.assets.insert(imageA)
        #expect(sticker(c, create.item!)?.position == pt(7, 7))
        #expect(sticker(c, create.item!)?.scale == 2)
        try sync(&a, &b)
        #expect(try canonical(c) == canonical(a))
    }

    @Test func assetBytesNotYetReceivedArePendingNeverEmptyImages() throws {
        var (a, b, _) = makeReplicas()
        let s = try a.addSticker(imagePNG: imageA, at: pt(1, 1)).item!
        _ = try a.setBackground(imagePNG: imageB)
        try b.apply(a.operations(since: b.versionVector))
        let pending = b.snapshot()
        #expect(pending.pendingStickerIDs == [s.uuid])
        #expect(pending.isBackgroundPending)
        #expect(pending.stickers[0].imageSHA256 == AssetHash.of(imageA).hex)
        #expect(Set(b.missingAssets) == [AssetHash.of(imageA), AssetHash.of(imageB)])
        // Wrong bytes under a claimed hash are refused.
        #expect(throws: AssetStoreError.self) { try b.assets.insert(imageB, claimedHash: AssetHash.of(imageA)) }
        try b.assets.insert(imageA, claimedHash: AssetHash.of(imageA))
        try b.assets.insert(imageB, claimedHash: AssetHash.of(imageB))
        #expect(b.missingAssets.isEmpty)
        #expect(b.snapshot().pendingStickerIDs.isEmpty)
        #expect(try canonical(b) == canonical(a))
    }

    /// Redo writes the undone edit's own value, never a value another replica wrote meanwhile.
    @Test func redoRestoresThisReplicasOwnValue() throws {
        var (a, b, _) = makeReplicas()
        let s = try a.addSticker(imagePNG: imageA, at: pt(0, 0)).item!
        try sync(&a, &b)
        _ = try a.move(s, to: pt(20, 20))
        try sync(&a, &b)
        _ = try b.move(s, to: pt(30, 30))
        try sync(&a, &b)
        _ = try a.undo()
        try sync(&a, &b)
        #expect(sticker(b, s)?.position == pt(0, 0), "undo writes the value a's move replaced")
        _ = try a.redo()
        try sync(&a, &b)
        #expect(sticker(a, s)?.position == pt(20, 20), "redo writes a's own move, not b's")
        #expect(sticker(b, s)?.position == pt(20, 20))
        // A drag redoes to where it ended.
        a.beginUndoGroup()
        for x in [40.0, 50, 60] { _ = try a.move(s, to: pt(x, x)) }
        a.endUndoGroup()
        _ = try a.undo()
        #expect(sticker(a, s)?.position == pt(20, 20))
        _ = try a.redo()
        #expect(sticker(a, s)?.position == pt(60, 60))
    }
}
