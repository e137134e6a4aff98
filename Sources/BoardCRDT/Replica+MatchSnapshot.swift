import BoardModel
import Foundation

extension Replica {
    /// Makes this replica show `board`, as one undo step of ordinary edits: the reading side of
    /// the document model (`apply(snapshot:previous:)`) and the import of packages written
    /// without sync data.
    ///
    /// Items keep their UUIDs. Strokes whose points differ are replaced by new strokes (points are
    /// never edited in place). Image bytes in the snapshot go into `assets`; a sticker or
    /// background that is pending in the snapshot keeps its hash. Without `paintOrder`, strokes
    /// are painted below stickers.
    public mutating func edits(toMatch board: BoardSnapshot) throws -> LocalEdit {
        finishStroke()
        beginUndoGroup()
        defer { endUndoGroup() }
        var made: [Op] = []

        let current = snapshot()
        if current.canvasSize != board.canvasSize {
            made += try setCanvasSize(board.canvasSize).operations
        }
        let wantedBackground: AssetHash?
        if let bytes = board.backgroundPNG {
            wantedBackground = assets.insert(bytes)
        } else {
            wantedBackground = board.backgroundSHA256.flatMap(AssetHash.init(hex:))
        }
        if current.backgroundSHA256 != wantedBackground?.hex {
            made += try setBackground(asset: wantedBackground).operations
        }

        let wanted = Set(board.strokes.map(\.id) + board.stickers.map(\.id))
        for uuid in current.paintOrder ?? [] where !wanted.contains(uuid) {
            made += try delete(ItemID(uuid: uuid)).operations
        }
        var replaced: [UUID: ItemID] = [:]
        for stroke in board.strokes {
            let id = ItemID(uuid: stroke.id)
            let grid = stroke.points.compactMap(GridPoint.init)
            switch kind(of: id) {
            case .stroke?:
                if points(of: id).compactMap(GridPoint.init) != grid {
                    made += try delete(id).operations
                    let edit = try beginStroke(color: stroke.color, width: stroke.width, points: stroke.points)
                    finishStroke()
                    made += edit.operations
                    replaced[stroke.id] = edit.item
                    continue
                }
                if !isVisible(id) { made += try restore(id).operations }
                if value(of: .color, for: id) != Color8(stroke.color).map(ItemField.color) {
                    made += try setColor(id, to: stroke.color).operations
                }
                if value(of: .width, for: id) != FixedPoint.units(stroke.width).map(ItemField.width) {
                    made += try setWidth(id, to: stroke.width).operations
                }
            case .sticker?:
                throw EditError.wrongKind(id, expected: .stroke)
            case nil:
                made += try beginStroke(id: id, color: stroke.color, width: stroke.width, points: stroke.points).operations
                finishStroke()
            }
        }
        for sticker in board.stickers {
            let id = ItemID(uuid: sticker.id)
            let asset: AssetHash
            if !sticker.imagePNG.isEmpty {
                asset = assets.insert(sticker.imagePNG)
            } else if let hex = sticker.imageSHA256, let hash = AssetHash(hex: hex) {
                asset = hash
            } else {
                throw EditError.unknownAsset("(sticker \(sticker.id.uuidString) has neither bytes nor a hash)")
            }
            switch kind(of: id) {
            case .sticker?:
                if !isVisible(id) { made += try restore(id).operations }
                if value(of: .asset, for: id) != .asset(asset) { made += try replaceImage(id, with: asset).operations }
                if value(of: .position, for: id) != GridPoint(sticker.position).map(ItemField.position) {
                    made += try move(id, to: sticker.position).operations
                }
                if value(of: .scale, for: id) != .scale(sticker.scale) { made += try setScale(id, to: sticker.scale).operations }
                if value(of: .rotation, for: id) != .rotation(sticker.rotationRadians) {
                    made += try setRotation(id, to: sticker.rotationRadians).operations
                }
            case .stroke?:
                throw EditError.wrongKind(id, expected: .sticker)
            case nil:
                made += try addSticker(id: id, asset: asset, at: sticker.position, scale: sticker.scale,
                                       rotation: sticker.rotationRadians).operations
            }
        }

        // Paint order: walk the wanted order and put every item not above the last above it
        // (re-keying neighbours, which keeps their order, when there is no short key there).
        let order = (board.paintOrder ?? (board.strokes.map(\.id) + board.stickers.map(\.id)))
            .filter(wanted.contains).map { replaced[$0] ?? ItemID(uuid: $0) }
        var last: ItemID?
        for item in order {
            if let below = last, !(paintKey(below) < paintKey(item)) {
                made += try place(item, at: .above(below)).operations
            }
            last = item
        }
        return LocalEdit(operations: made)
    }
}
