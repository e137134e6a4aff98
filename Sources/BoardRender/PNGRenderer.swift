import BoardModel
import Foundation

extension ExportPolicy {
    /// The output size in pixels for `canvas`, or why it cannot be exported (checked before
    /// anything is allocated).
    func pixelSize(for canvas: CodableSize) throws -> (width: Int, height: Int) {
        guard canvas.width.isFinite, canvas.height.isFinite, canvas.width > 0, canvas.height > 0 else {
            throw ExportError(message: "the canvas \(canvas.width)x\(canvas.height) cannot be exported")
        }
        guard scale.isFinite, scale > 0 else {
            throw ExportError(message: "the scale \(scale) must be a positive number")
        }
        let width = (canvas.width * scale).rounded(.up), height = (canvas.height * scale).rounded(.up)
        guard width <= ExportPolicy.maxPixelsPerSide, height <= ExportPolicy.maxPixelsPerSide else {
            throw ExportError(message: "a \(Int(width))x\(Int(height)) pixel export is larger than \(Int(ExportPolicy.maxPixelsPerSide)) pixels on a side; lower --scale")
        }
        guard width * height <= ExportPolicy.maxPixels else {
            throw ExportError(message: "a \(Int(width))x\(Int(height)) pixel export has more than \(Int(ExportPolicy.maxPixels)) pixels; lower --scale")
        }
        return (max(1, Int(width)), max(1, Int(height)))
    }
}

/// What the raster and PDF renderers draw, in paint order, with each image decoded once.
struct DrawList {
    enum Item {
        case stroke(InkStroke)
        /// An image (or a placeholder) and where its pixels land on the board.
        case image(ImageRef, Affine)
    }

    /// A decoded image, shared by every item that shows the same bytes.
    final class ImageRef {
        let image: RGBAImage
        let key: Int
        init(_ image: RGBAImage, key: Int) { self.image = image; self.key = key }
    }

    var background: (ImageRef, Affine)?
    var items: [Item] = []
    var warnings: [String] = []
    var images: [ImageRef] = []

    init(_ board: BoardSnapshot) {
        var cache: [Data: ImageRef?] = [:]
        var placeholderRef: ImageRef?
        func decoded(_ png: Data) -> ImageRef? {
            if let hit = cache[png] { return hit }
            let ref = (try? PNGDecoder.decode([UInt8](png))).map { ImageRef($0, key: images.count) }
            if let ref { images.append(ref) }
            cache[png] = ref
            return ref
        }
        func placeholder() -> ImageRef {
            if let placeholderRef { return placeholderRef }
            let ref = ImageRef(DrawList.placeholderImage, key: images.count)
            images.append(ref)
            placeholderRef = ref
            return ref
        }
        let canvas = board.canvasSize
        /// An image stretched over the whole canvas.
        func stretched(_ ref: ImageRef) -> (ImageRef, Affine) {
            (ref, Affine(a: canvas.width / Double(ref.image.width), b: 0, c: 0, d: canvas.height / Double(ref.image.height), tx: 0, ty: 0))
        }
        if let png = board.backgroundPNG, !png.isEmpty {
            if let ref = decoded(png) {
                background = stretched(ref)
            } else {
                warnings.append("the background image is damaged; drawn as a placeholder")
                background = stretched(placeholder())
            }
        } else if let hash = board.backgroundSHA256 {
            warnings.append("the background image \(hash.prefix(12)) has not arrived yet; drawn as a placeholder")
            background = stretched(placeholder())
        }
        let strokes = Dictionary(board.strokes.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        let stickers = Dictionary(board.stickers.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        let order = board.paintOrder ?? (board.strokes.map(\.id) + board.stickers.map(\.id))
        for id in order {
            if let stroke = strokes[id] {
                items.append(.stroke(stroke))
            } else if let sticker = stickers[id] {
                let ref: ImageRef
                if sticker.isPending || sticker.imagePNG.isEmpty {
                    warnings.append("sticker \(sticker.id.uuidString) shows an image that has not arrived yet; drawn as a placeholder")
                    ref = placeholder()
                } else if let image = decoded(sticker.imagePNG) {
                    ref = image
                } else {
                    warnings.append("sticker \(sticker.id.uuidString) has a damaged image; drawn as a placeholder")
                    ref = placeholder()
                }
                let transform = Affine.sticker(position: sticker.position, scale: sticker.scale, rotation: sticker.rotationRadians,
                                               width: Double(ref.image.width), height: Double(ref.image.height))
                items.append(.image(ref, transform))
            }
        }
    }

    /// A missing or damaged image: 64×64, light grey, a grey border and a cross.
    static let placeholderImage: RGBAImage = {
        let size = 64
        var pixels = [UInt8](repeating: 0, count: size * size * 4)
        for y in 0..<size {
            for x in 0..<size {
                let border = x < 2 || y < 2 || x >= size - 2 || y >= size - 2
                let cross = abs(x - y) <= 1 || abs(x - (size - 1 - y)) <= 1
                let value: UInt8 = border || cross ? 128 : 211
                let index = (y * size + x) * 4
                pixels[index] = value; pixels[index + 1] = value; pixels[index + 2] = value; pixels[index + 3] = 255
            }
        }
        return RGBAImage(width: size, height: size, pixels: pixels)
    }()
}

func straightColor(_ color: RGBAColor) -> (Float, Float, Float, Float) {
    func clamp(_ value: Double) -> Float { Float(min(1, max(0, value.isFinite ? value : 0))) }
    return (clamp(color.red), clamp(color.green), clamp(color.blue), clamp(color.alpha))
}

/// Renders a board snapshot as an 8-bit RGBA PNG: white (or transparent) paper, the background
/// scaled to the canvas, then every item in paint order — strokes anti-aliased with round caps
/// and joins, stickers decoded and drawn centred on their position with their scale and
/// rotation, alpha composited. `policy.scale` pixels per board point. Deterministic.
public enum PNGRenderer {
    public static func render(_ board: BoardSnapshot, policy: ExportPolicy = ExportPolicy()) throws -> Rendering {
        let (image, warnings) = try rasterize(board, policy: policy)
        return Rendering(bytes: PNGWriter.encode(image), warnings: warnings)
    }

    /// The rendered pixels themselves (for tests and for callers that want them unencoded).
    public static func rasterize(_ board: BoardSnapshot, policy: ExportPolicy = ExportPolicy()) throws -> (RGBAImage, [String]) {
        let size = try policy.pixelSize(for: board.canvasSize)
        var raster = Raster(width: size.width, height: size.height, background: policy.transparent ? (0, 0, 0, 0) : (1, 1, 1, 1),
                            budget: policy.maxPixelVisits)
        let list = DrawList(board)
        let scale = Affine(a: policy.scale, b: 0, c: 0, d: policy.scale, tx: 0, ty: 0)
        var textures: [Int: Texture] = [:]
        func texture(_ ref: DrawList.ImageRef) -> Texture {
            if let hit = textures[ref.key] { return hit }
            let made = Texture(ref.image)
            textures[ref.key] = made
            return made
        }
        if let (ref, transform) = list.background {
            raster.draw(texture(ref), transform: scale.concatenating(transform))
        }
        for item in list.items {
            switch item {
            case .stroke(let stroke):
                let points = stroke.points.map { ($0.x * policy.scale, $0.y * policy.scale) }
                guard points.allSatisfy({ $0.0.isFinite && $0.1.isFinite }), stroke.width.isFinite else { continue }
                raster.stroke(points, lineWidth: stroke.width * policy.scale, color: straightColor(stroke.color))
            case .image(let ref, let transform):
                raster.draw(texture(ref), transform: scale.concatenating(transform))
            }
            if raster.exhausted {
                throw ExportError(message: "the board is too heavy to rasterize at this size (its strokes and images would take more than \(policy.maxPixelVisits) pixel visits); export PDF or SVG, or lower --scale")
            }
        }
        return (RGBAImage(width: size.width, height: size.height, pixels: raster.rgba8()), list.warnings)
    }
}

/// PNG encoding with real compression (zlib): 8-bit RGBA, each row filtered with whichever of
/// the five filters leaves the smallest sum of absolute values (the usual heuristic).
public enum PNGWriter {
    public static func encode(_ image: RGBAImage, level: Int32 = 6) -> [UInt8] {
        let rowBytes = image.width * 4
        var raw = [UInt8](repeating: 0, count: image.height * (rowBytes + 1))
        let zeros = [UInt8](repeating: 0, count: rowBytes)
        image.pixels.withUnsafeBufferPointer { pixels in
            zeros.withUnsafeBufferPointer { zeroRow in
                raw.withUnsafeMutableBufferPointer { out in
                    for y in 0..<image.height {
                        let row = pixels.baseAddress! + y * rowBytes
                        let above = y == 0 ? zeroRow.baseAddress! : pixels.baseAddress! + (y - 1) * rowBytes
                        // The cost of each filter (sum of the residuals as signed bytes), in one pass.
                        var costs = (0, 0, 0, 0, 0)
                        for i in 0..<rowBytes {
                            let x = Int(row[i]), b = Int(above[i])
                            let a = i >= 4 ? Int(row[i - 4]) : 0
                            let c = i >= 4 ? Int(above[i - 4]) : 0
                            costs.0 += weight(x)
                            costs.1 += weight(x - a)
                            costs.2 += weight(x - b)
                            costs.3 += weight(x - (a + b) / 2)
                            costs.4 += weight(x - paeth(a, b, c))
                        }
                        var type = 0, best = costs.0
                        for (candidate, cost) in [(1, costs.1), (2, costs.2), (3, costs.3), (4, costs.4)] where cost < best {
                            type = candidate
                            best = cost
                        }
                        let start = y * (rowBytes + 1)
                        out[start] = UInt8(type)
                        for i in 0..<rowBytes {
                            let x = Int(row[i]), b = Int(above[i])
                            let a = i >= 4 ? Int(row[i - 4]) : 0
                            let predictor: Int
                            switch type {
                            case 0: predictor = 0
                            case 1: predictor = a
                            case 2: predictor = b
                            case 3: predictor = (a + b) / 2
                            default: predictor = paeth(a, b, i >= 4 ? Int(above[i - 4]) : 0)
                            }
                            out[start + 1 + i] = UInt8(truncatingIfNeeded: x - predictor)
                        }
                    }
                }
            }
        }
        var out = signature
        out += chunk("IHDR", bigEndian(UInt32(image.width)) + bigEndian(UInt32(image.height)) + [8, 6, 0, 0, 0])
        out += chunk("IDAT", Zlib.compress(raw, level: level))
        out += chunk("IEND", [])
        return out
    }

    /// The eight bytes every PNG file starts with.
    public static let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]

    /// One chunk: length, type, body, CRC-32 of type and body.
    public static func chunk(_ type: String, _ body: [UInt8]) -> [UInt8] {
        let typeBytes = Array(type.utf8)
        return bigEndian(UInt32(body.count)) + typeBytes + body + bigEndian(CRC32.checksum(body, continuing: CRC32.checksum(typeBytes)))
    }

    public static func bigEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }

    @inline(__always) static func weight(_ residual: Int) -> Int {
        let byte = residual & 0xFF
        return byte < 128 ? byte : 256 - byte
    }

    @inline(__always) static func paeth(_ a: Int, _ b: Int, _ c: Int) -> Int {
        let p = a + b - c
        let pa = abs(p - a), pb = abs(p - b), pc = abs(p - c)
        return pa <= pb && pa <= pc ? a : pb <= pc ? b : c
    }
}
