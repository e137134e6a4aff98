import BoardCRDT
import BoardModel
import BoardSimulation
import Foundation
import Testing

/// The algebra of merge: applying operation batches is idempotent, commutative and associative.
@Suite struct MergeLawTests {
    /// Three batches of concurrent operations from a generated history.
    static func batches(seed: UInt64) -> (Replica, [Op], [Op], [Op]) {
        let history = HistoryGenerator(replicaCount: 3...3, steps: 40...40).generate(seed: seed)
        var rng = SeededRandom(seed: seed ^ 0x5EED)
        let shuffled = history.operations.shuffled(using: &rng)
        let third = shuffled.count / 3
        var fresh = Replica(id: ReplicaID(0xF00D))
        for data in history.assets.values { fresh.assets.insert(data) }
        return (fresh, Array(shuffled[..<third]), Array(shuffled[third..<(2 * third)]), Array(shuffled[(2 * third)...]))
    }

    @Test(arguments: 0..<20 as Range<UInt64>)
    func applyingABatchTwiceChangesNothing(seed: UInt64) throws {
        var (replica, x, y, _) = Self.batches(seed: seed)
        try replica.apply(x + y)
        let once = try canonical(replica)
        let vector = replica.versionVector
        #expect(try replica.apply(x) == 0, "seed \(seed)")
        #expect(try replica.apply(x + y) == 0, "seed \(seed)")
        #expect(try canonical(replica) == once, "seed \(seed)")
        #expect(replica.versionVector == vector, "seed \(seed)")
    }

    @Test(arguments: 0..<20 as Range<UInt64>)
    func twoBatchesInEitherOrderGiveTheSameState(seed: UInt64) throws {
        let (fresh, x, y, _) = Self.batches(seed: seed)
        var first = fresh
        var second = fresh
        try first.apply(x)
        try first.apply(y)
        try second.apply(y)
        try second.apply(x)
        #expect(try canonical(first) == canonical(second), "seed \(seed)")
        #expect(first.versionVector == second.versionVector, "seed \(seed)")
    }

    @Test(arguments: 0..<20 as Range<UInt64>)
    func anyGroupingGivesTheSameState(seed: UInt64) throws {
        let (fresh, x, y, z) = Self.batches(seed: seed)
        var left = fresh     // (x y) z
        var right = fresh    // x (y z)
        var flat = fresh     // x y z as one batch
        try left.apply(x + y)
        try left.apply(z)
        try right.apply(x)
        try right.apply(y + z)
        try flat.apply(x + y + z)
        #expect(try canonical(left) == canonical(right), "seed \(seed)")
        #expect(try canonical(left) == canonical(flat), "seed \(seed)")
    }
}
