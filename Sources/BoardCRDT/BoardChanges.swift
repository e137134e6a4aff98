import BoardModel
import Foundation

/// A stroke or a sticker, as a snapshot holds it.
public enum BoardItem: Sendable, Equatable, Identifiable {
    case stroke(InkStroke)
    case sticker(PlacedSticker)

    public var id: UUID {
        switch self {
        case .stroke(let stroke): return stroke.id
        case .sticker(let sticker): return sticker.id
        }
    }
}

/// What changed between two snapshots, typed: `applied(to: previous)` gives the new snapshot.
///
/// Items are keyed by id. `paintOrder` is the new bottom-to-top order of every visible item
/// when it changed (an item added, removed or restacked); nil when it did not.
public struct BoardChanges: Sendable, Equatable {
    public var added: [BoardItem] = []
    public var changed: [BoardItem] = []
    public var removed: [UUID] = []
    /// The new canvas size, when it changed.
    public var canvasSize: CodableSize?
    /// The new background, when it changed (its bytes or its hash: nil inside means none).
    public var background: Background?
    public var paintOrder: [UUID]?

    public struct Background: Sendable, Equatable {
        public var png: Data?
        public var sha256: String?
    }

    public init() {}

    public var isEmpty: Bool {
        added.isEmpty && changed.isEmpty && removed.isEmpty && canvasSize == nil && background == nil && paintOrder == nil
    }

    /// The changes from `old` to `new` (compares every item: O(board)).
    public init(from old: BoardSnapshot, to new: BoardSnapshot) {
        let before = Self.items(of: old)
        let after = Self.items(of: new)
        for item in Self.orderedItems(of: new) {
            if let previous = before[item.id] {
                if previous != item { changed.append(item) }
            } else {
                added.append(item)
            }
        }
        for item in Self.orderedItems(of: old) where after[item.id] == nil { removed.append(item.id) }
        if old.canvasSize != new.canvasSize { canvasSize = new.canvasSize }
        if old.backgroundPNG != new.backgroundPNG || old.backgroundSHA256 != new.backgroundSHA256 {
            background = Background(png: new.backgroundPNG, sha256: new.backgroundSHA256)
        }
        if (old.paintOrder ?? []) != (new.paintOrder ?? []) { paintOrder = new.paintOrder ?? [] }
    }

    /// The snapshot `snapshot` becomes with these changes.
    public func applied(to snapshot: BoardSnapshot) -> BoardSnapshot {
        var items = Self.items(of: snapshot)
        for id in removed { items[id] = nil }
        for item in added { items[item.id] = item }
        for item in changed { items[item.id] = item }
        var result = snapshot
        if let canvasSize { result.canvasSize = canvasSize }
        if let background {
            result.backgroundPNG = background.png
            result.backgroundSHA256 = background.sha256
        }
        let order = paintOrder ?? snapshot.paintOrder ?? []
        result.paintOrder = order
        result.strokes = []
        result.stickers = []
        for id in order {
            switch items[id] {
            case .stroke(let stroke)?: result.strokes.append(stroke)
            case .sticker(let sticker)?: result.stickers.append(sticker)
            case nil: break
            }
        }
        return result
    }

    /// These changes followed by `later`, as one set of changes from the same starting point.
    public func followed(by later: BoardChanges) -> BoardChanges {
        enum Kind { case added, changed }
        var state: [UUID: (Kind?, BoardItem?)] = [:]  // (nil, nil): removed
        var order: [UUID] = []
        func note(_ id: UUID) { if state[id] == nil { order.append(id) } }
        for item in added { note(item.id); state[item.id] = (.added, item) }
        for item in changed { note(item.id); state[item.id] = (.changed, item) }
        for id in removed { note(id); state[id] = (nil, nil) }
        for id in later.removed {
            note(id)
            if case (.added?, _)? = state[id] { state[id] = nil; order.removeAll { $0 == id } } else { state[id] = (nil, nil) }
        }
        for item in later.added {
            note(item.id)
            // Removed earlier and back now: it was in the starting board, so it changed.
            if case (nil, nil)? = state[item.id] { state[item.id] = (.changed, item) } else { state[item.id] = (.added, item) }
        }
        for item in later.changed {
            note(item.id)
            if case (.added?, _)? = state[item.id] { state[item.id] = (.added, item) } else { state[item.id] = (.changed, item) }
        }
        var result = BoardChanges()
        for id in order {
            guard let entry = state[id] else { continue }
            switch entry {
            case (.added?, let item?): result.added.append(item)
            case (.changed?, let item?): result.changed.append(item)
            default: result.removed.append(id)
            }
        }
        result.canvasSize = later.canvasSize ?? canvasSize
        result.background = later.background ?? background
        result.paintOrder = later.paintOrder ?? paintOrder
        return result
    }

    /// Every item of a board as added (what a board's first update says of it).
    public static func everything(in snapshot: BoardSnapshot) -> BoardChanges {
        BoardChanges(from: BoardSnapshot(canvasSize: snapshot.canvasSize, paintOrder: []), to: snapshot)
    }

    static func items(of snapshot: BoardSnapshot) -> [UUID: BoardItem] {
        var items: [UUID: BoardItem] = [:]
        items.reserveCapacity(snapshot.strokes.count + snapshot.stickers.count)
        for stroke in snapshot.strokes { items[stroke.id] = .stroke(stroke) }
        for sticker in snapshot.stickers { items[sticker.id] = .sticker(sticker) }
        return items
    }

    static func orderedItems(of snapshot: BoardSnapshot) -> [BoardItem] {
        let items = Self.items(of: snapshot)
        if let order = snapshot.paintOrder { return order.compactMap { items[$0] } }
        return snapshot.strokes.map(BoardItem.stroke) + snapshot.stickers.map(BoardItem.sticker)
    }
}
