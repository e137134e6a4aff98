import BoardCRDT
import BoardModel
import Foundation

/// Every item's look through a history, so that a listed version is shown without building a
/// replica of the board (docs/ARCHITECTURE.md, "History": item timelines).
///
/// An item's look depends on its own operations alone (`ItemFold`, the rules a replica
/// integrates them with), and a version whose vector covers every operation of the entries up
/// to its own (`BoardHistory.versionEntries`) holds exactly those entries. So the board at such a
/// version is, item by item, the look after the item's last operation at or before that entry:
/// a binary search per item. Built once per history, on the first snapshot of a listed version;
/// read-only after, and shared by every thread that views.
final class ItemTimelines: Sendable {
    /// One change of an item's look: from `entry` on (until the next step) the item shows
    /// `look`, or nothing when `look` is nil (not created yet, or deleted).
    struct Step: Sendable {
        var entry: Int32
        /// The rank of its z key among every z key of the history (paint order), -1 when not shown.
        var rank: Int32
        /// A stroke's points are the first this many of the item's `points` (its look holds
        /// none); -1 when the look holds its own.
        var points: Int32
        /// A sticker's image: its index in `images` (its bytes are attached when a view shows it).
        var image: Int32
        var look: BoardItem?
    }

    /// Every item the history creates or touches, in id order (paint order breaks ties by id,
    /// so an item's index breaks them too).
    let items: [ItemID]
    let steps: [[Step]]
    /// Per item, the most points its stroke ever showed: a stroke only grows, so each step's
    /// points are a prefix of these, kept once (empty for a sticker).
    let points: [[CodablePoint]]
    /// The images stickers show.
    let images: [AssetHash]
    /// The board's own registers after each entry that changed them.
    let boardSteps: [(entry: Int32, fields: BoardFieldsFold)]
    /// Per operation of each entry, the index (in `items`) of the item it touches, -1 for the
    /// board's own registers, -2 for a label: entry `e`'s are
    /// `entryItems[entryStart[e] ..< entryStart[e + 1]]`.
    let entryItems: [Int32]
    let entryStart: [Int32]

    init(_ history: BoardHistory) {
        let items = history.itemPlaces.keys.sorted()
        // Per entry, a slot for each of its operations: the item it touches, -1 for the board's
        // registers, -2 for a label (filled from the places below, without hashing).
        var entryStart: [Int32] = [0]
        entryStart.reserveCapacity(history.entries.count + 1)
        for entry in history.entries { entryStart.append(entryStart[entryStart.count - 1] + Int32(entry.operations.count)) }
        var entryItems = [Int32](repeating: -2, count: Int(entryStart[entryStart.count - 1]))

        // Each item's steps, folded from its own operations, on the caller's thread (a reader
        // such as the web view's history queue promises one core); its operations' slots.
        let folded = items.enumerated().map { itemIndex, item in
            let places = history.itemPlaces[item] ?? []
            for place in places { entryItems[Int(entryStart[Int(place.entry)]) + Int(place.index)] = Int32(itemIndex) }
            return Self.fold(item, places, history.entries)
        }
        var steps: [[Step]] = []
        var points: [[CodablePoint]] = []
        var zKeys: [[ZKey?]] = []
        var images: [AssetHash] = []
        var imageIndex: [AssetHash: (index: Int32, hex: String)] = [:]
        steps.reserveCapacity(items.count)
        points.reserveCapacity(items.count)
        zKeys.reserveCapacity(items.count)
        var ownPoints = 0
        for item in folded {
            ownPoints += item.ownPoints
            var itemSteps = item.steps
            for (at, hash) in item.images.enumerated() {
                guard let hash, case .sticker(var sticker)? = itemSteps[at].look else { continue }
                if imageIndex[hash] == nil {
                    imageIndex[hash] = (Int32(images.count), hash.hex)
                    images.append(hash)
                }
                // One copy of the hash's text for every step that shows it.
                itemSteps[at].image = imageIndex[hash]!.index
                sticker.imageSHA256 = imageIndex[hash]!.hex
                itemSteps[at].look = .sticker(sticker)
            }
            steps.append(itemSteps)
            points.append(item.points)
            zKeys.append(item.keys)
        }
        // Ranks of the z keys, so paint order is an integer order.
        let sortedKeys = Set(zKeys.joined().compactMap { $0 }).sorted()
        var rank: [ZKey: Int32] = [:]
        rank.reserveCapacity(sortedKeys.count)
        for (at, key) in sortedKeys.enumerated() { rank[key] = Int32(at) }
        for item in steps.indices {
            var last: Int32 = -1
            for at in steps[item].indices {
                if let key = zKeys[item][at] { last = rank[key]! }
                if steps[item][at].look != nil { steps[item][at].rank = last }
            }
        }
        var boardSteps: [(entry: Int32, fields: BoardFieldsFold)] = []
        var fields = BoardFieldsFold()
        let boardWrites = history.boardPlaces.filter { place in
            if case .setBoard = history.entries[Int(place.entry)].operations[Int(place.index)].payload { return true }
            return false  // a label's operation never changes what the board shows
        }
        for place in boardWrites { entryItems[Int(entryStart[Int(place.entry)]) + Int(place.index)] = -1 }
        for (at, place) in boardWrites.enumerated() {
            fields.integrate(history.entries[Int(place.entry)].operations[Int(place.index)])
            if at + 1 < boardWrites.count, boardWrites[at + 1].entry == place.entry { continue }
            boardSteps.append((place.entry, fields))
        }

        self.usable = ownPoints <= Self.maxOwnPoints
        self.items = items
        self.steps = steps
        self.points = points
        self.images = images
        self.boardSteps = boardSteps
        self.entryItems = entryItems
        self.entryStart = entryStart
    }

    /// One item's steps as folded (`fold`), before its images are numbered and its z keys ranked.
    struct Folded {
        var steps: [Step]
        var points: [CodablePoint]
        /// Per step, its z key where it differs from the step shown before (nil: the same, or
        /// not shown).
        var keys: [ZKey?]
        /// Per step, a sticker's image.
        var images: [AssetHash?]
        /// Points held by steps that keep their own.
        var ownPoints = 0
    }

    /// Points the steps that keep their own (`Step.points` -1) may hold in all: beyond it (a
    /// history where creations of one id replace each other under a long stroke, which only a
    /// damaged or hand-written log holds) the timelines are not used and every view comes from
    /// a replica (`usable`), so their memory stays linear in the history.
    static let maxOwnPoints = 1 << 20

    /// False when the steps' own points passed `maxOwnPoints`: views use replicas.
    let usable: Bool

    /// One item's looks, folded from its own operations: a step where an entry changed it.
    /// A stroke's points are made once, from all its operations; a step names how many of them
    /// it shows (O(1) a step, however long the stroke or however its runs arrived). While the
    /// item's creation stays the final one, every look a view can show is a prefix of those
    /// points: a view shows a version that covers every operation of the entries up to it, so
    /// the creator's runs it holds are all of the history's runs up to a sequence number, the
    /// first ones in the order a stroke shows them. A step whose creation is not the final one
    /// (two creations of one id, the earlier arriving later) keeps its own points.
    static func fold(_ item: ItemID, _ places: [BoardHistory.Place], _ entries: [BoardHistory.Entry]) -> Folded {
        let none = AssetStore()
        var result = Folded(steps: [], points: [], keys: [], images: [])
        var fold = ItemFold(item)
        var started = false
        var lastLook: VisibleItem?
        var lastPoints = 0
        var lastCreation: OpID?
        var lastZ: ZKey?
        /// Per stroke step, the creation it showed and the places folded up to it.
        var strokeSteps: [(step: Int, creation: OpID?, through: Int)] = []
        for (at, place) in places.enumerated() {
            fold.integrate(entries[Int(place.entry)].operations[Int(place.index)])
            // Only the look after an entry's last operation on the item can be seen.
            if at + 1 < places.count, places[at + 1].entry == place.entry { continue }
            let visible = fold.visibleWithoutPoints(assets: none)
            let count = fold.strokePointCount, creation = fold.creation
            if started ? (lastPoints == count && lastCreation == creation && lastLook == visible) : visible == nil { continue }
            started = true
            (lastPoints, lastCreation) = (count, creation)
            var step = Step(entry: place.entry, rank: -1, points: -1, image: -1, look: nil)
            var image: AssetHash?
            var z: ZKey?
            if let visible {
                z = visible.z
                if let stroke = visible.stroke {
                    step.points = Int32(count)
                    step.look = .stroke(stroke)
                    strokeSteps.append((result.steps.count, creation, at))
                } else if let sticker = visible.sticker {
                    step.look = .sticker(sticker)
                    image = visible.pendingAsset
                }
            }
            lastLook = consume visible
            result.steps.append(step)
            result.images.append(image)
            // A z key only where it changed (most steps of a moved sticker keep theirs).
            result.keys.append(z != nil && z == lastZ ? nil : z)
            if z != nil { lastZ = z }
        }
        guard !strokeSteps.isEmpty else { return result }
        result.points = fold.strokePoints
        // A step whose creation is not the final one keeps its own points, from one more fold:
        // only when two creations claimed the id, which admission refuses from peers.
        let own = strokeSteps.filter { $0.creation != fold.creation || Int(result.steps[$0.step].points) > result.points.count }
        guard !own.isEmpty else { return result }
        var again = ItemFold(item)
        var folded = 0
        for (at, _, through) in own {
            while folded <= through {
                again.integrate(entries[Int(places[folded].entry)].operations[Int(places[folded].index)])
                folded += 1
            }
            result.steps[at].points = -1
            result.steps[at].look = again.visible(assets: none)?.stroke.map(BoardItem.stroke)
            result.ownPoints += again.strokePointCount
            // Past the bound the history is viewed from replicas instead (`ItemTimelines.usable`).
            if result.ownPoints > ItemTimelines.maxOwnPoints { break }
        }
        return result
    }

    /// The index of the item's step shown at `entry` (its last at or before it), -1 for none.
    func step(of item: Int, at entry: Int32) -> Int32 {
        let list = steps[item]
        var low = 0, high = list.count
        while low < high {
            let middle = (low + high) / 2
            if list[middle].entry <= entry { low = middle + 1 } else { high = middle }
        }
        return Int32(low - 1)
    }

    /// Step `at` of an item as a view shows it: a stroke with its points, a sticker with its
    /// image's bytes from `images` (nil when not shown).
    func look(of item: Int, _ at: Int32, images source: inout ImageSource) -> BoardItem? {
        guard at >= 0 else { return nil }
        let step = steps[item][Int(at)]
        switch step.look {
        case .stroke(var stroke)? where step.points >= 0:
            let all = points[item]
            stroke.points = Int(step.points) == all.count ? all : Array(all[..<Int(step.points)])
            return .stroke(stroke)
        case .sticker(var sticker)? where step.image >= 0:
            if let bytes = source.data(images[Int(step.image)]) { sticker.imagePNG = bytes }
            return .sticker(sticker)
        case let look:
            return look
        }
    }

    /// The board's registers at `entry`.
    func fields(at entry: Int32) -> BoardFieldsFold {
        var low = 0, high = boardSteps.count
        while low < high {
            let middle = (low + high) / 2
            if boardSteps[middle].entry <= entry { low = middle + 1 } else { high = middle }
        }
        return low > 0 ? boardSteps[low - 1].fields : BoardFieldsFold()
    }

    /// The operations of the entries after `from` up to `to` inclusive, or of those after `to`
    /// up to `from` when going back.
    func operationCount(between from: Int32, and to: Int32) -> Int {
        let (low, high) = (min(from, to), max(from, to))
        return Int(entryStart[Int(high) + 1] - entryStart[Int(low) + 1])
    }
}
