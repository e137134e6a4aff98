/// Appends the codec's primitives to a byte buffer: LEB128 varints, zigzag varints, fixed-width
/// little-endian integers and length-prefixed byte strings. Its mirror is `ByteReader`.
public struct ByteWriter: Sendable {
    public private(set) var bytes: [UInt8] = []

    public init(capacity: Int = 64) {
        bytes.reserveCapacity(capacity)
    }

    /// Bytes written so far.
    public var count: Int { bytes.count }

    /// Sets bits in a byte already written (a flag known only once what follows is written).
    public mutating func setBits(_ bits: UInt8, at index: Int) {
        bytes[index] |= bits
    }

    public mutating func write(byte: UInt8) {
        bytes.append(byte)
    }

    public mutating func write<Bytes: Sequence>(bytes more: Bytes) where Bytes.Element == UInt8 {
        bytes.append(contentsOf: more)
    }

    public mutating func write(varint value: UInt64) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    public mutating func write(zigzag value: Int64) {
        write(varint: UInt64(bitPattern: (value << 1) ^ (value >> 63)))
    }

    public mutating func write(fixed64 value: UInt64) {
        for shift in stride(from: 0, to: 64, by: 8) {
            bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift)))
        }
    }

    public mutating func write(fixed32 value: UInt32) {
        Self.append(fixed32: value, to: &bytes)
    }

    /// Appends `value` as a little-endian u32 (frame and op-log headers, built in place).
    @inlinable
    public static func append(fixed32 value: UInt32, to bytes: inout [UInt8]) {
        for shift in stride(from: 0, to: 32, by: 8) {
            bytes.append(UInt8(truncatingIfNeeded: value >> UInt32(shift)))
        }
    }

    public mutating func write(double value: Double) {
        write(fixed64: value.bitPattern)
    }

    /// A varint length, then the bytes.
    public mutating func write(lengthPrefixed more: [UInt8]) {
        write(varint: UInt64(more.count))
        bytes.append(contentsOf: more)
    }
}
