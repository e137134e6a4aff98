import BoardCRDT
import Foundation

// Hooks for `bin/bench` (Benchmarks/BoardBench, same package): the live client's path from a
// remote merge to its published update, timed without a network, and the snapshots it makes.
extension LiveBoard {
    /// Benchmarks only: merges `batch` (after storing `images`) into the store as a
    /// connection's merge does, then publishes the update exactly as `received` does (typed
    /// changes, snapshot source, status, save schedule). The frame's decoding and the sync
    /// hub's bookkeeping are not part of it (the sync benchmarks measure those).
    package func mergeForBenchmark(_ batch: OperationBatch, images: [Data] = []) throws {
        guard let store else { throw LiveBoardError.closed }
        for image in images { _ = try store.addReceivedAsset(image, claimedHash: nil) }
        _ = try store.merging(batch, deferringSync: false)
        changes.changed = true
        publishRemoteChange()
    }

    /// Snapshots made from updates' changes so far in this process (`SnapshotSource`).
    package static var snapshotsMadeForBenchmark: Int { SnapshotSource.made.load(ordering: .relaxed) }
}
