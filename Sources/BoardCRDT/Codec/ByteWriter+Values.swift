import BoardModel

extension ByteWriter {
    /// A register write's value, as self-contained and linked batches both write it; `position`
    /// writes a point (from the origin in a self-contained batch, from the item's last
    /// coordinate on a link).
    mutating func writeValue(of field: ItemField, position: (inout ByteWriter, GridPoint) -> Void) {
        switch field {
        case .exists: break
        case .color(let color): write(color)
        case .width(let width): write(varint: UInt64(width))
        case .asset(let hash): write(bytes: hash.digest)
        case .position(let point): position(&self, point)
        case .scale(let value), .rotation(let value): write(double: value)
        case .z(let key): write(lengthPrefixed: key.bytes)
        }
    }

    mutating func writeValue(of field: BoardField) {
        switch field {
        case .background(let hash): if let hash { write(bytes: hash.digest) }
        case .canvas(let width, let height):
            write(varint: UInt64(width))
            write(varint: UInt64(height))
        }
    }

    /// A label operation's payload (docs/PROTOCOL.md, kind 15): the label id (replica u64 LE,
    /// number varint), 1 and the value or 0 for a deletion; a value is its text (length and
    /// UTF-8), time (zigzag milliseconds since 1970) and version (count, then each replica u64
    /// LE and its sequence number, replicas ascending).
    mutating func writeLabel(_ id: LabelID, _ label: Label?) {
        write(fixed64: id.replica.rawValue)
        write(varint: id.number)
        guard let label else { return write(byte: 0) }
        write(byte: 1)
        write(lengthPrefixed: Array(label.text.utf8))
        write(zigzag: label.time)
        let entries = label.version.sortedEntries
        write(varint: UInt64(entries.count))
        for entry in entries {
            write(fixed64: entry.replica.rawValue)
            write(varint: entry.seq)
        }
    }

    mutating func write(_ color: Color8) {
        // Byte by byte: an array literal here was a heap allocation per stroke.
        write(byte: color.red)
        write(byte: color.green)
        write(byte: color.blue)
        write(byte: color.alpha)
    }
}

/// Packs values of one bit width into bytes, least significant bit first.
struct BitPacker {
    let width: Int
    private var buffer: UInt64 = 0
    private var count = 0  // bits in `buffer`, always < 8 between appends

    init(width: Int) {
        self.width = width
    }

    mutating func append(_ value: UInt64, to writer: inout ByteWriter) {
        if width > 32 {
            // Two halves, so the buffer (under 8 bits) never overflows 64.
            put(value & 0xFFFF_FFFF, bits: 32, to: &writer)
            put(value >> 32, bits: width - 32, to: &writer)
        } else {
            put(value, bits: width, to: &writer)
        }
    }

    private mutating func put(_ value: UInt64, bits: Int, to writer: inout ByteWriter) {
        buffer |= value << UInt64(count)
        count += bits
        while count >= 8 {
            writer.write(byte: UInt8(truncatingIfNeeded: buffer))
            buffer >>= 8
            count -= 8
        }
    }

    /// Writes the last partial byte, padded with zero bits.
    mutating func finish(to writer: inout ByteWriter) {
        if count > 0 { writer.write(byte: UInt8(truncatingIfNeeded: buffer)) }
        buffer = 0
        count = 0
    }
}
