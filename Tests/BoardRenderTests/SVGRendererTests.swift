import BoardModel
import BoardRender
import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import Testing

/// SVG exports: well-formed XML, one element per visible item in paint order, vector strokes,
/// stickers placed by their transform, placeholders with warnings, refused absurd sizes, and
/// the same bytes for the same snapshot.
@Suite struct SVGRendererTests {
    static let red = Data(PNGEncoder.solid(width: 4, height: 2, red: 255, green: 0, blue: 0))

    static func board() -> BoardSnapshot {
        let stroke = InkStroke(id: UUID(uuidString: "00000000-0000-0000-0000-000000000001")!,
                               color: RGBAColor(red: 0, green: 0.5, blue: 1, alpha: 0.5), width: 3,
                               points: [CodablePoint(x: 10, y: 20), CodablePoint(x: 30.25, y: 40)])
        let dot = InkStroke(id: UUID(uuidString: "00000000-0000-0000-0000-000000000002")!,
                            color: RGBAColor(red: 1, green: 0, blue: 0), width: 8, points: [CodablePoint(x: 5, y: 5)])
        let sticker = PlacedSticker(id: UUID(uuidString: "00000000-0000-0000-0000-000000000003")!, imagePNG: red,
                                    position: CodablePoint(x: 100, y: 50), scale: 2, rotationRadians: .pi / 2)
        let pending = PlacedSticker(id: UUID(uuidString: "00000000-0000-0000-0000-000000000004")!, imagePNG: Data(),
                                    position: CodablePoint(x: 0, y: 0), imageSHA256: String(repeating: "ab", count: 32))
        return BoardSnapshot(canvasSize: CodableSize(width: 200, height: 100), strokes: [stroke, dot], stickers: [sticker, pending],
                             paintOrder: [sticker.id, stroke.id, dot.id, pending.id])
    }

    /// Parses the SVG with Foundation's XML parser and lists the elements under <svg>.
    final class Elements: NSObject, XMLParserDelegate {
        var names: [(name: String, attributes: [String: String])] = []
        var depth = 0
        func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?, attributes: [String: String] = [:]) {
            if depth == 1 { names.append((name, attributes)) }
            depth += 1
        }
        func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) { depth -= 1 }
    }

    func parse(_ bytes: [UInt8]) throws -> [(name: String, attributes: [String: String])] {
        let parser = XMLParser(data: Data(bytes))
        let elements = Elements()
        parser.delegate = elements
        #expect(parser.parse(), "well-formed XML: \(parser.parserError.map { "\($0)" } ?? "")")
        return elements.names
    }

    @Test func oneElementPerVisibleItemInPaintOrder() throws {
        let rendering = try SVGRenderer.render(Self.board(), policy: ExportPolicy(scale: 2))
        let text = String(decoding: rendering.bytes, as: UTF8.self)
        #expect(text.contains(#"width="400" height="200" viewBox="0 0 200 100""#), "scale sets pixels, the view box stays in points")
        let elements = try parse(rendering.bytes)
        #expect(elements.first?.name == "rect", "white paper first")
        let items = elements.filter { $0.attributes["id"]?.hasPrefix("item-") == true }.map { $0.attributes["id"]! }
        #expect(items == ["item-00000000-0000-0000-0000-000000000003", "item-00000000-0000-0000-0000-000000000001",
                          "item-00000000-0000-0000-0000-000000000002", "item-00000000-0000-0000-0000-000000000004"])
        let stroke = try #require(elements.first { $0.attributes["id"] == "item-00000000-0000-0000-0000-000000000001" })
        #expect(stroke.name == "polyline")
        #expect(stroke.attributes["points"] == "10,20 30.25,40")
        #expect(stroke.attributes["stroke"] == "rgb(0,128,255)")
        #expect(stroke.attributes["opacity"] == "0.5")
        #expect(stroke.attributes["stroke-linecap"] == "round" && stroke.attributes["stroke-linejoin"] == "round")
        let dot = try #require(elements.first { $0.attributes["id"] == "item-00000000-0000-0000-0000-000000000002" })
        #expect(dot.name == "circle" && dot.attributes["r"] == "4", "a one-point stroke is a round dot of its width")
        let sticker = try #require(elements.first { $0.attributes["id"] == "item-00000000-0000-0000-0000-000000000003" })
        #expect(sticker.attributes["transform"] == "translate(100 50) rotate(90) scale(2)")
        #expect(text.contains(#"<image x="-2" y="-1" width="4" height="2""#), "the image is centred on the position at its own size")
        #expect(text.contains("data:image/png;base64,\(Self.red.base64EncodedString())"))
        #expect(rendering.warnings == ["sticker 00000000-0000-0000-0000-000000000004 shows an image that has not arrived yet; drawn as a placeholder"])
    }

    @Test func transparentDamagedAndAbsurd() throws {
        var board = Self.board()
        board.stickers[0].imagePNG = Data([0x89, 0x50, 0x4E, 0x47, 1, 2, 3])
        let rendering = try SVGRenderer.render(board, policy: ExportPolicy(transparent: true))
        let elements = try parse(rendering.bytes)
        #expect(!elements.contains { $0.attributes["id"] == "paper" }, "no paper when transparent")
        #expect(rendering.warnings.contains { $0.contains("00000000-0000-0000-0000-000000000003") && $0.contains("damaged") })
        #expect(String(decoding: rendering.bytes, as: UTF8.self).contains("placeholder"))
        #expect(throws: ExportError.self) { try SVGRenderer.render(board, policy: ExportPolicy(scale: 1_000)) }
        #expect(throws: ExportError.self) { try SVGRenderer.render(board, policy: ExportPolicy(scale: .nan)) }
        board.canvasSize = CodableSize(width: .infinity, height: 10)
        #expect(throws: ExportError.self) { try SVGRenderer.render(board) }
    }

    /// The attributes of the <svg> element.
    static func root(_ bytes: [UInt8]) -> [String: String]? {
        final class Root: NSObject, XMLParserDelegate {
            var attributes: [String: String]?
            func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?, attributes: [String: String] = [:]) {
                if name == "svg", self.attributes == nil { self.attributes = attributes }
            }
        }
        let parser = XMLParser(data: Data(bytes))
        let root = Root()
        parser.delegate = root
        _ = parser.parse()
        return root.attributes
    }

    /// The view box of an export, parsed from the SVG.
    func viewBox(_ bytes: [UInt8]) throws -> ViewBox {
        let text = String(decoding: bytes, as: UTF8.self)
        let range = try #require(text.range(of: #"viewBox="[^"]*""#, options: .regularExpression))
        let numbers = text[range].dropFirst(9).dropLast().split(separator: " ").compactMap { Double($0) }
        try #require(numbers.count == 4, "\(text[range])")
        return ViewBox(x: numbers[0], y: numbers[1], width: numbers[2], height: numbers[3])
    }

    /// `frame: .content` draws what the board holds, not the page: the view box encloses every
    /// item as drawn (a stroke out to half its width, a turned and scaled sticker, a placeholder)
    /// with the margin, and is far smaller than a large canvas; the pixels follow the view box.
    @Test func framingTheContentEnclosesEveryItemAndIsSmallerThanTheCanvas() throws {
        let tiny = Data(PNGEncoder.solid(width: 4, height: 4, red: 255, green: 0, blue: 0))
        let stroke = InkStroke(id: UUID(), color: .black, width: 6, points: [CodablePoint(x: 100, y: 200), CodablePoint(x: 140, y: 230)])
        // A 4 x 4 image at scale 3 turned 45 degrees reaches 6 * sqrt(2) from its centre.
        let turned = PlacedSticker(id: UUID(), imagePNG: tiny, position: CodablePoint(x: 300, y: 100), scale: 3, rotationRadians: .pi / 4)
        let pending = PlacedSticker(id: UUID(), imagePNG: Data(), position: CodablePoint(x: 50, y: 400), imageSHA256: String(repeating: "cd", count: 32))
        let board = BoardSnapshot(canvasSize: CodableSize(width: 1600, height: 1200), strokes: [stroke], stickers: [turned, pending],
                                  paintOrder: [stroke.id, turned.id, pending.id])
        let rendering = try SVGRenderer.render(board, policy: ExportPolicy(scale: 2), frame: .content(margin: 10))
        let view = try viewBox(rendering.bytes)
        let reach = 6 * 2.0.squareRoot()
        // Exactly the items' extent plus the margin: the placeholder (64 x 64 at 50,400) on the
        // left and at the bottom, the turned sticker at the top and on the right.
        let expected = ViewBox(x: 50 - 32 - 10, y: 100 - reach - 10, width: (300 + reach + 10) - (50 - 32 - 10), height: (400 + 32 + 10) - (100 - reach - 10))
        #expect(abs(view.x - expected.x) < 0.001 && abs(view.y - expected.y) < 0.001, "\(view) vs \(expected)")
        #expect(abs(view.width - expected.width) < 0.002 && abs(view.height - expected.height) < 0.002, "\(view) vs \(expected)")
        for item in [ViewBox(x: 97, y: 197, width: 46, height: 36), ViewBox(x: 300 - reach, y: 100 - reach, width: 2 * reach, height: 2 * reach),
                     ViewBox(x: 18, y: 368, width: 64, height: 64)] {
            #expect(view.contains(item), "\(item) inside \(view)")
        }
        #expect(view.width * view.height < 1600 * 1200 / 4, "much smaller than the canvas")
        let elements = try parse(rendering.bytes)
        let svg = try #require(Self.root(rendering.bytes))
        #expect(abs((Double(svg["width"] ?? "") ?? 0) - view.width * 2) < 0.002 && abs((Double(svg["height"] ?? "") ?? 0) - view.height * 2) < 0.002,
                "pixels follow the view box: \(svg)")
        let paper = try #require(elements.first { $0.attributes["id"] == "paper" })
        #expect(paper.attributes["x"].flatMap(Double.init) == view.x && paper.attributes["y"].flatMap(Double.init).map { abs($0 - view.y) < 0.001 } == true
                && paper.attributes["width"].flatMap(Double.init).map { abs($0 - view.width) < 0.001 } == true, "the paper covers the view: \(paper.attributes)")
        #expect(elements.filter { $0.attributes["id"]?.hasPrefix("item-") == true }.count == 3, "every item is still drawn")

        // A 4-point sticker on a 1600 x 1200 page, as the simulator's scenarios draw it.
        let lone = BoardSnapshot(canvasSize: CodableSize(width: 1600, height: 1200), strokes: [],
                                 stickers: [PlacedSticker(id: UUID(), imagePNG: tiny, position: CodablePoint(x: 0, y: 200))])
        #expect(SVGRenderer.viewBox(of: lone, frame: .content(margin: 16)) == ViewBox(x: -18, y: 182, width: 36, height: 36))
    }

    /// The default frame is still the canvas, byte for byte; a board with nothing to frame falls
    /// back to the canvas; a background covers the canvas, so it is part of the content; a
    /// deleted item (not in the paint order) is not framed.
    @Test func theCanvasStaysTheDefaultAndAnEmptyBoardFallsBackToIt() throws {
        #expect(try SVGRenderer.render(Self.board()).bytes == SVGRenderer.render(Self.board(), frame: .canvas).bytes)
        #expect(try viewBox(SVGRenderer.render(Self.board()).bytes) == ViewBox(x: 0, y: 0, width: 200, height: 100))
        let empty = BoardSnapshot(canvasSize: CodableSize(width: 1600, height: 1200), strokes: [], stickers: [])
        let framed = try SVGRenderer.render(empty, frame: .content(margin: 16))
        #expect(try viewBox(framed.bytes) == ViewBox(x: 0, y: 0, width: 1600, height: 1200))
        #expect(framed.bytes == (try SVGRenderer.render(empty).bytes), "the same picture as the canvas export")

        var backed = Self.board()
        backed.backgroundPNG = Self.red
        let withBackground = SVGRenderer.viewBox(of: backed, frame: .content(margin: 0))
        #expect(withBackground.contains(ViewBox(x: 0, y: 0, width: 200, height: 100)), "\(withBackground)")

        var hidden = Self.board()
        hidden.strokes.append(InkStroke(id: UUID(), color: .black, width: 1, points: [CodablePoint(x: 5000, y: 5000)]))
        #expect(SVGRenderer.viewBox(of: hidden, frame: .content(margin: 0)) == SVGRenderer.viewBox(of: Self.board(), frame: .content(margin: 0)),
                "an item outside the paint order is not drawn, so not framed")
        // Content too far apart to draw is refused, like a canvas too large.
        var far = Self.board()
        far.strokes[0].points.append(CodablePoint(x: 1e9, y: 0))
        #expect(throws: ExportError.self) { try SVGRenderer.render(far, frame: .content(margin: 16)) }
    }

    @Test func theSameSnapshotGivesTheSameBytes() throws {
        #expect(try SVGRenderer.render(Self.board()).bytes == SVGRenderer.render(Self.board()).bytes)
    }
}
