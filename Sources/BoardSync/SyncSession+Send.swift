import BoardCRDT
import BoardModel
import Foundation

/// What a host asks an open session to send. Every call is ignored before the handshake and
/// after close: only an open link has anywhere to put it.
extension SyncSession {
    /// Sends operations (a delta or live ones).
    /// Consecutive live batches are coalesced into one OPS frame when output is taken (any other
    /// frame flushes them first, so the order of frames is kept).
    package mutating func send(_ batch: OperationBatch) {
        guard !batch.operations.isEmpty || batch.covers != nil else { return }
        withOpen { link, outbox in
            if batch.base == nil, batch.covers == nil {
                link.pendingLive += batch.operations
            } else {
                let readable = link.readable(batch)
                link.queue(.operations(readable.encoded(format: link.batchFormat)), into: &outbox)
            }
        }
    }

    /// Sends an already encoded batch (a handshake delta shared by several peers), in the
    /// session's `batchFormat`, without label operations unless `readsLabels`.
    package mutating func sendEncoded(_ batch: [UInt8]) {
        withOpen { link, outbox in link.queue(.operations(batch), into: &outbox) }
    }

    /// Sends a whole OPS frame encoded once by the caller for several sessions (a hub relaying
    /// one peer's operations to every other peer encodes them once per `batchFormat`, not once
    /// per peer).
    package mutating func sendOperationsFrame(_ frame: [UInt8]) {
        withOpen { link, outbox in
            link.flushLive(into: &outbox)
            outbox += frame
        }
    }

    /// Sends what a replica is doing on the board. Latest wins: a newer presence of the same
    /// replica replaces one not yet taken as output. Dropped for peers that did not announce
    /// the capability (they would refuse an unknown message).
    package mutating func sendPresence(_ presence: Presence) {
        withOpen { link, _ in
            if link.supportsPresence { link.pendingPresence[presence.replica] = presence }
        }
    }

    /// Says which operations of a batch were dropped and why, to a peer that announced
    /// `Capabilities.refusalNotices` (an older peer would close on an unknown message: it is not
    /// told). Returns whether it was sent.
    @discardableResult
    public mutating func sendRefused(_ error: SessionError, operations: VersionVector) -> Bool {
        withOpen { link, outbox in
            guard link.sharedCapabilities & Capabilities.refusalNotices != 0 else { return false }
            link.queue(.refused(code: error.code.rawValue, message: error.message, operations: operations), into: &outbox)
            return true
        } ?? false
    }

    /// Marks the end of the initial delta.
    package mutating func sendSynced(_ version: VersionVector) {
        withOpen { link, outbox in link.queue(.synced(version), into: &outbox) }
    }

    /// Tells the peer what is now durably merged here.
    package mutating func acknowledge(_ version: VersionVector) {
        withOpen { link, outbox in link.queue(.ack(version), into: &outbox) }
    }

    /// Asks for assets (each from where a previous transfer stopped). Hashes already
    /// outstanding on this link are not asked again.
    package mutating func want(_ requests: [AssetRequest]) {
        withOpen { link, outbox in
            let fresh = requests.filter { link.outstandingWants.insert($0.hash).inserted }
            for start in stride(from: 0, to: fresh.count, by: 1024) {
                link.queue(.want(Array(fresh[start..<min(start + 1024, fresh.count)])), into: &outbox)
            }
        }
    }

    /// Queues an asset's bytes from `offset` in chunks. Each asset is sent at most once per
    /// link (a resumed request after a reconnect is a new link).
    package mutating func queueAsset(_ hash: AssetHash, _ data: Data, from offset: UInt64 = 0) {
        withOpen { link, _ in
            guard link.sentAssets.insert(hash).inserted else { return }
            link.assetQueue.append((hash, data, Int(min(offset, UInt64(data.count)))))
        }
    }

    package mutating func sendNoAsset(_ hash: AssetHash) {
        withOpen { link, outbox in link.queue(.noAsset(hash), into: &outbox) }
    }

    /// Asks the peer for history. False, and nothing sent, when the peer did not announce
    /// `Capabilities.history`, the id is already awaiting an answer, or
    /// `limits.historyRequestsInFlight` requests already are.
    @discardableResult
    package mutating func requestHistory(_ request: HistoryRequest) -> Bool {
        let limit = limits.historyRequestsInFlight
        return withOpen { link, outbox in
            guard link.supportsHistory, !link.ownHistoryRequests.contains(request.id),
                  link.ownHistoryRequests.count < limit else { return false }
            link.ownHistoryRequests.insert(request.id)
            link.queue(.historyRequest(request), into: &outbox)
            return true
        } ?? false
    }

    /// Answers a history request the peer sent (`.historyRequested`); ignored for an id that is
    /// not awaiting an answer. An answer whose frame would exceed `limits.maxFrame` goes as a
    /// `tooLarge` refusal instead.
    package mutating func answerHistory(_ answer: HistoryAnswer) {
        let maxFrame = limits.maxFrame
        withOpen { link, outbox in
            guard link.peerHistoryRequests.remove(answer.id) != nil else { return }
            var frame = Message.history(answer).frame()
            if frame.payload.count + 1 > maxFrame {
                let refusal = HistoryAnswer(id: answer.id, status: .tooLarge,
                                            message: "the answer would take \(frame.payload.count) bytes, over the \(maxFrame)-byte frame limit; ask for fewer versions",
                                            what: answer.what)
                frame = Message.history(refusal).frame()
            }
            link.flushLive(into: &outbox)
            outbox += frame.encoded()
        }
    }
}
