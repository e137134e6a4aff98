/// For each replica, the highest sequence number up to which this side holds every operation
/// (or everything that still matters of it: overwritten values may have been compacted away).
public struct VersionVector: Hashable, Sendable, CustomStringConvertible {
    public private(set) var entries: [ReplicaID: UInt64]

    public init(_ entries: [ReplicaID: UInt64] = [:]) {
        self.entries = entries.filter { $0.value > 0 }
    }

    public static let empty = VersionVector()

    public subscript(replica: ReplicaID) -> UInt64 {
        get { entries[replica] ?? 0 }
        set { entries[replica] = newValue == 0 ? nil : newValue }
    }

    /// Whether this vector covers every operation `other` covers.
    public func dominates(_ other: VersionVector) -> Bool {
        other.entries.allSatisfy { self[$0.key] >= $0.value }
    }

    /// Whether `op` is covered.
    public func covers(_ op: OpID) -> Bool { self[op.replica] >= op.seq }

    /// The entry-wise maximum.
    public func merged(with other: VersionVector) -> VersionVector {
        var result = self
        for (replica, seq) in other.entries where seq > result[replica] {
            result[replica] = seq
        }
        return result
    }

    /// Sum of all entries: how many operations the vector covers.
    public var totalCount: UInt64 {
        // Saturating: a damaged package may name sequence numbers whose sum passes UInt64.max.
        entries.values.reduce(0) { sum, seq in
            let (total, overflow) = sum.addingReportingOverflow(seq)
            return overflow ? .max : total
        }
    }

    /// Entries sorted by replica id, for deterministic encodings and output.
    public var sortedEntries: [(replica: ReplicaID, seq: UInt64)] {
        entries.sorted { $0.key < $1.key }.map { (replica: $0.key, seq: $0.value) }
    }

    public var description: String {
        "[" + sortedEntries.map { "\($0.replica):\($0.seq)" }.joined(separator: ", ") + "]"
    }
}

extension VersionVector {
    /// This vector raised to everything `batch` reaches: its operations' sequence numbers and,
    /// for a complete delta, its `covers`.
    public func raised(by batch: OperationBatch) -> VersionVector {
        var vector = self
        for op in batch.operations where op.id.seq > vector[op.id.replica] { vector[op.id.replica] = op.id.seq }
        if let covers = batch.covers { vector = vector.merged(with: covers) }
        return vector
    }
}
