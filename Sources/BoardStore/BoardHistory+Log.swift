import BoardCRDT
import BoardModel

// Reading a history whole: every operation with its author and time (`board-sync log`), and the
// views a pruned history can still give.

extension BoardHistory {
    /// One operation of the history, with who made it and when this package recorded it.
    public struct LoggedOperation: Sendable {
        public var operation: Op
        /// The replica that made it (its id's replica).
        public var author: ReplicaID { operation.id.replica }
        /// The number of the first version that holds it (nil: it lies ahead of a gap no record
        /// closed).
        public var version: Int?
        /// Milliseconds since 1970 when this package integrated the record that brought it (the
        /// first version's time; nil when not known). Metadata only: never used to decide a
        /// conflict.
        public var time: Int64?
    }

    /// Every operation the history holds (archived by compaction or still in the live log), each
    /// once, in the order this package integrated them. After a prune, the operations the
    /// horizon's board holds stand for the ones before it (the horizon's version and time).
    public var operationLog: [LoggedOperation] {
        var result: [LoggedOperation] = []
        for entry in entries {
            for op in entry.operations {
                // Versions' vectors only grow: the first that covers the operation.
                var low = 0, high = versions.count
                while low < high {
                    let middle = (low + high) / 2
                    if versions[middle].vector.covers(op.id) { high = middle } else { low = middle + 1 }
                }
                let version = low < versions.count ? versions[low] : nil
                result.append(LoggedOperation(operation: op, version: version?.number, time: version?.time))
            }
        }
        return result
    }

    /// Throws when this history no longer holds `version`: it lies before the horizon of a
    /// prune (`horizon` does not hold in it), so a view of it would be a guess.
    public func requireHeld(_ version: VersionVector) throws {
        if let horizon, !version.dominates(horizon) {
            throw HistoryError("version \(version) is before the history's horizon \(horizon) (pruned): it is no longer kept")
        }
    }

    /// `replica(at:)`, refusing a version before the horizon (`requireHeld`).
    public func heldReplica(at version: VersionVector) throws -> Replica {
        try requireHeld(version)
        return replica(at: version)
    }

    /// `snapshot(at:)`, refusing a version before the horizon (`requireHeld`).
    public func heldSnapshot(at version: VersionVector) throws -> BoardSnapshot {
        try requireHeld(version)
        return snapshot(at: version)
    }
}
