import BoardCRDT
import BoardModel
import Foundation

// Local edits, peer merges and images in, and saving the view (BoardPackage.swift holds the
// package itself: its state, create and open).

extension BoardPackage {
    // MARK: Editing

    /// Runs a local edit on the replica and saves its operations durably (log append + fsync)
    /// before returning. If the edit throws or the log cannot be written, nothing changes.
    /// The edit works on the package's replica in place: `body` must use the replica it is
    /// given, not this package (reading `replica` from inside it is an overlapping access).
    @discardableResult
    public func commit(_ body: (inout Replica) throws -> LocalEdit) throws -> LocalEdit {
        try requireOpen()
        let before = storedAssets
        do {
            // In place, in a transaction: a failed edit, validation or log write puts back what
            // it changed. (Copying the replica to throw the copy away cost O(board) per edit:
            // ~2 ms on the workload board.)
            return try replica.transaction { replica in
                let edit = try body(&replica)
                // Write-read symmetry: never log an operation that this or any replica would refuse.
                for op in edit.operations { try op.validate() }
                if !edit.operations.isEmpty {
                    try storeAssets(referencedBy: edit.operations, from: replica)
                    noteTime(of: try log.append(OperationBatch(operations: edit.operations)))
                }
                return edit
            }
        } catch {
            // A failed commit changes nothing: images stored for it go again.
            for hash in storedAssets.subtracting(before) { try? fileSystem.removeFile(assetPath(hash)) }
            storedAssets = before
            throw error
        }
    }

    /// Merges a peer's operations and saves the new ones durably before returning; returns how
    /// many were new. Asset bytes should be added with `addAsset` as they arrive.
    @discardableResult
    public func merge(_ batch: OperationBatch) throws -> Int {
        try merge(batch, deferringSync: false)
    }

    /// `merge`, but the log record is durable only after `syncMerges()`: a host merging many
    /// peers' frames in one turn of its loop pays one fsync for all of them, and acknowledges
    /// them after it (group commit). Until then a crash may lose them; nobody was told they
    /// were saved.
    @discardableResult
    public func merge(_ batch: OperationBatch, deferringSync: Bool) throws -> Int {
        try merging(batch, deferringSync: deferringSync).count
    }

    /// `merge`, returning the operations that were new (what the log took of the batch).
    ///
    /// One path: admission validates the operations (unless a decoder already did) and picks
    /// the new ones in the same pass; the log takes those; the replica integrates them without
    /// checking them again. Applying an admitted batch cannot fail, so a failed log write still
    /// changes nothing, and the replica is never copied (a copy of a large board per merged
    /// frame was most of a merge's cost).
    @discardableResult
    public func merging(_ batch: OperationBatch, deferringSync: Bool) throws -> [Op] {
        try requireOpen()
        let fresh = try replica.admitted(batch)
        let raisesVector = batch.covers.map { !replica.versionVector.dominates($0) } ?? false
        guard !fresh.isEmpty || raisesVector else { return [] }
        let record = OperationBatch(operations: fresh, base: batch.base, covers: batch.covers)
        noteTime(of: try log.append(record, sync: !deferringSync))
        try replica.apply(record, from: .ownLog)
        return fresh
    }

    /// Makes every deferred merge durable (one fsync of the log).
    public func syncMerges() throws {
        try requireOpen()
        try log.sync()
    }

    /// Stores asset bytes durably and makes them available to snapshots. With `claimedHash`,
    /// bytes that do not match are refused.
    @discardableResult
    public func addAsset(_ data: Data, claimedHash: AssetHash? = nil) throws -> AssetHash {
        try addAsset(data, claimedHash: claimedHash, syncDirectory: true)
    }

    /// Stores bytes a peer sent: the file is fsynced and renamed into place, but the directory
    /// fsync waits for the next `save` or `close` (a received asset lost to a crash before then
    /// is simply fetched again), so a replica catching up on 100 images pays one directory sync.
    @discardableResult
    public func addReceivedAsset(_ data: Data, claimedHash: AssetHash?) throws -> AssetHash {
        try addAsset(data, claimedHash: claimedHash, syncDirectory: false)
    }

    private func addAsset(_ data: Data, claimedHash: AssetHash?, syncDirectory: Bool) throws -> AssetHash {
        try requireOpen()
        let hash = AssetHash.of(data)
        if let claimedHash, claimedHash != hash {
            throw AssetStoreError.hashMismatch(claimed: claimedHash, actual: hash)
        }
        try storeAsset(hash, data, syncDirectory: syncDirectory)
        replica.assets.insert(data)
        return hash
    }

    // MARK: Saving the view

    /// Brings the view (manifest, background, sticker images) up to date with the replica,
    /// writing only what changed, then records what the view now reflects. Also saves the undo
    /// history and compacts the log when it has grown well past the state it holds.
    @discardableResult
    public func save(progress: (PackageWriter.Progress) -> Void = { _ in }) throws -> PackageWriter.Report {
        let write = try prepareViewWrite()
        let report: PackageWriter.Report
        do {
            report = try write.run(progress: progress)
        } catch {
            try finishViewWrite(write, error: error)
            throw error
        }
        try finishViewWrite(write, error: nil)
        return report
    }

    /// Rewrites the log as one record of the replica's surviving operations.
    public func compactLog() throws {
        try compact(to: replica.fullState())
    }

    func compactIfWorthwhile() throws {
        guard log.recordCount > compactionRecordThreshold else { return }
        // Finding the state's size is O(board) (every surviving operation gathered and encoded:
        // tens of milliseconds on the workload board), and it ran after every save once the
        // log passed the threshold. It is looked at again only when the log has grown past
        // twice the size found last time (a state that shrank meanwhile is compacted a little
        // later than it could be; never more than twice its old size late).
        if let known = stateBytesLastChecked, log.size <= 2 * known { return }
        let state = replica.fullState()
        let bytes = state.encoded().count + OpLog.magic.count + 8
        if log.size > 2 * bytes {
            try compact(to: state)
            stateBytesLastChecked = nil
        } else {
            stateBytesLastChecked = bytes
        }
    }
}
