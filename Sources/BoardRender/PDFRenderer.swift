import BoardModel
import Foundation

/// Renders a board snapshot as a one-page PDF the size of the canvas (times `policy.scale`, in
/// points): strokes as vector paths with round caps and joins (never a bitmap; translucent ones
/// through an ExtGState), images embedded once each, Flate-compressed, alpha as a soft mask,
/// placed by the same transforms as the PNG export. Deterministic: no dates, no random ids.
public enum PDFRenderer {
    public static func render(_ board: BoardSnapshot, policy: ExportPolicy = ExportPolicy()) throws -> Rendering {
        _ = try policy.pixelSize(for: board.canvasSize)
        let list = DrawList(board)
        let width = board.canvasSize.width * policy.scale, height = board.canvasSize.height * policy.scale

        var objects: [[UInt8]] = []  // object n is objects[n - 1]
        func reserve() -> Int { objects.append([]); return objects.count }
        func stream(_ dictionary: String, _ data: [UInt8]) -> [UInt8] {
            Array("<< \(dictionary) /Length \(data.count) >>\nstream\n".utf8) + data + Array("\nendstream".utf8)
        }
        let catalog = reserve(), pages = reserve(), page = reserve(), contents = reserve()

        // Images: one XObject (and a soft mask when any pixel is not opaque) per distinct image.
        var imageNames: [Int: String] = [:]
        var resources: [String] = []
        func imageName(_ ref: DrawList.ImageRef) -> String {
            if let name = imageNames[ref.key] { return name }
            let image = ref.image
            var rgb = [UInt8](), alpha = [UInt8]()
            rgb.reserveCapacity(image.width * image.height * 3)
            alpha.reserveCapacity(image.width * image.height)
            var opaque = true
            for index in stride(from: 0, to: image.pixels.count, by: 4) {
                rgb.append(image.pixels[index]); rgb.append(image.pixels[index + 1]); rgb.append(image.pixels[index + 2])
                alpha.append(image.pixels[index + 3])
                if image.pixels[index + 3] != 255 { opaque = false }
            }
            var mask = ""
            if !opaque {
                let number = reserve()
                objects[number - 1] = stream("/Type /XObject /Subtype /Image /Width \(image.width) /Height \(image.height) /ColorSpace /DeviceGray /BitsPerComponent 8 /Filter /FlateDecode",
                                             Zlib.compress(alpha))
                mask = " /SMask \(number) 0 R"
            }
            let number = reserve()
            objects[number - 1] = stream("/Type /XObject /Subtype /Image /Width \(image.width) /Height \(image.height) /ColorSpace /DeviceRGB /BitsPerComponent 8 /Filter /FlateDecode\(mask)",
                                         Zlib.compress(rgb))
            let name = "Im\(imageNames.count)"
            imageNames[ref.key] = name
            resources.append("/\(name) \(number) 0 R")
            return name
        }
        var alphaStates: [String: String] = [:]
        var stateResources: [String] = []
        func alphaState(_ alpha: String) -> String {
            if let name = alphaStates[alpha] { return name }
            let name = "GS\(alphaStates.count)"
            alphaStates[alpha] = name
            stateResources.append("/\(name) << /Type /ExtGState /CA \(alpha) /ca \(alpha) >>")
            return name
        }

        let n = SVGRenderer.number
        var content: [UInt8] = []
        content.reserveCapacity(list.items.count * 64)
        func put(_ text: String) { content += Array(text.utf8) }
        func put(_ value: Double) { NumberText.append(value, to: &content); content.append(UInt8(ascii: " ")) }
        // Board coordinates (points, y down) onto the page (y up), scaled.
        put("\(n(policy.scale)) 0 0 \(n(-policy.scale)) 0 \(n(height)) cm\n")
        if !policy.transparent {
            put("1 1 1 rg 0 0 \(n(board.canvasSize.width)) \(n(board.canvasSize.height)) re f\n")
        }
        func place(_ ref: DrawList.ImageRef, _ transform: Affine) {
            let w = Double(ref.image.width), h = Double(ref.image.height)
            // The image's unit square, first row at the top, onto its place on the board.
            let m = transform.concatenating(Affine(a: w, b: 0, c: 0, d: -h, tx: 0, ty: h))
            guard [m.a, m.b, m.c, m.d, m.tx, m.ty].allSatisfy(\.isFinite) else { return }
            put("q \(n(m.a)) \(n(m.b)) \(n(m.c)) \(n(m.d)) \(n(m.tx)) \(n(m.ty)) cm /\(imageName(ref)) Do Q\n")
        }
        if let (ref, transform) = list.background { place(ref, transform) }
        put("1 J 1 j\n")
        for item in list.items {
            switch item {
            case .stroke(let stroke):
                guard !stroke.points.isEmpty, stroke.width.isFinite, stroke.width > 0,
                      stroke.points.allSatisfy({ $0.x.isFinite && $0.y.isFinite }) else { continue }
                let (r, g, b, a) = straightColor(stroke.color)
                guard a > 0 else { continue }
                put("q ")
                if a < 1 { put("/\(alphaState(n(Double(a)))) gs ") }
                put(Double(r)); put(Double(g)); put(Double(b)); put("RG "); put(stroke.width); put("w ")
                put(stroke.points[0].x); put(stroke.points[0].y); put("m")
                // A single point is a zero-length line: its round caps make a dot.
                for point in stroke.points.count == 1 ? stroke.points[...] : stroke.points.dropFirst() {
                    put(" "); put(point.x); put(point.y); put("l")
                }
                put(" S Q\n")
            case .image(let ref, let transform):
                place(ref, transform)
            }
        }
        objects[contents - 1] = stream("/Filter /FlateDecode", Zlib.compress(content))
        objects[catalog - 1] = Array("<< /Type /Catalog /Pages \(pages) 0 R >>".utf8)
        objects[pages - 1] = Array("<< /Type /Pages /Kids [\(page) 0 R] /Count 1 >>".utf8)
        var resourceText = ""
        if !resources.isEmpty { resourceText += " /XObject << \(resources.joined(separator: " ")) >>" }
        if !stateResources.isEmpty { resourceText += " /ExtGState << \(stateResources.joined(separator: " ")) >>" }
        objects[page - 1] = Array("<< /Type /Page /Parent \(pages) 0 R /MediaBox [0 0 \(n(width)) \(n(height))] /Resources <<\(resourceText) >> /Contents \(contents) 0 R >>".utf8)

        var out = Array("%PDF-1.4\n%\u{E2}\u{E3}\u{CF}\u{D3}\n".utf8)
        var offsets: [Int] = []
        for (index, body) in objects.enumerated() {
            offsets.append(out.count)
            out += Array("\(index + 1) 0 obj\n".utf8) + body + Array("\nendobj\n".utf8)
        }
        let xref = out.count
        var table = "xref\n0 \(objects.count + 1)\n0000000000 65535 f \n"
        for offset in offsets { table += String(format: "%010d 00000 n \n", offset) }
        table += "trailer\n<< /Size \(objects.count + 1) /Root \(catalog) 0 R >>\nstartxref\n\(xref)\n%%EOF\n"
        out += Array(table.utf8)
        return Rendering(bytes: out, warnings: list.warnings)
    }
}
