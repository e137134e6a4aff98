import BoardCRDT
import BoardModel
import BoardSimulation
import Foundation
import Testing

/// Hostile operations from a peer: each case is refused before it changes anything, with an
/// error that names what was wrong (issue 7, findings 1 and 3).
@Suite struct AdmissionTests {
    /// Applies and expects a refusal that leaves the replica byte-identical.
    func expectRefused(_ replica: inout Replica, _ batch: OperationBatch, _ check: (OperationError) -> Bool,
                       sourceLocation: SourceLocation = #_sourceLocation) throws {
        let before = try canonical(replica)
        let vector = replica.versionVector
        do {
            try replica.apply(batch)
            Issue.record("accepted a hostile batch", sourceLocation: sourceLocation)
        } catch let error as OperationError {
            #expect(check(error), "unexpected refusal: \(error)", sourceLocation: sourceLocation)
        }
        #expect(try canonical(replica) == before, sourceLocation: sourceLocation)
        #expect(replica.versionVector == vector, sourceLocation: sourceLocation)
    }

    /// A decoded batch's operations are validated once, by the decoder; admission trusts that
    /// only while they are the decoder's: any operation changed or added afterwards is checked.
    @Test func operationsChangedAfterDecodingAreValidatedAgain() throws {
        var author = Replica(id: ReplicaID(0xA))
        let edit = try author.addSticker(imagePNG: imageA, at: pt(1, 2))
        let decoded = try OperationBatch(decoding: OperationBatch(operations: edit.operations).encoded())
        #expect(decoded == OperationBatch(operations: edit.operations), "equality ignores where a batch came from")
        let invalid = Op(id: OpID(replica: ReplicaID(0xA), seq: 2), lamport: 0, payload: .setItem(edit.item!, .position(GridPoint(x: 1, y: 1))))
        var appended = decoded
        appended.operations.append(invalid)
        var replaced = decoded
        replaced.operations[0] = Op(id: OpID(replica: ReplicaID(0xA), seq: 0), lamport: 1, payload: edit.operations[0].payload)
        for batch in [appended, replaced] {
            let victim = Replica(id: ReplicaID(0xB))
            #expect(throws: OperationError.self) { try victim.admit(batch) }
            #expect(throws: OperationError.self) { _ = try victim.admitted(batch) }
        }
        var receiver = Replica(id: ReplicaID(0xB))
        #expect(try receiver.apply(decoded) == edit.operations.count)
    }

    /// `admitted` returns exactly the operations not held yet, in batch order (what a store
    /// logs), in the same pass that checks the batch.
    @Test(arguments: 0..<20 as Range<UInt64>)
    func admittedReturnsExactlyTheNewOperations(seed: UInt64) throws {
        let history = HistoryGenerator().generate(seed: seed)
        var rng = SeededRandom(seed: seed)
        var receiver = history.replicas[0]
        let cut = Int.random(in: 0...history.operations.count, using: &rng)
        try receiver.apply(Array(history.operations.prefix(cut)))
        var ops = history.operations.shuffled(using: &rng)
        if let repeated = ops.first { ops.append(repeated) }
        let batch = OperationBatch(operations: ops)
        let expected = ops.filter { !receiver.hasIntegrated($0.id) }
        #expect(try receiver.admitted(batch) == expected, "seed \(seed)")
        let fresh = OperationBatch(operations: expected)
        #expect(try receiver.admitted(fresh) == expected, "seed \(seed): nothing held")
    }

    @Test func aLamportCounterFarAheadIsRefusedSoNoPeerCanExhaustTheClock() throws {
        var (a, victim, attacker) = makeReplicas()
        let s = try a.addSticker(imagePNG: imageA, at: pt(0, 0)).item!
        try sync(&a, &victim)
        let inflated = Op(id: OpID(replica: attacker.id, seq: 1), lamport: Op.maxCounter,
                          payload: .setItem(s, .position(GridPoint(x: 16, y: 16))))
        try expectRefused(&victim, OperationBatch(operations: [inflated])) {
            if case .lamportJump = $0 { return true } else { return false }
        }
        // The victim's next edit is still an operation every reader accepts.
        let edit = try victim.move(s, to: pt(5, 5))
        for op in edit.operations { try op.validate() }
        #expect(edit.operations[0].lamport < 100)
        // A plausible jump (a peer that saw many operations this replica has not) is fine.
        let ahead = Op(id: OpID(replica: attacker.id, seq: 1), lamport: victim.lamport + Replica.maxClockJump,
                       payload: .setItem(s, .position(GridPoint(x: 32, y: 32))))
        try victim.apply([ahead])
        _ = attacker
    }

    @Test func aSequenceNumberFarAheadIsRefused() throws {
        var (a, b, c) = makeReplicas()
        _ = try a.setCanvasSize(CodableSize(width: 100, height: 100))
        let forged = Op(id: OpID(replica: a.id, seq: Op.maxCounter), lamport: 2, payload: .setBoard(.background(nil)))
        try expectRefused(&b, OperationBatch(operations: [forged])) {
            if case .sequenceJump = $0 { return true } else { return false }
        }
        _ = c
    }

    @Test func operationsForgedUnderThisReplicasIdAreRefused() throws {
        var (victim, _, _) = makeReplicas()
        _ = try victim.setCanvasSize(CodableSize(width: 100, height: 100))
        let forged = Op(id: OpID(replica: victim.id, seq: victim.lastSeq + 1), lamport: 50, payload: .setBoard(.background(nil)))
        try expectRefused(&victim, OperationBatch(operations: [forged])) {
            $0 == .forgedOwnOperation(forged.id)
        }
        // The victim's own next edit takes that sequence number and is accepted by peers.
        let edit = try victim.setCanvasSize(CodableSize(width: 200, height: 100))
        #expect(edit.operations[0].id.seq == forged.id.seq)
    }

    @Test func aDeltaCoveringSomeoneElsesFutureIsRefusedAndTheVictimNoticesClaims() throws {
        var (victim, server, _) = makeReplicas()
        _ = try victim.setCanvasSize(CodableSize(width: 100, height: 100))
        try sync(&victim, &server)
        // A complete delta with no operations that claims the victim's operations up to 2^62.
        let claim = OperationBatch(operations: [], base: server.versionVector,
                                   covers: VersionVector([victim.id: Op.maxCounter]))
        try expectRefused(&server, claim) {
            if case .coversJump(let replica, _, _) = $0 { return replica == victim.id } else { return false }
        }
        // A smaller forged claim gets past the bound; the victim then refuses to sync quietly
        // with a peer that claims operations it never made.
        let plausible = OperationBatch(operations: [], base: server.versionVector,
                                       covers: VersionVector([victim.id: victim.lastSeq + 10]))
        try server.apply(plausible)
        #expect(throws: OperationError.forgedOwnVersion(victim.id, claimed: victim.lastSeq + 10, made: victim.lastSeq)) {
            try victim.checkPeerVersion(server.versionVector)
        }
        try expectRefused(&victim, server.operations(since: victim.versionVector)) {
            if case .forgedOwnVersion = $0 { return true } else { return false }
        }
    }

    @Test func oneIdWithTwoContentsIsEquivocationAndRefused() throws {
        var (a, b, _) = makeReplicas()
        let s = try a.addSticker(imagePNG: imageA, at: pt(0, 0)).item!
        let move = try a.move(s, to: pt(10, 10)).operations[0]
        try sync(&a, &b)
        let twin = Op(id: move.id, lamport: move.lamport, payload: .setItem(s, .position(GridPoint(x: 999, y: 0))))
        try expectRefused(&b, OperationBatch(operations: [twin])) { $0 == .equivocation(move.id) }
        // Inside one batch too, whatever the order.
        var c = Replica(id: ReplicaID(0xC))
        let next = Op(id: OpID(replica: a.id, seq: 3), lamport: 9, payload: .setBoard(.background(nil)))
        let other = Op(id: next.id, lamport: 9, payload: .setBoard(.canvas(width: 160, height: 160)))
        try expectRefused(&c, OperationBatch(operations: [next, other])) { $0 == .equivocation(next.id) }
    }

    @Test func aSecondCreationOfAnItemIsRefusedSoAStickerNeverTurnsIntoAStroke() throws {
        var (victim, server, attacker) = makeReplicas()
        let s = try victim.addSticker(imagePNG: imageA, at: pt(0, 0)).item!
        try sync(&victim, &server)
        // The attacker creates a stroke under the sticker's id with an earlier timestamp.
        let hijack = Op(id: OpID(replica: attacker.id, seq: 1), lamport: 1,
                        payload: .beginStroke(s, StrokeStart(color: Color8(red: 0, green: 0, blue: 0, alpha: 255), width: 16,
                                                             z: ZKey.initial, points: [])))
        for var replica in [victim, server] {
            try expectRefused(&replica, OperationBatch(operations: [hijack])) {
                if case .duplicateCreation(let item, _, _) = $0 { return item == s } else { return false }
            }
            #expect(replica.kind(of: s) == .sticker)
        }
        // Claiming an id shaped like a known replica's next creation is refused too.
        let squat = Op(id: OpID(replica: attacker.id, seq: 1), lamport: 3,
                       payload: .addSticker(ItemID(createdBy: OpID(replica: victim.id, seq: victim.lastSeq + 1)),
                                            StickerStart(asset: AssetHash.of(imageB), position: GridPoint(x: 0, y: 0), scale: 1, rotation: 0, z: ZKey.initial)))
        try expectRefused(&server, OperationBatch(operations: [squat])) {
            if case .foreignItemID = $0 { return true } else { return false }
        }
        _ = attacker
    }

    @Test func aReplicaAtTheEndOfItsClockRefusesToEditInsteadOfWritingUnreadableOperations() throws {
        var (a, _, _) = makeReplicas()
        let s = try a.addSticker(imagePNG: imageA, at: pt(0, 0)).item!
        // Reachable only through the trusted replay of an old log written before admission.
        let last = Op(id: OpID(replica: ReplicaID(0xD), seq: 1), lamport: Op.maxCounter, payload: .setBoard(.background(nil)))
        try a.apply(OperationBatch(operations: [last]), from: .ownLog)
        let before = try canonical(a)
        #expect(throws: EditError.clockExhausted) { try a.move(s, to: pt(1, 1)) }
        #expect(throws: EditError.clockExhausted) { try a.undo() }
        #expect(try canonical(a) == before)
    }

    @Test func operationsForItemsThatNeverExistAreBounded() throws {
        var server = Replica(id: ReplicaID(0x5))
        let attacker = ReplicaID(0xBAD)
        var seq: UInt64 = 0
        func batch(_ count: Int) -> OperationBatch {
            OperationBatch(operations: (0..<count).map { _ in
                seq += 1
                return Op(id: OpID(replica: attacker, seq: seq), lamport: seq,
                          payload: .setItem(ItemID(high: 0xFFFF, low: seq), .position(GridPoint(x: 1, y: 1))))
            })
        }
        for _ in 0..<(Replica.maxWaitingOperations / 2_000) { try server.apply(batch(2_000)) }
        #expect(server.waitingOperations == Replica.maxWaitingOperations)
        try expectRefused(&server, batch(1)) { $0 == .tooManyWaiting(Replica.maxWaitingOperations + 1, limit: Replica.maxWaitingOperations) }
        // Creations release what waited for them; operations that wait legitimately still pass.
        var b = Replica(id: ReplicaID(0xB))
        var c = Replica(id: ReplicaID(0xC))
        let s = try b.addSticker(imagePNG: imageA, at: pt(0, 0))
        try c.apply(s.operations)
        let move = try c.move(s.item!, to: pt(3, 3))
        var d = Replica(id: ReplicaID(0xD))
        try d.apply(move.operations)
        #expect(d.waitingOperations == 1)
        try d.apply(s.operations)
        #expect(d.waitingOperations == 0)
    }

    /// Found by the `operations` fuzz target: a point at Int64.min made validation trap
    /// (`abs` overflows), so one crafted operation crashed every replica and server decoding it.
    /// It is an out-of-range coordinate like any other, refused by the decoder with a reason.
    @Test func aPointAtTheSmallestInt64IsRefusedNotATrap() throws {
        let author = ReplicaID(0xBAD)
        for point in [GridPoint(x: .min, y: 0), GridPoint(x: 0, y: .min), GridPoint(x: .min, y: .min), GridPoint(x: .max, y: 0)] {
            let start = StrokeStart(color: Color8(red: 0, green: 0, blue: 0, alpha: 255), width: 16, z: ZKey.after(nil), points: [point])
            let item = ItemID(createdBy: OpID(replica: author, seq: 1))
            let op = Op(id: OpID(replica: author, seq: 1), lamport: 1, payload: .beginStroke(item, start))
            #expect(throws: OperationError.coordinateOutOfRange(op.id)) { try op.validate() }
            let bytes = OperationBatch(operations: [op]).encoded()
            #expect(throws: (any Error).self) { _ = try OperationBatch(decoding: bytes) }
        }
    }
}
