import BoardCRDT
import Foundation

/// Connections: accepted, refused or dialed, their bytes read, the HELLO that routes a handshake
/// to its board (`attach`: access, then the board opened, then the hub), and closing.
extension SyncEndpoint {
    /// An inbound connection.
    package func accept(_ id: SessionID, now: Double) {
        self.now = now
        // A peer without access control hands the connection to its hub at once; with it, the
        // HELLO's token is checked first, as a server does.
        if !isServer, options.access == nil, let board = boards.values.first {
            links[id] = EndpointLink(phase: .attached(board: board.name))
            board.routed += 1
            board.hub.addAcceptor(id, makeSession(.acceptor, board.store.replica.id), now: now)
        } else {
            var session = makeSession(.acceptor, ReplicaID(0))
            session.listen(now: now)
            links[id] = EndpointLink(phase: .handshaking(session))
            pendingChanged(id)
        }
    }

    /// Turns an accepted connection away before its handshake (a transport limit, such as
    /// connections per address): the peer gets one ERROR, then `isFinished` says close.
    package func refuse(_ id: SessionID, _ error: SessionError, now: Double) {
        self.now = now
        withHandshaking(id) { $0.close(error) }
        pendingChanged(id)
        options.log("connection \(id): refused: \(error.message)")
    }

    /// An outbound connection is up (single-board endpoints dial peers): start the handshake.
    package func dialed(_ id: SessionID, now: Double) {
        self.now = now
        guard let board = boards.values.first else { return }
        links[id, default: EndpointLink(phase: .connecting)].phase = .attached(board: board.name)
        board.routed += 1
        board.hub.addDialer(id, makeSession(.dialer, board.store.replica.id), now: now)
    }

    /// Bytes read from a connection.
    @discardableResult
    package func receive(_ id: SessionID, _ bytes: [UInt8], now: Double) -> [SessionEvent] {
        self.now = now
        if let name = links[id]?.board, let board = boards[name] {
            return board.hub.receive(id, bytes, now: now)
        }
        // In place while it grows: a copy of its buffer per read made a slow handshake quadratic.
        guard let events = withHandshaking(id, { $0.receive(bytes, now: now) }) else { return [] }
        for event in events {
            if case .hello(let hello) = event {
                attach(id, hello)
                break
            }
        }
        pendingChanged(id)
        return events
    }

    /// Server: route a handshake to its board, opening or creating the board.
    func attach(_ id: SessionID, _ hello: Hello) {
        guard let index = links.index(forKey: id), case .handshaking(var session) = links.values[index].phase else { return }
        links.values[index].phase = .lent  // the only copy is `session` now
        // The token first: a refusal says nothing more (not whether the board exists), and no
        // board is opened or created for someone without access.
        var readOnly = false
        var subject: String?
        var relay = false
        var grant: AccessGrant?
        if let access = options.access {
            switch access.check(hello.credentials, board: hello.board) {
            case .success(let verified):
                readOnly = verified.role == .read
                relay = verified.role == .peer
                subject = verified.subject
                grant = verified
            case .failure(let refusal):
                let name = Hello.isValidBoardName(hello.board) ? "'\(hello.board)'" : "(an invalid name)"
                options.log("connection \(id): access denied to board \(name): \(refusal)")
                metrics.refused(refusal)
                // An expired token (signed, for this board) is told so, that its holder may
                // fetch a fresh one and dial again; every other refusal says only "denied".
                if case .expired = refusal {
                    session.close(SessionError(.tokenExpired, "the token expired; dial again with a fresh one"))
                } else {
                    session.close(SessionError(.unauthorized, "access denied"))
                }
                links[id]?.phase = .handshaking(session)
                return
            }
        }
        guard let board = isServer ? openBoard(hello.board) : boards.values.first else {
            let failure = openFailures[hello.board]
            session.close(SessionError(failure?.code ?? .badBoardName,
                                       "board '\(hello.board)' cannot be opened here\(failure.map { ": \($0.why)" } ?? "")"))
            links[id]?.phase = .handshaking(session)
            return
        }
        session.rebind(localReplica: board.store.replica.id)
        if let grant, let access = options.access {
            links[id]?.grant = grant
            // The expiry (wall clock) becomes a deadline on the host's clock, which the session
            // fires like its keep-alives; `handleTimers` also re-checks on the wall clock.
            if let expires = grant.expires, let left = access.secondsLeft(grant) {
                session.tokenExpiry = now + left
                earliestGrantExpiry = min(earliestGrantExpiry ?? expires, expires)
            }
        }
        links[id]?.phase = .attached(board: board.name)
        board.routed += 1
        board.lastActive = now
        board.hub.attach(id, session, hello: hello, readOnly: readOnly, subject: subject, relay: relay)
    }

    /// The transport closed a connection.
    package func closed(_ id: SessionID, now: Double) {
        self.now = now
        guard let link = links.removeValue(forKey: id) else { return }
        if let target = link.dialTarget {
            dialTargets[target].link = nil
            // A link that got as far as the other side's HELLO worked: the backoff starts over.
            // One that failed before it (a TLS mismatch, a port that accepts and closes, a
            // refusal) keeps doubling, so a misconfigured peer does not redial in a tight loop.
            if let name = link.board, boards[name]?.hub.session(id)?.peer != nil {
                dialTargets[target].backoff.reset()
            }
            scheduleRedial(target)
        }
        if case .handshaking(let session) = link.phase {
            pendingChanged(id)
            if let reason = session.closeReason { lastCloseReason = reason }
            return
        }
        guard let name = link.board, let board = boards[name] else { return }
        board.routed -= 1
        if let session = board.hub.session(id) {
            if let reason = session.closeReason { lastCloseReason = reason }
            retiredBytes.sent += session.bytesSent
            retiredBytes.received += session.bytesReceived
        }
        board.hub.remove(id)
        // Its last session gone, the board's idle time counts from the latest timer run that
        // found it with sessions (or its latest attach, if later).
        if board.hub.sessionCount == 0, let last = lastTimersRun { board.lastActive = max(board.lastActive, last) }
        timersMayHaveChanged(board)
    }

    /// The board a session is attached to, if any.
    package func board(of id: SessionID) -> String? { links[id]?.board }

    /// The session of a connection (attached or still in its handshake).
    package func session(_ id: SessionID) -> SyncSession? {
        switch links[id]?.phase {
        case .attached(let name)?: return boards[name]?.hub.session(id)
        case .handshaking(let session)?: return session
        case .connecting?, .lent?, nil: return nil
        }
    }

    /// Changes a handshaking connection's session in place (out of its record meanwhile, so its
    /// buffers are not copied); nil when the connection is not handshaking.
    @discardableResult
    func withHandshaking<T>(_ id: SessionID, _ body: (inout SyncSession) -> T) -> T? {
        guard let index = links.index(forKey: id), case .handshaking(var session) = links.values[index].phase else { return nil }
        links.values[index].phase = .lent
        let result = body(&session)
        links.values[index].phase = .handshaking(session)
        return result
    }
}
