/// POSIX ustar headers for `GET /boards/NAME/export` (no external tools): a 512-byte header per
/// entry, the file's bytes padded to 512, and two zero blocks at the end. Names up to 100 bytes,
/// or 255 split at a '/' into a 155-byte prefix; sizes below 8 GiB (11 octal digits).
public enum TarWriter {
    public static let block = 512
    public static let maxSize = (1 << 33) - 1

    public enum Kind: UInt8 { case file = 0x30, directory = 0x35 }

    /// The header of one entry, or nil when the name cannot be written in ustar (too long,
    /// or no '/' to split it at) or the size is out of range.
    public static func header(name: String, size: Int, kind: Kind, mode: Int, mtime: Int) -> [UInt8]? {
        let bytes = Array(name.utf8)
        guard !bytes.isEmpty, !bytes.contains(0), size >= 0, size <= maxSize else { return nil }
        var prefix: [UInt8] = []
        var rest = bytes
        if bytes.count > 100 {
            // The longest prefix of at most 155 bytes ending before a '/' that leaves at most 100.
            guard let slash = bytes.indices.last(where: { bytes[$0] == UInt8(ascii: "/") && $0 <= 155 && bytes.count - $0 - 1 <= 100 }),
                  slash > 0, slash < bytes.count - 1 else { return nil }
            prefix = Array(bytes[..<slash])
            rest = Array(bytes[(slash + 1)...])
        }
        var header = [UInt8](repeating: 0, count: block)
        func put(_ field: [UInt8], at offset: Int) { for (index, byte) in field.enumerated() { header[offset + index] = byte } }
        func octal(_ value: Int, width: Int) -> [UInt8] {
            let digits = String(value, radix: 8)
            return Array((String(repeating: "0", count: max(0, width - 1 - digits.count)) + digits).utf8) + [0]
        }
        put(rest, at: 0)
        put(octal(mode, width: 8), at: 100)
        put(octal(0, width: 8), at: 108)
        put(octal(0, width: 8), at: 116)
        put(octal(size, width: 12), at: 124)
        put(octal(max(0, mtime), width: 12), at: 136)
        put(Array(repeating: UInt8(ascii: " "), count: 8), at: 148)
        header[156] = kind.rawValue
        put(Array("ustar".utf8) + [0], at: 257)
        put(Array("00".utf8), at: 263)
        put(prefix, at: 345)
        let sum = header.reduce(0) { $0 + Int($1) }
        put(octal(sum, width: 7) + [UInt8(ascii: " ")], at: 148)
        return header
    }

    /// Zero bytes after `size` bytes of content, up to the next block.
    public static func padding(after size: Int) -> [UInt8] {
        let rest = size % block
        return rest == 0 ? [] : [UInt8](repeating: 0, count: block - rest)
    }

    /// The end of an archive: two zero blocks.
    public static let end = [UInt8](repeating: 0, count: 2 * block)
}
