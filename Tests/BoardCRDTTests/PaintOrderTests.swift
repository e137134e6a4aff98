import BoardCRDT
import BoardModel
import BoardSimulation
import Foundation
import Testing

/// z keys stay short under any amount of reordering (issue 7, finding 2): the 8,192nd
/// send-to-back used to write a key the codec refuses, bricking the board.
@Suite struct PaintOrderTests {
    func keys(_ replica: Replica) -> [ZKey] {
        replica.itemIDs.compactMap { item in
            if case .z(let key) = replica.value(of: .z, for: item) { return key }
            return nil
        }
    }

    func roundTrips(_ replica: Replica) throws {
        var copy = Replica(id: ReplicaID(0xEE))
        try copy.apply(try OperationBatch(decoding: replica.fullState().encoded()))
        copy.assets = replica.assets
        let (x, y) = (try canonical(copy), try canonical(replica))
        #expect(x == y, "\(x)\n\(y)\n\(replica.fullState().operations)")
    }

    @Test func tenThousandSendToBacksKeepKeysShort() throws {
        var a = Replica(id: ReplicaID(0xA))
        let items = try (0..<3).map { _ in try a.addSticker(imagePNG: imageA, at: pt(0, 0)).item! }
        for step in 0..<10_000 {
            let item = items[step % 3]
            _ = try a.sendToBack(item)
            #expect(order(a).first == item.uuid)
            _ = try a.bringToFront(items[(step + 1) % 3])
        }
        #expect(keys(a).allSatisfy { $0.bytes.count <= 4 }, "longest: \(keys(a).map(\.bytes.count).max()!)")
        try roundTrips(a)
    }

    @Test func repeatedlyPuttingBetweenTheSameNeighboursRebalancesInsteadOfGrowing() throws {
        var a = Replica(id: ReplicaID(0xA))
        let low = try a.addSticker(imagePNG: imageA, at: pt(0, 0)).item!
        let first = try a.addSticker(imagePNG: imageA, at: pt(0, 0)).item!
        var high = first
        var expected = [first]
        for _ in 0..<2_000 {
            let item = try a.addSticker(imagePNG: imageB, at: pt(1, 1)).item!
            _ = try a.put(item, between: low, and: high)
            expected.insert(item, at: 0)
            high = item
        }
        #expect(order(a) == ([low] + expected).map(\.uuid))
        #expect(keys(a).allSatisfy { $0.bytes.count <= ZKey.comfortableLength })
        try roundTrips(a)
    }

    @Test(arguments: [1, 2, 3] as [UInt64])
    func randomReordersKeepKeysShortAndDoWhatTheyAsk(seed: UInt64) throws {
        var rng = SeededRandom(seed: seed)
        var a = Replica(id: ReplicaID(0xA))
        var items = try (0..<12).map { _ in try a.addSticker(imagePNG: imageA, at: pt(0, 0)).item! }
        for step in 0..<6_000 {
            // Undo may delete a created item: reorder only what is shown.
            let visible = items.filter { a.isVisible($0) }
            guard visible.count >= 3 else {
                items.append(try a.addSticker(imagePNG: imageA, at: pt(0, 0)).item!)
                continue
            }
            let item = rng.pick(visible)
            switch Int.random(in: 0..<4, using: &rng) {
            case 0:
                _ = try a.bringToFront(item)
                #expect(order(a).last == item.uuid, "seed \(seed) step \(step)")
            case 1:
                _ = try a.sendToBack(item)
                #expect(order(a).first == item.uuid, "seed \(seed) step \(step)")
            case 2:
                let others = visible.filter { $0 != item }.shuffled(using: &rng)
                _ = try a.put(item, between: others[0], and: others[1])
                let ids = order(a)
                let at = ids.firstIndex(of: item.uuid)!
                let (x, y) = (ids.firstIndex(of: others[0].uuid)!, ids.firstIndex(of: others[1].uuid)!)
                #expect(min(x, y) < at && at < max(x, y), "seed \(seed) step \(step)")
            default:
                if rng.chance(0.1) { items.append(try a.addSticker(imagePNG: imageA, at: pt(0, 0)).item!) }
                _ = try a.undo()
            }
        }
        let longest = keys(a).map(\.bytes.count).max()!
        #expect(longest <= ZKey.comfortableLength, "seed \(seed): longest key \(longest) bytes")
        try roundTrips(a)
    }

    @Test func anAbsurdKeyFromAPeerIsReplacedNotBuiltUpon() throws {
        var (a, b, _) = makeReplicas()
        let s = try a.addSticker(imagePNG: imageA, at: pt(0, 0)).item!
        let t = try a.addSticker(imagePNG: imageA, at: pt(0, 0)).item!
        try sync(&a, &b)
        // b writes the largest key the codec accepts: 1,024 bytes of 0xFF.
        let top = ZKey(bytes: [UInt8](repeating: 0xFF, count: ZKey.maxLength))!
        _ = b
        let hostile = Op(id: OpID(replica: b.id, seq: 1), lamport: a.lamport + 1, payload: .setItem(t, .z(top)))
        try a.apply(try OperationBatch(decoding: OperationBatch(operations: [hostile]).encoded()))
        let edit = try a.bringToFront(s)
        #expect(order(a).last == s.uuid)
        for op in edit.operations {
            if case .setItem(_, .z(let key)) = op.payload { #expect(key.bytes.count <= ZKey.comfortableLength) }
        }
        // Everything a writes still decodes.
        _ = try OperationBatch(decoding: OperationBatch(operations: edit.operations).encoded())
        try roundTrips(a)
        _ = try a.sendToBack(s)
        _ = try a.bringToFront(s)
        #expect(keys(a).allSatisfy { $0.bytes.count <= ZKey.comfortableLength })
    }
}
