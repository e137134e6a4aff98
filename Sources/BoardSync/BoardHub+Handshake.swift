import BoardCRDT
import BoardModel

/// The handshake: a peer's HELLO is answered (or held, or refused), then the peer is greeted
/// with exactly what it lacks, the end-of-delta marker and who is on the board.
extension BoardHub {
    /// A session's HELLO: a dialed one's answer, or an accepted one's greeting to answer.
    func receiveHello(_ hello: Hello, from id: SessionID) {
        guard peers[id]?.session.role == .acceptor else {
            greet(id, hello)
            return
        }
        guard acceptsAnyBoard || hello.board == board else {
            closeSession(id, SessionError(.boardMismatch, "this host serves '\(board)', not '\(hello.board)'"))
            return
        }
        acceptAndGreet(id, hello)
    }

    /// Answers an accepted peer's HELLO, greets it, then handles the frames that arrived behind
    /// the HELLO (a session stops parsing at a HELLO until it is accepted).
    func acceptAndGreet(_ id: SessionID, _ hello: Hello) {
        if storageTrouble != nil { return refuseForStorage(id) }  // BoardHub+Storage.swift
        if holdsGreetings {
            peers[id]?.heldGreeting = hello
            return
        }
        withSession(id) { $0.accept(version: store.replica.versionVector) }
        greet(id, hello)
        if let session = peers[id]?.session, session.isOpen {
            receive(id, [], now: session.lastReceivedAt)
        }
    }

    /// Sessions whose HELLO waits while greetings are held, in order.
    var heldGreetings: [(SessionID, Hello)] {
        peers.compactMap { id, peer in peer.heldGreeting.map { (id, $0) } }.sorted { $0.0 < $1.0 }
    }

    /// Greets every held session still open (greetings are no longer held).
    func releaseHeldGreetings() {
        for (id, hello) in heldGreetings {
            peers[id]?.heldGreeting = nil
            if peers[id].map({ !$0.session.isClosed }) == true { acceptAndGreet(id, hello) }
        }
    }

    /// After the handshake: send the peer exactly what it lacks, then the end-of-delta marker.
    func greet(_ id: SessionID, _ hello: Hello) {
        let replica = store.replica
        do {
            try replica.checkPeerVersion(hello.version)
        } catch {
            log?("session \(id): refused replica \(hello.replica) on board '\(hello.board)': \(error)")
            closeSession(id, SessionError(.invalidOperations, "\(error)"))
            return
        }
        let current = replica.versionVector
        let bytes: [UInt8]
        let count: Int
        // The cache key's format carries 0x80 for a peer that does not read labels (sent the
        // delta without them: `OperationBatch.withoutLabels`).
        let readsLabels = withSession(id) { $0.readsLabels } ?? true
        let format = withSession(id) { $0.batchFormat } ?? OperationBatch.formatVersion
        let key = readsLabels ? format : format | 0x80
        if let cached = deltaCache, cached.since == hello.version, cached.at == current, cached.format == key {
            (bytes, count) = (cached.bytes, cached.count)
        } else {
            var delta = replica.operations(since: hello.version)
            // Equivocation probes: our own latest operation and the latest we hold by the peer's
            // replica, even when the peer's vector covers them. Same id with another content on
            // the far side means someone forged operations under one of our ids: the receiver
            // refuses loudly instead of both sides agreeing on vectors over different operations.
            var probed = false
            for author in [replica.id, hello.replica] {
                if let probe = replica.latestOperation(by: author), hello.version.covers(probe.id) {
                    delta.operations.append(probe)
                    probed = true
                }
            }
            if !readsLabels { delta = delta.withoutLabels() }
            (bytes, count) = (delta.encoded(format: format), delta.operations.count)
            if !probed { deltaCache = (hello.version, current, key, count, bytes) }
        }
        // Memory a crowd of handshakes can cost: deltas not yet acknowledged plus output queued
        // here and in the transport stay under the budget (one delta is always allowed, so a
        // board larger than the budget can still be served, one peer at a time).
        let (inFlight, inTransport) = peers.values.reduce((0, 0)) { ($0.0 + $1.deltaInFlight, $0.1 + $1.transportQueued) }
        var queued = inTransport
        forEachSession { _, session in queued += session.pendingOutputCount }
        if (inFlight > 0 || queued > 0), inFlight + queued + bytes.count > maxQueuedOutput {
            log?("session \(id): turned away replica \(hello.replica): \(inFlight + queued) bytes already on their way to other peers")
            closeSession(id, SessionError(.busy, "the server has \(inFlight + queued) bytes on their way to other peers (limit \(maxQueuedOutput)); retry in a few seconds"))
            return
        }
        peers[id]?.known = hello.version
        operationsSent += count
        withSession(id) { session in
            session.sendEncoded(bytes)
            session.sendSynced(current)
        }
        if bytes.count > 1 << 16 { peers[id]?.deltaInFlight = bytes.count }
        // Who is on the board, with what is left of each presence's time-to-live.
        for (_, entry) in presences.sorted(by: { $0.key < $1.key }) where entry.from != id && entry.expires > now {
            var presence = entry.presence
            presence.ttl = entry.expires - now
            withSession(id) { $0.sendPresence(presence) }
        }
        // Images nobody could offer before may be with this peer: ask it now.
        requestMissing(preferring: id)
        log?("session \(id): replica \(hello.replica) joined board '\(hello.board)'")
    }
}
