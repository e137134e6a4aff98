import BoardModel

/// An image as 8-bit RGBA, straight (not premultiplied) alpha, rows top to bottom.
public struct RGBAImage: Equatable, Sendable {
    public var width: Int
    public var height: Int
    /// width × height × 4 bytes: red, green, blue, alpha.
    public var pixels: [UInt8]

    public init(width: Int, height: Int, pixels: [UInt8]) {
        precondition(pixels.count == width * height * 4)
        self.width = width
        self.height = height
        self.pixels = pixels
    }
}

public struct PNGDecodeError: Error, Equatable, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}

/// Decodes every PNG a board may carry (the PNG 1.2 / ISO 15948 core): gray, gray with alpha,
/// RGB, RGBA and palette images; bit depths 1, 2, 4, 8 and 16; transparency from tRNS; Adam7
/// interlacing; all five row filters. Checks every chunk's CRC and the image data's size; 16-bit
/// samples become 8-bit by their high byte, low-depth gray is scaled to the full range.
/// Ancillary chunks other than tRNS (gamma, colour profiles, text) are skipped.
public enum PNGDecoder {
    /// Images with more pixels than this are refused before any pixel buffer is allocated.
    public static let maxPixels = 50_000_000

    public static func decode(_ bytes: [UInt8]) throws -> RGBAImage {
        let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        guard bytes.count >= 8, Array(bytes[0..<8]) == signature else { throw PNGDecodeError("not a PNG file (bad signature)") }
        var offset = 8
        var header: (width: Int, height: Int, depth: Int, colorType: Int, interlaced: Bool)?
        var palette: [UInt8] = []
        var transparency: [UInt8]?
        var data: [UInt8] = []
        var sawEnd = false
        while !sawEnd {
            guard offset + 12 <= bytes.count else { throw PNGDecodeError("truncated at byte \(offset) (no IEND chunk)") }
            let length = Int(be32(bytes, offset))
            guard length <= 0x7FFF_FFFF, offset + 12 + length <= bytes.count else {
                throw PNGDecodeError("truncated: a chunk at byte \(offset) runs past the end of the file")
            }
            let typeBytes = Array(bytes[(offset + 4)..<(offset + 8)])
            let type = String(decoding: typeBytes, as: UTF8.self)
            let body = Array(bytes[(offset + 8)..<(offset + 8 + length)])
            let crc = be32(bytes, offset + 8 + length)
            guard CRC32.checksum(body, continuing: CRC32.checksum(typeBytes)) == crc else {
                throw PNGDecodeError("the \(type) chunk at byte \(offset) is damaged (CRC mismatch)")
            }
            offset += 12 + length
            if header == nil && type != "IHDR" { throw PNGDecodeError("the first chunk is \(type), not IHDR") }
            switch type {
            case "IHDR":
                guard header == nil, length == 13 else { throw PNGDecodeError("a malformed IHDR chunk") }
                let width = Int(be32(body, 0)), height = Int(be32(body, 4))
                let depth = Int(body[8]), colorType = Int(body[9])
                guard width > 0, height > 0, width <= 0x7FFF_FFFF, height <= 0x7FFF_FFFF else {
                    throw PNGDecodeError("an image of \(width)x\(height) pixels")
                }
                guard width * height <= maxPixels else {
                    throw PNGDecodeError("an image of \(width)x\(height) pixels is larger than the \(maxPixels) pixels allowed")
                }
                let allowed: [Int: [Int]] = [0: [1, 2, 4, 8, 16], 2: [8, 16], 3: [1, 2, 4, 8], 4: [8, 16], 6: [8, 16]]
                guard let depths = allowed[colorType] else { throw PNGDecodeError("unknown colour type \(colorType)") }
                guard depths.contains(depth) else { throw PNGDecodeError("bit depth \(depth) is not allowed for colour type \(colorType)") }
                guard body[10] == 0, body[11] == 0 else { throw PNGDecodeError("unknown compression or filter method") }
                guard body[12] <= 1 else { throw PNGDecodeError("unknown interlace method \(body[12])") }
                header = (width, height, depth, colorType, body[12] == 1)
            case "PLTE":
                guard length % 3 == 0, length > 0, length <= 768 else { throw PNGDecodeError("a palette of \(length) bytes") }
                palette = body
            case "tRNS":
                transparency = body
            case "IDAT":
                data += body
            case "IEND":
                sawEnd = true
            default:
                // Unknown critical chunks (uppercase first letter) cannot be skipped safely.
                if typeBytes[0] & 0x20 == 0 { throw PNGDecodeError("an unknown critical chunk \(type)") }
            }
        }
        guard let header else { throw PNGDecodeError("no IHDR chunk") }
        guard !data.isEmpty else { throw PNGDecodeError("no image data (IDAT)") }
        if header.colorType == 3 && palette.isEmpty { throw PNGDecodeError("a palette image without a palette") }

        let channels = [0: 1, 2: 3, 3: 1, 4: 2, 6: 4][header.colorType]!
        let bitsPerPixel = channels * header.depth
        let filterStride = max(1, bitsPerPixel / 8)
        let passes: [(x: Int, y: Int, dx: Int, dy: Int)] = header.interlaced
            ? [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
            : [(0, 0, 1, 1)]
        func size(_ pass: (x: Int, y: Int, dx: Int, dy: Int)) -> (columns: Int, rows: Int, rowBytes: Int) {
            let columns = header.width > pass.x ? (header.width - pass.x + pass.dx - 1) / pass.dx : 0
            let rows = header.height > pass.y ? (header.height - pass.y + pass.dy - 1) / pass.dy : 0
            return (columns, rows, (columns * bitsPerPixel + 7) / 8)
        }
        let expected = passes.reduce(0) { total, pass in
            let s = size(pass)
            return total + (s.columns == 0 ? 0 : s.rows * (1 + s.rowBytes))
        }
        let raw: [UInt8]
        do { raw = try Zlib.decompress(data, limit: expected) } catch let failure as Zlib.Failure {
            throw PNGDecodeError("the image data: \(failure.description)")
        }
        guard raw.count == expected else {
            throw PNGDecodeError("the image data holds \(raw.count) bytes; a \(header.width)x\(header.height) image needs \(expected)")
        }

        // Palette and transparency, as RGBA per palette entry; a key colour for gray and RGB.
        var paletteRGBA = [UInt8](repeating: 255, count: 256 * 4)
        for index in 0..<(palette.count / 3) {
            paletteRGBA[index * 4] = palette[index * 3]
            paletteRGBA[index * 4 + 1] = palette[index * 3 + 1]
            paletteRGBA[index * 4 + 2] = palette[index * 3 + 2]
        }
        var key: [Int]?
        if let transparency {
            switch header.colorType {
            case 3:
                guard transparency.count <= palette.count / 3 else { throw PNGDecodeError("more transparency entries than palette entries") }
                for (index, alpha) in transparency.enumerated() { paletteRGBA[index * 4 + 3] = alpha }
            case 0:
                guard transparency.count == 2 else { throw PNGDecodeError("a malformed tRNS chunk") }
                key = [Int(be16(transparency, 0))]
            case 2:
                guard transparency.count == 6 else { throw PNGDecodeError("a malformed tRNS chunk") }
                key = [Int(be16(transparency, 0)), Int(be16(transparency, 2)), Int(be16(transparency, 4))]
            default:
                throw PNGDecodeError("a tRNS chunk in an image that has an alpha channel")
            }
        }
        let paletteCount = palette.count / 3

        var pixels = [UInt8](repeating: 0, count: header.width * header.height * 4)
        var position = 0
        var previous = [UInt8]()
        var row = [UInt8]()
        let depth = header.depth
        let maxSample = (1 << depth) - 1
        for pass in passes {
            let s = size(pass)
            guard s.columns > 0 else { continue }
            previous = [UInt8](repeating: 0, count: s.rowBytes)
            for rowIndex in 0..<s.rows {
                let filter = raw[position]
                row = Array(raw[(position + 1)..<(position + 1 + s.rowBytes)])
                position += 1 + s.rowBytes
                try unfilter(&row, previous: previous, type: filter, stride: filterStride)
                previous = row
                let y = pass.y + rowIndex * pass.dy
                // One sample at index `i` of the row, at the image's bit depth.
                func sample(_ i: Int) -> Int {
                    switch depth {
                    case 8: return Int(row[i])
                    case 16: return Int(row[2 * i]) << 8 | Int(row[2 * i + 1])
                    default:
                        let bit = i * depth
                        return Int(row[bit >> 3] >> UInt8(8 - depth - (bit & 7))) & maxSample
                    }
                }
                func to8(_ value: Int) -> UInt8 {
                    depth == 16 ? UInt8(value >> 8) : depth == 8 ? UInt8(value) : UInt8(value * 255 / maxSample)
                }
                for column in 0..<s.columns {
                    let x = pass.x + column * pass.dx
                    let out = (y * header.width + x) * 4
                    let first = column * channels
                    switch header.colorType {
                    case 0:
                        let gray = sample(first)
                        let value = to8(gray)
                        pixels[out] = value; pixels[out + 1] = value; pixels[out + 2] = value
                        pixels[out + 3] = key?[0] == gray ? 0 : 255
                    case 2:
                        let r = sample(first), g = sample(first + 1), b = sample(first + 2)
                        pixels[out] = to8(r); pixels[out + 1] = to8(g); pixels[out + 2] = to8(b)
                        pixels[out + 3] = key.map { $0 == [r, g, b] } == true ? 0 : 255
                    case 3:
                        let index = sample(first)
                        guard index < paletteCount else { throw PNGDecodeError("palette index \(index) is past the palette's \(paletteCount) entries") }
                        pixels[out] = paletteRGBA[index * 4]; pixels[out + 1] = paletteRGBA[index * 4 + 1]
                        pixels[out + 2] = paletteRGBA[index * 4 + 2]; pixels[out + 3] = paletteRGBA[index * 4 + 3]
                    case 4:
                        let value = to8(sample(first))
                        pixels[out] = value; pixels[out + 1] = value; pixels[out + 2] = value
                        pixels[out + 3] = to8(sample(first + 1))
                    default:
                        pixels[out] = to8(sample(first)); pixels[out + 1] = to8(sample(first + 1))
                        pixels[out + 2] = to8(sample(first + 2)); pixels[out + 3] = to8(sample(first + 3))
                    }
                }
            }
        }
        return RGBAImage(width: header.width, height: header.height, pixels: pixels)
    }

    static func unfilter(_ row: inout [UInt8], previous: [UInt8], type: UInt8, stride: Int) throws {
        let count = row.count
        switch type {
        case 0: return
        case 1:
            if count > stride { for i in stride..<count { row[i] = row[i] &+ row[i - stride] } }
        case 2:
            for i in 0..<count { row[i] = row[i] &+ previous[i] }
        case 3:
            for i in 0..<count {
                let left = i >= stride ? Int(row[i - stride]) : 0
                row[i] = row[i] &+ UInt8((left + Int(previous[i])) / 2)
            }
        case 4:
            for i in 0..<count {
                let a = i >= stride ? Int(row[i - stride]) : 0
                let b = Int(previous[i])
                let c = i >= stride ? Int(previous[i - stride]) : 0
                let p = a + b - c
                let pa = abs(p - a), pb = abs(p - b), pc = abs(p - c)
                let predictor = pa <= pb && pa <= pc ? a : pb <= pc ? b : c
                row[i] = row[i] &+ UInt8(predictor)
            }
        default:
            throw PNGDecodeError("unknown row filter \(type)")
        }
    }

    static func be32(_ bytes: [UInt8], _ at: Int) -> UInt32 {
        UInt32(bytes[at]) << 24 | UInt32(bytes[at + 1]) << 16 | UInt32(bytes[at + 2]) << 8 | UInt32(bytes[at + 3])
    }

    static func be16(_ bytes: [UInt8], _ at: Int) -> UInt16 {
        UInt16(bytes[at]) << 8 | UInt16(bytes[at + 1])
    }
}
