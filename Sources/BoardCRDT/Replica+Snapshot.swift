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
            if let stroke = state.stroke(uuid) {
                strokes.append(stroke)
            } else if let sticker = state.sticker(uuid, assets: assets) {
                stickers.append(sticker)
            }
        }
        var board = BoardSnapshot(strokes: strokes, stickers: stickers, paintOrder: order)
        setBoardFields(of: &board)
        return board
    }

    /// The board's own fields (canvas size, background) as a snapshot shows them, set on `board`.
    public func setBoardFields(of board: inout BoardSnapshot) {
        Self.setBoardFields(canvas: canvas.value, background: background.value, assets: assets, of: &board)
    }

    /// The board's fields from its two registers' values (a replica's, or `BoardFieldsFold`'s).
    static func setBoardFields(canvas: BoardField, background: BoardField, assets: AssetStore, of board: inout BoardSnapshot) {
        if case .canvas(let width, let height) = canvas {
            board.canvasSize = CodableSize(width: FixedPoint.points(width), height: FixedPoint.points(height))
        }
        if case .background(let hash?) = background {
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
        items[item]?.visible(item, assets: assets)
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
        items[item]?.strokePoints().map(\.codable) ?? []
    }
}

extension ItemState {
    /// The item as a snapshot shows it, with its paint-order key; nil when it is not visible
    /// (not created yet, deleted). Sticker images come from `assets`.
    /// `imageName`: the hex text of the sticker's current image hash when the caller holds it.
    /// `withPoints` false: a stroke's points are left out (empty).
    func visible(_ item: ItemID, assets: AssetStore, imageName: String? = nil, withPoints: Bool = true) -> VisibleItem? {
        guard isVisible else { return nil }
        let z = self.z ?? ZKey.initial
        if let stroke = stroke(item.uuid, withPoints: withPoints) { return VisibleItem(id: item, z: z, stroke: stroke) }
        if let sticker = sticker(item.uuid, assets: assets, imageName: imageName) {
            // A pending sticker's image hash (what to watch for), from its registers.
            let pending = sticker.imagePNG.isEmpty ? stickerAsset : nil
            return VisibleItem(id: item, z: z, sticker: sticker, pendingAsset: pending)
        }
        return nil
    }

    /// A stroke's points: the first points, then the creator's appended runs in sequence order
    /// (empty for a sticker or an item not created yet).
    func strokePoints() -> [GridPoint] {
        guard case .stroke(let start)? = creation?.kind, let creator = creation?.op.replica else { return [] }
        var points = start.points
        for run in appends where run.op.replica == creator {
            points.append(contentsOf: run.points)
        }
        return points
    }

    /// How many points `strokePoints()` gives, without making them.
    func strokePointCount() -> Int {
        guard case .stroke(let start)? = creation?.kind, let creator = creation?.op.replica else { return 0 }
        return appends.reduce(start.points.count) { $0 + ($1.op.replica == creator ? $1.points.count : 0) }
    }

    func stroke(_ uuid: UUID, withPoints: Bool = true) -> InkStroke? {
        guard case .stroke(let start)? = creation?.kind else { return nil }
        var color = start.color
        var width = start.width
        if case .color(let value) = self[.color] { color = value }
        if case .width(let value) = self[.width] { width = value }
        return InkStroke(id: uuid, color: color.rgba, width: FixedPoint.points(width),
                         points: withPoints ? strokePoints().map(\.codable) : [])
    }

    /// The hash of the image a sticker shows now (nil for a stroke).
    var stickerAsset: AssetHash? {
        guard case .sticker(let start)? = creation?.kind else { return nil }
        if case .asset(let value) = self[.asset] { return value }
        return start.asset
    }

    func sticker(_ uuid: UUID, assets: AssetStore, imageName: String? = nil) -> PlacedSticker? {
        guard case .sticker(let start)? = creation?.kind, let asset = stickerAsset else { return nil }
        var sticker = PlacedSticker(id: uuid, imagePNG: Data(), position: start.position.codable,
                                    scale: start.scale, rotationRadians: start.rotation)
        if case .position(let value) = self[.position] { sticker.position = value.codable }
        if case .scale(let value) = self[.scale] { sticker.scale = value }
        if case .rotation(let value) = self[.rotation] { sticker.rotationRadians = value }
        sticker.imageSHA256 = imageName ?? asset.hex
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
