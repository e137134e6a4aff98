import BoardCRDT
import BoardModel
import BoardSimulation
import Foundation
import Testing

@Suite struct CompactionTests {
    @Test func overwrittenValuesLeaveTheLog() throws {
        var (a, _, _) = makeReplicas()
        let s = try a.addSticker(imagePNG: imageA, at: pt(0, 0)).item!
        for x in 1...100 { _ = try a.move(s, to: pt(Double(x), 0)) }
        _ = try a.setScale(s, to: 2)
        _ = try a.setScale(s, to: 3)
        // The creation, the last move and the last scale survive.
        #expect(a.storedOperationCount == 3)
        #expect(a.versionVector[a.id] == 103)
    }

    /// A complete delta skips recording each operation's sequence number (its `covers` lifts
    /// the prefixes at the end): operations the receiver holds already, loose or ahead of a gap,
    /// are still recognized and not integrated twice (appended points would double), and a
    /// batch repeating an operation takes the one-by-one path. Random histories, seeded.
    @Test func completeDeltasOverLooseOperationsIntegrateEachOperationOnce() throws {
        for seed in 0..<UInt64(120) {
            let rerun = "seed \(seed)"
            let history = HistoryGenerator(replicaCount: 2...4, steps: 30...120).generate(seed: seed)
            var source = Replica(id: ReplicaID(0x5011))
            try source.apply(history.operations)
            var rng = SeededRandom(seed: seed)
            // The receiver holds a random subset: gaps, and operations ahead of them.
            var receiver = Replica(id: ReplicaID(0x5012))
            try receiver.apply(history.operations.filter { _ in rng.chance(0.4) })
            var delta = source.operations(since: receiver.versionVector)
            if rng.chance(0.5), let repeated = delta.operations.randomElement(using: &rng) {
                delta.operations.append(repeated)
            }
            try receiver.apply(try OperationBatch(decoding: delta.encoded()))
            for data in history.assets.values { receiver.assets.insert(data); source.assets.insert(data) }
            #expect(try canonical(receiver) == canonical(source), "\(rerun)")
            #expect(receiver.versionVector == source.versionVector, "\(rerun)")
            #expect(receiver.fullState().operations == source.fullState().operations, "\(rerun)")
        }
    }

    @Test func aCompleteDeltaCoversCompactedOperations() throws {
        var (a, b, _) = makeReplicas()
        let s = try a.addSticker(imagePNG: imageA, at: pt(0, 0)).item!
        try b.apply(a.operations(since: b.versionVector))
        for x in 1...3 { _ = try a.move(s, to: pt(Double(x), 0)) }  // seqs 2, 3, 4; only 4 survives
        let delta = a.operations(since: b.versionVector)
        #expect(delta.operations.map(\.id.seq) == [4])
        try b.apply(delta)
        #expect(b.versionVector == a.versionVector, "b counts as holding seqs 2 and 3")
        // The next live operation arrives alone and extends the prefix.
        let next = try a.move(s, to: pt(9, 9)).operations
        try b.apply(next)
        #expect(b.versionVector[a.id] == 5)
        #expect(sticker(b, s)?.position == pt(9, 9))
    }

    @Test func aDeltaComputedForAnotherVectorDoesNotOverclaim() throws {
        var (a, b, _) = makeReplicas()
        let s = try a.addSticker(imagePNG: imageA, at: pt(0, 0)).item!
        for x in 1...5 { _ = try a.setRotation(s, to: Double(x)) }
        // A delta computed against a vector b does not have (a:3): b must not jump to a's vector.
        let wrong = a.operations(since: VersionVector([a.id: 3]))
        try b.apply(wrong)
        #expect(b.versionVector[a.id] == 0, "b lacks the creation, so it may not claim seqs 1...6")
        // The right delta then brings it all.
        try b.apply(a.operations(since: b.versionVector))
        #expect(b.versionVector == a.versionVector)
        b.assets.insert(imageA)
        #expect(try canonical(b) == canonical(a))
    }

    @Test func outOfOrderOperationsExtendTheVectorOnlyWhenContiguous() throws {
        var (a, b, _) = makeReplicas()
        var ops: [Op] = []
        for _ in 0..<4 { ops += try a.setBackground(asset: nil).operations }
        try b.apply([ops[3], ops[1]])
        #expect(b.versionVector[a.id] == 0)
        try b.apply([ops[0]])
        #expect(b.versionVector[a.id] == 2)
        try b.apply([ops[2]])
        #expect(b.versionVector[a.id] == 4)
        #expect(b.hasIntegrated(ops[3].id))
    }
}
