import BoardCRDT
import BoardModel
import BoardSimulation
import Foundation
import Testing

/// The worst paint-order keys a peer can send (the codec takes up to 1,024 bytes) must not stop
/// any local edit, nor make one write a key longer than `ZKey.comfortableLength`: one `z` write of
/// 1,024 bytes of 0xFF used to make every replica that synced it build its next stroke's key
/// above that one, 1,025 bytes, which every reader refuses.
///
/// Each path that makes a key (creation of a stroke and of a sticker, front, back, between,
/// undo, redo, restore, matching a snapshot) runs against each attack.
@Suite struct HostileZKeyTests {
    /// The largest key: any key above it has more than 1,024 bytes.
    static let highest = key([UInt8](repeating: 0xFF, count: ZKey.maxLength))
    /// Adjacent to `highest`: no key of at most 1,024 bytes lies between the two.
    static let belowHighest = key([UInt8](repeating: 0xFF, count: ZKey.maxLength - 1) + [0xFE])
    /// The smallest key: any key below it has more than 1,024 bytes.
    static let lowest = key([UInt8](repeating: 0, count: ZKey.maxLength - 1) + [1])
    /// Adjacent to `lowest`.
    static let aboveLowest = key([UInt8](repeating: 0, count: ZKey.maxLength - 1) + [2])

    static func key(_ bytes: [UInt8]) -> ZKey { ZKey(bytes: bytes)! }

    enum Attack: String, CaseIterable, Sendable {
        /// The top item's key becomes the largest key.
        case highestOnTop
        /// Every item gets the largest key (all tied, broken by id).
        case highestOnEveryItem
        /// The two top items get adjacent maximal keys: no room above or between.
        case noRoomAtTop
        /// The two bottom items get adjacent minimal keys: no room below or between.
        case noRoomAtBottom
        /// Both of the above at once.
        case noRoomAtEitherEnd
        /// Keys for items that are never created (the writes wait for creations forever).
        case keysOfItemsNeverCreated
        /// The peer creates 40 items of its own with adjacent 1,024-byte keys at the top.
        case manyMaximalKeys
        /// A deleted item gets the largest key (a restore shows it again).
        case highestOnADeletedItem
    }

    /// A board of six items made by `a` (stickers and strokes alternating, bottom to top), an
    /// honest peer `b` that holds it, and the attack's operations delivered to both through the
    /// codec.
    struct Board {
        var a: Replica
        var b: Replica
        var items: [ItemID]
        var hostileItems: [ItemID] = []
        var hostile = Hostile()
        let attack: Attack

        init(_ attack: Attack) throws {
            self.attack = attack
            let replicas = makeReplicas()
            a = replicas.a
            b = replicas.b
            var made: [ItemID] = []
            for index in 0..<6 {
                if index.isMultiple(of: 2) {
                    made.append(try a.addSticker(imagePNG: imageA, at: pt(Double(index), 0)).item!)
                } else {
                    made.append(try a.beginStroke(color: red, width: 2, points: [pt(0, Double(index))]).item!)
                    a.finishStroke()
                }
            }
            items = made
            if attack == .highestOnADeletedItem { _ = try a.delete(items[5]) }
            try sync(&a, &b)
            let ops = hostileOperations()
            try deliver(ops, to: &a)
            try deliver(ops, to: &b)
        }

        private mutating func hostileOperations() -> [Op] {
            let lamport = a.lamport
            var writes: [(ItemID, ZKey)] = []
            switch attack {
            case .highestOnTop, .highestOnADeletedItem:
                writes = [(items[5], highest)]
            case .highestOnEveryItem:
                writes = items.map { ($0, highest) }
            case .noRoomAtTop:
                writes = [(items[4], belowHighest), (items[5], highest)]
            case .noRoomAtBottom:
                writes = [(items[0], lowest), (items[1], aboveLowest)]
            case .noRoomAtEitherEnd:
                writes = [(items[0], lowest), (items[1], aboveLowest), (items[4], belowHighest), (items[5], highest)]
            case .keysOfItemsNeverCreated:
                writes = [(ItemID(high: hostile.id.rawValue, low: 1_000), highest),
                          (ItemID(high: hostile.id.rawValue, low: 1_001), lowest)]
            case .manyMaximalKeys:
                var ops: [Op] = []
                for index in 0..<40 {
                    let z = key([UInt8](repeating: 0xFF, count: ZKey.maxLength - 1) + [UInt8(0x80 + index)])
                    let (item, op) = hostile.addSticker(z: z, lamport: lamport + UInt64(index) + 1)
                    hostileItems.append(item)
                    ops.append(op)
                }
                return ops
            }
            return writes.enumerated().map { index, write in
                hostile.setZ(write.0, write.1, lamport: lamport + UInt64(index) + 1)
            }
        }

        /// The two neighbours whose keys leave the least room (for put-between).
        var pair: (ItemID, ItemID) {
            switch attack {
            case .noRoomAtBottom, .noRoomAtEitherEnd: return (items[0], items[1])
            case .manyMaximalKeys: return (hostileItems[10], hostileItems[11])
            case .highestOnADeletedItem: return (items[3], items[4])
            default: return (items[4], items[5])
            }
        }

        /// The item whose own key is the most absurd (for undo and redo).
        var target: ItemID {
            switch attack {
            case .noRoomAtBottom: return items[0]
            case .manyMaximalKeys: return hostileItems[39]
            default: return items[5]
            }
        }
    }

    /// Another replica's operations, written by hand: any key the codec accepts.
    struct Hostile {
        let id = ReplicaID(0x66)
        var seq: UInt64 = 0

        mutating func setZ(_ item: ItemID, _ key: ZKey, lamport: UInt64) -> Op {
            seq += 1
            return Op(id: OpID(replica: id, seq: seq), lamport: lamport, payload: .setItem(item, .z(key)))
        }

        mutating func addSticker(z: ZKey, lamport: UInt64) -> (ItemID, Op) {
            seq += 1
            let op = OpID(replica: id, seq: seq)
            let start = StickerStart(asset: AssetHash.of(imageA), position: GridPoint(x: 0, y: 0), scale: 1, rotation: 0, z: z)
            return (ItemID(createdBy: op), Op(id: op, lamport: lamport, payload: .addSticker(ItemID(createdBy: op), start)))
        }
    }

    static func deliver(_ ops: [Op], to replica: inout Replica) throws {
        try replica.apply(try OperationBatch(decoding: OperationBatch(operations: ops).encoded()))
    }

    /// Every key the edit writes is short, its operations pass the codec, the honest peer takes
    /// them and converges, and the peer can go on drawing.
    static func expectBounded(_ edit: LocalEdit, _ board: inout Board, _ what: String,
                              sourceLocation: SourceLocation = #_sourceLocation) throws {
        for op in edit.operations {
            if let key = op.payload.zKey {
                #expect(key.bytes.count <= ZKey.comfortableLength, "\(board.attack) \(what): \(op.id) writes a key of \(key.bytes.count) bytes", sourceLocation: sourceLocation)
            }
        }
        let decoded = try OperationBatch(decoding: OperationBatch(operations: edit.operations).encoded())
        #expect(decoded.operations == edit.operations, sourceLocation: sourceLocation)
        try sync(&board.a, &board.b)
        #expect(try canonical(board.a) == canonical(board.b), "\(board.attack) \(what)", sourceLocation: sourceLocation)
        let peer = try board.b.beginStroke(color: blue, width: 1, points: [pt(3, 3)])
        board.b.finishStroke()
        for op in peer.operations {
            if let key = op.payload.zKey { #expect(key.bytes.count <= ZKey.comfortableLength, "\(board.attack) \(what): the peer's next stroke", sourceLocation: sourceLocation) }
        }
        try sync(&board.a, &board.b)
        #expect(order(board.b).last == peer.item!.uuid, "\(board.attack) \(what)", sourceLocation: sourceLocation)
        #expect(try canonical(board.a) == canonical(board.b), "\(board.attack) \(what)", sourceLocation: sourceLocation)
    }

    static let attacks = Attack.allCases

    @Test(arguments: attacks)
    func creatingAStroke(attack: Attack) throws {
        var board = try Board(attack)
        let edit = try board.a.beginStroke(color: red, width: 3, points: [pt(5, 5)])
        let item = edit.item!
        _ = try board.a.appendPoints([pt(6, 6)], to: item)
        board.a.finishStroke()
        #expect(order(board.a).last == item.uuid, "\(attack)")
        #expect(edit.operations.first?.id == OpID(replica: board.a.id, seq: item.low), "the creation comes first and names the item")
        try Self.expectBounded(edit, &board, "stroke")
        #expect(stroke(board.b, item)?.points.count == 2)
    }

    @Test(arguments: attacks)
    func creatingASticker(attack: Attack) throws {
        var board = try Board(attack)
        let edit = try board.a.addSticker(imagePNG: imageB, at: pt(4, 4))
        #expect(order(board.a).last == edit.item!.uuid, "\(attack)")
        try Self.expectBounded(edit, &board, "sticker")
        #expect(sticker(board.b, edit.item!) != nil)
    }

    @Test(arguments: attacks)
    func bringingToFront(attack: Attack) throws {
        var board = try Board(attack)
        let item = board.items[0]
        let edit = try board.a.bringToFront(item)
        #expect(order(board.a).last == item.uuid, "\(attack)")
        try Self.expectBounded(edit, &board, "front")
    }

    @Test(arguments: attacks)
    func sendingToBack(attack: Attack) throws {
        var board = try Board(attack)
        let item = board.items[4]
        let edit = try board.a.sendToBack(item)
        #expect(order(board.a).first == item.uuid, "\(attack)")
        try Self.expectBounded(edit, &board, "back")
    }

    @Test(arguments: attacks)
    func puttingBetweenTheWorstNeighbours(attack: Attack) throws {
        var board = try Board(attack)
        let (lower, upper) = board.pair
        let item = board.items[2]
        let edit = try board.a.put(item, between: lower, and: upper)
        let ids = order(board.a)
        let (x, y, at) = (ids.firstIndex(of: lower.uuid)!, ids.firstIndex(of: upper.uuid)!, ids.firstIndex(of: item.uuid)!)
        #expect(min(x, y) < at && at < max(x, y), "\(attack): \(x) \(at) \(y)")
        try Self.expectBounded(edit, &board, "between")
    }

    /// Undo writes back what an edit replaced, here a peer's absurd key: it must put the item
    /// back where that key painted it, with a short key.
    /// `a`'s paint order without the strokes `expectBounded` makes the honest peer draw.
    static func ownOrder(_ board: Board) -> [UUID] {
        order(board.a).filter { ItemID(uuid: $0).high != board.b.id.rawValue }
    }

    @Test(arguments: attacks)
    func undoingAReorderAndACreation(attack: Attack) throws {
        var board = try Board(attack)
        let before = Self.ownOrder(board)
        let moved = try board.a.sendToBack(board.target)
        try Self.expectBounded(moved, &board, "back")
        let afterMove = Self.ownOrder(board)
        let created = try board.a.addSticker(imagePNG: imageB, at: pt(4, 4))
        try Self.expectBounded(created, &board, "sticker")
        let undoneCreation = try board.a.undo()
        #expect(Self.ownOrder(board) == afterMove, "\(attack)")
        try Self.expectBounded(undoneCreation, &board, "undo of the creation")
        let undoneMove = try board.a.undo()
        #expect(Self.ownOrder(board) == before, "\(attack)")
        try Self.expectBounded(undoneMove, &board, "undo of the reorder")
    }

    @Test(arguments: attacks)
    func redoingAReorderAndACreation(attack: Attack) throws {
        var board = try Board(attack)
        _ = try board.a.sendToBack(board.target)
        let afterMove = Self.ownOrder(board)
        let created = try board.a.addSticker(imagePNG: imageB, at: pt(4, 4)).item!
        let afterCreation = Self.ownOrder(board)
        _ = try board.a.undo()
        _ = try board.a.undo()
        let redoneMove = try board.a.redo()
        #expect(Self.ownOrder(board) == afterMove, "\(attack)")
        try Self.expectBounded(redoneMove, &board, "redo of the reorder")
        let redoneCreation = try board.a.redo()
        #expect(board.a.isVisible(created))
        #expect(Self.ownOrder(board) == afterCreation, "\(attack)")
        try Self.expectBounded(redoneCreation, &board, "redo of the creation")
    }

    /// A deleted item whose key a peer made absurd comes back where that key paints it; every
    /// edit after that stays bounded. Undoing the delete restores it the same way.
    @Test(arguments: attacks)
    func restoringADeletedItem(attack: Attack) throws {
        var board = try Board(attack)
        let item = board.items[3]
        _ = try board.a.delete(item)
        try sync(&board.a, &board.b)
        try Self.deliver([board.hostile.setZ(item, Self.highest, lamport: board.a.lamport + 1)], to: &board.a)
        let restored = try board.a.restore(item)
        #expect(board.a.isVisible(item))
        try Self.expectBounded(restored, &board, "restore")
        let created = try board.a.beginStroke(color: red, width: 1, points: [pt(1, 1)])
        board.a.finishStroke()
        #expect(order(board.a).last == created.item!.uuid)
        try Self.expectBounded(created, &board, "stroke after the restore")

        // Deleted again, an absurd key again, brought back by undoing the delete.
        _ = try board.a.delete(item)
        try Self.deliver([board.hostile.setZ(item, Self.lowest, lamport: board.a.lamport + 1)], to: &board.a)
        let undone = try board.a.undo()
        #expect(board.a.isVisible(item))
        try Self.expectBounded(undone, &board, "undo of the delete")
        let back = try board.a.sendToBack(created.item!)
        #expect(order(board.a).first == created.item!.uuid)
        try Self.expectBounded(back, &board, "back after the undo")
    }

    /// Importing a snapshot (`edits(toMatch:)`) re-keys items that are out of the wanted order.
    @Test(arguments: attacks)
    func matchingASnapshotsPaintOrder(attack: Attack) throws {
        var board = try Board(attack)
        var wanted = board.a.snapshot()
        wanted.paintOrder = wanted.paintOrder.map { Array($0.reversed()) }
        let edit = try board.a.edits(toMatch: wanted)
        #expect(order(board.a) == wanted.paintOrder!, "\(attack)")
        try Self.expectBounded(edit, &board, "match")
    }

    /// An undo history saved earlier (`undoHistory`) may hold any key the codec accepts: replaying
    /// one longer than the bound places the item where it paints instead of writing it.
    @Test func replayingAPersistedStepWithALongKeyStaysBounded() throws {
        var a = Replica(id: ReplicaID(0xA))
        let items = try (0..<4).map { _ in try a.addSticker(imagePNG: imageA, at: pt(0, 0)).item! }
        let short = ZKey.initial
        a.undoHistory = UndoHistory(undo: [.init(inverses: [.setItem(items[0], .z(Self.highest))], forwards: [.setItem(items[0], .z(short))])])
        let undone = try a.undo()
        #expect(order(a).last == items[0].uuid)
        a.undoHistory = UndoHistory(redo: [.init(inverses: [.setItem(items[3], .z(short))], forwards: [.setItem(items[3], .z(Self.lowest))])])
        let redone = try a.redo()
        #expect(order(a).first == items[3].uuid)
        for op in undone.operations + redone.operations {
            if let key = op.payload.zKey { #expect(key.bytes.count <= ZKey.comfortableLength, "\(op)") }
        }
        _ = try OperationBatch(decoding: OperationBatch(operations: undone.operations + redone.operations).encoded())
    }
}

/// What a peer's keys can make a local edit cost, counted in operations (every re-keyed item is
/// one): an edit re-keys only items whose keys leave no room near its spot, and afterwards they
/// hold short keys, so a peer must write keys again to make another edit re-key them.
@Suite struct HostileZKeyCostTests {
    typealias Hostile = HostileZKeyTests.Hostile

    func board(_ count: Int) throws -> (Replica, [ItemID]) {
        var a = Replica(id: ReplicaID(0xA))
        let items = try (0..<count).map { _ in try a.addSticker(imagePNG: imageA, at: pt(0, 0)).item! }
        return (a, items)
    }

    func expectShort(_ edit: LocalEdit, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
        for op in edit.operations {
            if let key = op.payload.zKey {
                #expect(key.bytes.count <= ZKey.comfortableLength, "\(what): a key of \(key.bytes.count) bytes", sourceLocation: sourceLocation)
            }
        }
    }

    /// A peer that writes an absurd key on the top (or bottom) item before each edit makes that
    /// edit re-key that one item: two operations, never the board.
    @Test func aPeerKeyBeforeEveryEditCostsThatEditOneMoreOperation() throws {
        var (a, items) = try board(200)
        var hostile = Hostile()
        let keys = [HostileZKeyTests.highest, ZKey(bytes: [0xFF])!, HostileZKeyTests.belowHighest]
        var top = items.last!
        for round in 0..<30 {
            try HostileZKeyTests.deliver([hostile.setZ(top, keys[round % keys.count], lamport: a.lamport + 1)], to: &a)
            let edit = try a.addSticker(imagePNG: imageB, at: pt(1, 1))
            #expect(edit.operations.count <= 2, "round \(round): \(edit.operations.count) operations")
            expectShort(edit, "round \(round)")
            #expect(order(a).last == edit.item!.uuid)
            top = edit.item!
        }
        let bottomKeys = [HostileZKeyTests.lowest, ZKey(bytes: [0x00, 0x01])!, HostileZKeyTests.aboveLowest]
        for round in 0..<30 {
            let bottom = ItemID(uuid: order(a).first!)
            let mover = ItemID(uuid: order(a).last!)
            try HostileZKeyTests.deliver([hostile.setZ(bottom, bottomKeys[round % bottomKeys.count], lamport: a.lamport + 1)], to: &a)
            let edit = try a.sendToBack(mover)
            #expect(edit.operations.count <= 2, "round \(round): \(edit.operations.count) operations")
            expectShort(edit, "round \(round)")
            #expect(order(a).first == mover.uuid)
        }
    }

    /// Building on a peer's short `ff` key would gain a byte every eight new items, until one
    /// creation had to re-key the 250 items stacked on it: the first creation re-keys it instead.
    @Test func aShortKeyAtTheEndOfTheKeySpaceIsReKeyedAtOnceNotBuiltUpon() throws {
        var (a, items) = try board(2_000)
        var hostile = Hostile()
        try HostileZKeyTests.deliver([hostile.setZ(items.last!, ZKey(bytes: [0xFF])!, lamport: a.lamport + 1),
                                      hostile.setZ(items.first!, ZKey(bytes: [0x00, 0x01])!, lamport: a.lamport + 2)], to: &a)
        var counts: [Int] = []
        for index in 0..<600 {
            let edit = index.isMultiple(of: 2)
                ? try a.addSticker(imagePNG: imageB, at: pt(1, 1))
                : try a.sendToBack(items[index])
            expectShort(edit, "edit \(index)")
            counts.append(edit.operations.count)
        }
        #expect(counts.max()! <= 2, "\(counts.max()!) operations at edit \(counts.firstIndex(of: counts.max()!)!)")
        #expect(counts.reduce(0, +) <= 602)
    }

    /// Many absurd keys are re-keyed by the first edit that needs room there (the window doubles,
    /// so at most about twice as many items); then edits are single writes again. Keys written
    /// for items never created do not steer edits into rebalancing at all after the first.
    @Test func manyAbsurdKeysAreReKeyedOnceThenEditsAreSingleWrites() throws {
        var (a, items) = try board(400)
        var hostile = Hostile()
        var ops = items.prefix(40).enumerated().map { index, item in
            hostile.setZ(item, HostileZKeyTests.highest, lamport: a.lamport + UInt64(index) + 1)
        }
        for index in 0..<20 {
            ops.append(hostile.setZ(ItemID(high: hostile.id.rawValue, low: 10_000 + UInt64(index)), HostileZKeyTests.highest, lamport: a.lamport + 100))
        }
        try HostileZKeyTests.deliver(ops, to: &a)
        let first = try a.beginStroke(color: red, width: 1, points: [pt(0, 0)])
        a.finishStroke()
        expectShort(first, "first")
        #expect(first.operations.count <= 2 * 41 + 1, "\(first.operations.count) operations")
        for index in 0..<50 {
            let edit = try a.beginStroke(color: red, width: 1, points: [pt(0, 0)])
            a.finishStroke()
            #expect(edit.operations.count == 1, "stroke \(index): \(edit.operations.count) operations")
            expectShort(edit, "stroke \(index)")
        }
    }
}
