/// The version vector a replica reaches as it integrates batches, followed without integrating
/// them: per author the contiguous prefix of operations seen, with numbers ahead of a gap held
/// until it fills, and a complete delta (`base` held, `covers` set) raising prefixes to `covers`
/// exactly as `Replica.apply` does. History uses it to name the version after each record.
public struct VersionTracker: Sendable {
    private var seen: [ReplicaID: SeenSet] = [:]

    public init() {}

    /// The vector reached so far.
    public var vector: VersionVector {
        var entries: [ReplicaID: UInt64] = [:]
        for (replica, set) in seen where set.prefix > 0 { entries[replica] = set.prefix }
        return VersionVector(entries)
    }

    /// Per author the largest sequence number seen, ahead of a gap or not (covers included).
    public var highest: VersionVector {
        var entries: [ReplicaID: UInt64] = [:]
        for (replica, set) in seen { entries[replica] = max(set.prefix, set.ahead.max() ?? 0) }
        return VersionVector(entries)
    }

    /// Whether an operation noted so far lies ahead of a gap (its number is above its author's
    /// prefix): then `vector` does not cover every operation noted.
    public var holdsOperationsAhead: Bool {
        seen.values.contains { !$0.ahead.isEmpty }
    }

    /// Whether this operation was noted already.
    public func contains(_ op: OpID) -> Bool {
        seen[op.replica]?.contains(op.seq) ?? false
    }

    /// Notes a batch: its operations, then (for a complete delta whose base was reached before
    /// it) its `covers`. Returns the operations that were new.
    @discardableResult
    public mutating func note(_ batch: OperationBatch) -> [Op] {
        let complete = batch.base.map { base in batch.covers != nil && vector.dominates(base) } ?? false
        var fresh: [Op] = []
        for op in batch.operations where seen[op.id.replica, default: SeenSet()].insert(op.id.seq) {
            fresh.append(op)
        }
        if complete, let covers = batch.covers {
            for (replica, seq) in covers.entries { seen[replica, default: SeenSet()].raisePrefix(to: seq) }
        }
        return fresh
    }
}

extension Replica {
    /// Per author the largest sequence number integrated (ahead of a gap or not) or covered by a
    /// complete delta: no operation this replica holds lies beyond it.
    public var highestSeen: VersionVector {
        var entries: [ReplicaID: UInt64] = [:]
        for (replica, set) in seen { entries[replica] = max(set.prefix, set.ahead.max() ?? 0) }
        return VersionVector(entries)
    }
}
