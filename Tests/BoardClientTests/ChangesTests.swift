import BoardClient
import BoardClientTesting
import BoardCRDT
import BoardModel
import Foundation
import Testing

/// Typed changes, applied to the previous snapshot, give the new one; folded changes too.
@Suite struct ChangesTests {
    @Test(arguments: [UInt64(1), 2, 3, 42, 2026])
    func changesAppliedToThePreviousSnapshotGiveTheNewOne(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        var mine = Replica(id: ReplicaID(1))
        var theirs = Replica(id: ReplicaID(2))
        var previous = mine.snapshot()
        var folded = BoardChanges()
        var foldedFrom = previous
        for step in 0..<300 {
            let action = Int.random(in: 0..<11, using: &random)
            let visible = mine.itemIDs.filter { mine.isVisible($0) }
            let stickers = visible.filter { mine.kind(of: $0) == .sticker }
            func point() -> CodablePoint { CodablePoint(x: Double.random(in: 0...1000, using: &random).rounded(), y: Double.random(in: 0...800, using: &random).rounded()) }
            switch action {
            case 0:
                _ = try mine.beginStroke(color: .black, width: 2, points: [point(), point()])
                mine.finishStroke()
            case 1: _ = try mine.addSticker(imagePNG: Bool.random(using: &random) ? redPNG : bluePNG, at: point())
            case 2: if let item = stickers.randomElement(using: &random) { _ = try mine.move(item, to: point()) }
            case 3: if let item = visible.randomElement(using: &random) { _ = try mine.delete(item) }
            case 4: if let item = visible.randomElement(using: &random) { _ = try mine.bringToFront(item) }
            case 5: _ = try mine.undo()
            case 6: _ = try mine.redo()
            case 7: _ = try mine.setCanvasSize(CodableSize(width: Double(Int.random(in: 100...2000, using: &random)), height: 900))
            case 8: _ = try mine.setBackground(imagePNG: bluePNG)
            default:
                // Another replica's edits arrive (their images sometimes later: pending first).
                _ = try theirs.apply(mine.operations(since: theirs.versionVector))
                let edit = Bool.random(using: &random)
                    ? try theirs.beginStroke(color: .black, width: 3, points: [point()])
                    : try theirs.addSticker(imagePNG: redPNG, at: point())
                theirs.finishStroke()
                _ = try mine.apply(OperationBatch(operations: edit.operations))
                if Bool.random(using: &random) { mine.assets.insert(redPNG) }
            }
            let next = mine.snapshot()
            let changes = BoardChanges(from: previous, to: next)
            #expect(changes.applied(to: previous) == next, "seed \(seed), step \(step): changes applied to the previous snapshot")
            folded = folded.followed(by: changes)
            if Int.random(in: 0..<5, using: &random) == 0 {
                #expect(folded.applied(to: foldedFrom) == next, "seed \(seed), step \(step): folded changes applied")
                folded = BoardChanges()
                foldedFrom = next
            }
            previous = next
        }
        #expect(folded.applied(to: foldedFrom) == previous, "seed \(seed): folded changes at the end")
    }
}

