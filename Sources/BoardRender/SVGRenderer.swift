import BoardModel
import Foundation

/// What an export draws beyond the board itself (docs/ARCHITECTURE.md, "Exports").
public struct ExportPolicy: Sendable, Equatable {
    /// Output pixels per board point (the SVG's width and height; its view box stays in points).
    public var scale: Double = 1
    /// A transparent background instead of white where the board has no background image.
    public var transparent = false
    /// Exports larger than this many pixels on a side are refused before anything is built.
    public static let maxPixelsPerSide = 32_768.0
    /// Raster exports with more pixels than this (about 1 GB of working memory) are refused too.
    public static let maxPixels = 64_000_000.0
    /// Raster exports stop with an error after this many pixel visits (each stroke segment and
    /// image visits the pixels it may cover): a hostile board cannot keep a server or a user's
    /// machine drawing for hours. The default is reached in about 4 s (release build) by a
    /// stroke of 20,000 points as wide as the canvas; the workload board of docs/PERFORMANCE.md
    /// (5,000 strokes, 500 stickers) needs under 50 million.
    public var maxPixelVisits = 400_000_000

    public init(scale: Double = 1, transparent: Bool = false) {
        self.scale = scale
        self.transparent = transparent
    }
}

public struct ExportError: Error, Equatable, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}

/// An export's bytes and what it had to draw as a placeholder.
public struct Rendering: Sendable {
    public var bytes: [UInt8]
    /// One line per sticker or background drawn as a placeholder (pending or damaged image).
    public var warnings: [String]
}

/// Which part of the board an SVG export shows (its `viewBox`, in board points).
public enum SVGFrame: Sendable, Equatable {
    /// The canvas, from (0, 0) to its size: what `board-sync export` writes.
    case canvas
    /// The drawing itself: the bounds of every visible item (and of the canvas when the board
    /// has a background, which covers it), with `margin` points around them. A board with
    /// nothing to frame falls back to the canvas. For pictures of small content on a large
    /// canvas (the simulator's scenarios: 4-point stickers on a 1600 x 1200 page).
    case content(margin: Double)
}

/// An SVG's view box: the rectangle of board points the picture shows.
public struct ViewBox: Sendable, Equatable {
    public var x: Double
    public var y: Double
    public var width: Double
    public var height: Double

    public init(x: Double, y: Double, width: Double, height: Double) {
        self.x = x
        self.y = y
        self.width = width
        self.height = height
    }

    /// Whether `other` lies inside this box.
    public func contains(_ other: ViewBox) -> Bool {
        other.x >= x && other.y >= y && other.x + other.width <= x + width && other.y + other.height <= y + height
    }
}

/// Renders a board snapshot as SVG: the background scaled to the canvas, then every item in
/// paint order, strokes as vector polylines with round caps and joins, stickers as embedded PNG
/// images centred on their position with their scale and rotation. One element per visible
/// item, with the id `item-<UUID>`. Deterministic: the same snapshot gives the same bytes.
/// The view box is the canvas unless `frame` asks for the content (`SVGFrame.content`).
public enum SVGRenderer {
    public static func render(_ board: BoardSnapshot, policy: ExportPolicy = ExportPolicy()) throws -> Rendering {
        try render(board, policy: policy, frame: .canvas)
    }

    public static func render(_ board: BoardSnapshot, policy: ExportPolicy = ExportPolicy(), frame: SVGFrame) throws -> Rendering {
        let size = board.canvasSize
        guard size.width.isFinite, size.height.isFinite, size.width > 0, size.height > 0 else {
            throw ExportError(message: "the canvas \(size.width)x\(size.height) cannot be exported")
        }
        guard policy.scale.isFinite, policy.scale > 0 else {
            throw ExportError(message: "the scale \(policy.scale) must be a positive number")
        }
        let view = viewBox(of: board, frame: frame)
        let pixels = (view.width * policy.scale, view.height * policy.scale)
        guard pixels.0 <= ExportPolicy.maxPixelsPerSide, pixels.1 <= ExportPolicy.maxPixelsPerSide else {
            throw ExportError(message: "a \(Int(min(pixels.0, 1e18)))x\(Int(min(pixels.1, 1e18))) pixel export is larger than \(Int(ExportPolicy.maxPixelsPerSide)) pixels on a side; lower --scale")
        }
        let box = "\(number(view.x)) \(number(view.y)) \(number(view.width)) \(number(view.height))"
        var out = #"<?xml version="1.0" encoding="UTF-8"?>"# + "\n"
        out += #"<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="\#(number(pixels.0))" height="\#(number(pixels.1))" viewBox="\#(box)">"# + "\n"
        var warnings: [String] = []
        if !policy.transparent {
            // The paper covers the whole view (the canvas, or the framed content around it).
            let origin = view.x == 0 && view.y == 0 ? "" : #"x="\#(number(view.x))" y="\#(number(view.y))" "#
            out += #"<rect id="paper" \#(origin)width="\#(number(view.width))" height="\#(number(view.height))" fill="white"/>"# + "\n"
        }
        if let png = board.backgroundPNG, !png.isEmpty {
            if (try? PNGHeader(validating: png)) != nil {
                out += #"<image id="background" width="\#(number(size.width))" height="\#(number(size.height))" preserveAspectRatio="none" xlink:href="data:image/png;base64,\#(png.base64EncodedString())"/>"# + "\n"
            } else {
                warnings.append("the background image is damaged; drawn as a placeholder")
                out += placeholder(id: "background", width: size.width, height: size.height)
            }
        } else if let hash = board.backgroundSHA256 {
            warnings.append("the background image \(hash.prefix(12)) has not arrived yet; drawn as a placeholder")
            out += placeholder(id: "background", width: size.width, height: size.height)
        }
        let strokes = Dictionary(board.strokes.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        let stickers = Dictionary(board.stickers.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        let order = board.paintOrder ?? (board.strokes.map(\.id) + board.stickers.map(\.id))
        for id in order {
            if let stroke = strokes[id] {
                out += element(for: stroke)
            } else if let sticker = stickers[id] {
                let (text, warning) = element(for: sticker)
                out += text
                if let warning { warnings.append(warning) }
            }
        }
        out += "</svg>\n"
        return Rendering(bytes: Array(out.utf8), warnings: warnings)
    }

    /// The view box an export of `board` with `frame` shows (the canvas is assumed valid).
    public static func viewBox(of board: BoardSnapshot, frame: SVGFrame) -> ViewBox {
        let canvas = ViewBox(x: 0, y: 0, width: board.canvasSize.width, height: board.canvasSize.height)
        guard case .content(let margin) = frame, let bounds = contentBounds(of: board) else { return canvas }
        let pad = margin.isFinite ? max(0, margin) : 0
        // At least a point on a side, so a lone dot of width 0 still has a picture.
        return ViewBox(x: bounds.x - pad, y: bounds.y - pad, width: max(1, bounds.width + 2 * pad), height: max(1, bounds.height + 2 * pad))
    }

    /// The smallest box holding every visible item as drawn (a stroke's points out to half its
    /// width, a sticker's image or placeholder turned and scaled), and the canvas when a
    /// background covers it; nil when there is nothing (items with non-finite values are left
    /// out: they draw nothing).
    public static func contentBounds(of board: BoardSnapshot) -> ViewBox? {
        var minX = Double.infinity, minY = Double.infinity, maxX = -Double.infinity, maxY = -Double.infinity
        func include(_ x0: Double, _ y0: Double, _ x1: Double, _ y1: Double) {
            guard x0.isFinite, y0.isFinite, x1.isFinite, y1.isFinite else { return }
            minX = min(minX, x0); minY = min(minY, y0); maxX = max(maxX, x1); maxY = max(maxY, y1)
        }
        if board.backgroundPNG?.isEmpty == false || board.backgroundSHA256 != nil {
            include(0, 0, board.canvasSize.width, board.canvasSize.height)
        }
        let visible = board.paintOrder.map(Set.init)
        for stroke in board.strokes where visible?.contains(stroke.id) ?? true {
            let half = stroke.width.isFinite ? max(0, stroke.width) / 2 : 0
            for point in stroke.points {
                include(point.x - half, point.y - half, point.x + half, point.y + half)
            }
        }
        for sticker in board.stickers where visible?.contains(sticker.id) ?? true {
            var width = 64.0, height = 64.0  // a placeholder's box
            if !sticker.isPending, !sticker.imagePNG.isEmpty, let header = try? PNGHeader(validating: sticker.imagePNG) {
                width = Double(header.width)
                height = Double(header.height)
            }
            let scale = abs(sticker.scale), angle = sticker.rotationRadians
            let halfX = width * scale / 2, halfY = height * scale / 2
            let extentX = abs(cos(angle)) * halfX + abs(sin(angle)) * halfY
            let extentY = abs(sin(angle)) * halfX + abs(cos(angle)) * halfY
            include(sticker.position.x - extentX, sticker.position.y - extentY, sticker.position.x + extentX, sticker.position.y + extentY)
        }
        guard minX <= maxX, minY <= maxY else { return nil }
        return ViewBox(x: minX, y: minY, width: maxX - minX, height: maxY - minY)
    }

    static func element(for stroke: InkStroke) -> String {
        let color = stroke.color
        let paint = "rgb(\(channel(color.red)),\(channel(color.green)),\(channel(color.blue)))"
        let opacity = color.alpha >= 1 ? "" : #" opacity="\#(number(max(0, color.alpha)))""#
        let id = "item-\(stroke.id.uuidString)"
        guard stroke.points.count > 1 else {
            let point = stroke.points.first ?? CodablePoint(x: 0, y: 0)
            if stroke.points.isEmpty { return #"<g id="\#(id)"/>"# + "\n" }
            return #"<circle id="\#(id)" cx="\#(number(point.x))" cy="\#(number(point.y))" r="\#(number(stroke.width / 2))" fill="\#(paint)"\#(opacity)/>"# + "\n"
        }
        var pointBytes: [UInt8] = []
        pointBytes.reserveCapacity(stroke.points.count * 12)
        for (index, point) in stroke.points.enumerated() {
            if index > 0 { pointBytes.append(UInt8(ascii: " ")) }
            NumberText.append(point.x, to: &pointBytes)
            pointBytes.append(UInt8(ascii: ","))
            NumberText.append(point.y, to: &pointBytes)
        }
        let points = String(decoding: pointBytes, as: UTF8.self)
        return #"<polyline id="\#(id)" points="\#(points)" fill="none" stroke="\#(paint)" stroke-width="\#(number(stroke.width))" stroke-linecap="round" stroke-linejoin="round"\#(opacity)/>"# + "\n"
    }

    static func element(for sticker: PlacedSticker) -> (String, String?) {
        let id = "item-\(sticker.id.uuidString)"
        let transform = #"transform="translate(\#(number(sticker.position.x)) \#(number(sticker.position.y))) rotate(\#(number(sticker.rotationRadians * 180 / .pi))) scale(\#(number(sticker.scale)))""#
        if sticker.isPending || sticker.imagePNG.isEmpty {
            return (#"<g id="\#(id)" \#(transform)>"# + placeholder(id: nil, width: 64, height: 64, centred: true) + "</g>\n",
                    "sticker \(sticker.id.uuidString) shows an image that has not arrived yet; drawn as a placeholder")
        }
        guard let header = try? PNGHeader(validating: sticker.imagePNG) else {
            return (#"<g id="\#(id)" \#(transform)>"# + placeholder(id: nil, width: 64, height: 64, centred: true) + "</g>\n",
                    "sticker \(sticker.id.uuidString) has a damaged image; drawn as a placeholder")
        }
        let width = Double(header.width), height = Double(header.height)
        let image = #"<image x="\#(number(-width / 2))" y="\#(number(-height / 2))" width="\#(number(width))" height="\#(number(height))" xlink:href="data:image/png;base64,\#(sticker.imagePNG.base64EncodedString())"/>"#
        return (#"<g id="\#(id)" \#(transform)>"# + image + "</g>\n", nil)
    }

    /// A grey box with a cross: an image that is missing or damaged.
    static func placeholder(id: String?, width: Double, height: Double, centred: Bool = false) -> String {
        let x = centred ? -width / 2 : 0, y = centred ? -height / 2 : 0
        let idAttribute = id.map { #" id="\#($0)""# } ?? ""
        return #"<g\#(idAttribute) class="placeholder"><rect x="\#(number(x))" y="\#(number(y))" width="\#(number(width))" height="\#(number(height))" fill="lightgray" stroke="gray" stroke-dasharray="4 4"/><path d="M\#(number(x)) \#(number(y))L\#(number(x + width)) \#(number(y + height))M\#(number(x + width)) \#(number(y))L\#(number(x)) \#(number(y + height))" stroke="gray"/></g>"# + (centred ? "" : "\n")
    }

    static func channel(_ value: Double) -> Int {
        Int((min(1, max(0, value.isFinite ? value : 0)) * 255).rounded())
    }

    /// Shortest fixed notation with at most three decimals ("12", "0.5", "-3.125").
    static func number(_ value: Double) -> String {
        NumberText.string(value)
    }
}
