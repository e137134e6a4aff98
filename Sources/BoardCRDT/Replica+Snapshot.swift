import BoardModel
import Foundation

extension Replica {
    /// The board as it looks now: visible items in paint order (z key, then id), asset bytes
    /// from `assets`. A sticker or background whose bytes are missing is *pending*: its hash is
    /// set and its bytes are empty (see `PlacedSticker.isPending`).
    public func snapshot() -> BoardSnapshot {
        let visible = items.filter { $0.value.isVisible }
            .map { (key: PaintKey(z: $0.value.z ?? ZKey.initial, item: $0.key), state: $0.value) }
            .sorted { $0.key < $1.key }
        var strokes: [InkStroke] = []
        var stickers: [PlacedSticker] = []
        var order: [UUID] = []
        order.reserveCapacity(visible.count)
        for (key, state) in visible {
            let uuid = key.item.uuid
            order.append(uuid)
            if let stroke = makeStroke(uuid, state) {
                strokes.append(stroke)
            } else if let sticker = makeSticker(uuid, state) {
                stickers.append(sticker)
            }
        }
        var board = BoardSnapshot(strokes: strokes, stickers: stickers, paintOrder: order)
        setBoardFields(of: &board)
        return board
    }

    /// The board's own fields (canvas size, background) as a snapshot shows them, set on `board`.
    public func setBoardFields(of board: inout BoardSnapshot) {
        if case .canvas(let width, let height) = canvas.value {
            board.canvasSize = CodableSize(width: FixedPoint.points(width), height: FixedPoint.points(height))
        }
        if case .background(let hash?) = background.value {
            board.backgroundSHA256 = hash.hex
            board.backgroundPNG = assets.data(for: hash)
        } else {
            board.backgroundSHA256 = nil
            board.backgroundPNG = nil
        }
    }

    /// One item as `snapshot()` shows it, with its paint-order key; nil when it is not visible
    /// (unknown, not created yet, deleted). What an incremental view recomputes for the items an
    /// operation touched, instead of the whole board.
    public func visibleItem(_ item: ItemID) -> VisibleItem? {
        guard let state = items[item], state.isVisible else { return nil }
        let z = state.z ?? ZKey.initial
        if let stroke = makeStroke(item.uuid, state) { return VisibleItem(id: item, z: z, stroke: stroke) }
        if let sticker = makeSticker(item.uuid, state) {
            // A pending sticker's image hash (what to watch for), from its registers.
            var pending: AssetHash?
            if sticker.imagePNG.isEmpty, case .sticker(let start)? = state.creation?.kind {
                pending = start.asset
                if case .asset(let value) = state[.asset] { pending = value }
            }
            return VisibleItem(id: item, z: z, sticker: sticker, pendingAsset: pending)
        }
        return nil
    }

    /// A sticker's current registers, typed (nil for an unknown item or a stroke).
    public func sticker(_ item: ItemID) -> StickerState? {
        guard kind(of: item) == .sticker,
              case .position(let position)? = value(of: .position, for: item),
              case .scale(let scale)? = value(of: .scale, for: item),
              case .rotation(let rotation)? = value(of: .rotation, for: item),
              case .asset(let asset)? = value(of: .asset, for: item) else { return nil }
        return StickerState(position: position.codable, scale: scale, rotation: rotation, asset: asset, isDeleted: !isShown(item))
    }

    /// A stroke's current colour and width, typed (nil for an unknown item or a sticker).
    public func strokeStyle(_ item: ItemID) -> StrokeStyle? {
        guard kind(of: item) == .stroke,
              case .color(let color)? = value(of: .color, for: item),
              case .width(let width)? = value(of: .width, for: item) else { return nil }
        return StrokeStyle(color: color.rgba, width: FixedPoint.points(width), isErased: !isShown(item))
    }

    /// The item's existence register (true until a delete or erase, and after a restore).
    private func isShown(_ item: ItemID) -> Bool {
        if case .exists(let flag)? = value(of: .exists, for: item) { return flag }
        return true
    }

    /// The points of a stroke as every replica shows them: the first points, then the creator's
    /// appended runs in sequence order.
    public func points(of item: ItemID) -> [CodablePoint] {
        guard let state = items[item], case .stroke(let start)? = state.creation?.kind else { return [] }
        return strokePoints(state, start).map(\.codable)
    }

    private func strokePoints(_ state: ItemState, _ start: StrokeStart) -> [GridPoint] {
        guard let creator = state.creation?.op.replica else { return [] }
        var points = start.points
        for run in state.appends where run.op.replica == creator {
            points.append(contentsOf: run.points)
        }
        return points
    }

    private func makeStroke(_ uuid: UUID, _ state: ItemState) -> InkStroke? {
        guard case .stroke(let start)? = state.creation?.kind else { return nil }
        var color = start.color
        var width = start.width
        if case .color(let value) = state[.color] { color = value }
        if case .width(let value) = state[.width] { width = value }
        return InkStroke(id: uuid, color: color.rgba, width: FixedPoint.points(width),
                         points: strokePoints(state, start).map(\.codable))
    }

    private func makeSticker(_ uuid: UUID, _ state: ItemState) -> PlacedSticker? {
        guard case .sticker(let start)? = state.creation?.kind else { return nil }
        var sticker = PlacedSticker(id: uuid, imagePNG: Data(), position: start.position.codable,
                                    scale: start.scale, rotationRadians: start.rotation)
        var asset = start.asset
        if case .asset(let value) = state[.asset] { asset = value }
        if case .position(let value) = state[.position] { sticker.position = value.codable }
        if case .scale(let value) = state[.scale] { sticker.scale = value }
        if case .rotation(let value) = state[.rotation] { sticker.rotationRadians = value }
        sticker.imageSHA256 = asset.hex
        sticker.imagePNG = assets.data(for: asset) ?? Data()
        return sticker
    }
}

/// One visible item (`Replica.visibleItem(_:)`): a stroke or a sticker, and where it paints.
public struct VisibleItem: Sendable, Equatable {
    public var id: ItemID
    /// Its paint-order key: items paint by (z, id), lowest first.
    public var z: ZKey
    public var stroke: InkStroke?
    public var sticker: PlacedSticker?
    /// A sticker whose image bytes are missing: their hash.
    public var pendingAsset: AssetHash?

    public init(id: ItemID, z: ZKey, stroke: InkStroke? = nil, sticker: PlacedSticker? = nil, pendingAsset: AssetHash? = nil) {
        self.id = id
        self.z = z
        self.stroke = stroke
        self.sticker = sticker
        self.pendingAsset = pendingAsset
    }

    /// Whether it paints before (under) `other`.
    public func paintsBefore(_ other: VisibleItem) -> Bool { (z, id) < (other.z, other.id) }
}

/// A sticker's registers as `Replica.sticker(_:)` reads them.
public struct StickerState: Hashable, Sendable {
    public var position: CodablePoint
    public var scale: Double
    public var rotation: Double
    public var asset: AssetHash
    public var isDeleted: Bool
}

/// A stroke's style as `Replica.strokeStyle(_:)` reads it (its points: `points(of:)`).
public struct StrokeStyle: Hashable, Sendable {
    public var color: RGBAColor
    public var width: Double
    public var isErased: Bool
}
