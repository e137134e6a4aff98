/// Reads what `ByteWriter` writes. Every read checks the remaining length first and throws
/// `CodecError` instead of trapping, so malformed input can never crash or over-allocate.
public struct ByteReader: Sendable {
    public let bytes: [UInt8]
    public private(set) var offset: Int

    public init(_ bytes: [UInt8], offset: Int = 0) {
        self.bytes = bytes
        self.offset = offset
    }

    public var remaining: Int { bytes.count - offset }
    public var isAtEnd: Bool { offset >= bytes.count }

    public mutating func readByte() throws -> UInt8 {
        guard offset < bytes.count else { throw CodecError.truncated(offset: offset) }
        defer { offset += 1 }
        return bytes[offset]
    }

    public mutating func readBytes(_ count: Int) throws -> ArraySlice<UInt8> {
        guard count >= 0, count <= remaining else { throw CodecError.truncated(offset: offset) }
        defer { offset += count }
        return bytes[offset..<offset + count]
    }

    public mutating func readVarint() throws -> UInt64 {
        let start = offset
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let byte = try readByte()
            if shift == 63 && byte > 1 { throw CodecError.malformed("varint overflows 64 bits", offset: start) }
            result |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 { return result }
            shift += 7
            if shift > 63 { throw CodecError.malformed("varint longer than 10 bytes", offset: start) }
        }
    }

    /// A varint that must not exceed `limit`; `what` names it in the error.
    public mutating func readVarint(max limit: UInt64, _ what: String) throws -> UInt64 {
        let start = offset
        let value = try readVarint()
        guard value <= limit else { throw CodecError.limitExceeded(what, value: value, limit: limit, offset: start) }
        return value
    }

    /// A count of elements that each take at least `minimumSize` bytes: bounded by `limit` and by
    /// what the remaining bytes could hold, so no absurd count allocates anything.
    public mutating func readCount(max limit: Int, minimumSize: Int = 1, _ what: String) throws -> Int {
        let start = offset
        let value = try readVarint(max: UInt64(limit), what)
        guard value <= UInt64(remaining) / UInt64(max(minimumSize, 1)) else { throw CodecError.truncated(offset: start) }
        return Int(value)
    }

    public mutating func readZigzag() throws -> Int64 {
        let raw = try readVarint()
        return Int64(bitPattern: raw >> 1) ^ -Int64(bitPattern: raw & 1)
    }

    public mutating func readFixed64() throws -> UInt64 {
        let slice = try readBytes(8)
        var value: UInt64 = 0
        for (index, byte) in slice.enumerated() {
            value |= UInt64(byte) << UInt64(8 * index)
        }
        return value
    }

    /// The little-endian u32 at `index` of `bytes`, which the caller has checked holds four
    /// bytes there (frame and op-log headers, read in place).
    @inlinable
    public static func fixed32<Bytes: RandomAccessCollection>(in bytes: Bytes, at index: Bytes.Index) -> UInt32 where Bytes.Element == UInt8 {
        var value: UInt32 = 0
        var position = index
        for shift in stride(from: 0, to: 32, by: 8) {
            value |= UInt32(bytes[position]) << UInt32(shift)
            position = bytes.index(after: position)
        }
        return value
    }

    public mutating func readFixed32() throws -> UInt32 {
        let slice = try readBytes(4)
        var value: UInt32 = 0
        for (index, byte) in slice.enumerated() {
            value |= UInt32(byte) << UInt32(8 * index)
        }
        return value
    }

    public mutating func readDouble() throws -> Double {
        Double(bitPattern: try readFixed64())
    }

    public mutating func readLengthPrefixed(max limit: Int, _ what: String) throws -> [UInt8] {
        let count = try readCount(max: limit, what)
        return Array(try readBytes(count))
    }
}

/// Why bytes could not be decoded. Offsets count from the start of the buffer.
public enum CodecError: Error, Hashable, CustomStringConvertible {
    case truncated(offset: Int)
    case malformed(String, offset: Int)
    case limitExceeded(String, value: UInt64, limit: UInt64, offset: Int)
    case unsupportedVersion(UInt8)
    case invalidOperation(String)

    public var description: String {
        switch self {
        case .truncated(let offset): return "input ends too early (at byte \(offset))"
        case .malformed(let what, let offset): return "malformed input at byte \(offset): \(what)"
        case .limitExceeded(let what, let value, let limit, let offset):
            return "\(what) is \(value), over the limit of \(limit) (at byte \(offset))"
        case .unsupportedVersion(let version): return "unsupported encoding version \(version)"
        case .invalidOperation(let why): return "invalid operation: \(why)"
        }
    }
}
