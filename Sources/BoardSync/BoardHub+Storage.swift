/// A board whose storage cannot serve it (a server's Redis unreachable or refusing it): the
/// replication layer says why in `storageTrouble`, and sessions that say HELLO meanwhile are
/// turned away with `storageUnavailable` (retry later) instead of waiting without a word for a
/// greeting that may never come.
extension BoardHub {
    /// Why the board's storage cannot serve it now (nil: it can). Set by a replication layer
    /// (`RedisBoardLog`), without secrets. While set, every HELLO, held ones included, is
    /// answered with `storageUnavailable`: sessions with a token (`attach(subject:)`) hear this
    /// reason, others only that the storage is unavailable. Sessions already greeted stay.
    package var storageTrouble: String? {
        get { storage.trouble }
        set {
            storage.trouble = newValue
            guard newValue != nil else { return }
            for (id, _) in heldGreetings {
                peers[id]?.heldGreeting = nil
                refuseForStorage(id)
            }
        }
    }

    /// Turns a session away: the board's storage is in trouble.
    func refuseForStorage(_ id: SessionID) {
        guard let hasToken = withPeer(id, { $0.session.isClosed ? nil : $0.subject != nil }) ?? nil else { return }
        let detail = hasToken ? storageTrouble : nil
        closeSession(id, SessionError.storageUnavailable(detail: detail))
        storage.refused += 1
    }

    /// Sessions turned away for the board's storage since the hub was made (statistics, tests).
    package var storageRefusals: Int { storage.refused }
}

/// What `BoardHub+Storage.swift` keeps in the hub.
struct HubStorageState {
    var trouble: String?
    var refused = 0
}
