import BoardCRDT
import BoardModel
import Foundation

/// The board at one listed version, made from item timelines (`BoardHistory.snapshot(at:)`):
/// kept between views so that the next one reads again only the items whose operations lie
/// between the two entries.
struct TimelineView: Sendable {
    var vector: VersionVector
    var entry: Int32
    /// Per item (index in `ItemTimelines.items`), the step shown (-1: none).
    var stepAt: [Int32]
    /// Per item, the look shown with its image attached (nil: not shown).
    var shown: [BoardItem?]
    /// Per item, its index in `board.strokes` or `board.stickers`.
    var slot: [Int32]
    /// The shown items' paint keys (`rank << 32 | item`), ascending: paint order.
    var keys: [UInt64]
    var board = BoardSnapshot()
    /// Marks touched items once per update (`mark[item] == generation`).
    var mark: [UInt32]
    var generation: UInt32 = 0

    /// More operations between two entries than this many per item, and the view is made
    /// afresh rather than updated item by item.
    static let updateLimitPerItem = 2

    static func key(_ rank: Int32, _ item: Int) -> UInt64 { UInt64(UInt32(rank)) << 32 | UInt64(item) }

    /// The board at `entry`: every item's step found afresh.
    init(_ timelines: ItemTimelines, entry: Int32, vector: VersionVector, images: inout ImageSource) {
        let count = timelines.items.count
        self.vector = vector
        self.entry = entry
        stepAt = Array(repeating: -1, count: count)
        shown = Array(repeating: nil, count: count)
        slot = Array(repeating: -1, count: count)
        mark = Array(repeating: 0, count: count)
        keys = []
        for item in 0..<count {
            let at = timelines.step(of: item, at: entry)
            stepAt[item] = at
            guard at >= 0 else { continue }
            guard let look = timelines.look(of: item, at, images: &images) else { continue }
            shown[item] = look
            keys.append(Self.key(timelines.steps[item][Int(at)].rank, item))
        }
        keys.sort()
        rebuild(timelines)
        setFields(timelines, images: &images)
    }

    /// Moves the view to `entry`, reading again only the items the operations between touch.
    mutating func update(_ timelines: ItemTimelines, to entry: Int32, vector: VersionVector, images: inout ImageSource) {
        let (low, high) = (min(self.entry, entry), max(self.entry, entry))
        let range = Int(timelines.entryStart[Int(low) + 1])..<Int(timelines.entryStart[Int(high) + 1])
        self.entry = entry
        self.vector = vector
        generation &+= 1
        if generation == 0 {
            mark = Array(repeating: 0, count: mark.count)
            generation = 1
        }
        var removed: [UInt64] = []
        var added: [UInt64] = []
        var inPlace: [Int] = []
        var boardFields = false
        for at in range {
            let touched = timelines.entryItems[at]
            guard touched >= 0 else {
                if touched == -1 { boardFields = true }
                continue
            }
            let item = Int(touched)
            guard mark[item] != generation else { continue }
            mark[item] = generation
            let now = timelines.step(of: item, at: entry)
            let before = stepAt[item]
            guard now != before else { continue }
            stepAt[item] = now
            let old = before >= 0 ? timelines.steps[item][Int(before)] : nil
            let new = now >= 0 ? timelines.steps[item][Int(now)] : nil
            let look = timelines.look(of: item, now, images: &images)
            shown[item] = look
            let oldKey = old?.look == nil ? nil : Self.key(old!.rank, item)
            let newKey = look == nil ? nil : Self.key(new!.rank, item)
            if let oldKey, oldKey == newKey, old?.look?.isStroke == look?.isStroke {
                inPlace.append(item)
                continue
            }
            if let oldKey { removed.append(oldKey) }
            if let newKey { added.append(newKey) }
        }
        if !removed.isEmpty || !added.isEmpty {
            removed.sort()
            added.sort()
            var merged: [UInt64] = []
            merged.reserveCapacity(keys.count - removed.count + added.count)
            var (r, a) = (0, 0)
            for key in keys {
                while r < removed.count, removed[r] < key { r += 1 }
                if r < removed.count, removed[r] == key { r += 1; continue }
                while a < added.count, added[a] < key { merged.append(added[a]); a += 1 }
                merged.append(key)
            }
            merged.append(contentsOf: added[a...])
            keys = merged
            rebuild(timelines)
        } else {
            for item in inPlace {
                switch shown[item] {
                case .stroke(let stroke)?: board.strokes[Int(slot[item])] = stroke
                case .sticker(let sticker)?: board.stickers[Int(slot[item])] = sticker
                case nil: break
                }
            }
        }
        if boardFields { setFields(timelines, images: &images) }
    }

    /// The snapshot's items in paint order from `keys` (its board fields stay).
    private mutating func rebuild(_ timelines: ItemTimelines) {
        var strokes: [InkStroke] = []
        var stickers: [PlacedSticker] = []
        var order: [UUID] = []
        order.reserveCapacity(keys.count)
        for key in keys {
            let item = Int(key & 0xFFFF_FFFF)
            switch shown[item] {
            case .stroke(let stroke)?:
                slot[item] = Int32(strokes.count)
                strokes.append(stroke)
            case .sticker(let sticker)?:
                slot[item] = Int32(stickers.count)
                stickers.append(sticker)
            case nil:
                continue
            }
            order.append(timelines.items[item].uuid)
        }
        board.strokes = strokes
        board.stickers = stickers
        board.paintOrder = order
    }

    private mutating func setFields(_ timelines: ItemTimelines, images: inout ImageSource) {
        let fields = timelines.fields(at: entry)
        if let hash = fields.backgroundAsset { _ = images.data(hash) }
        fields.set(on: &board, assets: images.assets)
    }
}

/// Image bytes for views: those loaded so far, and the package's asset store for the rest.
struct ImageSource {
    var assets: AssetStore
    let history: BoardHistory

    /// The image's bytes, loaded from the package when not yet held; nil when the package does
    /// not hold it (or holds other bytes under its name).
    mutating func data(_ hash: AssetHash) -> Data? {
        if let held = assets.data(for: hash) { return held }
        // Checked against its name as it is kept (a damaged file shows as a missing image).
        guard let bytes = try? history.fileSystem.readFile(Path.join(history.assetDirectory, hash.hex)),
              (try? assets.insert(Data(bytes), claimedHash: hash)) != nil else { return nil }
        return assets.data(for: hash)
    }
}

extension BoardHistory {
    /// Image bytes read with the timelines (so that the views after the first do not stop to
    /// read images one by one): at most this many; the rest are read when a view first shows
    /// them.
    static let preloadedImageBytes = 8 << 20

    /// Reads the images `hashes` names that the cache lacks, up to `preloadedImageBytes`, on
    /// the caller's thread; each is checked against its hash (a damaged or missing one is left
    /// for views to show as missing).
    func preloadImages(_ hashes: [AssetHash]) {
        let held = cache.assets
        var wanted: [AssetHash] = []
        var budget = Self.preloadedImageBytes
        for hash in hashes where !held.contains(hash) {
            guard let size = try? fileSystem.fileSize(Path.join(assetDirectory, hash.hex)), size <= budget else { continue }
            budget -= size
            wanted.append(hash)
        }
        guard !wanted.isEmpty else { return }
        var source = ImageSource(assets: held, history: self)
        for hash in wanted { _ = source.data(hash) }
        cache.assets = source.assets
    }

    /// `snapshot(at:)` of a listed version whose vector covers exactly a prefix of the entries,
    /// from item timelines; nil for any other vector (the caller views it from a replica).
    func timelineSnapshot(at version: VersionVector) -> BoardSnapshot? {
        guard let number = versionNumber(of: version) else { return nil }
        let entry: Int32
        if number == 0 {
            entry = -1
        } else {
            entry = versionEntries[number - 1]
            guard entry >= 0 else { return nil }
        }
        let timelines = cache.timelines(of: self)
        guard timelines.usable else { return nil }
        var images = ImageSource(assets: cache.assets, history: self)
        let loaded = images.assets.count
        var view: TimelineView
        if var last = cache.takeTimelineView(),
           timelines.operationCount(between: last.entry, and: entry) <= TimelineView.updateLimitPerItem * max(1, timelines.items.count) {
            last.update(timelines, to: entry, vector: version, images: &images)
            view = last
        } else {
            view = TimelineView(timelines, entry: entry, vector: version, images: &images)
        }
        if images.assets.count > loaded { cache.assets = images.assets }
        let board = view.board
        cache.keepTimelineView(view)
        return board
    }
}
