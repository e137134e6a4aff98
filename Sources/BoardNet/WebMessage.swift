import BoardCRDT
import BoardModel
import BoardSync
import Foundation

/// What a web page may send on its WebSocket (docs/PROTOCOL.md, "The web view's page
/// protocol"), parsed from its JSON and checked before anything is done with it. Pure: the
/// `webmessage` fuzz target feeds it arbitrary text and applies what it accepts to a replica.
public enum WebMessage: Equatable, Sendable {
    /// The page's pointer (board points), its display name, and the ink it is drawing.
    case pointer(Pointer)
    case stroke(points: [CodablePoint], color: RGBAColor, width: Double)
    case sticker(png: Data, at: CodablePoint, scale: Double)
    case move(ItemID, to: CodablePoint)
    case transform(ItemID, scale: Double?, rotation: Double?)
    case delete(ItemID)
    case front(ItemID)
    case back(ItemID)
    case undo, redo, beginGroup, endGroup

    public struct Pointer: Equatable, Sendable {
        public var at: GridPoint
        public var name: String?
        public var color: Color8
        public var width: Int64
        public var ink: [GridPoint]
    }

    /// Why a message was refused (told to the page).
    public struct Refusal: Error, Equatable, Sendable {
        public var message: String
    }

    /// Most points a stroke message may carry.
    public static let maxStrokePoints = 20_000

    /// The message in `text`, or why it is refused. Images over `maxImageSide` pixels on a side
    /// are refused (a decompression bomb for every viewer otherwise).
    public static func parse(_ text: String, maxImageSide: Int) -> Result<WebMessage, Refusal> {
        guard let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
              let type = object["type"] as? String else { return .failure(Refusal(message: "a message is a JSON object with a type")) }
        func refuse(_ why: String) -> Result<WebMessage, Refusal> { .failure(Refusal(message: why)) }
        func number(_ key: String) -> Double? { (object[key] as? NSNumber)?.doubleValue }
        func item() -> ItemID? { (object["id"] as? String).flatMap(ItemID.init(uuidString:)) }
        func point() -> CodablePoint? {
            guard let x = number("x"), let y = number("y") else { return nil }
            return CodablePoint(x: x, y: y)
        }
        switch type {
        case "pointer":
            guard let at = point(), let grid = GridPoint(at) else { return refuse("pointer needs x and y on the board") }
            let name = (object["name"] as? String).map(Presence.clipped).flatMap { $0.isEmpty ? nil : $0 }
            // Ink being drawn travels with the pointer, so others see it before the stroke lands.
            let color = (object["color"] as? String).flatMap(Color8.init(hex:)) ?? Color8(red: 120, green: 60, blue: 200, alpha: 255)
            let ink = points(object["ink"], limit: Presence.maxStrokePoints).compactMap(GridPoint.init)
            let width = number("width").flatMap(FixedPoint.units) ?? 48
            return .success(.pointer(Pointer(at: grid, name: name, color: color, width: max(0, width), ink: ink)))
        case "stroke":
            let points = points(object["points"], limit: maxStrokePoints + 1)
            guard !points.isEmpty, points.count <= maxStrokePoints else { return refuse("a stroke needs 1 to 20,000 points") }
            let color = (object["color"] as? String).flatMap(Color8.init(hex:))?.rgba ?? RGBAColor(red: 0, green: 0, blue: 0)
            return .success(.stroke(points: points, color: color, width: number("width") ?? 3))
        case "sticker":
            guard let text = object["png"] as? String, let png = Data(base64Encoded: text), let at = point() else {
                return refuse("a sticker needs png (base64) and x, y")
            }
            guard let header = try? PNGHeader(validating: png) else { return refuse("that file is not a PNG image") }
            guard header.width <= maxImageSide, header.height <= maxImageSide else {
                return refuse("that image is \(header.width)x\(header.height) pixels; stickers are at most \(maxImageSide) on a side")
            }
            return .success(.sticker(png: png, at: at, scale: number("scale") ?? 1))
        case "move":
            guard let id = item(), let to = point() else { return refuse("move needs id, x and y") }
            return .success(.move(id, to: to))
        case "transform":
            guard let id = item() else { return refuse("transform needs id") }
            return .success(.transform(id, scale: number("scale"), rotation: number("rotation")))
        case "delete", "front", "back":
            guard let id = item() else { return refuse("\(type) needs id") }
            return .success(type == "delete" ? .delete(id) : type == "front" ? .front(id) : .back(id))
        case "undo": return .success(.undo)
        case "redo": return .success(.redo)
        case "begin-group": return .success(.beginGroup)
        case "end-group": return .success(.endGroup)
        default:
            return refuse("unknown message type '\(type.prefix(40))'")
        }
    }

    /// The edit this message makes on the page's replica (nil for a pointer).
    public var edit: ((inout Replica) throws -> LocalEdit)? {
        switch self {
        case .pointer: return nil
        case .stroke(let points, let color, let width):
            return { replica in
                let edit = try replica.beginStroke(color: color, width: width, points: points)
                if let stroke = edit.item { replica.finishStroke(stroke) }
                return edit
            }
        case .sticker(let png, let at, let scale): return { try $0.addSticker(imagePNG: png, at: at, scale: scale) }
        case .move(let id, let to): return { try $0.move(id, to: to) }
        case .transform(let id, let scale, let rotation): return { try $0.transform(id, scale: scale, rotation: rotation) }
        case .delete(let id): return { try $0.delete(id) }
        case .front(let id): return { try $0.bringToFront(id) }
        case .back(let id): return { try $0.sendToBack(id) }
        case .undo: return { try $0.undo() }
        case .redo: return { try $0.redo() }
        case .beginGroup: return { $0.beginUndoGroup(); return LocalEdit() }
        case .endGroup: return { $0.endUndoGroup(); return LocalEdit() }
        }
    }

    /// `[x, y, x, y, ...]` from a page's JSON as board points (at most `limit` of them, the last).
    private static func points(_ value: Any?, limit: Int) -> [CodablePoint] {
        let flat = ((value as? [NSNumber]) ?? []).suffix(2 * limit).map(\.doubleValue)
        return stride(from: 0, to: flat.count - 1, by: 2).map { CodablePoint(x: flat[$0], y: flat[$0 + 1]) }
    }
}
