import BoardModel
@testable import BoardCRDT
import BoardSimulation
import Foundation
import Testing

/// How a replica stores what it merged: each author's log as one ordered array with dead
/// entries marked (not a hash table), and an item's registers only once something other than
/// its creation wrote them. Neither may change what any replica shows or sends.
@Suite struct StorageTests {
    /// An author's log answers like a table keyed by sequence number, whatever the order of
    /// stores and drops (in order, out of order, re-stores of dropped entries, enough drops to
    /// sweep): seeded against a dictionary.
    @Test(arguments: 0..<12 as Range<UInt64>)
    func anAuthorLogAnswersLikeATable(seed: UInt64) {
        let rerun = "seed \(seed) (StorageTests.anAuthorLogAnswersLikeATable)"
        var rng = SeededRandom(seed: seed)
        let author = ReplicaID(0xA0 + seed)
        func op(_ seq: UInt64) -> Op {
            Op(id: OpID(replica: author, seq: seq), lamport: seq * 3,
               payload: .setItem(ItemID(high: 1, low: seq % 7), .width(Int64(rng.next() % 100))))
        }
        var log = AuthorLog()
        var model: [UInt64: Op] = [:]
        var next: UInt64 = 1
        for step in 0..<3_000 {
            switch rng.next() % 10 {
            case 0...3:  // the next operation, in order
                let entry = op(next)
                log[next] = entry
                model[next] = entry
                next += 1 + rng.next() % 2
            case 4:  // one arriving late, below the newest
                let seq = 1 + rng.next() % next
                let entry = op(seq)
                log[seq] = entry
                model[seq] = entry
            default:  // a drop, sometimes of one that is not there
                let seq = 1 + rng.next() % next
                log[seq] = nil
                model[seq] = nil
            }
            let probe = rng.next() % (next + 2)
            #expect(log[probe] == model[probe], "step \(step) seq \(probe), \(rerun)")
            if step % 100 == 0 || step == 2_999 {
                #expect(log.count == model.count, "step \(step), \(rerun)")
                #expect(log.isEmpty == model.isEmpty, "step \(step), \(rerun)")
                let floor = rng.next() % (next + 1)
                #expect(Array(log.operations(after: floor)) == model.filter { $0.key > floor }.sorted { $0.key < $1.key }.map(\.value),
                        "step \(step) floor \(floor), \(rerun)")
                #expect(log.latest == model.max { $0.key < $1.key }?.value, "step \(step), \(rerun)")
            }
        }
        #expect(Array(log.operations(after: .max)).isEmpty, "\(rerun)")
    }

    /// Most strokes are never edited after they are drawn: they keep no registers, only their
    /// creation, and read its values. An edit stores exactly the register it wrote.
    @Test func anItemKeepsOnlyTheRegistersWrittenAfterItsCreation() throws {
        var a = Replica(id: ReplicaID(0xA))
        let s = try a.beginStroke(color: red, width: 2, points: [pt(0, 0)]).item!
        _ = try a.appendPoints([pt(1, 1)])
        a.finishStroke()
        let sticker = try a.addSticker(imagePNG: imageA, at: pt(5, 5)).item!
        #expect(a.items[s]!.fields.isEmpty)
        #expect(a.items[sticker]!.fields.isEmpty)
        #expect(a.value(of: .width, for: s) == .width(32))
        #expect(a.value(of: .position, for: sticker) == .position(GridPoint(pt(5, 5))!))
        #expect(a.value(of: .position, for: s) == nil, "a stroke has no position")
        _ = try a.move(sticker, to: pt(9, 9))
        #expect(a.items[sticker]!.fields.map(\.value) == [.position(GridPoint(pt(9, 9))!)])
        #expect(a.value(of: .scale, for: sticker) == .scale(1))
        _ = try a.undo()
        #expect(a.value(of: .position, for: sticker) == .position(GridPoint(pt(5, 5))!))
    }

    /// Writes that arrive before the item's creation wait in its registers; when the creation
    /// arrives it overwrites the earlier ones (its values show) and the later ones stand, exactly
    /// as when the creation arrived first.
    @Test func writesThatArrivedBeforeTheCreationStandOnlyIfLater() throws {
        let maker = ReplicaID(0xA)
        let editor = ReplicaID(0xB)
        let item = ItemID(createdBy: OpID(replica: maker, seq: 1))
        let start = StrokeStart(color: Color8(red: 255, green: 0, blue: 0, alpha: 255), width: 16,
                                z: ZKey.after(nil), points: [GridPoint(x: 0, y: 0), GridPoint(x: 16, y: 16)])
        let creation = Op(id: OpID(replica: maker, seq: 1), lamport: 5, payload: .beginStroke(item, start))
        let earlier = Op(id: OpID(replica: editor, seq: 1), lamport: 3,
                         payload: .setItem(item, .color(Color8(red: 0, green: 0, blue: 255, alpha: 255))))
        let later = Op(id: OpID(replica: editor, seq: 2), lamport: 9, payload: .setItem(item, .width(48)))
        let orders = [[creation, earlier, later], [earlier, later, creation], [later, creation, earlier], [earlier, creation, later]]
        var shown: [String] = []
        for order in orders {
            var replica = Replica(id: ReplicaID(0xC))
            for op in order { try replica.apply([op]) }
            #expect(replica.waitingOperations == 0)
            #expect(replica.value(of: .color, for: item) == .color(start.color), "the creation (lamport 5) beats the write at 3")
            #expect(replica.value(of: .width, for: item) == .width(48), "the write at 9 beats the creation")
            #expect(replica.value(of: .z, for: item) == .z(start.z))
            shown.append(try canonical(replica))
        }
        #expect(Set(shown).count == 1, "every order shows the same board")
    }

    /// Two creations of one item id are refused from peers, but a replica's own log is not
    /// checked again: merged in any order they give one board — the earlier creation keeps the
    /// item, every register takes the value of the latest write (a creation counts as writing
    /// its initial values).
    @Test func twoCreationsOfOneItemMergeTheSameInAnyOrder() throws {
        let maker = ReplicaID(0xA)
        let item = ItemID(createdBy: OpID(replica: maker, seq: 1))
        func start(_ blue: UInt8, width: Int64, x: Int64) -> StrokeStart {
            StrokeStart(color: Color8(red: 0, green: 0, blue: blue, alpha: 255), width: width,
                        z: ZKey.after(nil), points: [GridPoint(x: x, y: 0)])
        }
        let first = Op(id: OpID(replica: maker, seq: 1), lamport: 2, payload: .beginStroke(item, start(10, width: 16, x: 1)))
        let second = Op(id: OpID(replica: maker, seq: 2), lamport: 7, payload: .beginStroke(item, start(20, width: 32, x: 2)))
        let between = Op(id: OpID(replica: ReplicaID(0xB), seq: 1), lamport: 5, payload: .setItem(item, .width(64)))
        let after = Op(id: OpID(replica: ReplicaID(0xB), seq: 2), lamport: 8, payload: .setItem(item, .color(Color8(red: 9, green: 9, blue: 9, alpha: 255))))
        let ops = [first, second, between, after]
        var shown: Set<String> = []
        for permutation in permutations(ops) {
            var replica = Replica(id: ReplicaID(0xC))
            for op in permutation { try replica.apply(OperationBatch(operations: [op]), from: .ownLog) }
            #expect(replica.value(of: .width, for: item) == .width(32), "the second creation (7) beats the write at 5")
            #expect(replica.value(of: .color, for: item) == .color(Color8(red: 9, green: 9, blue: 9, alpha: 255)))
            #expect(stroke(replica, item)?.points.first?.x == FixedPoint.points(1), "the earlier creation keeps the item")
            shown.insert(try canonical(replica))
        }
        #expect(shown.count == 1, "all 24 orders show the same board")
    }

    private func permutations<T>(_ items: [T]) -> [[T]] {
        guard items.count > 1 else { return [items] }
        return items.indices.flatMap { index -> [[T]] in
            var rest = items
            let head = rest.remove(at: index)
            return permutations(rest).map { [head] + $0 }
        }
    }
}
