import BoardCRDT
import BoardModel

/// A peer's operations: checked (access, rate, authorship), merged durably, acknowledged (at
/// once, or after the group commit's sync, or once the shared log holds them), and relayed to
/// every other session. Local edits enter through `broadcast`.
extension BoardHub {
    func mergeFromPeer(_ id: SessionID, _ batch: OperationBatch) {
        // Every way operations arrive (handshake deltas, coalesced live batches) passes here.
        guard let (readOnly, writer, held) = withPeer(id, { ($0.readOnly, $0.subject != nil && !$0.relay, $0.heldBatches != nil) }) else { return }
        if readOnly {
            // An empty delta (a mirror with nothing of its own) is fine; anything else is not.
            if !batch.operations.isEmpty { refuseWrite(id, "operations") }
            return
        }
        guard admitRate(of: batch, from: id) else { return }
        // Authorship (servers with access control): a writer's batches wait, in order, while
        // one of them waits for the shared log's answer.
        if writer {
            if held { return hold(batch, from: id) }
            switch authorship(of: batch, from: id) {
            case .allowed(let authorized): return mergeAuthorized(id, authorized)
            case .refused: return
            case .waiting:
                peers[id]?.heldBatches = []
                return hold(batch, from: id)
            }
        }
        mergeAuthorized(id, batch)
    }

    /// Merges a batch whose authors the session may send (after the read-only, rate and
    /// authorship checks), acknowledges and relays it.
    func mergeAuthorized(_ id: SessionID, _ batch: OperationBatch) {
        // Only a complete delta can raise the vector without a new operation: the vector before
        // is needed for nothing else.
        let vectorBefore = batch.covers != nil ? store.replica.versionVector : nil
        let fresh: [Op]
        do {
            fresh = try store.merging(batch, deferringSync: groupCommit)
        } catch let error as OperationError {
            log?("session \(id): refused operations: \(error)")
            closeSession(id, SessionError(.invalidOperations, error.description))
            return
        } catch {
            // The error (a path on this server, say) goes to the operator's log, not the peer.
            log?("session \(id): could not save operations: \(error)")
            closeSession(id, SessionError(.internalError, "the server could not save operations (its log says why)"))
            return
        }
        operationsMerged += fresh.count
        if groupCommit || sharedLog { operationsSinceCommit += fresh.count }
        // A peer that said it lacks an image may have it by now if it sends operations using it.
        if peers[id]?.unavailable.isEmpty == false {
            for op in fresh { if let hash = op.payload.asset { peers[id]?.unavailable[hash] = nil } }
        }
        // Only images the new operations name can have gone missing by this merge: no scan of
        // every item on the board per frame (session events rescan all).
        let named = fresh.compactMap { op in op.payload.asset.map { (hash: $0, item: op.payload.item) } }
        if !named.isEmpty { requestMissing(preferring: id, named: named) }
        if groupCommit || sharedLog {
            // Acknowledged after the store's next sync (this loop turn's, `commitMerges`).
            if peers[id]?.awaitingSync == false {
                peers[id]?.awaitingSync = true
                commitWaiters.append(id)
            }
            if syncPendingSince == nil { syncPendingSince = now }
        } else {
            let version = store.replica.versionVector
            withSession(id) { $0.acknowledge(version) }
        }
        // A complete delta may raise the vector over operations its sender compacted away
        // without carrying a single new operation: the others must hear of that too, or the
        // next loose operation leaves them a gap that never closes (found by the simulator).
        guard !fresh.isEmpty || rose(from: vectorBefore) else { return }
        if sharedLog {
            // For the shared log: the new operations. A complete delta goes as this board's own
            // complete delta from the same base: its `covers` (which closes the gaps its sender
            // compacted away) applies only with its `base`, and then the entry must carry every
            // operation beyond that base, not only the ones this hub lacked (found by the demo on
            // three servers: a reconnecting peer's offline edits never reached the others).
            // When the vector rose over operations nobody carries any more, the entry goes as
            // the whole state (base empty): a reader not at the sender's base would take the
            // operations loose and never rise to `covers`, left behind for good (found by the
            // cluster simulation with byte-level faults: a reader that fell behind the trim).
            if rose(from: vectorBefore) {
                pendingReplication.append(store.replica.fullState())
            } else if let base = batch.base, batch.covers != nil {
                pendingReplication.append(store.replica.operations(since: base))
            } else {
                pendingReplication.append(OperationBatch(operations: fresh))
            }
        }
        relay(fresh, of: batch, except: id)
        emit(.changed)
    }

    /// An author's drafted edit (`SyncEndpoint.edit(_:as:now:_:)`): its images stored, its
    /// operations checked and merged like a peer's, durable with the next group commit, relayed
    /// to every session and, with a shared log, appended to it. Throws what the store throws
    /// (nothing changed then but images already stored).
    package func mergeAuthored(_ draft: Draft) throws {
        // Write-read symmetry: never log an operation that this or any replica would refuse.
        for op in draft.edit.operations { try op.validate() }
        // Images count against the board's limit as a session's uploads do.
        let images = draft.images.keys.filter { !store.replica.assets.contains($0) }.sorted()
        if let maxAssets, !images.isEmpty, store.replica.assets.count + images.count > maxAssets {
            throw LimitError("this board holds its limit of \(maxAssets) images")
        }
        for hash in images {
            let data = draft.images[hash]!
            try store.addReceivedAsset(data, claimedHash: hash)
            if sharedLog { emit(.sharedLog(.storeAsset(hash, data))) }
        }
        let fresh = try store.merging(OperationBatch(operations: draft.edit.operations), deferringSync: groupCommit)
        guard !fresh.isEmpty else { return }
        operationsMerged += fresh.count
        if groupCommit || sharedLog, syncPendingSince == nil { syncPendingSince = now }
        if sharedLog {
            pendingReplication.append(OperationBatch(operations: fresh))
            pendingAuthored += fresh  // relayed once the shared log holds them (`replicated`)
        } else {
            broadcast(fresh)
        }
        emit(.changed)
    }

    /// Group commit: makes the merges deferred since the last commit durable with one sync of
    /// the store, then acknowledges them. A failed sync closes the sessions that waited (they
    /// send their operations again when they reconnect; nothing was acknowledged).
    package func commitMerges() {
        guard syncPendingSince != nil else { return }
        syncPendingSince = nil
        var waiting: [SessionID] = []
        for id in commitWaiters where peers[id]?.awaitingSync == true {
            peers[id]?.awaitingSync = false
            waiting.append(id)
        }
        waiting.sort()
        commitWaiters.removeAll(keepingCapacity: true)
        let operations = operationsSinceCommit
        operationsSinceCommit = 0
        let started = metrics?.clock?()
        do {
            try store.syncMerges()
            metrics?.committed(operations, started: started)
        } catch {
            log?("could not save merged operations: \(error)")
            for id in waiting { closeSession(id, SessionError(.internalError, "the server could not save operations (its log says why)")) }
            return
        }
        let version = store.replica.versionVector
        if sharedLog {
            // Acknowledged once the shared log holds this turn's operations (`replicated`).
            let batches = pendingReplication
            pendingReplication = []
            lastTicket += 1
            awaitingReplication[lastTicket] = (waiting, version)
            if !pendingAuthored.isEmpty {
                awaitingAuthored[lastTicket] = pendingAuthored
                pendingAuthored = []
            }
            emit(.sharedLog(.append(batches, ticket: lastTicket)))
            return
        }
        for id in waiting { withSession(id) { $0.acknowledge(version) } }
    }

    /// Local edits made on this hub's store: stream them to every open session.
    package func broadcast(_ operations: [Op], except excluded: SessionID? = nil) {
        guard !operations.isEmpty else { return }
        let recipients = peers.keys.filter { $0 != excluded }.sorted()
        guard !recipients.isEmpty else { return }
        // Encoded once for every recipient of self-contained batches (it was once per session, each coalescing its own
        // copy: the host takes every session's output right after each read anyway).
        let batch = OperationBatch(operations: operations)
        var frames: [UInt8: [UInt8]] = [:]  // by batch format (peers from before format 2 read 1) and labels
        for id in recipients {
            let sent = withSession(id) { session -> Bool in
                guard session.isOpen else { return false }
                if session.sendsLinkedBatches {
                    // Linked batches depend on what each link carried: encoded per session (a
                    // one-operation batch costs about a microsecond; it saves three quarters of
                    // the bytes).
                    session.send(batch)
                    return true
                }
                // Keyed by format and by whether the peer reads labels (one from before named
                // versions is sent the batch without them: `OperationBatch.withoutLabels`).
                let format = session.batchFormat
                let key = session.readsLabels ? format : format | 0x80
                let readable = session.readsLabels ? batch : batch.withoutLabels()
                guard !readable.operations.isEmpty || readable.covers != nil else { return true }
                let frame = frames[key] ?? Message.operations(readable.encoded(format: format)).frame().encoded()
                frames[key] = frame
                session.sendOperationsFrame(frame)
                return true
            }
            if sent == true { operationsSent += operations.count }
        }
    }

    /// Passes merged operations on to every other open session. A complete delta may skip
    /// operations its sender had compacted away; relayed as loose operations they would leave
    /// gaps in the other peers' version vectors, so each gets a complete delta from what it is
    /// known to hold instead.
    func relay(_ fresh: [Op], of batch: OperationBatch, except excluded: SessionID?) {
        guard batch.covers != nil else { return broadcast(fresh, except: excluded) }
        for other in peers.keys.sorted() where other != excluded && isOpen(other) {
            let delta = store.replica.operations(since: peers[other]?.known ?? .empty)
            operationsSent += delta.operations.count
            withSession(other) { $0.send(delta) }
        }
    }

    /// Whether the board's vector rose above `before` (the vector before a complete delta's
    /// merge; nil for loose operations, which raise it only with new operations).
    func rose(from before: VersionVector?) -> Bool {
        before.map { !$0.dominates(store.replica.versionVector) } ?? false
    }
}
