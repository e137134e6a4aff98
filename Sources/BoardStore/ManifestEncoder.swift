import BoardModel
import Foundation

/// Writes `manifest.json`: the snapshot without image bytes, with sorted keys, in a single pass
/// over the board (Foundation's JSONEncoder takes ~0.5 s on a 280k-point board; this takes a
/// fraction of that).
///
/// Stickers whose image bytes have not arrived are listed under `pendingStickers`, not
/// `stickers`: a seed reader loads every sticker's file, and a pending sticker has none yet.
/// Decodes with `JSONDecoder` into `BoardSnapshot` (and into the seed's own model).
public enum ManifestEncoder {
    public static func encode(_ board: BoardSnapshot) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64 + board.strokes.reduce(0) { $0 + 90 + $1.points.count * 24 } + board.stickers.count * 220)
        out.append(ascii: "{")
        if let hash = board.backgroundSHA256 {
            key("backgroundSHA256", &out)
            string(hash, &out)
            out.append(ascii: ",")
        }
        key("canvasSize", &out)
        out.append(ascii: "{")
        key("height", &out); number(board.canvasSize.height, &out)
        out.append(ascii: ",")
        key("width", &out); number(board.canvasSize.width, &out)
        out.append(ascii: "}")
        if let order = board.paintOrder {
            out.append(ascii: ",")
            key("paintOrder", &out)
            list(order, &out) { uuid, out in string(uuid.uuidString, &out) }
        }
        let pending = board.stickers.filter(\.isPending)
        if !pending.isEmpty {
            out.append(ascii: ",")
            key("pendingStickers", &out)
            list(pending, &out, sticker)
        }
        out.append(ascii: ",")
        key("schemaVersion", &out)
        out.append(contentsOf: Array(String(board.schemaVersion).utf8))
        out.append(ascii: ",")
        key("stickers", &out)
        list(board.stickers.filter { !$0.isPending }, &out, sticker)
        out.append(ascii: ",")
        key("strokes", &out)
        list(board.strokes, &out, stroke)
        out.append(ascii: "}")
        return out
    }

    private static func sticker(_ value: PlacedSticker, _ out: inout [UInt8]) {
        out.append(ascii: "{")
        key("id", &out); string(value.id.uuidString, &out)
        out.append(contentsOf: Array(#","imagePNG":"""#.utf8))
        if let hash = value.imageSHA256 {
            out.append(ascii: ",")
            key("imageSHA256", &out); string(hash, &out)
        }
        out.append(ascii: ",")
        key("position", &out); point(value.position, &out)
        out.append(ascii: ",")
        key("rotationRadians", &out); number(value.rotationRadians, &out)
        out.append(ascii: ",")
        key("scale", &out); number(value.scale, &out)
        out.append(ascii: "}")
    }

    private static func stroke(_ value: InkStroke, _ out: inout [UInt8]) {
        out.append(ascii: "{")
        key("color", &out)
        out.append(ascii: "{")
        key("alpha", &out); number(value.color.alpha, &out)
        out.append(ascii: ",")
        key("blue", &out); number(value.color.blue, &out)
        out.append(ascii: ",")
        key("green", &out); number(value.color.green, &out)
        out.append(ascii: ",")
        key("red", &out); number(value.color.red, &out)
        out.append(ascii: "}")
        out.append(ascii: ",")
        key("id", &out); string(value.id.uuidString, &out)
        out.append(ascii: ",")
        key("points", &out)
        list(value.points, &out, point)
        out.append(ascii: ",")
        key("width", &out); number(value.width, &out)
        out.append(ascii: "}")
    }

    private static func point(_ value: CodablePoint, _ out: inout [UInt8]) {
        out.append(contentsOf: [UInt8(ascii: "{"), UInt8(ascii: "\""), UInt8(ascii: "x"), UInt8(ascii: "\""), UInt8(ascii: ":")])
        number(value.x, &out)
        out.append(contentsOf: [UInt8(ascii: ","), UInt8(ascii: "\""), UInt8(ascii: "y"), UInt8(ascii: "\""), UInt8(ascii: ":")])
        number(value.y, &out)
        out.append(ascii: "}")
    }

    private static func list<T>(_ values: [T], _ out: inout [UInt8], _ each: (T, inout [UInt8]) -> Void) {
        out.append(ascii: "[")
        for (index, value) in values.enumerated() {
            if index > 0 { out.append(ascii: ",") }
            each(value, &out)
        }
        out.append(ascii: "]")
    }

    private static func key(_ name: String, _ out: inout [UInt8]) {
        string(name, &out)
        out.append(ascii: ":")
    }

    /// Only for keys, UUIDs and hex digests: none needs escaping.
    private static func string(_ value: String, _ out: inout [UInt8]) {
        out.append(ascii: "\"")
        out.append(contentsOf: value.utf8)
        out.append(ascii: "\"")
    }

    /// Integers without a fraction, everything else in Swift's shortest round-trip form;
    /// `-0` as `0`. Non-finite values cannot occur (the replica refuses them) and are written as 0.
    static func number(_ value: Double, _ out: inout [UInt8]) {
        guard value.isFinite else { out.append(ascii: "0"); return }
        if value == 0 { out.append(ascii: "0"); return }
        if value == value.rounded(), abs(value) < 1e15 {
            var integer = Int64(value)
            if integer < 0 { out.append(ascii: "-"); integer = -integer }
            var digits: [UInt8] = []
            while integer > 0 { digits.append(UInt8(integer % 10) + 48); integer /= 10 }
            out.append(contentsOf: digits.reversed())
            return
        }
        out.append(contentsOf: value.description.utf8)
    }
}

extension Array where Element == UInt8 {
    fileprivate mutating func append(ascii: Unicode.Scalar) {
        append(UInt8(ascii: ascii))
    }
}
