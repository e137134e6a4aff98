import BoardModel

/// Reassembles assets from chunks and keeps partial transfers while they are wanted, so an
/// interrupted transfer can resume from where it stopped. Verifies each finished asset's hash.
///
/// Bounded: partial transfers together hold at most `maxPartialBytes`; starting one beyond that
/// drops the least recently fed partial. Hosts `discard` a partial when the connection feeding
/// it closes, so nothing a peer started stays in memory after it leaves.
package struct AssetAssembler: Sendable {
    private var partial: [AssetHash: (total: UInt64, bytes: [UInt8])] = [:]
    private var touched: [AssetHash: UInt64] = [:]
    private var clock: UInt64 = 0
    package let maxPartialBytes: Int

    package init(maxPartialBytes: Int = 128 << 20) {
        self.maxPartialBytes = maxPartialBytes
    }

    /// Bytes held in partial transfers.
    package var partialBytes: Int { partial.values.reduce(0) { $0 + $1.bytes.count } }

    /// Forgets a partial transfer (its source went away).
    package mutating func discard(_ hash: AssetHash) {
        partial[hash] = nil
        touched[hash] = nil
    }

    /// Where to resume `hash` from (0 when nothing has arrived).
    package func offset(for hash: AssetHash) -> UInt64 {
        UInt64(partial[hash]?.bytes.count ?? 0)
    }

    /// Adds a chunk. Returns the complete bytes when this chunk finished the asset. Throws when
    /// chunks disagree or the finished bytes do not match the hash (the partial is discarded).
    package mutating func add(_ chunk: AssetChunk) throws(SessionError) -> [UInt8]? {
        // Taken out of the dictionary while it grows: a copy per chunk made large assets quadratic.
        var entry = partial.removeValue(forKey: chunk.hash) ?? (chunk.totalSize, [])
        clock += 1
        touched[chunk.hash] = clock
        guard entry.total == chunk.totalSize else {
            touched[chunk.hash] = nil
            throw SessionError(.assetMismatch, "asset \(chunk.hash.hex.prefix(12)) changed size between chunks")
        }
        if chunk.offset < UInt64(entry.bytes.count) {
            // A resent prefix (the peer resumed from an earlier offset): drop what we have.
            entry.bytes.removeLast(entry.bytes.count - Int(chunk.offset))
        }
        guard chunk.offset == UInt64(entry.bytes.count) else {
            touched[chunk.hash] = nil
            throw SessionError(.malformedFrame, "asset \(chunk.hash.hex.prefix(12)) chunk at \(chunk.offset), expected \(entry.bytes.count)")
        }
        entry.bytes += chunk.bytes
        if UInt64(entry.bytes.count) == entry.total {
            touched[chunk.hash] = nil
            guard AssetHash.of(entry.bytes) == chunk.hash else {
                throw SessionError(.assetMismatch, "asset bytes do not hash to \(chunk.hash.hex.prefix(12))")
            }
            return entry.bytes
        }
        partial[chunk.hash] = entry
        // Over the budget: drop the least recently fed other partials.
        var held = partialBytes
        while held > maxPartialBytes, let oldest = touched.filter({ $0.key != chunk.hash }).min(by: { $0.value < $1.value })?.key {
            held -= partial[oldest]?.bytes.count ?? 0
            discard(oldest)
        }
        return nil
    }
}
