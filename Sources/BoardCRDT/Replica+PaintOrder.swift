// Choosing paint-order keys. Every local edit that gives an item a z key (creating a stroke or a
// sticker, front, back, between, undo and redo, matching a snapshot) takes it from
// `placement(of:at:)`, so no key this replica writes is longer than `ZKey.comfortableLength`,
// whatever keys peers wrote: when the one short key an edit would write does not exist (the top
// key is a peer's 1,024 bytes of 0xFF, two neighbours leave no room), the edit re-keys a window of
// neighbouring items instead, and an absurd key is replaced, never built upon.
extension Replica {
    /// Where an item goes in the paint order.
    enum Spot {
        /// Below every item.
        case bottom
        /// Above every item.
        case top
        /// Strictly between two items, the first painted below the second now.
        case between(ItemID, ItemID)
        /// Above an item: just above its key when that key is short (perhaps above items painted
        /// over it too), else directly above the item.
        case above(ItemID)
    }

    /// The keys that put an item at a spot: its own, and those of neighbours a rebalance re-keyed.
    struct Placement {
        var item: ItemID
        var key: ZKey
        /// Re-keyed neighbours, bottom to top; empty when one key did (no allocation).
        var neighbours: [(item: ItemID, key: ZKey)] = []
        /// Whether a window was re-keyed: the z range is then recomputed from current keys.
        var rebalanced = false

        var count: Int { 1 + neighbours.count }
    }

    /// Keys that put `item` (created or about to be) at `spot`, none longer than
    /// `ZKey.comfortableLength`. Usually one key for the item, found in O(1) from the z range or
    /// the neighbours' keys. When that key would be longer, a window of the paint order around
    /// the spot is re-keyed (`window(placing:at:)`). Changes nothing.
    func placement(of item: ItemID, at spot: Spot) throws -> Placement {
        let key: ZKey?
        switch spot {
        case .top:
            key = Replica.counted(ZKey.after(zRange?.highest))
        case .bottom:
            key = Replica.counted(ZKey.before(zRange?.lowest))
        case .between(let lower, let upper):
            let (low, high) = (paintKey(lower).z, paintKey(upper).z)
            key = low < high ? ZKey.between(low, high) : nil  // tied keys: broken by id, no room
        case .above(let lower):
            key = Replica.counted(ZKey.after(paintKey(lower).z))
        }
        if let key, key.bytes.count <= ZKey.comfortableLength {
            return Placement(item: item, key: key)
        }
        var keys = try window(placing: item, at: spot)
        let own = keys.remove(at: keys.firstIndex { $0.item == item }!)
        return Placement(item: item, key: own.key, neighbours: keys, rebalanced: true)
    }

    /// Gives existing `item` its place at `spot`: one z write, or, when neighbours are re-keyed,
    /// several in one undo step.
    mutating func place(_ item: ItemID, at spot: Spot) throws -> LocalEdit {
        let placement = try placement(of: item, at: spot)
        try reserve(placement.count)
        return LocalEdit(item: item, operations: write(placement, withItem: true))
    }

    /// Writes a placement's keys, the item's first unless its creation carries it, in one undo
    /// step; after a rebalance the z range is recomputed, so an absurd key that was replaced
    /// stops steering the next edits.
    mutating func write(_ placement: Placement, withItem: Bool) -> [Op] {
        guard placement.rebalanced else {
            return withItem ? [makeOperation(.setItem(placement.item, .z(placement.key)))] : []
        }
        undoLog.begin()
        defer { undoLog.end() }
        var operations: [Op] = []
        operations.reserveCapacity(placement.count)
        if withItem { operations.append(makeOperation(.setItem(placement.item, .z(placement.key)))) }
        for (target, key) in placement.neighbours {
            operations.append(makeOperation(.setItem(target, .z(key))))
        }
        recomputeZRange()
        return operations
    }

    /// Puts each item of `wanted` where its key (too long to write again) would paint it among
    /// the current keys, with short keys: undo and redo of a step that holds a peer's absurd key.
    /// The items go in increasing order of those keys, each strictly between the item the keys
    /// would paint just below it and the next one above that is not still to be placed, so the
    /// order comes out as writing the keys themselves would make it.
    mutating func place(atKeys wanted: [PaintKey]) throws -> [Op] {
        let moving = Set(wanted.map(\.item))
        var order = items.compactMap { id, state in
            state.creation != nil && !moving.contains(id) ? paintKey(id) : nil
        }
        order += wanted
        order.sort()
        var operations: [Op] = []
        for (index, entry) in order.enumerated() where moving.contains(entry.item) {
            let lower = index > 0 ? order[index - 1].item : nil
            let upper = order[(index + 1)...].first { !moving.contains($0.item) }?.item
            let spot: Spot
            switch (lower, upper) {
            case (nil, _): spot = .bottom
            case (_?, nil): spot = .top
            case (let lower?, let upper?): spot = .between(lower, upper)
            }
            operations += write(try placement(of: entry.item, at: spot), withItem: true)
        }
        return operations
    }

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

    /// New keys for `item` at `spot` and as few neighbours as possible: the window around the
    /// spot doubles until the gap around it holds short keys for all of them; the whole board
    /// always does. Returns only the keys that change (the item's always).
    ///
    /// Only items whose keys leave no room (absurd keys from a peer, or a gap that ordinary use
    /// filled) make the window grow, and afterwards they hold short keys: a peer must write keys
    /// again to make a later edit re-key them again.
    private func window(placing item: ItemID, at place: Spot) throws -> [(item: ItemID, key: ZKey)] {
        let others = paintOrder(excluding: item)
        let spot: Int
        switch place {
        case .bottom: spot = 0
        case .top: spot = others.count
        case .between(let lower, _), .above(let lower): spot = others.firstIndex(of: lower).map { $0 + 1 } ?? 0
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
        return zip(window, keys).compactMap { target, key in
            paintKey(target).z != key || target == item ? (target, key) : nil
        }
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
                guard let next = counted(upward ? ZKey.after(key) : ZKey.before(key)),
                      next.bytes.count <= ZKey.comfortableLength else { return nil }
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

    /// A key made by counting up or down (`ZKey.after`, `ZKey.before`) when it is an integer key
    /// (head `01`-`fe`), nil otherwise. Counting past a key with head `ff` or `00`, which only a
    /// peer writes (ordinary use would need 255^127 items), bisects toward an end of the key space
    /// and gains a byte every eight edits, so a peer's one-byte `ff` would make each of about 250
    /// new items build on the last until one edit re-keyed them all. Refusing such keys re-keys
    /// the peer's item at the first edit beside it instead.
    static func counted(_ key: ZKey) -> ZKey? {
        (0x01...0xFE).contains(key.bytes[0]) ? key : nil
    }

    /// The z range from the current keys of created items only, so an absurd key that was since
    /// overwritten, or written for an item that was never created, stops steering new keys.
    mutating func recomputeZRange() {
        var range: (lowest: ZKey, highest: ZKey)?
        for state in items.values where state.creation != nil {
            guard let key = state.z else { continue }
            range = range.map { (Swift.min($0.lowest, key), Swift.max($0.highest, key)) } ?? (key, key)
        }
        zRange = range
    }
}
