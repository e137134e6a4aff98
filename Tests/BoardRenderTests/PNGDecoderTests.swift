import BoardModel
import BoardRender
import Foundation
import Testing

/// The PNG decoder against fixtures made by an independent encoder
/// (Fixtures/make_png_fixtures.py: every colour type and bit depth, tRNS, Adam7, every row
/// filter, split IDAT, an ancillary chunk), and against damaged files.
@Suite struct PNGDecoderTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/png")

    static var names: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: fixtures.path)) ?? [])
            .filter { $0.hasSuffix(".png") }.map { String($0.dropLast(4)) }.sorted()
    }

    static func bytes(_ name: String, _ ext: String) throws -> [UInt8] {
        try [UInt8](Data(contentsOf: fixtures.appendingPathComponent("\(name).\(ext)")))
    }

    @Test func everyColourTypeBitDepthAndInterlacingDecodesToTheExpectedPixels() throws {
        let names = Self.names
        #expect(names.count == 52, "the fixture set: \(names.count) files")
        for name in names {
            let image = try PNGDecoder.decode(Self.bytes(name, "png"))
            #expect(image.width == 13 && image.height == 11, "\(name)")
            let expected = try Self.bytes(name, "rgba")
            let wrong = zip(image.pixels, expected).enumerated().filter { $0.element.0 != $0.element.1 }
            #expect(image.pixels.count == expected.count && wrong.isEmpty,
                    "\(name): \(wrong.count) bytes differ, first at pixel \(wrong.first.map { $0.offset / 4 } ?? -1)")
        }
        // The fixtures exercise what they claim: transparency keys hit, interlaced files differ.
        #expect(try PNGDecoder.decode(Self.bytes("ct0-d08-trns", "png")).pixels.enumerated().contains { $0.offset % 4 == 3 && $0.element == 0 })
        #expect(try Self.bytes("ct6-d08-adam7", "png")[28] == 1, "the interlace byte of IHDR")
    }

    @Test func ourOwnEncodersOutputDecodes() throws {
        let solid = PNGEncoder.solid(width: 5, height: 3, red: 10, green: 20, blue: 30, alpha: 128)
        let image = try PNGDecoder.decode(solid)
        #expect(image.width == 5 && image.height == 3)
        #expect(Array(image.pixels[0..<4]) == [10, 20, 30, 128])
        #expect(Set(stride(from: 0, to: image.pixels.count, by: 4).map { Array(image.pixels[$0..<$0 + 4]) }).count == 1)
    }

    @Test func damagedTruncatedAndAbsurdFilesAreRefusedWithAReason() throws {
        let good = try Self.bytes("ct2-d08", "png")
        func refusal(_ bytes: [UInt8]) -> String? {
            do { _ = try PNGDecoder.decode(bytes); return nil } catch { return "\(error)" }
        }
        #expect(refusal([])?.contains("not a PNG") == true)
        #expect(refusal(Array("GIF89a".utf8) + [UInt8](repeating: 0, count: 40))?.contains("not a PNG") == true)
        // Every truncation fails cleanly.
        for length in stride(from: 8, to: good.count, by: 7) {
            #expect(refusal(Array(good[0..<length])) != nil, "truncated to \(length)")
        }
        // A flipped bit anywhere after the signature is caught (CRC or zlib's checksum).
        for position in stride(from: 8, to: good.count, by: 5) {
            var bad = good
            bad[position] ^= 0x10
            #expect(refusal(bad) != nil, "bit flipped at \(position)")
        }
        // A header claiming a huge image is refused before any pixel buffer exists.
        var huge = Array(good[0..<33])
        huge[16...23] = [0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00]  // 65536 x 65536
        let crc = CRC32.checksum(Array(huge[12..<29]))
        huge[29...32] = [UInt8(crc >> 24), UInt8(crc >> 16 & 0xFF), UInt8(crc >> 8 & 0xFF), UInt8(crc & 0xFF)]
        #expect(refusal(huge)?.contains("larger than") == true, "\(refusal(huge) ?? "")")
        // A decompression bomb: IDAT that inflates past the declared image size.
        let bomb = PNGFixture.png(width: 2, height: 2, colorType: 6, depth: 8, idat: Zlib.compress([UInt8](repeating: 0, count: 10_000_000)))
        #expect(refusal(bomb)?.contains("inflates to more than") == true, "\(refusal(bomb) ?? "")")
        // A palette index past the palette.
        let indexed = PNGFixture.png(width: 1, height: 1, colorType: 3, depth: 8, idat: Zlib.compress([0, 5]),
                                     extra: [("PLTE", [1, 2, 3])])
        #expect(refusal(indexed)?.contains("palette index 5") == true, "\(refusal(indexed) ?? "")")
        // A bit depth the colour type does not allow.
        #expect(refusal(PNGFixture.png(width: 1, height: 1, colorType: 2, depth: 4, idat: Zlib.compress([0, 0])))?.contains("bit depth 4") == true)
    }
}

/// Hand-built PNGs for refusal tests.
enum PNGFixture {
    static func png(width: UInt32, height: UInt32, colorType: UInt8, depth: UInt8, idat: [UInt8],
                    extra: [(String, [UInt8])] = []) -> [UInt8] {
        let be = PNGWriter.bigEndian, chunk = PNGWriter.chunk
        var out = PNGWriter.signature
        out += chunk("IHDR", be(width) + be(height) + [depth, colorType, 0, 0, 0])
        for (type, body) in extra { out += chunk(type, body) }
        out += chunk("IDAT", idat) + chunk("IEND", [])
        return out
    }
}
