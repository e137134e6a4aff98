import BoardCRDT
import BoardModel

/// One message on the wire:
///
///     length  u32 LE   bytes of type + payload (1 ... Limits.maxFrame)
///     type    u8       MessageType
///     payload length - 1 bytes
///     crc32   u32 LE   CRC-32 of type + payload
package struct Frame: Equatable, Sendable {
    package var type: UInt8
    package var payload: [UInt8]

    package init(type: UInt8, payload: [UInt8]) {
        self.type = type
        self.payload = payload
    }

    package func encoded() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(payload.count + 9)
        let length = UInt32(payload.count + 1)
        ByteWriter.append(fixed32: length, to: &out)
        out.append(type)
        out += payload
        var crc = CRC32.checksum([type])
        crc = CRC32.checksum(payload, continuing: crc)
        ByteWriter.append(fixed32: crc, to: &out)
        return out
    }
}

/// Splits a byte stream into frames. Accepts any split of the stream; returns nil for "need more
/// bytes"; never consumes half a frame; checks a frame's length against the limit before
/// buffering its body.
package struct FrameDecoder: Sendable {
    /// Frames longer than this are refused before their body is buffered (sessions lower it
    /// until the handshake is done).
    package var maxFrame: Int
    private var buffer: [UInt8] = []
    private var start = 0

    package init(maxFrame: Int) {
        self.maxFrame = maxFrame
    }

    /// Bytes received but not yet returned as frames.
    package var bufferedCount: Int { buffer.count - start }

    package mutating func append<Bytes: Sequence>(_ bytes: Bytes) where Bytes.Element == UInt8 {
        buffer.append(contentsOf: bytes)
    }

    package mutating func next() throws(SessionError) -> Frame? {
        let available = buffer.count - start
        guard available >= 4 else { compactIfNeeded(); return nil }
        let length = Int(ByteReader.fixed32(in: buffer, at: start))
        guard length >= 1 else { throw SessionError(.malformedFrame, "frame of length 0") }
        guard length <= maxFrame else {
            throw SessionError(.frameTooLarge, "frame of \(length) bytes exceeds the limit of \(maxFrame)")
        }
        guard available >= 4 + length + 4 else { compactIfNeeded(); return nil }
        let bodyStart = start + 4
        let body = buffer[bodyStart..<(bodyStart + length)]
        let crcStart = bodyStart + length
        let crc = ByteReader.fixed32(in: buffer, at: crcStart)
        guard CRC32.checksum(body) == crc else { throw SessionError(.badChecksum, "frame checksum mismatch") }
        let frame = Frame(type: body.first!, payload: Array(body.dropFirst()))
        start = crcStart + 4
        compactIfNeeded()
        return frame
    }

    private mutating func compactIfNeeded() {
        if start > 0 && (start == buffer.count || start > 1 << 16) {
            buffer.removeFirst(start)
            start = 0
        }
    }
}
