/// CRC-32 (IEEE 802.3, reflected, polynomial 0xEDB88320): the checksum of PNG chunks, zlib and
/// BoardSync's op-log records and frames. Table-driven.
public enum CRC32 {
    private static let table: [UInt32] = (0..<256).map { index in
        var value = UInt32(index)
        for _ in 0..<8 {
            value = value & 1 != 0 ? 0xEDB8_8320 ^ (value >> 1) : value >> 1
        }
        return value
    }

    /// The CRC of `bytes`, continuing from `crc` (0 to start).
    public static func checksum<Bytes: Sequence>(_ bytes: Bytes, continuing crc: UInt32 = 0) -> UInt32 where Bytes.Element == UInt8 {
        var value = ~crc
        for byte in bytes {
            value = table[Int((value ^ UInt32(byte)) & 0xFF)] ^ (value >> 8)
        }
        return ~value
    }
}
