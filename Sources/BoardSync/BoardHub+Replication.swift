import BoardCRDT
import BoardModel
import Foundation

/// Replication through a shared log (BoardRedis's `RedisBoardLog`, docs/SCALE-OUT.md).
extension BoardHub {
    // A replication layer (BoardRedis's `RedisBoardLog`, docs/SCALE-OUT.md) sets `sharedLog`,
    // drains the hub's `.sharedLog` events (`SharedLogRequest`) and answers through the methods
    // below. With `sharedLog` set, every group commit hands it the operations merged from this
    // hub's sessions since the last one (fresh ones only; a complete delta keeps its `covers`),
    // and the sessions that sent them are acknowledged when the log holds them, not before.
    // `.storeAsset` carries each image a session uploaded; `.fetchAsset` asks for images no
    // session can offer.

    /// The shared log holds what the `.append` with `ticket` handed over:
    /// acknowledges the sessions that waited for it (tickets complete in order).
    package func replicated(_ ticket: UInt64) {
        if let authored = awaitingAuthored.removeValue(forKey: ticket) { broadcast(authored) }
        guard let entry = awaitingReplication.removeValue(forKey: ticket) else { return }
        for id in entry.sessions { withSession(id) { $0.acknowledge(entry.version) } }
    }

    /// Operations read from the shared log (written by another server, or found there when the
    /// board opened): merged and relayed to this hub's sessions, never handed back to
    /// the shared log. Returns how many were new. Throws when the store refuses them.
    @discardableResult
    package func mergeReplicated(_ batch: OperationBatch, now: Double) throws -> Int {
        self.now = now
        let vectorBefore = batch.covers != nil ? store.replica.versionVector : nil
        let fresh = try store.merging(batch, deferringSync: groupCommit)
        if groupCommit, syncPendingSince == nil { syncPendingSince = now }
        guard !fresh.isEmpty || rose(from: vectorBefore) else { return 0 }
        operationsMerged += fresh.count
        if groupCommit { operationsSinceCommit += fresh.count }
        let named = fresh.compactMap { op in op.payload.asset.map { (hash: $0, item: op.payload.item) } }
        if !named.isEmpty { requestMissing(preferring: nil, named: named) }
        relay(fresh, of: batch, except: nil)
        emit(.changed)
        return fresh.count
    }

    /// What a `.fetchAsset(hash)` found: the bytes (checked against the hash), or nil when the
    /// log does not have them either (whoever waits hears NOASSET).
    package func assetFetched(_ hash: AssetHash, _ data: Data?) {
        guard fetchingFromLog.remove(hash) != nil else { return }
        guard let data else {
            // A session asked meanwhile may still send it; its waiters wait for that.
            if fetching[hash] == nil { answerNoAsset(hash) }
            return
        }
        do {
            try store.addReceivedAsset(data, claimedHash: hash)
        } catch {
            log?("image \(hash) from the shared log refused: \(error)")
            answerNoAsset(hash)
            return
        }
        emit(.changed)
        for waiter in waiting.removeValue(forKey: hash) ?? [] { withSession(waiter) { $0.queueAsset(hash, data) } }
    }

    /// Tickets whose sessions still wait for the shared log.
    package var replicationsAwaited: Int { awaitingReplication.count }
}
