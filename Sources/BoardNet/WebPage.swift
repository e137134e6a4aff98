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
        var header: String
        var items: [String: String]
        var order: [String]

        /// The whole board, one message.
        var json: String {
            "{\"type\":\"board\",\(header),\"items\":[\(order.compactMap { items[$0] }.joined(separator: ","))]}"
        }

        /// What changed since `old` as one message (items upserted, ids removed, and the paint
        /// order when it changed), or nil when nothing did. A new canvas or background sends the
        /// whole board instead.
        func changes(since old: Rendered) -> String? {
            guard header == old.header else { return json }
            let upserts = order.filter { items[$0] != old.items[$0] }.compactMap { items[$0] }
            let removals = old.order.filter { items[$0] == nil }
            let reordered = order != old.order
            guard !upserts.isEmpty || !removals.isEmpty || reordered else { return nil }
            var out = "{\"type\":\"changes\",\"upserts\":[\(upserts.joined(separator: ","))],"
            out += "\"removals\":[\(removals.map { "\"\($0)\"" }.joined(separator: ","))]"
            if reordered { out += ",\"order\":[\(order.map { "\"\($0)\"" }.joined(separator: ","))]" }
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
            var points = ""
            points.reserveCapacity(stroke.points.count * 12)
            for (index, point) in stroke.points.enumerated() {
                if index > 0 { points += "," }
                points += number(point.x) + "," + number(point.y)
            }
            items[stroke.id.uuidString] = "{\"id\":\"\(stroke.id.uuidString)\",\"kind\":\"stroke\",\"color\":\"\(hex(stroke.color))\",\"width\":\(number(stroke.width)),\"points\":[\(points)]}"
        }
        for sticker in board.stickers {
            let hash = sticker.imageSHA256 ?? AssetHash.of(sticker.imagePNG).hex
            let size: (width: Int, height: Int)
            if let known = sizes[hash], !sticker.isPending {
                size = known
            } else {
                let header = try? PNGHeader(validating: sticker.imagePNG)
                size = header.map { (Int($0.width), Int($0.height)) } ?? (64, 64)
                if header != nil { sizes[hash] = size }
            }
            items[sticker.id.uuidString] = "{\"id\":\"\(sticker.id.uuidString)\",\"kind\":\"sticker\",\"asset\":\(json(hash)),"
                + "\"pending\":\(sticker.isPending),\"x\":\(number(sticker.position.x)),\"y\":\(number(sticker.position.y)),"
                + "\"scale\":\(number(sticker.scale)),\"rotation\":\(number(sticker.rotationRadians)),"
                + "\"w\":\(size.width),\"h\":\(size.height)}"
        }
        let order = (board.paintOrder ?? (board.strokes.map(\.id) + board.stickers.map(\.id))).map(\.uuidString).filter { items[$0] != nil }
        let background = board.backgroundSHA256.map(json) ?? "null"
        let header = "\"width\":\(number(board.canvasSize.width)),\"height\":\(number(board.canvasSize.height)),\"background\":\(background)"
        return Rendered(header: header, items: items, order: order)
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
