import BoardCRDT
import BoardModel
import Foundation

/// Access of open sessions: a token's authority ends when it expires or is revoked.
extension SyncEndpoint {
    func observeRevocations() {
        options.access?.revocations.observe { [weak self] in
            guard let self else { return }
            self.enforceAccess(now: self.now)
        }
    }

    /// Checks every attached session's token again (expiry on the wall clock, revocations) and
    /// closes those whose authority ended: `tokenExpired` for an expired token, `unauthorized`
    /// for a revoked one. Runs by itself when the access control's `revocations` change; the
    /// host then writes the sessions' output (their ERROR) and closes them (`isFinished`).
    @discardableResult
    package func enforceAccess(now: Double) -> [(SessionID, SessionEvent)] {
        self.now = now
        guard let access = options.access else { return [] }
        var fired: [(SessionID, SessionEvent)] = []
        var earliest: Double?
        for (id, grant) in links.compactMap({ id, link in link.grant.map { (id, $0) } }).sorted(by: { $0.0 < $1.0 }) {
            guard let refusal = access.recheck(grant) else {
                if let expires = grant.expires { earliest = min(earliest ?? expires, expires) }
                continue
            }
            guard let name = links[id]?.board, let hub = boards[name]?.hub, hub.session(id)?.isClosed == false else { continue }
            let error: SessionError
            if case .expired = refusal {
                error = SessionError(.tokenExpired, "the token of this connection expired; dial again with a fresh one")
            } else {
                error = SessionError(.unauthorized, "access revoked")
            }
            options.log("board '\(name)': session \(id) (subject '\(grant.subject)') closed: \(refusal)")
            hub.close(id, error)
            fired.append((id, .closed(error)))
        }
        earliestGrantExpiry = earliest
        return fired
    }
}
