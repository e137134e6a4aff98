extension RedisBoardLog {
    /// The tail link's one blocking `XREAD` (`+Tail`): whether one is out, whether a
    /// `CLIENT UNBLOCK` for it is out, and when the next may start. Unblocking needs the tail
    /// link's client id, so no read starts before `CLIENT ID` has answered.
    enum TailRead {
        /// The tail link is down, or up with its `CLIENT ID` not answered yet. No read starts
        /// before `notBefore`.
        case awaitingClientID(notBefore: Double)
        /// No read out; the next starts at `notBefore` (after a refused read, `retryDelay` on).
        case idle(clientID: Int64, notBefore: Double)
        /// A read out; `unblocking` while a `CLIENT UNBLOCK` ending it early is out too.
        case reading(clientID: Int64, unblocking: Bool)

        /// The tail link's client id, once `CLIENT ID` answered on it.
        var clientID: Int64? {
            switch self {
            case .awaitingClientID: return nil
            case .idle(let id, _), .reading(let id, _): return id
            }
        }

        /// When the next read may start, while none is out.
        var notBefore: Double? {
            switch self {
            case .awaitingClientID(let notBefore), .idle(_, let notBefore): return notBefore
            case .reading: return nil
            }
        }

        /// The tail link connected or dropped: any read on it is over and its client id is asked
        /// again. (A read started only at or after its `notBefore`, so a read's end leaves no
        /// wait behind.)
        mutating func linkReset() {
            self = .awaitingClientID(notBefore: notBefore ?? 0)
        }

        /// `CLIENT ID` answered.
        mutating func clientIDAnswered(_ id: Int64) {
            switch self {
            case .awaitingClientID(let notBefore), .idle(_, let notBefore): self = .idle(clientID: id, notBefore: notBefore)
            case .reading(_, let unblocking): self = .reading(clientID: id, unblocking: unblocking)
            }
        }

        /// The read was answered or lost with its link (`retryAt` nil), or refused: the next
        /// starts at `retryAt`.
        mutating func readEnded(retryAt: Double? = nil) {
            switch self {
            case .awaitingClientID(let notBefore): self = .awaitingClientID(notBefore: retryAt ?? notBefore)
            case .idle(let id, let notBefore): self = .idle(clientID: id, notBefore: retryAt ?? notBefore)
            case .reading(let id, _): self = .idle(clientID: id, notBefore: retryAt ?? 0)
            }
        }

        /// A `CLIENT UNBLOCK` was refused or lost with its link: the read out may be unblocked
        /// again.
        mutating func unblockEnded() {
            if case .reading(let id, true) = self { self = .reading(clientID: id, unblocking: false) }
        }
    }
}
