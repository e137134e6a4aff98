import BoardCRDT
import BoardModel
import Foundation
import Testing

/// Named versions: one last-writer-wins register per label, carried by ordinary operations
/// (docs/SEMANTICS.md, "Named versions").
@Suite struct LabelTests {
    func roundTrips(_ batch: OperationBatch) throws {
        for format: UInt8 in [1, 2] {
            #expect(try OperationBatch(decoding: batch.encoded(format: format)) == batch, "format \(format)")
        }
        if batch.base == nil, batch.covers == nil {
            var out = BatchLink()
            var into = BatchLink()
            #expect(try OperationBatch(decoding: batch.encoded(linkedTo: &out), link: &into).operations == batch.operations, "linked")
        }
    }

    @Test func setRenameDeleteNeverChangeTheBoardAndRoundTrip() throws {
        var (a, b, _) = makeReplicas()
        _ = try a.beginStroke(color: red, width: 2, points: [pt(1, 1), pt(2, 2)])
        let before = try canonical(a)
        let version = a.versionVector
        let set = try a.setLabel(text: "Première ébauche ✏️", version: version, time: 1_700_000_000_000)
        guard case .setLabel(let id, _)? = set.operations.first?.payload else { Issue.record("no label operation"); return }
        #expect(id == LabelID(replica: a.id, number: 2))
        #expect(LabelID(id.description) == id)
        #expect(a.labels == [NamedVersion(id: id, text: "Première ébauche ✏️", version: version, time: 1_700_000_000_000, author: a.id)])
        #expect(try canonical(a) == before, "a label never changes what the board shows")
        let rename = try a.renameLabel(id, to: "First draft", time: 5)
        try roundTrips(OperationBatch(operations: set.operations + rename.operations))
        try sync(&a, &b)
        #expect(b.labels.map(\.text) == ["First draft"] && b.labels.first?.version == version)
        // The overwritten write is compacted away like any register's.
        #expect(a.fullState().operations.filter { if case .setLabel = $0.payload { true } else { false } }.count == 1)
        _ = try b.removeLabel(id)
        try sync(&a, &b)
        #expect(a.labels.isEmpty && b.labels.isEmpty)
        #expect(try canonical(a) == before && canonical(b) == before)
        #expect(throws: EditError.unknownLabel(id)) { try a.removeLabel(id) }
        // A delete travels as an operation too.
        try roundTrips(b.fullState())
    }

    @Test func concurrentRenamesAndADeleteConvergeByTimestamp() throws {
        var (a, b, c) = makeReplicas()
        let id: LabelID
        let made = try a.setLabel(text: "v1", version: a.versionVector, time: 1)
        guard case .setLabel(let madeID, _)? = made.operations.first?.payload else { Issue.record("no label"); return }
        id = madeID
        try sync(&a, &b)
        try sync(&a, &c)
        // Concurrent: a renames, b renames, c deletes, all at the same Lamport counter: the
        // greatest replica id (c) wins the tie, so the label is deleted everywhere.
        _ = try a.renameLabel(id, to: "from a", time: 2)
        _ = try b.renameLabel(id, to: "from b", time: 3)
        _ = try c.removeLabel(id)
        var firstPair: (Replica, Replica)?
        for order in [(a, b, c), (c, b, a), (b, a, c)] {
            var (p, q, r) = order
            try sync(&p, &q)
            try sync(&q, &r)
            try sync(&p, &q)
            #expect(p.labels.isEmpty && q.labels.isEmpty && r.labels.isEmpty)
            if firstPair == nil { firstPair = (p, q) }
        }
        // A later rename (a higher Lamport counter) brings it back: a register's later write wins.
        var (x, y) = firstPair!
        _ = try x.setLabel(id, text: "back", version: .empty, time: 9)
        try sync(&x, &y)
        #expect(x.labels.map(\.text) == ["back"] && y.labels == x.labels)
        #expect(y.labels.first?.author == x.id, "the winning write's author")
    }

    /// Random label writes on four replicas delivered in random orders, through the codec, end
    /// in the model's labels: per id, the write with the greatest (Lamport, replica).
    @Test func randomLabelWritesConvergeToTheModel() throws {
        for seed in UInt64(1)...20 {
            var random = LabelRandom(seed: seed)
            var replicas = (1...4).map { Replica(id: ReplicaID(UInt64($0) * 0x1111)) }
            var all: [Op] = []
            for _ in 0..<60 {
                let who = Int(random.next() % 4)
                var replica = replicas[who]
                let known = replica.labels.map(\.id)
                let edit: LocalEdit
                switch random.next() % 4 {
                case 0 where !known.isEmpty:
                    edit = try replica.removeLabel(known[Int(random.next() % UInt64(known.count))])
                case 1 where !known.isEmpty:
                    edit = try replica.renameLabel(known[Int(random.next() % UInt64(known.count))], to: "r\(random.next() % 100)", time: Int64(all.count))
                default:
                    edit = try replica.setLabel(text: "l\(random.next() % 100)", version: replica.versionVector, time: Int64(all.count))
                }
                all += edit.operations
                replicas[who] = replica
                // Sometimes a random pair syncs.
                if random.next() % 3 == 0 {
                    let (i, j) = (Int(random.next() % 4), Int(random.next() % 4))
                    if i != j { try syncAt(&replicas, i, j) }
                }
            }
            // The model: per label id, the write with the greatest timestamp.
            var winners: [LabelID: Op] = [:]
            for op in all {
                guard case .setLabel(let id, _) = op.payload else { continue }
                if let held = winners[id], held.timestamp > op.timestamp { continue }
                winners[id] = op
            }
            let expected = winners.compactMap { id, op -> NamedVersion? in
                guard case .setLabel(_, let label?) = op.payload else { return nil }
                return NamedVersion(id: id, text: label.text, version: label.version, time: label.time, author: op.id.replica)
            }.sorted { $0.id < $1.id }
            // Everything to everyone, in a seeded order.
            for _ in 0..<3 {
                for i in replicas.indices {
                    let j = Int(random.next() % 4)
                    if i != j { try syncAt(&replicas, i, j) }
                }
                for i in 1..<replicas.count { try syncAt(&replicas, 0, i) }
            }
            for replica in replicas {
                #expect(replica.labels == expected, "seed \(seed): replica \(replica.id)")
            }
        }
    }

    @Test func hostileLabelsAreRefusedWithAClearError() throws {
        let peer = ReplicaID(0xBAD)
        func op(_ label: Label?, number: UInt64 = 1) -> Op {
            Op(id: OpID(replica: peer, seq: number), lamport: number, payload: .setLabel(LabelID(replica: peer, number: number), label))
        }
        var victim = Replica(id: ReplicaID(1))
        let long = Label(text: String(repeating: "x", count: Label.maxTextBytes + 1), version: .empty, time: 0)
        #expect(throws: OperationError.invalidLabel(OpID(replica: peer, seq: 1), "a label's text is \(Label.maxTextBytes + 1) bytes of UTF-8 (at most \(Label.maxTextBytes))")) {
            try victim.apply([op(long)])
        }
        let control = Label(text: "line\nbreak", version: .empty, time: 0)
        #expect(throws: OperationError.self) { try victim.apply([op(control)]) }
        var entries: [ReplicaID: UInt64] = [:]
        for index in 1...(Label.maxVersionEntries + 1) { entries[ReplicaID(UInt64(index))] = 1 }
        let wide = Label(text: "wide", version: VersionVector(entries), time: 0)
        #expect(throws: OperationError.self) { try victim.apply([op(wide)]) }
        // The decoder refuses the same values before allocating them: text length, entry count.
        let longBytes = OperationBatch(operations: [op(long)]).encoded()
        #expect(throws: CodecError.self) { try OperationBatch(decoding: longBytes) }
        let wideBytes = OperationBatch(operations: [op(wide)]).encoded()
        #expect(throws: CodecError.self) { try OperationBatch(decoding: wideBytes) }
        #expect(victim.labels.isEmpty && victim.versionVector == .empty, "nothing was applied")
        // Labels per board: a peer's batch that would pass the bound is refused whole.
        let many = (1...UInt64(Label.maxAdmittedLabels + 1)).map { op(Label(text: "n\($0)", version: .empty, time: 0), number: $0) }
        #expect(throws: OperationError.tooManyLabels(Label.maxAdmittedLabels + 1, limit: Label.maxAdmittedLabels)) {
            try victim.apply(many)
        }
        try victim.apply(Array(many.prefix(Label.maxAdmittedLabels)))
        #expect(victim.labels.count == Label.maxAdmittedLabels)
        // A local new label past the local bound is refused; renames still work.
        #expect(throws: EditError.tooManyLabels(limit: Label.maxLabelsPerBoard)) {
            try victim.setLabel(text: "one more", version: .empty, time: 0)
        }
        _ = try victim.renameLabel(LabelID(replica: peer, number: 1), to: "renamed", time: 0)
        // Local edits refuse what peers would refuse.
        #expect(throws: EditError.invalidLabel("a label's text is empty")) { try victim.renameLabel(LabelID(replica: peer, number: 1), to: "", time: 0) }
    }

    /// Deleting labels frees room: at the local bound, a new label takes the register of one of
    /// this replica's own deleted labels (the lowest id), never another replica's, and peers
    /// converge on it; with none of its own deleted, it is refused as before.
    @Test func aNewLabelAtTheBoundReusesThisReplicasOwnDeletedRegister() throws {
        var a = Replica(id: ReplicaID(0xA))
        var b = Replica(id: ReplicaID(0xB))
        // b holds one register, deleted: not a's to reuse.
        let bLabel = try b.setLabel(text: "b's", version: .empty, time: 1)
        _ = try b.removeLabel(LabelID(replica: b.id, number: bLabel.operations[0].id.seq))
        try a.apply(b.operations(since: a.versionVector))
        var mine: [LabelID] = []
        while a.labelRegisterCount < Label.maxLabelsPerBoard {
            let edit = try a.setLabel(text: "n\(mine.count)", version: .empty, time: 2)
            guard case .setLabel(let id, _) = edit.operations[0].payload else { Issue.record("not a label operation"); return }
            mine.append(id)
        }
        #expect(throws: EditError.tooManyLabels(limit: Label.maxLabelsPerBoard), "none of a's own labels is deleted") {
            try a.setLabel(text: "one more", version: .empty, time: 3)
        }
        _ = try a.removeLabel(mine[7])
        _ = try a.removeLabel(mine[3])
        let edit = try a.setLabel(text: "reused", version: a.versionVector, time: 4)
        guard case .setLabel(let reused, _) = edit.operations[0].payload else { Issue.record("not a label operation"); return }
        #expect(reused == mine[3], "the lowest of a's own deleted labels")
        #expect(a.labelRegisterCount == Label.maxLabelsPerBoard)
        #expect(a.label(reused)?.text == "reused" && a.label(mine[7]) == nil)
        _ = try a.setLabel(text: "again", version: .empty, time: 5)
        #expect(a.label(mine[7])?.text == "again")
        #expect(throws: EditError.tooManyLabels(limit: Label.maxLabelsPerBoard), "b's deleted register is never taken") {
            try a.setLabel(text: "past the bound", version: .empty, time: 6)
        }
        try b.apply(a.operations(since: b.versionVector))
        #expect(b.labels == a.labels, "peers converge on the reused registers")
        #expect(b.labels.count == Label.maxLabelsPerBoard - 1)
    }

    /// A peer from before labels is sent batches without them, and its version vector still
    /// rises past their sequence numbers (no gap to resend forever).
    @Test func aPeerWithoutLabelsGetsBatchesWithoutThemAndNoGap() throws {
        var (a, old, _) = makeReplicas()
        var ops = try a.beginStroke(color: red, width: 2, points: [pt(1, 1)]).operations
        ops += try a.setLabel(text: "named", version: a.versionVector, time: 0).operations
        ops += try a.appendPoints([pt(3, 3)]).operations
        let live = OperationBatch(operations: ops).withoutLabels()
        #expect(live.operations.count == 2 && !live.containsLabels)
        #expect(live.covers == VersionVector([a.id: 3]) && live.base == .empty)
        try old.apply(OperationBatch(decoding: live.encoded()))
        #expect(old.versionVector == a.versionVector, "the label's sequence number is covered")
        #expect(try canonical(old) == canonical(a))
        // A complete delta keeps its base and covers.
        var fresh = Replica(id: ReplicaID(0xD))
        let delta = a.operations(since: fresh.versionVector).withoutLabels()
        try fresh.apply(delta)
        #expect(fresh.versionVector == a.versionVector && fresh.labels.isEmpty)
        // An author whose operations in the batch have a gap stays loose.
        let gapped = OperationBatch(operations: [ops[0], ops[1]]).withoutLabels()
        #expect(gapped.covers == VersionVector([a.id: 2]))
        let loose = OperationBatch(operations: [ops[1], ops[2]] + [Op(id: OpID(replica: a.id, seq: 9), lamport: 9, payload: .appendPoints(ItemID(createdBy: ops[0].id), [GridPoint(x: 0, y: 0)]))]).withoutLabels()
        #expect(loose.covers == nil && loose.operations.count == 2)
        // An author whose labels alone would raise it from nothing is held, not covered (a
        // server with access control binds a replica at its first operation).
        var fresh2 = Replica(id: ReplicaID(0xE))
        let first = try fresh2.setLabel(text: "first of all", version: .empty, time: 0).operations
        let alone = OperationBatch(operations: first).withoutLabelsHolding()
        #expect(alone.batch.operations.isEmpty && alone.batch.covers == nil && alone.held == first)
        let next = try fresh2.beginStroke(color: red, width: 1, points: [pt(1, 1)]).operations
        let together = OperationBatch(operations: alone.held + next).withoutLabelsHolding()
        #expect(together.held.isEmpty && together.batch.operations == next && together.batch.covers == VersionVector([fresh2.id: 2]))
        let handshake = fresh2.operations(since: .empty)
        let onlyLabels = OperationBatch(operations: first, base: .empty, covers: VersionVector([fresh2.id: 1])).withoutLabelsHolding()
        #expect(onlyLabels.batch.covers == .empty && onlyLabels.held == first)
        #expect(handshake.withoutLabels().covers == fresh2.versionVector, "with another operation of the author, covered")
    }
}

/// `sync` of two replicas of an array.
private func syncAt(_ replicas: inout [Replica], _ i: Int, _ j: Int) throws {
    var x = replicas[i], y = replicas[j]
    try sync(&x, &y)
    replicas[i] = x
    replicas[j] = y
}

/// A seeded generator (SplitMix64); tests print the seed on failure.
private struct LabelRandom {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
