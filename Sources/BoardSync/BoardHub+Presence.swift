import BoardCRDT
import BoardModel

/// Who is on the board: each replica's latest presence (ephemeral, never stored), relayed to
/// every other session, expired by its time-to-live, and "gone" when its session closes.
extension BoardHub {

    /// What a replica said last about itself on this board, which session brought it (nil: this
    /// host's own), and when it expires.
    package struct PresenceEntry: Equatable, Sendable {
        package var presence: Presence
        package var from: SessionID?
        package var expires: Double
    }


    /// Announces a presence of this host (its own replica, or one it edits for, like a web page):
    /// kept, and sent to every session whose peer understands presence.
    package func setLocalPresence(_ presence: Presence, now: Double) {
        self.now = now
        take(presence, from: nil)
    }

    func receivePresence(_ presence: Presence, from id: SessionID) {
        guard let (hello, restricted) = withPeer(id, { peer in peer.session.peer.map { ($0, peer.subject != nil && !peer.relay) } }) ?? nil else { return }
        // With access control, a session speaks only for its own replica unless it is a
        // trusted relay; nobody speaks for this host's replica.
        if presence.replica == store.replica.id || (restricted && presence.replica != hello.replica) {
            log?("session \(id): dropped a presence for replica \(presence.replica), which it may not speak for")
            return
        }
        take(presence, from: id)
    }

    /// Latest wins by clock; a "gone" removes. What is taken is relayed to every other session.
    func take(_ presence: Presence, from id: SessionID?) {
        let held = presences[presence.replica]
        if presence.isGone {
            guard let held, presence.clock >= held.presence.clock else { return }
            presences[presence.replica] = nil
        } else {
            if let held, presence.clock <= held.presence.clock { return }
            let expires = now + min(presence.ttl, Presence.maxTTL)
            presences[presence.replica] = PresenceEntry(presence: presence, from: id, expires: expires)
            lowerDeadlineBound(to: expires)
        }
        relayPresence(presence, except: id)
        if id != nil { emit(.presence(presence)) }
        if sharedLog, id != BoardHub.sharedLogSource { emit(.sharedLog(.publishPresence(presence))) }
    }

    /// The `from` of presences that came through the shared log (other servers' clients): they
    /// are shown and relayed like a session's, expire by their ttl, and are never published back.
    package static let sharedLogSource: SessionID = -1


    /// A presence another server published for this board.
    package func receiveReplicatedPresence(_ presence: Presence, now: Double) {
        self.now = now
        guard presence.replica != store.replica.id else { return }
        take(presence, from: BoardHub.sharedLogSource)
    }


    func relayPresence(_ presence: Presence, except excluded: SessionID?) {
        if dropsRelayedPresence, excluded != nil { return }
        for id in peers.keys.sorted() where id != excluded {
            withSession(id) { $0.sendPresence(presence) }
        }
    }

    /// Forgets presences whose time-to-live ran out (peers expire them on their own clocks).
    func expirePresences() {
        for (replica, entry) in presences.sorted(by: { $0.key < $1.key }) where entry.expires <= now {
            presences[replica] = nil
            if entry.from != nil { emit(.presence(Presence.gone(replica, clock: entry.presence.clock))) }
        }
    }
}
