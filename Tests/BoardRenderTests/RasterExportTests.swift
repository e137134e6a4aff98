import BoardModel
import BoardRender
import Foundation
import Testing

/// PNG and PDF exports: pixels where the geometry puts them (expected values worked out by hand
/// from the board, not read back from the renderer), compositing, paint order, placeholders,
/// refusals, determinism, and the PDF's structure (rendered by poppler's pdftoppm when present).
@Suite struct RasterExportTests {
    static func id(_ n: Int) -> UUID { UUID(uuidString: String(format: "00000000-0000-0000-0000-%012d", n))! }

    /// A 20×10 image in four quadrants: red top-left, green top-right, blue bottom-left,
    /// yellow bottom-right.
    static let quadrants: Data = {
        var pixels = [UInt8]()
        for y in 0..<10 {
            for x in 0..<20 {
                let colour: [UInt8] = y < 5 ? (x < 10 ? [255, 0, 0, 255] : [0, 255, 0, 255]) : (x < 10 ? [0, 0, 255, 255] : [255, 255, 0, 255])
                pixels += colour
            }
        }
        return Data(PNGWriter.encode(RGBAImage(width: 20, height: 10, pixels: pixels)))
    }()

    static let blue = Data(PNGEncoder.solid(width: 10, height: 10, red: 0, green: 0, blue: 255))

    func pixel(_ image: RGBAImage, _ x: Int, _ y: Int) -> [Int] {
        let index = (y * image.width + x) * 4
        return image.pixels[index..<index + 4].map(Int.init)
    }

    func close(_ a: [Int], _ b: [Int], within tolerance: Int = 2) -> Bool {
        zip(a, b).allSatisfy { abs($0 - $1) <= tolerance }
    }

    @Test func aStrokePaintsItsPathInItsColourWithRoundCapsAndLeavesThePaperElsewhere() throws {
        let stroke = InkStroke(id: Self.id(1), color: RGBAColor(red: 1, green: 0, blue: 0), width: 6,
                               points: [CodablePoint(x: 10, y: 30.5), CodablePoint(x: 90, y: 30.5)])
        let board = BoardSnapshot(canvasSize: CodableSize(width: 100, height: 60), strokes: [stroke])
        // Pixel (x, y) is the square from (x, y) to (x + 1, y + 1); its centre is sampled. The
        // stroke's edges run along y = 27.5 and y = 33.5.
        let (image, warnings) = try PNGRenderer.rasterize(board)
        #expect(image.width == 100 && image.height == 60 && warnings.isEmpty)
        #expect(pixel(image, 50, 30) == [255, 0, 0, 255], "on the path")
        #expect(pixel(image, 50, 28) == [255, 0, 0, 255], "within half the width of it")
        #expect(pixel(image, 50, 10) == [255, 255, 255, 255], "paper away from it")
        #expect(pixel(image, 50, 35) == [255, 255, 255, 255], "beyond half the width")
        // Round caps: 1.5 points past the end is inside the cap; (92.5, 33.5) is in the corner a
        // square cap would fill, 3.9 points from the end, outside the round one.
        #expect(pixel(image, 91, 30) == [255, 0, 0, 255])
        #expect(pixel(image, 92, 33) == [255, 255, 255, 255])
        // Anti-aliased edge: the row whose centre lies on the edge is half red, half paper.
        let edge = pixel(image, 50, 33)
        #expect(close(edge, [255, 128, 128, 255]), "\(edge)")
        // A single point is a dot of the stroke's width.
        let dot = BoardSnapshot(canvasSize: CodableSize(width: 20, height: 20),
                                strokes: [InkStroke(id: Self.id(2), color: RGBAColor(red: 0, green: 0, blue: 0), width: 8, points: [CodablePoint(x: 10, y: 10)])])
        let (dotImage, _) = try PNGRenderer.rasterize(dot)
        #expect(pixel(dotImage, 10, 10) == [0, 0, 0, 255] && pixel(dotImage, 11, 11) == [0, 0, 0, 255])
        #expect(pixel(dotImage, 12, 10) == [0, 0, 0, 255] && pixel(dotImage, 7, 9) == [0, 0, 0, 255])
        #expect(pixel(dotImage, 2, 2) == [255, 255, 255, 255])
    }

    @Test func aRotatedScaledStickersCornersLandWhereItsTransformPutsThem() throws {
        // Centred at (50, 50), scale 2, a quarter turn clockwise: the 40×20 box becomes 20×40
        // spanning x 40...60, y 30...70. Image point (u, v) lands at (60 - 2v, 30 + 2u): the
        // top-left quadrant's centre (5, 2.5) at (55, 40), top-right (15, 2.5) at (55, 60),
        // bottom-left (5, 7.5) at (45, 40), bottom-right (15, 7.5) at (45, 60).
        let sticker = PlacedSticker(id: Self.id(3), imagePNG: Self.quadrants, position: CodablePoint(x: 50, y: 50),
                                    scale: 2, rotationRadians: .pi / 2)
        let board = BoardSnapshot(canvasSize: CodableSize(width: 100, height: 100), stickers: [sticker])
        let (image, _) = try PNGRenderer.rasterize(board)
        #expect(pixel(image, 55, 40) == [255, 0, 0, 255], "top-left quadrant")
        #expect(pixel(image, 55, 60) == [0, 255, 0, 255], "top-right quadrant")
        #expect(pixel(image, 45, 40) == [0, 0, 255, 255], "bottom-left quadrant")
        #expect(pixel(image, 45, 60) == [255, 255, 0, 255], "bottom-right quadrant")
        #expect(pixel(image, 35, 50) == [255, 255, 255, 255], "outside the rotated box (it was inside the unrotated one)")
        #expect(pixel(image, 50, 25) == [255, 255, 255, 255])
    }

    @Test func aHalfTransparentStrokeBlendsOverAStickerAndPaintOrderDecidesWhatCovers() throws {
        let sticker = PlacedSticker(id: Self.id(4), imagePNG: Self.blue, position: CodablePoint(x: 20, y: 20), scale: 2)
        let stroke = InkStroke(id: Self.id(5), color: RGBAColor(red: 1, green: 0, blue: 0, alpha: 0.5), width: 4,
                               points: [CodablePoint(x: 5, y: 20), CodablePoint(x: 35, y: 20)])
        let canvas = CodableSize(width: 40, height: 40)
        let strokeOnTop = BoardSnapshot(canvasSize: canvas, strokes: [stroke], stickers: [sticker], paintOrder: [sticker.id, stroke.id])
        let (blended, _) = try PNGRenderer.rasterize(strokeOnTop)
        #expect(close(pixel(blended, 20, 20), [128, 0, 127, 255]), "half red over blue: \(pixel(blended, 20, 20))")
        #expect(close(pixel(blended, 2, 20), [255, 255, 255, 255]), "the stroke's round cap ends before x = 3")
        #expect(close(pixel(blended, 6, 20), [255, 127, 127, 255]), "half red over white: \(pixel(blended, 6, 20))")
        // The sticker brought to the front covers the stroke where they overlap.
        let stickerOnTop = BoardSnapshot(canvasSize: canvas, strokes: [stroke], stickers: [sticker], paintOrder: [stroke.id, sticker.id])
        let (covered, _) = try PNGRenderer.rasterize(stickerOnTop)
        #expect(pixel(covered, 20, 20) == [0, 0, 255, 255])
        #expect(close(pixel(covered, 6, 20), [255, 127, 127, 255]), "outside the sticker the stroke still shows")
    }

    @Test func scaleBackgroundTransparencyAndPlaceholders() throws {
        let background = Data(PNGEncoder.solid(width: 4, height: 3, red: 0, green: 200, blue: 0))
        let pending = PlacedSticker(id: Self.id(6), imagePNG: Data(), position: CodablePoint(x: 200, y: 100),
                                    imageSHA256: String(repeating: "cd", count: 32))
        let damaged = PlacedSticker(id: Self.id(7), imagePNG: Data([0x89, 0x50, 0x4E, 0x47, 1, 2, 3]), position: CodablePoint(x: 60, y: 100))
        var board = BoardSnapshot(canvasSize: CodableSize(width: 300, height: 200), backgroundPNG: background, stickers: [pending, damaged])
        let (image, warnings) = try PNGRenderer.rasterize(board, policy: ExportPolicy(scale: 2))
        #expect(image.width == 600 && image.height == 400, "two pixels per point")
        #expect(pixel(image, 4, 4) == [0, 200, 0, 255], "the background stretched over the canvas")
        #expect(pixel(image, 596, 396) == [0, 200, 0, 255])
        #expect(warnings.count == 2)
        #expect(warnings.contains { $0.contains(Self.id(6).uuidString) && $0.contains("not arrived") })
        #expect(warnings.contains { $0.contains(Self.id(7).uuidString) && $0.contains("damaged") })
        // Placeholders are grey (64 points square, centred): not the background's green.
        let centre = pixel(image, 400 + 20, 200 + 30)
        #expect(pixel(image, 120 + 20, 200 + 30) == centre, "the damaged one too")
        #expect(centre[0] == centre[1] && centre[1] == centre[2] && centre[0] > 100, "\(centre)")
        // Transparent paper: alpha 0 where nothing is drawn; white by default.
        board.backgroundPNG = nil
        board.stickers = []
        let (clear, _) = try PNGRenderer.rasterize(board, policy: ExportPolicy(transparent: true))
        #expect(pixel(clear, 10, 10)[3] == 0)
        let (white, _) = try PNGRenderer.rasterize(board)
        #expect(pixel(white, 10, 10) == [255, 255, 255, 255])
    }

    @Test func absurdSizesAreRefusedBeforeAnythingIsDrawn() throws {
        let huge = BoardSnapshot(canvasSize: CodableSize(width: 100_000, height: 100_000))
        for render in [PNGRenderer.render, PDFRenderer.render, SVGRenderer.render] {
            #expect { _ = try render(huge, ExportPolicy()) } throws: { "\($0)".contains("larger than") }
        }
        let board = BoardSnapshot(canvasSize: CodableSize(width: 8000, height: 8000))
        #expect { _ = try PNGRenderer.render(board, policy: ExportPolicy(scale: 2)) } throws: { "\($0)".contains("more than") }
        #expect { _ = try PNGRenderer.render(board, policy: ExportPolicy(scale: 0)) } throws: { "\($0)".contains("positive") }
        // A hostile board: a 20,000-point stroke as wide as the canvas. Rasterizing it would
        // visit every pixel once per segment (38 billion visits); it runs out of its budget
        // instead (a small one here, to keep the debug-build test quick; the default is 400 million).
        let wide = InkStroke(id: Self.id(50), color: RGBAColor(red: 0, green: 0, blue: 0), width: 5000,
                             points: (0..<20_000).map { CodablePoint(x: Double($0 % 1600), y: Double($0 % 1200)) })
        let heavy = BoardSnapshot(canvasSize: CodableSize(width: 1600, height: 1200), strokes: [wide])
        var limited = ExportPolicy()
        limited.maxPixelVisits = 20_000_000
        #expect { _ = try PNGRenderer.render(heavy, policy: limited) } throws: { "\($0)".contains("too heavy") }
        #expect(try PNGRenderer.render(Self.sample(), policy: limited).bytes.count > 0, "an ordinary board is far within it")
        #expect(try PDFRenderer.render(heavy).bytes.count > 0, "vector exports are linear in the points")
        let nan = BoardSnapshot(canvasSize: CodableSize(width: .nan, height: 5))
        #expect { _ = try PNGRenderer.render(nan, policy: ExportPolicy()) } throws: { "\($0)".contains("cannot be exported") }
    }

    static func sample() -> BoardSnapshot {
        var strokes: [InkStroke] = []
        for index in 0..<6 {
            let shade = Double(index) / 6
            let color = RGBAColor(red: shade, green: 0.3, blue: 1 - shade, alpha: index % 2 == 0 ? 1 : 0.6)
            var points: [CodablePoint] = []
            for step in 0..<12 {
                points.append(CodablePoint(x: 10 + Double(step) * 15, y: 20 + Double(index) * 25 + Double(step % 3) * 6))
            }
            strokes.append(InkStroke(id: id(10 + index), color: color, width: 2 + Double(index), points: points))
        }
        let stickers = [PlacedSticker(id: id(30), imagePNG: quadrants, position: CodablePoint(x: 120, y: 90), scale: 3, rotationRadians: 0.4),
                        PlacedSticker(id: id(31), imagePNG: blue, position: CodablePoint(x: 40, y: 140), scale: 2)]
        return BoardSnapshot(canvasSize: CodableSize(width: 200, height: 180), strokes: strokes, stickers: stickers,
                             paintOrder: [id(30)] + strokes.map { $0.id } + [id(31)])
    }

    @Test func everyExportIsDeterministicAndThePNGDecodesToTheRenderedPixels() throws {
        let board = Self.sample()
        for render in [PNGRenderer.render, PDFRenderer.render, SVGRenderer.render] {
            #expect(try render(board, ExportPolicy()).bytes == render(board, ExportPolicy()).bytes)
        }
        let png = try PNGRenderer.render(board)
        let (pixels, _) = try PNGRenderer.rasterize(board)
        #expect(try PNGDecoder.decode(png.bytes) == pixels)
        // Real compression: far smaller than the raw pixels.
        #expect(png.bytes.count < pixels.pixels.count / 4)
    }

    @Test func thePDFIsOnePageOfTheCanvasWithVectorStrokesAndMaskedImages() throws {
        let board = Self.sample()
        let pdf = try PDFRenderer.render(board).bytes
        let text = String(decoding: pdf, as: UTF8.self)
        #expect(text.hasPrefix("%PDF-1.4\n"))
        #expect(text.hasSuffix("%%EOF\n"))
        // The cross-reference table points at each object.
        let startxref = try #require(text.range(of: "startxref\n"))
        let xrefOffset = try #require(Int(text[startxref.upperBound...].prefix { $0.isNumber }))
        #expect(String(decoding: pdf[xrefOffset..<xrefOffset + 4], as: UTF8.self) == "xref")
        let entries = String(decoding: pdf[xrefOffset...], as: UTF8.self).split(separator: "\n").dropFirst(3)
            .prefix { $0.hasSuffix(" n ") }
        #expect(entries.count >= 6)
        for (index, entry) in entries.enumerated() {
            let offset = try #require(Int(entry.prefix(10)))
            #expect(String(decoding: pdf[offset..<offset + 10], as: UTF8.self).hasPrefix("\(index + 1) 0 obj"))
        }
        #expect(text.components(separatedBy: "/Type /Page ").count == 2, "one page")
        #expect(text.contains("/MediaBox [0 0 200 180]"))
        #expect(!text.contains("/SMask"), "both images are opaque: no soft mask")
        // The content stream: inflate it and find the strokes as path operators.
        let contents = try #require(Self.streams(pdf).first { String(decoding: $0.dictionary, as: UTF8.self).contains("/Filter /FlateDecode") && !String(decoding: $0.dictionary, as: UTF8.self).contains("/Subtype /Image") })
        let operators = String(decoding: try Zlib.decompress(contents.data, limit: 1 << 24), as: UTF8.self)
        #expect(operators.components(separatedBy: " RG ").count - 1 == 6, "six stroked paths")
        #expect(operators.components(separatedBy: " l").count - 1 == 6 * 11, "eleven line segments each")
        #expect(operators.contains("1 J 1 j"), "round caps and joins")
        #expect(operators.components(separatedBy: " Do ").count - 1 == 2, "two stickers, drawn as images")
        #expect(operators.contains(" gs "), "translucent strokes through an ExtGState")
        // A translucent image gets a soft mask.
        let translucent = Data(PNGEncoder.solid(width: 3, height: 3, red: 9, green: 9, blue: 9, alpha: 100))
        let masked = try PDFRenderer.render(BoardSnapshot(stickers: [PlacedSticker(id: Self.id(40), imagePNG: translucent, position: CodablePoint(x: 9, y: 9))]))
        #expect(String(decoding: masked.bytes, as: UTF8.self).contains("/SMask"))
    }

    @Test func popplerRendersThePDFLikeThePNGExport() throws {
        guard let pdftoppm = ["/usr/bin/pdftoppm", "/usr/local/bin/pdftoppm"].first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            print("SKIPPED: pdftoppm (poppler-utils) is not installed: the PDF is not rendered and compared; .ci/run installs it")
            return
        }
        let board = Self.sample()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("boardsync-pdf-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try Data(PDFRenderer.render(board).bytes).write(to: directory.appendingPathComponent("board.pdf"))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: pdftoppm)
        process.arguments = ["-png", "-r", "72", "-singlefile", "board.pdf", "page"]
        process.currentDirectoryURL = directory
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        let page = try PNGDecoder.decode([UInt8](Data(contentsOf: directory.appendingPathComponent("page.png"))))
        let (ours, _) = try PNGRenderer.rasterize(board)
        #expect(page.width == ours.width && page.height == ours.height, "one point per pixel at 72 dpi")
        // Close, not equal: two rasterizers anti-alias edges differently. Compare every channel.
        var total = 0, far = 0
        for (a, b) in zip(page.pixels, ours.pixels) {
            let difference = abs(Int(a) - Int(b))
            total += difference
            if difference > 64 { far += 1 }
        }
        let mean = Double(total) / Double(page.pixels.count)
        #expect(mean < 3, "mean difference per channel \(mean)")
        #expect(Double(far) / Double(page.pixels.count) < 0.01, "\(far) channels differ by more than a quarter")
    }

    /// The dictionaries and raw data of every stream object in a PDF.
    static func streams(_ pdf: [UInt8]) -> [(dictionary: [UInt8], data: [UInt8])] {
        var found: [(dictionary: [UInt8], data: [UInt8])] = []
        let marker = Array("stream\n".utf8)
        var index = 0
        while index + marker.count < pdf.count {
            guard pdf[index..<index + marker.count].elementsEqual(marker), index >= 3,
                  !(pdf[index - 3..<index].elementsEqual(Array("end".utf8))) else { index += 1; continue }
            let dictionaryStart = (pdf[..<index].lastIndex(of: UInt8(ascii: "<")) ?? 0)
            var start = dictionaryStart
            while start > 0 && !(pdf[start - 1] == UInt8(ascii: "\n")) { start -= 1 }
            let dictionary = Array(pdf[start..<index])
            let text = String(decoding: dictionary, as: UTF8.self)
            guard let range = text.range(of: "/Length "), let length = Int(text[range.upperBound...].prefix { $0.isNumber }) else { index += 1; continue }
            let dataStart = index + marker.count
            found.append((dictionary, Array(pdf[dataStart..<dataStart + length])))
            index = dataStart + length
        }
        return found
    }
}
