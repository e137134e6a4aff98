import BoardCRDT
import BoardModel
import Foundation

extension BoardHistory {
    /// The items whose operations one of `a` and `b` covers and the other does not (what may
    /// look different between the two views); nil when that is not known cheaply (views scan,
    /// or more than `limit` operations lie between).
    func itemsTouched(between a: VersionVector, and b: VersionVector, limit: Int) -> (items: [ItemID], board: Bool, operations: Int)? {
        guard placesInOrder else { return nil }
        var low = VersionVector.empty, high = VersionVector.empty
        for author in Set(a.entries.keys).union(b.entries.keys) {
            low[author] = min(a[author], b[author])
            high[author] = max(a[author], b[author])
        }
        let between = runs(from: 0, above: low, upTo: high)
        let count = between.reduce(0) { $0 + $1.range.count }
        guard count <= limit else { return nil }
        var seen: Set<ItemID> = []
        var touched: [ItemID] = []
        var board = false
        for (list, range) in between {
            for place in list[range] {
                if let item = entries[Int(place.entry)].operations[Int(place.index)].payload.item {
                    if seen.insert(item).inserted { touched.append(item) }
                } else {
                    board = true
                }
            }
        }
        return (touched, board, count)
    }

    /// A replica holding only `places`' operations that `version` covers, with the package's
    /// images for them (`assets`: those loaded so far, and any it loads); nil if they did not
    /// apply. An item's state (creation, points, registers, existence) and the board's own
    /// fields depend on their own operations alone, so it shows them as `replica(at: version)`
    /// does.
    func partialReplica(_ places: [Place], at version: VersionVector, assets: inout AssetStore) -> Replica? {
        var operations: [Op] = []
        for place in places {
            let op = entries[Int(place.entry)].operations[Int(place.index)]
            if version.covers(op.id) { operations.append(op) }
        }
        var replica = Replica(id: ReplicaID(0))
        guard (try? replica.apply(OperationBatch(operations: operations), from: .ownLog)) != nil else { return nil }
        replica.assets = assets
        if !replica.missingAssets.isEmpty {
            loadAssets(into: &replica)
            assets = replica.assets
        }
        return replica
    }

    /// The board at `version` as a snapshot, with the images the package holds: always
    /// `replica(at:).snapshot()` with the images loaded. A listed version (one of `versions`,
    /// or the empty vector) whose vector covers every operation of the records up to its own is
    /// read from item timelines (`ItemTimelines`: a binary search per item, built on the first
    /// such view), and next to the last one shown only the items whose operations lie between
    /// are read again. Any other vector is viewed from `replica(at:)`, and next to the last
    /// snapshot made that way only the items whose operations lie between are read again
    /// (`ShownBoard`).
    public func snapshot(at version: VersionVector) -> BoardSnapshot {
        // A listed version covering exactly a prefix of the entries: from item timelines.
        if let board = timelineSnapshot(at: version) { return board }
        if var shown = cache.takeShown(),
           let touched = itemsTouched(between: shown.vector, and: version, limit: ShownBoard.redrawLimit) {
            // Next to the last snapshot: only the items (and board fields) whose operations lie
            // between are read again: a few, each from its own operations up to `version`;
            // more, from the view of the whole board.
            var assets = cache.assets
            var replica: Replica?
            if touched.operations > ShownBoard.replayLimit {
                replica = self.replica(at: version)
                replica!.assets = assets
                if !replica!.missingAssets.isEmpty {
                    loadAssets(into: &replica!)
                    assets = replica!.assets
                }
            }
            let loaded = cache.assets.count
            if shown.update(to: version, touched: touched.items, boardFields: touched.board, from: replica, of: self, assets: &assets) {
                // Images loaded now show on items read now; one loaded earlier than the last
                // snapshot showed on it already (every read loads what it refers to).
                if assets.count > loaded { cache.assets = assets }
                cache.shown = shown
                return shown.board
            }
        }
        var replica = replica(at: version)
        replica.assets = cache.assets
        if !replica.missingAssets.isEmpty {
            let loaded = replica.assets.count
            loadAssets(into: &replica)
            if replica.assets.count > loaded { cache.assets = replica.assets }
        }
        let shown = ShownBoard(replica, at: version)
        cache.shown = shown
        return shown.board
    }

    /// Image bytes the replica refers to, from the package's asset store.
    public func loadAssets(into replica: inout Replica) {
        var source = ImageSource(assets: replica.assets, history: self)
        for hash in replica.missingAssets { _ = source.data(hash) }
        replica.assets = source.assets
    }
}

/// A snapshot of one version with each visible item kept by id with its paint key, so the
/// snapshot of a nearby version redraws only the items whose operations lie between the two
/// (`BoardHistory.snapshot(at:)`), as `ChangeTracker` does for a live board.
struct ShownBoard: Sendable {
    var vector: VersionVector
    var items: [UUID: (key: PaintKey, item: BoardItem)] = [:]
    /// Visible items, bottom to top.
    var order: [UUID] = []
    var board = BoardSnapshot()
    /// Where each item is in `board.strokes` or `board.stickers` (an item whose paint key
    /// stays is replaced in place).
    private var position: [UUID: Int] = [:]
    /// More operations between two versions than this, and the snapshot reads every item.
    static let redrawLimit = 20_000
    /// At most this many operations between, and the items they touch are replayed alone
    /// rather than read from a view of the whole board (`BoardHistory.replica(at:)`, which
    /// costs a copy of the board when no kept view can be changed in place).
    static let replayLimit = 64

    struct PaintKey: Sendable, Comparable {
        var z: ZKey
        var id: ItemID
        static func < (a: PaintKey, b: PaintKey) -> Bool { (a.z, a.id) < (b.z, b.id) }
    }

    /// Every visible item of `replica` (which shows `vector`), read one by one.
    init(_ replica: Replica, at vector: VersionVector) {
        self.vector = vector
        let ids = replica.itemIDs
        items.reserveCapacity(ids.count)
        for id in ids {
            guard let visible = replica.visibleItem(id), let item = Self.item(visible) else { continue }
            items[id.uuid] = (PaintKey(z: visible.z, id: id), item)
        }
        order = items.keys.sorted { items[$0]!.key < items[$1]!.key }
        var fields = BoardSnapshot()
        replica.setBoardFields(of: &fields)
        board = fields
        rebuild()
    }

    private static func item(_ visible: VisibleItem) -> BoardItem? {
        if let stroke = visible.stroke { return .stroke(stroke) }
        return visible.sticker.map(BoardItem.sticker)
    }

    private static func keyed(_ visible: VisibleItem?, _ id: ItemID) -> (key: PaintKey, item: BoardItem)? {
        visible.flatMap { visible in item(visible).map { (key: PaintKey(z: visible.z, id: id), item: $0) } }
    }

    /// Brings the board to `vector`, reading again only the `touched` items (and the board's
    /// fields when `boardFields`): from `replica` (which shows `vector`) when given, else each
    /// from its own operations in `history`. False (the board is then unusable) if one did
    /// not apply.
    mutating func update(to vector: VersionVector, touched: [ItemID], boardFields: Bool, from replica: Replica?,
                         of history: BoardHistory, assets: inout AssetStore) -> Bool {
        self.vector = vector
        var moved = false
        var changed: [UUID] = []
        for id in touched {
            let uuid = id.uuid
            let now: (key: PaintKey, item: BoardItem)?
            if let replica {
                now = Self.keyed(replica.visibleItem(id), id)
            } else {
                guard let alone = history.partialReplica(history.itemPlaces[id] ?? [], at: vector, assets: &assets) else { return false }
                now = Self.keyed(alone.visibleItem(id), id)
            }
            let before = items[uuid]
            if before == nil && now == nil { continue }
            if let before, let now, before.key == now.key, before.item.isStroke == now.item.isStroke {
                items[uuid] = now
                changed.append(uuid)
                continue
            }
            moved = true
            if let before {
                let at = insertionIndex(before.key)
                if at < order.count, order[at] == uuid { order.remove(at: at) } else if let found = order.firstIndex(of: uuid) { order.remove(at: found) }
            }
            items[uuid] = now
            if let now { order.insert(uuid, at: insertionIndex(now.key)) }
        }
        if boardFields {
            var fields = BoardSnapshot()
            if let replica {
                replica.setBoardFields(of: &fields)
            } else {
                guard let alone = history.partialReplica(history.boardPlaces, at: vector, assets: &assets) else { return false }
                alone.setBoardFields(of: &fields)
            }
            board.canvasSize = fields.canvasSize
            board.backgroundPNG = fields.backgroundPNG
            board.backgroundSHA256 = fields.backgroundSHA256
        }
        if moved {
            rebuild()
        } else {
            for uuid in changed {
                guard let at = position[uuid] else { continue }
                switch items[uuid]?.item {
                case .stroke(let stroke)?: board.strokes[at] = stroke
                case .sticker(let sticker)?: board.stickers[at] = sticker
                case nil: break
                }
            }
        }
        return true
    }

    /// Where `key` goes in `order` (sorted by key).
    private func insertionIndex(_ key: PaintKey) -> Int {
        var low = 0, high = order.count
        while low < high {
            let middle = (low + high) / 2
            if items[order[middle]]!.key < key { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// The snapshot's items in paint order (its board fields stay).
    private mutating func rebuild() {
        var strokes: [InkStroke] = []
        var stickers: [PlacedSticker] = []
        position.removeAll(keepingCapacity: true)
        for uuid in order {
            switch items[uuid]?.item {
            case .stroke(let stroke)?:
                position[uuid] = strokes.count
                strokes.append(stroke)
            case .sticker(let sticker)?:
                position[uuid] = stickers.count
                stickers.append(sticker)
            case nil: break
            }
        }
        board.strokes = strokes
        board.stickers = stickers
        board.paintOrder = order
    }
}

extension BoardItem {
    var isStroke: Bool {
        if case .stroke = self { return true }
        return false
    }
}
