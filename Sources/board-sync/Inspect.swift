import BoardCRDT
import BoardModel
import BoardStore
import Foundation

/// Human and JSON renderings for `show`, `log` and `repair`.
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
        case .setLabel(let id, let label):
            object["kind"] = label == nil ? "removeLabel" : "setLabel"
            object["label"] = id.description
            if let label {
                object["text"] = label.text
                object["version"] = Dictionary(uniqueKeysWithValues: label.version.sortedEntries.map { ("\($0.replica)", $0.seq) })
                object["time"] = label.time
            }
        }
        return object
    }

    /// One register a repair changed, as `show` prints the value: "canvas      2000x1500 →
    /// 1600x1200 points", "sticker  <UUID>  at 30,40 → 10,10".
    static func line(_ change: RegisterChange) -> String {
        let values = "\(text(change.before, change.register)) → \(text(change.after, change.register))"
        switch (change.subject, change.register) {
        case (.board, .canvas): return "canvas      \(values) points"
        case (.board, _): return "background  \(values)"
        case (.item(let id, let kind), let register):
            let label: String
            switch register {
            case .shown: label = "on the board"
            case .position: label = "at"
            case .paintOrder: label = "paint order"
            default: label = register.rawValue
            }
            let suffix = register == .paintOrder ? " from the bottom" : ""
            return "\(kind.rawValue.padding(toLength: 7, withPad: " ", startingAt: 0))  \(id.uuidString)  \(label) \(values)\(suffix)"
        }
    }

    private static func text(_ value: RegisterChange.Value, _ register: RegisterChange.Register) -> String {
        switch value {
        case .size(let size): return "\(number(size.width))x\(number(size.height))"
        case .image(let hash?): return String(hash.prefix(12))
        case .image(nil): return "none"
        case .shown(let shown): return shown ? "yes" : "no"
        case .color(let color): return hex(color)
        case .number(let value): return number(value)
        case .point(let point): return "\(number(point.x)),\(number(point.y))"
        case .count(let count): return "\(count)"
        case .place(let place, let count): return "\(place) of \(count)"
        }
    }

    /// A change for `repair --json`: values in board units, as `log --json` gives them.
    static func json(_ change: RegisterChange) -> [String: Any] {
        func value(_ value: RegisterChange.Value) -> Any {
            switch value {
            case .size(let size): return [size.width, size.height]
            case .image(let hash): return hash ?? NSNull()
            case .shown(let shown): return shown
            case .color(let color): return hex(color)
            case .number(let value): return value
            case .point(let point): return [point.x, point.y]
            case .count(let count): return count
            case .place(let place, let count): return ["fromBottom": place, "of": count]
            }
        }
        var object: [String: Any] = ["register": change.register.rawValue, "before": value(change.before), "after": value(change.after)]
        switch change.subject {
        case .board: object["kind"] = "board"
        case .item(let id, let kind):
            object["kind"] = kind.rawValue
            object["item"] = id.uuidString
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
