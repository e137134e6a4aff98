import BoardCRDT

/// Named versions in a history (docs/ARCHITECTURE.md, "Named versions"): labels are operations,
/// so a history holds every write to them; `labels` are the labels as of its latest version.
extension BoardHistory {
    /// Every label (deleted ones left out) as of the latest version, by id: per label, the
    /// write with the greatest timestamp among the history's operations, as a replica merges
    /// them. One pass over the operations, no view is materialized (cheap enough for the web
    /// view's version listing).
    public var labels: [NamedVersion] {
        var winners: [LabelID: Op] = [:]
        for entry in entries {
            for op in entry.operations {
                guard case .setLabel(let id, _) = op.payload else { continue }
                if let held = winners[id], held.timestamp > op.timestamp { continue }
                winners[id] = op
            }
        }
        return winners.compactMap { id, op -> NamedVersion? in
            guard case .setLabel(_, let label?) = op.payload else { return nil }
            return NamedVersion(id: id, text: label.text, version: label.version, time: label.time, author: op.id.replica)
        }.sorted { $0.id < $1.id }
    }

    /// The number of the first version whose vector is exactly `vector` (0 for the empty
    /// vector), nil when none is: a label may name a vector this history never reached as a
    /// version (one made elsewhere, or whose operations reached this package in other records).
    public func versionNumber(of vector: VersionVector) -> Int? {
        if vector.entries.isEmpty { return 0 }
        // Totals rise with every version (they only stay level if they saturate): from the
        // first whose total is not below this vector's, the versions with the same total.
        let total = vector.totalCount
        var low = 0, high = versionTotals.count
        while low < high {
            let middle = (low + high) / 2
            if versionTotals[middle] < total { low = middle + 1 } else { high = middle }
        }
        while low < versions.count, versionTotals[low] == total {
            if versions[low].vector == vector { return versions[low].number }
            low += 1
        }
        return nil
    }
}
