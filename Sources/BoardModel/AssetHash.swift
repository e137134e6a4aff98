import Foundation

/// The SHA-256 of an asset's bytes: how operations, the wire and the store name an image.
public struct AssetHash: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The 32 digest bytes as four big-endian words, so the value is cheap to copy and hash.
    public let words: (UInt64, UInt64, UInt64, UInt64)

    public init(words: (UInt64, UInt64, UInt64, UInt64)) {
        self.words = words
    }

    /// Takes exactly 32 digest bytes; returns nil for any other length.
    public init?<Bytes: Collection>(digest: Bytes) where Bytes.Element == UInt8 {
        guard digest.count == 32 else { return nil }
        var words: [UInt64] = [0, 0, 0, 0]
        for (index, byte) in digest.enumerated() {
            words[index / 8] = words[index / 8] << 8 | UInt64(byte)
        }
        self.words = (words[0], words[1], words[2], words[3])
    }

    /// Parses 64 hex digits (either case); nil for anything else.
    public init?(hex: String) {
        let utf8 = Array(hex.utf8)
        guard utf8.count == 64 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(32)
        for index in stride(from: 0, to: 64, by: 2) {
            guard let high = AssetHash.nibble(utf8[index]), let low = AssetHash.nibble(utf8[index + 1]) else {
                return nil
            }
            bytes.append(high << 4 | low)
        }
        self.init(digest: bytes)
    }

    /// The hash of `data`.
    public static func of<Bytes: Sequence>(_ data: Bytes) -> AssetHash where Bytes.Element == UInt8 {
        AssetHash(digest: SHA256.hash(data))!
    }

    public var digest: [UInt8] {
        [words.0, words.1, words.2, words.3].flatMap { word in
            (0..<8).reversed().map { UInt8(truncatingIfNeeded: word >> (UInt64($0) * 8)) }
        }
    }

    /// Lowercase hex, 64 digits.
    public var hex: String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(64)
        for byte in digest {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0xF)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    public var description: String { hex }

    public static func == (lhs: AssetHash, rhs: AssetHash) -> Bool {
        lhs.words == rhs.words
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(words.0)
        hasher.combine(words.1)
        hasher.combine(words.2)
        hasher.combine(words.3)
    }

    public static func < (lhs: AssetHash, rhs: AssetHash) -> Bool {
        (lhs.words.0, lhs.words.1, lhs.words.2, lhs.words.3) < (rhs.words.0, rhs.words.1, rhs.words.2, rhs.words.3)
    }

    private static func nibble(_ char: UInt8) -> UInt8? {
        switch char {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return char - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return char - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return char - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
