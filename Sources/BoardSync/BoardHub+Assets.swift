import BoardCRDT
import BoardModel
import Foundation

/// Images: fetched from whichever session (or shared log) has what the board lacks, stored
/// when every chunk is in, and served to sessions that ask.
extension BoardHub {
    /// A chunk of an image this hub asked a session for.
    func receiveChunk(_ chunk: AssetChunk, from id: SessionID) {
        if withPeer(id, { $0.readOnly }) ?? false { return refuseWrite(id, "image bytes") }
        if let maxAssets, !store.replica.assets.contains(chunk.hash), store.replica.assets.count >= maxAssets {
            log?("session \(id): refused an image: the board holds its limit of \(maxAssets)")
            closeSession(id, SessionError(.limitReached, "this board holds its limit of \(maxAssets) images"))
            return
        }
        do {
            if let bytes = try assembler.add(chunk) {
                fetching[chunk.hash] = nil
                fetchingFromLog.remove(chunk.hash)  // what the log finds later is not needed
                try store.addReceivedAsset(Data(bytes), claimedHash: chunk.hash)
                emit(.changed)
                let data = Data(bytes)
                if sharedLog { emit(.sharedLog(.storeAsset(chunk.hash, data))) }
                for waiter in waiting.removeValue(forKey: chunk.hash) ?? [] {
                    withSession(waiter) { $0.queueAsset(chunk.hash, data) }
                }
            }
        } catch let error as SessionError {
            fetching[chunk.hash] = nil
            closeSession(id, error)
        } catch {
            fetching[chunk.hash] = nil
            log?("session \(id): could not store image \(chunk.hash): \(error)")
            closeSession(id, SessionError(.internalError, "the server could not store an image (its log says why)"))
        }
    }

    /// A session said it does not have an image: ask someone else, or tell whoever waits.
    func peerLacks(_ hash: AssetHash, _ id: SessionID) {
        if let peer = peers[id] {
            let wait = peer.unavailable[hash].map { min(BoardHub.assetRetryMax, $0.wait * 2) } ?? BoardHub.assetRetryFirst
            peers[id]?.unavailable[hash] = (now + wait, wait)
            noteAssetRetry(at: now + wait)
        }
        if fetching[hash] == id { fetching[hash] = nil }
        requestMissing(preferring: nil)
        if fetching[hash] == nil && !fetchingFromLog.contains(hash) { answerNoAsset(hash) }
    }

    /// Whoever waits for `hash` hears that nobody has it.
    func answerNoAsset(_ hash: AssetHash) {
        for waiter in waiting.removeValue(forKey: hash) ?? [] { withSession(waiter) { $0.sendNoAsset(hash) } }
    }

    /// Asks for every referenced asset that is missing and not already on its way (with
    /// `named`, only the images those operations named that the board still shows and lacks).
    func requestMissing(preferring preferred: SessionID?, named: [(hash: AssetHash, item: ItemID?)]? = nil) {
        guard fetchesImages else { return }
        // An image already asked of the shared log is still asked of a session that may have
        // it (its uploader, reconnecting after going away mid-transfer, say): whichever answers
        // first stores it. The log is not asked twice.
        let missing = (named.map { store.replica.missingAssets(named: $0) } ?? store.replica.missingAssets)
            .filter { fetching[$0] == nil }
        guard !missing.isEmpty else { return }
        var byPeer: [SessionID: [AssetRequest]] = [:]
        var open: [SessionID] = []
        forEachSession { id, session in if session.isOpen { open.append(id) } }
        open.sort()
        for hash in missing {
            let candidates = ([preferred].compactMap { $0 } + open).filter { id in
                withPeer(id) { peer in
                    peer.session.isOpen && !peer.readOnly && (peer.unavailable[hash].map { now >= $0.askAgainAt } ?? true)
                } ?? false
            }
            guard let peer = candidates.first else {
                if fetchingFromLog.contains(hash) { continue }
                if sharedLog {
                    // The shared log's image store may have it (uploaded through another server).
                    fetchingFromLog.insert(hash)
                    emit(.sharedLog(.fetchAsset(hash)))
                    continue
                }
                // Nobody connected has it: whoever waits on this hub hears so now, not never.
                answerNoAsset(hash)
                continue
            }
            fetching[hash] = peer
            byPeer[peer, default: []].append(AssetRequest(hash: hash, offset: assembler.offset(for: hash)))
        }
        for (peer, requests) in byPeer { withSession(peer) { $0.want(requests) } }
    }

    /// How long after a peer said NO_ASSET it is asked for that image again (doubling per
    /// image up to `assetRetryMax`, while the image is still missing and the link stays up).
    package static let assetRetryFirst = 2.0
    package static let assetRetryMax = 60.0

    /// A peer may be asked again for an image at `time`: the hub's timers wake then.
    func noteAssetRetry(at time: Double) {
        nextAssetRetry = min(nextAssetRetry ?? time, time)
        lowerDeadlineBound(to: time)
    }

    /// At the retry deadline: images still missing are asked again of peers whose NO_ASSET
    /// has aged (and forgotten for images no longer missing).
    func retryUnavailableAssets() {
        guard let due = nextAssetRetry, due <= now else { return }
        nextAssetRetry = nil
        let missing = Set(store.replica.missingAssets)
        for id in Array(peers.keys) {
            guard var entries = peers[id]?.unavailable, !entries.isEmpty else { continue }
            entries = entries.filter { missing.contains($0.key) }
            peers[id]?.unavailable = entries
            for entry in entries.values where entry.askAgainAt > now { noteAssetRetry(at: entry.askAgainAt) }
        }
        requestMissing(preferring: nil)
    }

    /// Answers a WANT at once unless the bytes are on their way from a *different* peer: two
    /// hosts that each wait for the other to answer the same WANT would never finish a sync.
    func serve(_ request: AssetRequest, to id: SessionID) {
        if let data = store.replica.assets.data(for: request.hash) {
            withSession(id) { $0.queueAsset(request.hash, data, from: request.offset) }
        } else if let source = fetching[request.hash], source != id {
            waiting[request.hash, default: []].insert(id)
        } else if fetchingFromLog.contains(request.hash) {
            waiting[request.hash, default: []].insert(id)
        } else {
            withSession(id) { $0.sendNoAsset(request.hash) }
        }
    }
}
