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

    @Test func theSameSnapshotGivesTheSameBytes() throws {
        #expect(try SVGRenderer.render(Self.board()).bytes == SVGRenderer.render(Self.board()).bytes)
    }
}
