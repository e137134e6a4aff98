import BoardModel

/// Reassembles assets from chunks and keeps partial transfers across reconnects, so an
/// interrupted transfer resumes from where it stopped. Verifies each finished asset's hash.
public struct AssetAssembler: Sendable {
    private var partial: [AssetHash: (total: UInt64, bytes: [UInt8])] = [:]

    public init() {}

    /// Where to resume `hash` from (0 when nothing has arrived).
    public func offset(for hash: AssetHash) -> UInt64 {
        UInt64(partial[hash]?.bytes.count ?? 0)
    }

    /// Adds a chunk. Returns the complete bytes when this chunk finished the asset. Throws when
    /// chunks disagree or the finished bytes do not match the hash (the partial is discarded).
    public mutating func add(_ chunk: AssetChunk) throws(SessionError) -> [UInt8]? {
        var entry = partial[chunk.hash] ?? (chunk.totalSize, [])
        guard entry.total == chunk.totalSize else {
            partial[chunk.hash] = nil
            throw SessionError(.assetMismatch, "asset \(chunk.hash.hex.prefix(12)) changed size between chunks")
        }
        if chunk.offset < UInt64(entry.bytes.count) {
            // A resent prefix (the peer resumed from an earlier offset): drop what we have.
            entry.bytes.removeLast(entry.bytes.count - Int(chunk.offset))
        }
        guard chunk.offset == UInt64(entry.bytes.count) else {
            throw SessionError(.malformedFrame, "asset \(chunk.hash.hex.prefix(12)) chunk at \(chunk.offset), expected \(entry.bytes.count)")
        }
        entry.bytes += chunk.bytes
        if UInt64(entry.bytes.count) == entry.total {
            partial[chunk.hash] = nil
            guard AssetHash.of(entry.bytes) == chunk.hash else {
                throw SessionError(.assetMismatch, "asset bytes do not hash to \(chunk.hash.hex.prefix(12))")
            }
            return entry.bytes
        }
        partial[chunk.hash] = entry
        return nil
    }
}
