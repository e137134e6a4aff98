import BoardCRDT
import BoardModel

extension ClientEngine {
    /// A client's reconnects: the attempt count, the backoff (`first`, doubling to `maximum`,
    /// reset only by a link that stayed live `resetAfter` seconds), and what a link's end means.
    /// The jitter is the caller's (a uniform draw in [0, 1), passed to `delay(jitter:)`).
    public struct Reconnect: Sendable, Equatable {
        public enum Decision: Sendable, Equatable {
            /// Wait `delay(jitter:)`, then dial again.
            case retry
            /// Dial again at once (an expired token: the credentials are asked again).
            case redialNow
            /// Stop: retrying cannot fix it (the refusal, its recovery `.stop` when it is a
            /// limit of this side's).
            case stop(SessionError)
        }

        /// Attempts since the last long live link (0 right after one).
        public private(set) var attempt = 0
        public let resetAfter: Double
        private var backoff: Backoff
        /// A token refresh was tried since the last live link ended for another reason.
        private var refreshedToken = false
        /// The limit of this side's the previous link ended on (nil: it ended otherwise).
        private var previousOwnLimit: SessionError.Code?

        public init(firstDelay: Double, maximumDelay: Double, resetAfter: Double) {
            backoff = Backoff(first: firstDelay, max: maximumDelay)
            self.resetAfter = resetAfter
        }

        /// A connection attempt begins: its number.
        public mutating func dialing() -> Int {
            attempt += 1
            return attempt
        }

        /// The link ended (`refusal`: `ClientEngine.refusal` of its close reason); `liveFor`:
        /// seconds it was live (0 when it never was).
        public mutating func ended(refusal: SessionError?, wasLive: Bool, liveFor: Double) -> Decision {
            if wasLive && liveFor >= resetAfter {
                // Only a link that stayed live a while resets the backoff: one that went live
                // and dropped at once keeps doubling it.
                attempt = 0
                backoff.reset()
            }
            if wasLive {
                // A live link that ended for its token keeps the mark: a server that lets the
                // session go live and then says "expired" again gets the backoff, not a redial
                // (and a credentials call) per round trip.
                if refusal?.code != .tokenExpired { refreshedToken = false }
            }
            let ownLimit = refusal.flatMap { ClientEngine.exceedsOwnLimit($0) ? $0.code : nil }
            defer { previousOwnLimit = ownLimit }
            guard let refusal else { return .retry }
            if let ownLimit, ownLimit != previousOwnLimit {
                // More than this side's limits allow (a frame, an image, images) is terminal once
                // the server is seen to send it again: the first time may be a corrupted length
                // field (found by the simulator's corrupt fault), which a new link does not repeat.
                return .retry
            }
            let recovery = ClientEngine.exceedsOwnLimit(refusal) ? .stop : refusal.recovery
            if recovery == .stop { return .stop(refusal) }
            if recovery == .refreshCredentials {
                // Once at once: the next connect asks the credentials again. A fresh token
                // refused as expired before going live will not get better by waiting; one that
                // expired after a live session (short-lived tokens rotated under a running
                // client) is asked for again after the backoff.
                if !refreshedToken {
                    refreshedToken = true
                    return .redialNow
                }
                if !wasLive { return .stop(refusal) }
            }
            return .retry
        }

        /// The wait before the next attempt: the backoff's next delay spread by 0.5 + `jitter`
        /// (a uniform draw in [0, 1)).
        public mutating func delay(jitter: Double) -> Double {
            backoff.next() * (0.5 + jitter)
        }
    }

    /// What this replica says it is doing, sent at most every `interval` (the latest winning),
    /// refreshed half way to its expiry, said again on every connection.
    public struct PresenceThrottle: Sendable, Equatable {
        public private(set) var local: Presence?
        public private(set) var dirty = false
        public private(set) var sentAt = -Double.infinity

        public init() {}

        /// The presence to say from now on.
        public mutating func update(_ presence: Presence) {
            local = presence
            dirty = true
        }

        /// Says the replica left (once); false when nothing was said.
        @discardableResult
        public mutating func clear(_ replica: ReplicaID) -> Bool {
            guard local != nil else { return false }
            local = Presence.gone(replica, clock: 0)  // the endpoint stamps its clock
            dirty = true
            return true
        }

        /// A new connection: what is set is said again on it.
        public mutating func connectionOpened() {
            dirty = local != nil
        }

        /// Whether to send now (`send`), and when to look again (`next`; nil: nothing to send).
        public mutating func due(open: Bool, now: Double, interval: Double) -> (send: Presence?, next: Double?) {
            guard let presence = local, open else { return (nil, nil) }
            let refreshAt = sentAt + presence.ttl / 2
            let changeAt = sentAt + interval
            guard let due = dirty ? changeAt : (presence.ttl > 0 ? refreshAt : nil) else { return (nil, nil) }
            guard now >= due else { return (nil, due) }
            sentAt = now
            dirty = false
            if presence.ttl == 0 {
                local = nil
                return (presence, nil)
            }
            return (presence, now + presence.ttl / 2)
        }
    }
}
