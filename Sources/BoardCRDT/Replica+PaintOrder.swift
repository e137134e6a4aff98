// Re-keying a window of the paint order, so that z keys made by ordinary use stay short however
// often items are reordered (and an absurd key written by a peer is replaced, not built upon).
extension Replica {
    /// Every created item (deleted ones too: a restore shows them again) bottom to top, `item`
    /// left out.
    func paintOrder(excluding item: ItemID) -> [ItemID] {
        items.compactMap { id, state in
            id != item && state.creation != nil ? id : nil
        }
        .map(paintKey)
        .sorted()
        .map(\.item)
    }

    /// Where a rebalanced item goes.
    enum Spot {
        case bottom
        case top
        case above(ItemID)
    }

    /// Puts `item` at `spot`, giving it and as few neighbours as possible fresh short keys, in
    /// one undo step. The window around the spot doubles until the gap around it holds short
    /// keys for all of them; the whole board always does.
    mutating func rebalance(placing item: ItemID, at place: Spot) throws -> LocalEdit {
        let others = paintOrder(excluding: item)
        let spot: Int
        switch place {
        case .bottom: spot = 0
        case .top: spot = others.count
        case .above(let lower): spot = others.firstIndex(of: lower).map { $0 + 1 } ?? 0
        }
        var start = spot
        var end = spot
        var keys: [ZKey]?
        while true {
            let below = start > 0 ? paintKey(others[start - 1]).z : nil
            let above = end < others.count ? paintKey(others[end]).z : nil
            keys = Replica.spread(end - start + 1, above: below, below: above)
            if keys != nil || (start == 0 && end == others.count) { break }
            let grow = max(1, end - start)
            start = max(0, start - grow)
            end = min(others.count, end + grow)
        }
        guard let keys else { throw EditError.noRoomInPaintOrder }
        let window = Array(others[start..<spot]) + [item] + Array(others[spot..<end])
        let changed = zip(window, keys).filter { paintKey($0.0).z != $0.1 || $0.0 == item }
        try reserve(changed.count)
        undoLog.begin()
        defer { undoLog.end() }
        var operations: [Op] = []
        for (target, key) in changed {
            operations.append(makeOperation(.setItem(target, .z(key))))
        }
        recomputeZRange()
        return LocalEdit(item: item, operations: operations)
    }

    /// `count` increasing keys strictly between `lower` and `upper` (nil: the ends of the order),
    /// none longer than `ZKey.comfortableLength`; nil when the gap has no room for that.
    static func spread(_ count: Int, above lower: ZKey?, below upper: ZKey?) -> [ZKey]? {
        if let lower, let upper, !(lower < upper) { return nil }
        var keys: [ZKey] = []
        keys.reserveCapacity(count)
        if lower == nil || upper == nil {
            // An open end: count away from the other bound as bring-to-front (upward) and
            // send-to-back (downward) do, with short integer keys.
            let upward = upper == nil
            var key = upward ? lower : upper
            for _ in 0..<count {
                let next = upward ? ZKey.after(key) : ZKey.before(key)
                if let key, !(upward ? key < next : next < key) { return nil }
                keys.append(next)
                key = next
            }
            if !upward { keys.reverse() }
        } else {
            func fill(_ low: ZKey, _ high: ZKey, _ count: Int) {
                guard count > 0 else { return }
                let middle = ZKey.between(low, high)
                let left = (count - 1) / 2
                fill(low, middle, left)
                keys.append(middle)
                fill(middle, high, count - 1 - left)
            }
            fill(lower!, upper!, count)
        }
        guard keys.allSatisfy({ $0.bytes.count <= ZKey.comfortableLength }) else { return nil }
        return keys
    }

    /// The z range from current values only, so an absurd key that was since overwritten stops
    /// steering new keys.
    mutating func recomputeZRange() {
        var range: (lowest: ZKey, highest: ZKey)?
        for state in items.values {
            guard let key = state.z else { continue }
            range = range.map { (Swift.min($0.lowest, key), Swift.max($0.highest, key)) } ?? (key, key)
        }
        zRange = range
    }
}
