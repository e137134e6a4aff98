import BoardCRDT
import BoardModel
import BoardSync
import Foundation

/// Presence: who else is on the board (`peers`), and what this replica is doing
/// (`updatePresence`), throttled and coalesced. Ephemeral: never stored, never in the package.
extension LiveBoard {
    /// The other replicas on the board now (pointer, selection, the stroke being drawn), by
    /// replica id: the current roster first, then each change (a slow iterator gets the latest).
    /// Entries go when they expire, when their replica leaves, and all at once when this
    /// board's connection closes. Ends when the board closes.
    public nonisolated var peers: LiveStream<[Presence]> { LiveStream(peersChannel) }

    /// The roster now.
    public nonisolated var currentPeers: [Presence] { peersChannel.current }

    /// Says what this replica is doing (with `Identity.name` and `color`): sent while connected
    /// at most every `Sync.presenceInterval` (the latest wins), refreshed before its
    /// time-to-live runs out, and said again after a reconnect. Offline, only the latest is kept.
    public func updatePresence(pointer: GridPoint?, selection: [ItemID] = [], stroke: InkPreview? = nil) {
        engine.presence.update(Presence(replica: replicaID, name: Presence.clipped(identity.name), color: identity.color,
                                        pointer: pointer, selection: selection, stroke: stroke))
        signal()
    }

    /// Says this replica left (others drop it at once); nothing more is sent until the next
    /// `updatePresence`.
    public func clearPresence() {
        guard engine.presence.clear(replicaID) else { return }
        signal()
    }

    /// Sends the presence when it changed (and the interval passed) or is half way to its
    /// expiry; returns when to look again (nil: nothing to send).
    func sendPresenceIfDue(_ endpoint: SyncEndpoint, _ board: String, open: Bool, now: Double) -> Double? {
        guard let sync else { return nil }
        let (presence, next) = engine.presence.due(open: open, now: now, interval: sync.presenceInterval)
        if let presence { endpoint.setPresence(presence, on: board, now: now) }
        return next
    }

    func publishPeers(_ roster: [Presence]) {
        if roster != peersChannel.current { peersChannel.publish(roster) }
    }
}
