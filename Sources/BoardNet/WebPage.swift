import BoardCRDT
import BoardModel
import BoardSync
import Foundation

/// The web view's pages (embedded: no build step, no CDN, works offline) and the JSON it sends.
/// The board page is in `WebPage+Board.swift`, its script in `WebPage+BoardScript.swift` and
/// `WebPage+ViewScript.swift`.
enum WebPage {
    static func escapeHTML(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
            .replacingOccurrences(of: "'", with: "&#39;")
    }

    /// A JSON string literal.
    static func json(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "<": out += "\\u003c"  // never "</script>" in a page
            default:
                if scalar.value < 0x20 { out += String(format: "\\u%04x", scalar.value) } else { out.unicodeScalars.append(scalar) }
            }
        }
        return out + "\""
    }

    static func number(_ value: Double) -> String {
        guard value.isFinite else { return "0" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return String(value)
    }

    static func hex(_ color: RGBAColor) -> String {
        let c = Color8(color) ?? .black
        return String(format: "#%02x%02x%02x%02x", c.red, c.green, c.blue, c.alpha)
    }

    /// The board as the page draws it: the canvas and background (`header`), each item's JSON
    /// by id, and the paint order, bottom to top.
    struct Rendered: Equatable {
        var size: CodableSize
        var background: String?
        var items: [String: String]
        var order: [String]

        var header: String { WebPage.header(size: size, background: background) }

        /// The whole board, one message.
        var json: String {
            "{\"type\":\"board\",\(header),\"items\":[\(order.compactMap { items[$0] }.joined(separator: ","))]}"
        }

        /// What changed since `old` as one message (items upserted, ids removed, and the paint
        /// order when it changed), or nil when nothing did. A new canvas or background sends the
        /// whole board instead. Compares every item: `apply` is the incremental way.
        func changes(since old: Rendered) -> String? {
            guard header == old.header else { return json }
            let upserts = order.filter { items[$0] != old.items[$0] }.compactMap { items[$0] }
            let removals = old.order.filter { items[$0] == nil }
            return Self.message(upserts: upserts, removals: removals, order: order != old.order ? order : nil)
        }

        /// Brings this rendering up to date with typed changes, re-rendering only the items they
        /// name; returns the message for pages that had the rendering before (nil: nothing a page
        /// sees changed). A new canvas or background gives the whole board.
        mutating func apply(_ changes: BoardChanges, sizes: inout [String: (width: Int, height: Int)]) -> String? {
            var upserts: [String] = []
            for item in changes.added + changes.changed {
                let (id, text) = WebPage.itemJSON(item, sizes: &sizes)
                if items[id] != text {
                    items[id] = text
                    upserts.append(text)
                }
            }
            var removals: [String] = []
            for uuid in changes.removed where items.removeValue(forKey: uuid.uuidString) != nil {
                removals.append(uuid.uuidString)
            }
            var reordered: [String]?
            if let paintOrder = changes.paintOrder {
                let order = paintOrder.map(\.uuidString).filter { items[$0] != nil }
                if order != self.order {
                    self.order = order
                    reordered = order
                }
            }
            if changes.canvasSize != nil || changes.background != nil {
                let before = header
                if let size = changes.canvasSize { self.size = size }
                if let background = changes.background { self.background = background.sha256 }
                if header != before { return json }
            }
            return Self.message(upserts: upserts, removals: removals, order: reordered)
        }

        private static func message(upserts: [String], removals: [String], order: [String]?) -> String? {
            guard !upserts.isEmpty || !removals.isEmpty || order != nil else { return nil }
            var out = "{\"type\":\"changes\",\"upserts\":[\(upserts.joined(separator: ","))],"
            out += "\"removals\":[\(removals.map { "\"\($0)\"" }.joined(separator: ","))]"
            if let order { out += ",\"order\":[\(order.map { "\"\($0)\"" }.joined(separator: ","))]" }
            return out + "}"
        }
    }

    static func render(_ board: BoardSnapshot) -> Rendered {
        var sizes: [String: (width: Int, height: Int)] = [:]
        return render(board, sizes: &sizes)
    }

    /// `sizes`: each image's pixel size by hash, read from its PNG header once and kept.
    static func render(_ board: BoardSnapshot, sizes: inout [String: (width: Int, height: Int)]) -> Rendered {
        var items: [String: String] = [:]
        for stroke in board.strokes {
            let (id, text) = itemJSON(.stroke(stroke), sizes: &sizes)
            items[id] = text
        }
        for sticker in board.stickers {
            let (id, text) = itemJSON(.sticker(sticker), sizes: &sizes)
            items[id] = text
        }
        let order = (board.paintOrder ?? (board.strokes.map(\.id) + board.stickers.map(\.id))).map(\.uuidString).filter { items[$0] != nil }
        return Rendered(size: board.canvasSize, background: board.backgroundSHA256, items: items, order: order)
    }

    /// One item as the page draws it, by its id.
    static func itemJSON(_ item: BoardItem, sizes: inout [String: (width: Int, height: Int)]) -> (id: String, json: String) {
        switch item {
        case .stroke(let stroke):
            var points = ""
            points.reserveCapacity(stroke.points.count * 12)
            for (index, point) in stroke.points.enumerated() {
                if index > 0 { points += "," }
                points += number(point.x) + "," + number(point.y)
            }
            let id = stroke.id.uuidString
            return (id, "{\"id\":\"\(id)\",\"kind\":\"stroke\",\"color\":\"\(hex(stroke.color))\",\"width\":\(number(stroke.width)),\"points\":[\(points)]}")
        case .sticker(let sticker):
            let hash = sticker.imageSHA256 ?? AssetHash.of(sticker.imagePNG).hex
            let size: (width: Int, height: Int)
            if let known = sizes[hash], !sticker.isPending {
                size = known
            } else {
                let header = try? PNGHeader(validating: sticker.imagePNG)
                size = header.map { (Int($0.width), Int($0.height)) } ?? (64, 64)
                if header != nil { sizes[hash] = size }
            }
            let id = sticker.id.uuidString
            return (id, "{\"id\":\"\(id)\",\"kind\":\"sticker\",\"asset\":\(json(hash)),"
                + "\"pending\":\(sticker.isPending),\"x\":\(number(sticker.position.x)),\"y\":\(number(sticker.position.y)),"
                + "\"scale\":\(number(sticker.scale)),\"rotation\":\(number(sticker.rotationRadians)),"
                + "\"w\":\(size.width),\"h\":\(size.height)}")
        }
    }

    /// The board message's canvas and background fields.
    static func header(size: CodableSize, background: String?) -> String {
        "\"width\":\(number(size.width)),\"height\":\(number(size.height)),\"background\":\(background.map(json) ?? "null")"
    }

    /// The whole board as one message.
    static func boardJSON(_ board: BoardSnapshot) -> String {
        render(board).json
    }

    static func presenceJSON(_ presence: Presence) -> String {
        let color = String(format: "#%02x%02x%02x", presence.color.red, presence.color.green, presence.color.blue)
        let pointer = presence.pointer.map { ",\"x\":\(number(FixedPoint.points($0.x))),\"y\":\(number(FixedPoint.points($0.y)))" } ?? ""
        let ink = presence.stroke.map { stroke in
            ",\"ink\":[" + stroke.points.map { "\(number(FixedPoint.points($0.x))),\(number(FixedPoint.points($0.y)))" }.joined(separator: ",") + "]"
        } ?? ""
        return "{\"type\":\"presence\",\"replica\":\"\(presence.replica)\",\"name\":\(json(presence.name)),\"color\":\"\(color)\","
            + "\"gone\":\(presence.isGone),\"ttl\":\(number(presence.ttl))\(pointer)\(ink)}"
    }

    /// The board list; `token` (the view's run token) is carried by every link.
    static func index(boards: [String], token: String?) -> (html: String, script: String) {
        let query = token.map { "?token=" + escapeHTML($0.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "") } ?? ""
        let list = boards.isEmpty
            ? "<p>No boards to list (with access control, open <code>/b/NAME?token=…</code> directly).</p>"
            : "<ul>" + boards.map { "<li><a href=\"/b/\(escapeHTML($0))\(query)\">\(escapeHTML($0))</a></li>" }.joined() + "</ul>"
        // The token leaves the address bar (and the history); the links keep it.
        let script = "history.replaceState(null, \"\", location.pathname);"
        let html = """
        <!doctype html><html lang="en"><head><meta charset="utf-8"><title>BoardSync boards</title>
        <style>body{font:16px system-ui,sans-serif;margin:2em;color:#222}a{color:#3355aa}</style></head>
        <body><h1>Boards</h1>\(list)<script>\(script)</script></body></html>
        """
        return (html, script)
    }
}
