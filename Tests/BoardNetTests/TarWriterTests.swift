import BoardNet
import Foundation
import Testing

/// The admin API's ustar headers: fields where tar reads them, the checksum, long names split at
/// a '/', and what cannot be written refused rather than truncated.
@Suite struct TarWriterTests {
    static func field(_ header: [UInt8], _ offset: Int, _ length: Int) -> String {
        String(decoding: header[offset..<(offset + length)].prefix { $0 != 0 }, as: UTF8.self)
    }

    @Test func headerFieldsAndChecksum() throws {
        let header = try #require(TarWriter.header(name: "team.boardpkg/sync/oplog", size: 1234, kind: .file, mode: 0o644, mtime: 1_700_000_000))
        #expect(header.count == 512)
        #expect(Self.field(header, 0, 100) == "team.boardpkg/sync/oplog")
        #expect(Int(Self.field(header, 124, 12), radix: 8) == 1234)
        #expect(Int(Self.field(header, 136, 12), radix: 8) == 1_700_000_000)
        #expect(header[156] == UInt8(ascii: "0"))
        #expect(Self.field(header, 257, 6) == "ustar" && Self.field(header, 263, 2) == "00")
        // The checksum: the header's bytes summed with its own field read as spaces.
        var blank = header
        for index in 148..<156 { blank[index] = UInt8(ascii: " ") }
        let stored = Int(Self.field(header, 148, 8).trimmingCharacters(in: .whitespaces), radix: 8)
        #expect(stored == blank.reduce(0) { $0 + Int($1) })
        #expect(TarWriter.padding(after: 1234).count == 512 - 1234 % 512)
        #expect(TarWriter.padding(after: 1024).isEmpty)
        #expect(TarWriter.end.count == 1024 && TarWriter.end.allSatisfy { $0 == 0 })
    }

    @Test func longNamesSplitOrAreRefused() throws {
        let directory = String(repeating: "d", count: 140) + ".boardpkg"
        let name = directory + "/sync/assets/" + String(repeating: "a", count: 64)
        let header = try #require(TarWriter.header(name: name, size: 1, kind: .file, mode: 0o644, mtime: 0))
        let prefix = Self.field(header, 345, 155), rest = Self.field(header, 0, 100)
        #expect(prefix + "/" + rest == name)
        #expect(rest.utf8.count <= 100 && prefix.utf8.count <= 155)
        #expect(TarWriter.header(name: String(repeating: "x", count: 101), size: 1, kind: .file, mode: 0o644, mtime: 0) == nil, "no '/' to split at")
        #expect(TarWriter.header(name: String(repeating: "x", count: 300) + "/a", size: 1, kind: .file, mode: 0o644, mtime: 0) == nil)
        #expect(TarWriter.header(name: "a", size: TarWriter.maxSize + 1, kind: .file, mode: 0o644, mtime: 0) == nil)
        #expect(TarWriter.header(name: "a", size: -1, kind: .file, mode: 0o644, mtime: 0) == nil)
        #expect(TarWriter.header(name: "", size: 0, kind: .file, mode: 0o644, mtime: 0) == nil)
    }
}
