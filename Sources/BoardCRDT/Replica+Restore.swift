import BoardModel

extension Replica {
    /// Makes this replica show what `past` (an earlier version of the same board: a replica
    /// holding a subset of this one's operations, `BoardHistory.replica(at:)`) shows, as ordinary
    /// new operations in one undo step: the canvas and background are set back; items created
    /// since are deleted; every register of an older item that changed since is written again
    /// with its old value (existence too: an item deleted since comes back). Merges with
    /// concurrent edits by the contract, like any edit.
    ///
    /// What it cannot set back: points appended to a stroke since (points are only ever
    /// appended, by the stroke's creator), and operations other replicas make concurrently.
    /// Paint-order keys longer than `ZKey.comfortableLength` are not written again: the item
    /// goes where that key paints it, with a short key (as undo does).
    public mutating func edits(toReturnTo past: Replica) throws -> LocalEdit {
        finishStroke()
        var payloads: [Payload] = []
        var displaced: [PaintKey] = []
        if canvas.value != past.canvas.value { payloads.append(.setBoard(past.canvas.value)) }
        if background.value != past.background.value { payloads.append(.setBoard(past.background.value)) }
        for id in items.keys.sorted() {
            guard let state = items[id], state.creation != nil else { continue }
            guard let old = past.items[id], old.creation != nil else {
                if state.isVisible { payloads.append(.setItem(id, .exists(false))) }
                continue
            }
            for kind in ItemField.Kind.allCases {
                guard let want = old[kind], want != state[kind] else { continue }
                if case .z(let key) = want, key.bytes.count > ZKey.comfortableLength {
                    displaced.append(PaintKey(z: key, item: id))
                } else {
                    payloads.append(.setItem(id, want))
                }
            }
        }
        guard !payloads.isEmpty || !displaced.isEmpty else { return LocalEdit() }
        try reserve(payloads.count + displaced.count * max(1, items.count))
        beginUndoGroup()
        defer { endUndoGroup() }
        var made = payloads.map { makeOperation($0) }
        if !displaced.isEmpty { made += try place(atKeys: displaced) }
        return LocalEdit(operations: made)
    }
}
