import BoardCRDT
import BoardModel
import Foundation

/// A plain reference model of the conflict contract (docs/SEMANTICS.md), written from the
/// document and separately from `Replica`: no compaction, no incremental state, just "for each
/// register, the write with the greatest timestamp" over a set of operations. The simulator
/// checks every replica's board against it, so a broken merge rule shows up even when all
/// replicas agree on the wrong answer.
///
/// Image bytes are left out (stickers and the background carry their hashes only).
public enum ContractModel {
    /// The board that `operations` describe.
    public static func board(from operations: [Op]) -> BoardSnapshot {
        struct Write<Value> {
            var value: Value
            var stamp: Timestamp
        }
        struct Item {
            var creation: Op?
            var registers: [ItemField.Kind: Write<ItemField>] = [:]
            var appends: [Op] = []
        }
        func later<Value>(_ current: Write<Value>?, _ value: Value, _ stamp: Timestamp) -> Write<Value> {
            guard let current, current.stamp > stamp else { return Write(value: value, stamp: stamp) }
            return current
        }

        var items: [ItemID: Item] = [:]
        var canvas = Write<BoardField>(value: .canvas(width: Int64(BoardSnapshot.defaultCanvasSize.width * FixedPoint.unitsPerPoint),
                                                      height: Int64(BoardSnapshot.defaultCanvasSize.height * FixedPoint.unitsPerPoint)),
                                       stamp: .zero)
        var background = Write<BoardField>(value: .background(nil), stamp: .zero)
        for op in operations {
            let stamp = op.timestamp
            switch op.payload {
            case .beginStroke(let item, let start):
                var state = items[item] ?? Item()
                // One creation per item (a second is refused); the earlier one decides if ever two.
                if state.creation == nil || state.creation!.timestamp > stamp { state.creation = op }
                for field: ItemField in [.exists(true), .color(start.color), .width(start.width), .z(start.z)] {
                    state.registers[field.kind] = later(state.registers[field.kind], field, stamp)
                }
                items[item] = state
            case .addSticker(let item, let start):
                var state = items[item] ?? Item()
                if state.creation == nil || state.creation!.timestamp > stamp { state.creation = op }
                let fields: [ItemField] = [.exists(true), .asset(start.asset), .position(start.position),
                                           .scale(start.scale), .rotation(start.rotation), .z(start.z)]
                for field in fields {
                    state.registers[field.kind] = later(state.registers[field.kind], field, stamp)
                }
                items[item] = state
            case .appendPoints(let item, _):
                items[item, default: Item()].appends.append(op)
            case .setItem(let item, let field):
                items[item, default: Item()].registers[field.kind] = later(items[item]?.registers[field.kind], field, stamp)
            case .setBoard(let field):
                switch field {
                case .canvas: canvas = later(canvas, field, stamp)
                case .background: background = later(background, field, stamp)
                }
            case .setLabel:
                break  // labels never change what the board shows (LabelTests model them)
            }
        }

        // Visible items: created, existence true; painted by (z key bytes, item id).
        let visible = items.compactMap { id, item -> (ItemID, Item, [UInt8])? in
            guard item.creation != nil, case .exists(true)? = item.registers[.exists]?.value,
                  case .z(let key)? = item.registers[.z]?.value else { return nil }
            return (id, item, key.bytes)
        }.sorted { lhs, rhs in
            lhs.2 == rhs.2 ? (lhs.0.high, lhs.0.low) < (rhs.0.high, rhs.0.low) : lhs.2.lexicographicallyPrecedes(rhs.2)
        }
        var strokes: [InkStroke] = []
        var stickers: [PlacedSticker] = []
        for (id, item, _) in visible {
            guard let creation = item.creation else { continue }
            switch creation.payload {
            case .beginStroke(_, let start):
                guard case .color(let color)? = item.registers[.color]?.value,
                      case .width(let width)? = item.registers[.width]?.value else { continue }
                // Points: the first ones, then the creator's appends in sequence order.
                let runs = item.appends.filter { $0.id.replica == creation.id.replica }.sorted { $0.id.seq < $1.id.seq }
                var points = start.points
                for run in runs { if case .appendPoints(_, let more) = run.payload { points += more } }
                strokes.append(InkStroke(id: id.uuid, color: color.rgba, width: FixedPoint.points(width), points: points.map(\.codable)))
            case .addSticker:
                guard case .asset(let asset)? = item.registers[.asset]?.value,
                      case .position(let position)? = item.registers[.position]?.value,
                      case .scale(let scale)? = item.registers[.scale]?.value,
                      case .rotation(let rotation)? = item.registers[.rotation]?.value else { continue }
                var sticker = PlacedSticker(id: id.uuid, imagePNG: Data(), position: position.codable, scale: scale, rotationRadians: rotation)
                sticker.imageSHA256 = asset.hex
                stickers.append(sticker)
            default:
                continue
            }
        }
        var board = BoardSnapshot(strokes: strokes, stickers: stickers, paintOrder: visible.map { $0.0.uuid })
        if case .canvas(let width, let height) = canvas.value {
            board.canvasSize = CodableSize(width: FixedPoint.points(width), height: FixedPoint.points(height))
        }
        if case .background(let hash?) = background.value { board.backgroundSHA256 = hash.hex }
        return board
    }

    /// A replica's board with image bytes left out, for comparing with `board(from:)`.
    public static func withoutImageBytes(_ board: BoardSnapshot) -> BoardSnapshot {
        var board = board
        board.backgroundPNG = nil
        for index in board.stickers.indices { board.stickers[index].imagePNG = Data() }
        return board
    }
}
