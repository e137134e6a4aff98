import BoardModel
import Foundation

/// A 2-D affine map: (x, y) → (a·x + c·y + tx, b·x + d·y + ty).
public struct Affine: Equatable, Sendable {
    public var a, b, c, d, tx, ty: Double

    public init(a: Double, b: Double, c: Double, d: Double, tx: Double, ty: Double) {
        (self.a, self.b, self.c, self.d, self.tx, self.ty) = (a, b, c, d, tx, ty)
    }

    public static let identity = Affine(a: 1, b: 0, c: 0, d: 1, tx: 0, ty: 0)

    public func apply(_ x: Double, _ y: Double) -> (Double, Double) {
        (a * x + c * y + tx, b * x + d * y + ty)
    }

    /// This map after `other` (first `other`, then self).
    public func concatenating(_ other: Affine) -> Affine {
        Affine(a: a * other.a + c * other.b, b: b * other.a + d * other.b,
               c: a * other.c + c * other.d, d: b * other.c + d * other.d,
               tx: a * other.tx + c * other.ty + tx, ty: b * other.tx + d * other.ty + ty)
    }

    public var inverse: Affine? {
        let det = a * d - b * c
        guard det != 0, det.isFinite else { return nil }
        return Affine(a: d / det, b: -b / det, c: -c / det, d: a / det,
                      tx: (c * ty - d * tx) / det, ty: (b * tx - a * ty) / det)
    }

    /// Where a sticker's image pixel (x, y) lands on the board: the image centred on `position`,
    /// scaled, then rotated by `rotation` radians (clockwise on screen, y pointing down).
    public static func sticker(position: CodablePoint, scale: Double, rotation: Double, width: Double, height: Double) -> Affine {
        let cosine = cos(rotation) * scale, sine = sin(rotation) * scale
        let centre = Affine(a: 1, b: 0, c: 0, d: 1, tx: -width / 2, ty: -height / 2)
        return Affine(a: cosine, b: sine, c: -sine, d: cosine, tx: position.x, ty: position.y).concatenating(centre)
    }
}

/// An image ready to be drawn: premultiplied RGBA as floats in 0...1.
struct Texture {
    let width: Int
    let height: Int
    let pixels: [Float]

    init(_ image: RGBAImage) {
        width = image.width
        height = image.height
        var pixels = [Float](repeating: 0, count: image.pixels.count)
        image.pixels.withUnsafeBufferPointer { source in
            pixels.withUnsafeMutableBufferPointer { target in
                for index in stride(from: 0, to: source.count, by: 4) {
                    let alpha = Float(source[index + 3]) / 255
                    target[index] = Float(source[index]) / 255 * alpha
                    target[index + 1] = Float(source[index + 1]) / 255 * alpha
                    target[index + 2] = Float(source[index + 2]) / 255 * alpha
                    target[index + 3] = alpha
                }
            }
        }
        self.pixels = pixels
    }
}

/// A raster canvas: premultiplied RGBA floats, source-over compositing, anti-aliased strokes with
/// round caps and joins, and images drawn through an affine map with bilinear sampling.
struct Raster {
    let width: Int
    let height: Int
    private(set) var pixels: [Float]
    /// Per-pixel coverage of the stroke being drawn, and which pixels it touched (so a stroke's
    /// overlapping segments and joins are painted once, at their highest coverage).
    private var coverage: [Float]
    private var touched: [Int32] = []
    /// Pixel visits left: a hostile board (a million-point stroke as wide as the canvas, a
    /// hundred thousand full-canvas stickers) runs out of it instead of drawing for hours.
    private(set) var budget: Int
    var exhausted: Bool { budget < 0 }

    init(width: Int, height: Int, background: (Float, Float, Float, Float), budget: Int) {
        self.width = width
        self.height = height
        let (r, g, b, a) = background
        var pixels = [Float](repeating: 0, count: width * height * 4)
        if a > 0 {
            for index in stride(from: 0, to: pixels.count, by: 4) {
                pixels[index] = r * a; pixels[index + 1] = g * a; pixels[index + 2] = b * a; pixels[index + 3] = a
            }
        }
        self.pixels = pixels
        coverage = [Float](repeating: 0, count: width * height)
        self.budget = budget
    }

    /// A polyline `points` (canvas pixels) of `lineWidth` pixels in straight RGBA `color`.
    mutating func stroke(_ points: [(Double, Double)], lineWidth: Double, color: (Float, Float, Float, Float)) {
        guard !points.isEmpty, lineWidth > 0, color.3 > 0, !exhausted else { return }
        let radius = max(lineWidth / 2, 0.5)
        // Lines thinner than a pixel fade instead of thinning further.
        let thin = Float(min(1, lineWidth))
        let segments = points.count == 1 ? [(points[0], points[0])] : Array(zip(points, points.dropFirst()))
        let width = self.width, height = self.height
        coverage.withUnsafeMutableBufferPointer { cover in
            for (p, q) in segments {
                if budget < 0 { break }
                let (x0, y0) = p, (x1, y1) = q
                let reach = radius + 1
                let top = max(0, Int((min(y0, y1) - reach).rounded(.down)))
                let bottom = min(height - 1, Int((max(y0, y1) + reach).rounded(.up)))
                guard top <= bottom else { continue }
                let dx = x1 - x0, dy = y1 - y0
                let lengthSquared = dx * dx + dy * dy
                let length = lengthSquared.squareRoot()
                for y in top...bottom {
                    let cy = Double(y) + 0.5
                    // The pixels of this row within `reach` of the segment: the capsule is convex,
                    // so its slice is one interval, the hull of the end discs' and the band's.
                    var low = Double.infinity, high = -Double.infinity
                    for (ex, ey) in [(x0, y0), (x1, y1)] {
                        let h = reach * reach - (cy - ey) * (cy - ey)
                        if h >= 0 { let w = h.squareRoot(); low = min(low, ex - w); high = max(high, ex + w) }
                    }
                    if length > 0 {
                        // t(x) along the segment in 0...length and |s(x)| across it within reach.
                        var from = -Double.infinity, to = Double.infinity
                        func clip(_ slope: Double, _ intercept: Double, _ minimum: Double, _ maximum: Double) {
                            // minimum <= slope * x + intercept <= maximum
                            if slope == 0 {
                                if intercept < minimum || intercept > maximum { from = .infinity; to = -.infinity }
                            } else {
                                let u = (minimum - intercept) / slope, v = (maximum - intercept) / slope
                                from = max(from, min(u, v)); to = min(to, max(u, v))
                            }
                        }
                        clip(dx / length, ((-x0) * dx + (cy - y0) * dy) / length, 0, length)
                        clip(-dy / length, ((-x0) * -dy + (cy - y0) * dx) / length, -reach, reach)
                        if from <= to { low = min(low, from); high = max(high, to) }
                    }
                    guard low <= high else { continue }
                    let left = max(0, Int((low - 0.5).rounded(.down)))
                    let right = min(width - 1, Int((high - 0.5).rounded(.up)))
                    guard left <= right else { continue }
                    budget -= right - left + 1
                    if budget < 0 { break }
                    for x in left...right {
                        let cx = Double(x) + 0.5
                        var t = lengthSquared > 0 ? ((cx - x0) * dx + (cy - y0) * dy) / lengthSquared : 0
                        t = min(1, max(0, t))
                        let ux = cx - (x0 + t * dx), uy = cy - (y0 + t * dy)
                        let distance = (ux * ux + uy * uy).squareRoot()
                        let value = Float(min(1, max(0, radius + 0.5 - distance))) * thin
                        guard value > 0 else { continue }
                        let index = y * width + x
                        if cover[index] == 0 { touched.append(Int32(index)) }
                        if value > cover[index] { cover[index] = value }
                    }
                }
            }
        }
        let (r, g, b, a) = color
        pixels.withUnsafeMutableBufferPointer { target in
            coverage.withUnsafeMutableBufferPointer { cover in
                for index in touched {
                    let i = Int(index)
                    let alpha = a * cover[i]
                    cover[i] = 0
                    let o = i * 4
                    let keep = 1 - alpha
                    target[o] = r * alpha + target[o] * keep
                    target[o + 1] = g * alpha + target[o + 1] * keep
                    target[o + 2] = b * alpha + target[o + 2] * keep
                    target[o + 3] = alpha + target[o + 3] * keep
                }
            }
        }
        touched.removeAll(keepingCapacity: true)
    }

    /// Draws `texture` with `transform` mapping its pixel coordinates to canvas pixels; bilinear
    /// sampling inside, anti-aliased edges, source-over.
    mutating func draw(_ texture: Texture, transform: Affine) {
        guard let inverse = transform.inverse, !exhausted else { return }
        let w = Double(texture.width), h = Double(texture.height)
        let corners = [transform.apply(0, 0), transform.apply(w, 0), transform.apply(0, h), transform.apply(w, h)]
        let left = max(0, Int((corners.map(\.0).min()! - 1).rounded(.down)))
        let right = min(width - 1, Int((corners.map(\.0).max()! + 1).rounded(.up)))
        let top = max(0, Int((corners.map(\.1).min()! - 1).rounded(.down)))
        let bottom = min(height - 1, Int((corners.map(\.1).max()! + 1).rounded(.up)))
        guard left <= right, top <= bottom else { return }
        budget -= (right - left + 1) * (bottom - top + 1)
        if budget < 0 { return }
        // Canvas pixels per texture pixel, for the width of the anti-aliased edge.
        let zoom = max(1e-9, min((transform.a * transform.a + transform.b * transform.b).squareRoot(),
                                 (transform.c * transform.c + transform.d * transform.d).squareRoot()))
        let tw = texture.width, th = texture.height
        let canvasWidth = width
        texture.pixels.withUnsafeBufferPointer { source in
            pixels.withUnsafeMutableBufferPointer { target in
                for y in top...bottom {
                    let cy = Double(y) + 0.5
                    for x in left...right {
                        let (u, v) = inverse.apply(Double(x) + 0.5, cy)
                        let inside = min(u, w - u, v, h - v) * zoom + 0.5
                        guard inside > 0 else { continue }
                        let edge = Float(min(1, inside))
                        // Bilinear between the four nearest texel centres, clamped at the border.
                        let fx = u - 0.5, fy = v - 0.5
                        let ix = Int(fx.rounded(.down)), iy = Int(fy.rounded(.down))
                        let ax = Float(fx - Double(ix)), ay = Float(fy - Double(iy))
                        let x0 = min(tw - 1, max(0, ix)), x1 = min(tw - 1, max(0, ix + 1))
                        let y0 = min(th - 1, max(0, iy)), y1 = min(th - 1, max(0, iy + 1))
                        let o = (y * canvasWidth + x) * 4
                        let i00 = (y0 * tw + x0) * 4, i10 = (y0 * tw + x1) * 4
                        let i01 = (y1 * tw + x0) * 4, i11 = (y1 * tw + x1) * 4
                        let w00 = (1 - ax) * (1 - ay) * edge, w10 = ax * (1 - ay) * edge
                        let w01 = (1 - ax) * ay * edge, w11 = ax * ay * edge
                        let alpha = source[i00 + 3] * w00 + source[i10 + 3] * w10 + source[i01 + 3] * w01 + source[i11 + 3] * w11
                        guard alpha > 0 else { continue }
                        let keep = 1 - alpha
                        for channel in 0..<3 {
                            let value = source[i00 + channel] * w00 + source[i10 + channel] * w10
                                + source[i01 + channel] * w01 + source[i11 + channel] * w11
                            target[o + channel] = value + target[o + channel] * keep
                        }
                        target[o + 3] = alpha + target[o + 3] * keep
                    }
                }
            }
        }
    }

    /// Straight 8-bit RGBA.
    func rgba8() -> [UInt8] {
        var out = [UInt8](repeating: 0, count: pixels.count)
        pixels.withUnsafeBufferPointer { source in
            out.withUnsafeMutableBufferPointer { target in
                for index in stride(from: 0, to: source.count, by: 4) {
                    let alpha = min(1, max(0, source[index + 3]))
                    guard alpha > 0 else { continue }
                    for channel in 0..<3 {
                        target[index + channel] = UInt8(min(255, max(0, (source[index + channel] / alpha * 255).rounded())))
                    }
                    target[index + 3] = UInt8((alpha * 255).rounded())
                }
            }
        }
        return out
    }
}
