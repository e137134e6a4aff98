import CZlib

/// DEFLATE in the zlib format (RFC 1950), through the system zlib: compression for PNG and PDF
/// exports, decompression for the PNG images boards carry.
public enum Zlib {
    public struct Failure: Error, CustomStringConvertible, Equatable {
        public var description: String
    }

    /// Compresses `bytes` (level 6 by default). Deterministic: the same bytes and level give the
    /// same output.
    public static func compress(_ bytes: [UInt8], level: Int32 = 6) -> [UInt8] {
        var stream = z_stream()
        guard boardsync_deflate_init(&stream, level) == Z_OK else { preconditionFailure("zlib deflateInit failed") }
        defer { deflateEnd(&stream) }
        var output = [UInt8](repeating: 0, count: Int(deflateBound(&stream, uLong(bytes.count))))
        var input = bytes
        let produced: Int = input.withUnsafeMutableBufferPointer { source in
            output.withUnsafeMutableBufferPointer { target in
                stream.next_in = source.baseAddress
                stream.avail_in = uInt(source.count)
                stream.next_out = target.baseAddress
                stream.avail_out = uInt(target.count)
                let result = deflate(&stream, Z_FINISH)
                precondition(result == Z_STREAM_END, "zlib deflate did not finish within its bound")
                return Int(stream.total_out)
            }
        }
        output.removeSubrange(produced...)
        return output
    }

    /// Decompresses a zlib stream, refusing to produce more than `limit` bytes (an image's
    /// declared size bounds what its data may inflate to). Throws on damaged or truncated data.
    public static func decompress(_ bytes: [UInt8], limit: Int) throws -> [UInt8] {
        var stream = z_stream()
        guard boardsync_inflate_init(&stream) == Z_OK else { throw Failure(description: "zlib inflateInit failed") }
        defer { inflateEnd(&stream) }
        var output: [UInt8] = []
        var input = bytes
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        try input.withUnsafeMutableBufferPointer { source in
            stream.next_in = source.baseAddress
            stream.avail_in = uInt(source.count)
            while true {
                let (result, count): (Int32, Int) = chunk.withUnsafeMutableBufferPointer { target in
                    stream.next_out = target.baseAddress
                    stream.avail_out = uInt(target.count)
                    let result = inflate(&stream, Z_NO_FLUSH)
                    return (result, target.count - Int(stream.avail_out))
                }
                if output.count + count > limit {
                    throw Failure(description: "the compressed data inflates to more than the \(limit) bytes expected")
                }
                output += chunk[0..<count]
                switch result {
                case Z_STREAM_END:
                    return
                case Z_OK:
                    continue
                case Z_BUF_ERROR where stream.avail_in == 0:
                    throw Failure(description: "the compressed data is truncated")
                default:
                    let message = stream.msg.map { String(cString: $0) } ?? "error \(result)"
                    throw Failure(description: "the compressed data is damaged (\(message))")
                }
            }
        }
        return output
    }
}
