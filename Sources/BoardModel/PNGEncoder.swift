/// Writes RGBA8 pixels as a PNG. The image data is zlib-wrapped with *stored* (uncompressed)
/// deflate blocks: valid for every PNG reader, larger than a compressed file, and free of any
/// dependency. Used for generated test images and placeholders.
public enum PNGEncoder {
    /// `rgba` holds `width * height * 4` bytes, rows top to bottom.
    public static func encode(width: Int, height: Int, rgba: [UInt8]) -> [UInt8] {
        precondition(width > 0 && height > 0 && rgba.count == width * height * 4, "PNGEncoder: pixel count mismatch")
        var raw: [UInt8] = []
        raw.reserveCapacity(height * (width * 4 + 1))
        for row in 0..<height {
            raw.append(0)  // filter: none
            raw.append(contentsOf: rgba[(row * width * 4)..<((row + 1) * width * 4)])
        }
        var out = PNGHeader.signature
        var ihdr: [UInt8] = []
        ihdr += bigEndian(UInt32(width)) + bigEndian(UInt32(height))
        ihdr += [8, 6, 0, 0, 0]  // 8-bit RGBA, deflate, adaptive filtering, no interlace
        appendChunk("IHDR", ihdr, to: &out)
        appendChunk("IDAT", zlibStored(raw), to: &out)
        appendChunk("IEND", [], to: &out)
        return out
    }

    /// A solid-colour image.
    public static func solid(width: Int, height: Int, red: UInt8, green: UInt8, blue: UInt8, alpha: UInt8 = 255) -> [UInt8] {
        var pixels: [UInt8] = []
        pixels.reserveCapacity(width * height * 4)
        for _ in 0..<(width * height) { pixels += [red, green, blue, alpha] }
        return encode(width: width, height: height, rgba: pixels)
    }

    private static func bigEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8(truncatingIfNeeded: value >> 16), UInt8(truncatingIfNeeded: value >> 8), UInt8(truncatingIfNeeded: value)]
    }

    private static func appendChunk(_ type: String, _ body: [UInt8], to out: inout [UInt8]) {
        let typeBytes = Array(type.utf8)
        out += bigEndian(UInt32(body.count))
        out += typeBytes
        out += body
        out += bigEndian(CRC32.checksum(typeBytes + body))
    }

    private static func zlibStored(_ data: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [0x78, 0x01]
        var offset = 0
        repeat {
            let size = min(65_535, data.count - offset)
            let final: UInt8 = offset + size >= data.count ? 1 : 0
            out.append(final)
            out += [UInt8(size & 0xFF), UInt8(size >> 8), UInt8(~size & 0xFF), UInt8((~size >> 8) & 0xFF)]
            out += data[offset..<offset + size]
            offset += size
        } while offset < data.count
        var a: UInt32 = 1
        var b: UInt32 = 0
        for byte in data {
            a = (a + UInt32(byte)) % 65_521
            b = (b + a) % 65_521
        }
        out += bigEndian(b << 16 | a)
        return out
    }
}
