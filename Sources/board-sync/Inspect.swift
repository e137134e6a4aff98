import BoardCRDT
import BoardModel
import Foundation

/// Human and JSON renderings for `show` and `log`.
enum Inspect {
    static func describe(_ board: BoardSnapshot, replica: Replica, path: String) -> String {
        var lines: [String] = []
        lines.append("\(path)")
        lines.append("  canvas      \(number(board.canvasSize.width))x\(number(board.canvasSize.height)) points")
        lines.append("  replica     \(replica.id)   operations \(replica.versionVector.totalCount)   version \(replica.versionVector)")
        if let hash = board.backgroundSHA256 {
            let bytes = board.backgroundPNG.map { "\($0.count) bytes" } ?? "pending (bytes not received yet)"
            lines.append("  background  \(hash.prefix(12))  \(bytes)")
        } else {
            lines.append("  background  none")
        }
        let strokes = Dictionary(uniqueKeysWithValues: board.strokes.map { ($0.id, $0) })
        let stickers = Dictionary(uniqueKeysWithValues: board.stickers.map { ($0.id, $0) })
        let order = board.paintOrder ?? (board.strokes.map(\.id) + board.stickers.map(\.id))
        lines.append("  \(order.count) item\(order.count == 1 ? "" : "s"), bottom to top:")
        for id in order {
            if let stroke = strokes[id] {
                lines.append("    stroke   \(id.uuidString)  \(stroke.points.count) points  width \(number(stroke.width))  color \(hex(stroke.color))")
            } else if let sticker = stickers[id] {
                let image = sticker.isPending ? "image \(sticker.imageSHA256?.prefix(12) ?? "?") PENDING" : "image \(sticker.imageSHA256?.prefix(12) ?? "?") \(sticker.imagePNG.count) bytes"
                lines.append("    sticker  \(id.uuidString)  at \(number(sticker.position.x)),\(number(sticker.position.y))  scale \(number(sticker.scale))  rotation \(number(sticker.rotationRadians))  \(image)")
            }
        }
        return lines.joined(separator: "\n")
    }

    static func line(_ op: Op) -> String {
        "\(String(op.lamport).leftPad(7))@\(op.id.replica)  #\(String(op.id.seq).leftPad(5))  \(op.payload)"
    }

    /// Every field of an operation, in board units (points; colours as #RRGGBBAA; z keys and
    /// hashes in full hex), so a script can rebuild the board from `log --json`.
    static func json(_ op: Op) -> [String: Any] {
        var object: [String: Any] = [
            "replica": op.id.replica.description, "seq": op.id.seq, "lamport": op.lamport,
        ]
        if let item = op.payload.item { object["item"] = item.description }
        func points(_ points: [GridPoint]) -> [[Double]] {
            points.map { [FixedPoint.points($0.x), FixedPoint.points($0.y)] }
        }
        func hex(_ color: Color8) -> String {
            "#" + [color.red, color.green, color.blue, color.alpha].map { String($0, radix: 16, uppercase: true).leftPad(2, "0") }.joined()
        }
        func field(_ field: ItemField) -> Any {
            switch field {
            case .exists(let exists): return exists
            case .color(let color): return hex(color)
            case .width(let width): return FixedPoint.points(width)
            case .asset(let hash): return hash.hex
            case .position(let point): return [FixedPoint.points(point.x), FixedPoint.points(point.y)]
            case .scale(let scale): return scale
            case .rotation(let rotation): return rotation
            case .z(let key): return key.description
            }
        }
        switch op.payload {
        case .beginStroke(_, let start):
            object["kind"] = "beginStroke"
            object["points"] = points(start.points)
            object["width"] = FixedPoint.points(start.width)
            object["color"] = hex(start.color)
            object["z"] = start.z.description
        case .appendPoints(_, let added):
            object["kind"] = "appendPoints"
            object["points"] = points(added)
        case .addSticker(_, let start):
            object["kind"] = "addSticker"
            object["asset"] = start.asset.hex
            object["position"] = [FixedPoint.points(start.position.x), FixedPoint.points(start.position.y)]
            object["scale"] = start.scale
            object["rotation"] = start.rotation
            object["z"] = start.z.description
        case .setItem(_, let value):
            object["kind"] = "set"
            object["field"] = "\(value.kind)"
            object["value"] = field(value)
        case .setBoard(let value):
            object["kind"] = "setBoard"
            object["field"] = "\(value.kind)"
            switch value {
            case .background(let hash): object["value"] = hash.map { $0.hex as Any } ?? NSNull()
            case .canvas(let width, let height): object["value"] = [FixedPoint.points(width), FixedPoint.points(height)]
            }
        }
        return object
    }

    static func number(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }

    static func hex(_ color: RGBAColor) -> String {
        let c = Color8(color) ?? .black
        return "#" + [c.red, c.green, c.blue, c.alpha].map { String($0, radix: 16, uppercase: true).leftPad(2, "0") }.joined()
    }
}

extension String {
    func leftPad(_ width: Int, _ pad: Character = " ") -> String {
        count >= width ? self : String(repeating: pad, count: width - count) + self
    }
}
