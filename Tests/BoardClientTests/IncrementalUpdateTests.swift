import BoardClient
import BoardClientTesting
import BoardCRDT
import BoardModel
import Foundation
import Testing

/// A LiveBoard's updates are computed from what changed, not by diffing whole snapshots: after
/// random local edits, undo and redo, groups, restacking, deletes, board fields, remote
/// operations and images that arrive after their stickers, the board it shows is exactly the
/// replica's snapshot, and a subscriber that applies each update's changes to what it had gets
/// the same board.
@Suite struct IncrementalUpdateTests {
    static let seeds: [UInt64] = ProcessInfo.processInfo.environment["BOARDSYNC_SEED"].flatMap(UInt64.init).map { [$0] } ?? [1, 2, 3, 2026]

    @Test(arguments: seeds)
    func theShownBoardIsAlwaysTheReplicasSnapshot(seed: UInt64) async throws {
        var random = SplitMix64(seed: seed)
        let server = MemoryServer()
        let sync = LiveBoard.Sync(server: "memory", board: "incremental")
        let mine = try LiveBoard.open(storage: .memory, sync: sync, transport: MemoryTransport(server: server))
        let theirs = try LiveBoard.open(storage: .memory, sync: sync, transport: MemoryTransport(server: server))
        // A subscriber that rebuilds the board from changes alone.
        let follower = Task { () -> BoardSnapshot in
            var board = BoardSnapshot(paintOrder: [])
            for await update in mine.updates { board = update.changes.applied(to: board) }
            return board
        }
        let images = [redPNG, bluePNG, Data(PNGEncoder.solid(width: 5, height: 9, red: 1, green: 200, blue: 3))]
        for step in 0..<150 {
            let replica = await mine.replica
            let visible = replica.itemIDs.filter { replica.isVisible($0) }.sorted()
            let stickers = visible.filter { replica.kind(of: $0) == .sticker }
            func point() -> CodablePoint {
                CodablePoint(x: Double(Int.random(in: 0...1000, using: &random)), y: Double(Int.random(in: 0...800, using: &random)))
            }
            func pick(_ items: [ItemID]) -> ItemID? { items.isEmpty ? nil : items[Int.random(in: 0..<items.count, using: &random)] }
            let (a, b, c) = (point(), point(), point())
            let image = images[Int.random(in: 0..<images.count, using: &random)]
            switch Int.random(in: 0..<13, using: &random) {
            case 0:
                try await mine.edit { try $0.beginStroke(color: .black, width: 2, points: [a, b]) }
                try await mine.edit { try $0.appendPoints([c]) }
                try await mine.edit { $0.finishStroke(); return LocalEdit() }
            case 1: try await mine.edit { try $0.addSticker(imagePNG: image, at: a) }
            case 2: if let item = pick(stickers) { try await mine.edit { try $0.move(item, to: a) } }
            case 3: if let item = pick(visible) { try await mine.edit { try $0.delete(item) } }
            case 4: if let item = pick(visible) { try await mine.edit { try $0.bringToFront(item) } }
            case 5: if let item = pick(visible) { try await mine.edit { try $0.sendToBack(item) } }
            case 6: try await mine.undo()
            case 7: try await mine.redo()
            case 8: try await mine.edit { try $0.setCanvasSize(CodableSize(width: a.x + 10, height: b.y + 10)) }
            case 9: try await mine.edit { try $0.setBackground(imagePNG: image) }
            case 10:
                if let item = pick(stickers) {
                    try await mine.undoGroup { board in
                        try board.edit { try $0.move(item, to: a) }
                        try board.edit { try $0.move(item, to: b) }
                    }
                }
            default:
                // The other replica edits (new stickers with images the first has not seen:
                // pending until their bytes follow), and both meet the server once.
                let theirsNow = await theirs.replica
                let theirStickers = theirsNow.itemIDs.filter { theirsNow.isVisible($0) && theirsNow.kind(of: $0) == .sticker }.sorted()
                if Bool.random(using: &random) {
                    let fresh = Data(PNGEncoder.solid(width: 3 + step % 50, height: 4, red: UInt8(step % 256), green: 9, blue: 9))
                    try await theirs.edit { try $0.addSticker(imagePNG: fresh, at: a) }
                } else if let item = pick(theirStickers) {
                    try await theirs.edit { try $0.bringToFront(item) }
                } else {
                    try await theirs.edit { try $0.beginStroke(color: .black, width: 3, points: [a]) }
                    try await theirs.edit { $0.finishStroke(); return LocalEdit() }
                }
                try await mine.syncOnce(within: 20)
                try await theirs.syncOnce(within: 20)
                try await mine.syncOnce(within: 20)
            }
            let expected = await mine.replica.snapshot()
            #expect(mine.snapshot == expected, "seed \(seed), step \(step): the shown board is the replica's snapshot")
            if mine.snapshot != expected { break }
        }
        let final = await mine.replica.snapshot()
        _ = await mine.close()
        _ = await theirs.close()
        #expect(await follower.value == final, "seed \(seed): changes alone rebuild the board")
    }
}
