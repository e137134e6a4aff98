import BoardCRDT
import Foundation

// Authorship on servers with access control (docs/DEPLOYMENT.md, "Authorship"): one fact per
// board, bound at a replica's first operation. A write token's session may send new operations
// only of replica ids bound to its token's subject. The id it said HELLO under is bound to its
// subject when its first operation arrives, first come first served, and only if the board has
// no operation of that id yet (ids whose operations came through a `peer` token, or from before
// access control, stay unbound: only peer tokens carry their operations). Each subject may own
// `maxReplicasPerSubject` ids per board and the board `maxAuthorsPerBoard` in all. Alone, a hub
// keeps the table in its store (`sync/authors`); with `sharesAuthorship` (several servers, one
// Redis) the shared log decides and the hub holds the waiting operations until it has.

/// What a hub asks the layer that shares authorship between servers.
public struct AuthorshipRequest: Hashable, Sendable, CustomStringConvertible {
    package var replica: ReplicaID
    package var subject: String
    /// Bind `replica` to `subject` when nobody owns it, the shared log holds no operation of it
    /// and the limits allow; false: only say who owns it.
    package var bind: Bool
    package var maxPerSubject: Int
    package var maxPerBoard: Int

    package init(replica: ReplicaID, subject: String, bind: Bool, maxPerSubject: Int, maxPerBoard: Int) {
        self.replica = replica
        self.subject = subject
        self.bind = bind
        self.maxPerSubject = maxPerSubject
        self.maxPerBoard = maxPerBoard
    }

    public var description: String { "\(bind ? "bind" : "look up") replica \(replica) for '\(subject)'" }
}

/// The shared log's answer to an `AuthorshipRequest`.
package enum AuthorshipAnswer: Hashable, Sendable {
    /// The replica belongs to this subject (bound just now, or before).
    case owner(String)
    /// Nobody owns it (asked to bind: because the board already has operations of it).
    case unbound
    /// The subject owns its limit of replica ids on this board.
    case subjectLimit
    /// The board holds its limit of bindings.
    case boardLimit
}

enum AuthorshipOutcome {
    /// Merge this batch: the one received, or it without the operations of replicas the
    /// session's subject does not own.
    case allowed(OperationBatch)
    case refused, waiting
}

extension BoardHub {
    /// A writer's HELLO: refused when its replica id is known to belong to another subject.
    /// (With `sharesAuthorship` the owner is looked up meanwhile; the answer may still refuse it.)
    func checkHello(_ replica: ReplicaID, for id: SessionID) -> Bool {
        guard let subject = withPeer(id, { $0.subject }) ?? nil else { return true }
        if sharesAuthorship {
            if let owner = authors?[replica] {
                guard owner == subject else { return refuse(id, subject, replica, .owned(owner)) }
                return true
            }
            ask(AuthorshipRequest(replica: replica, subject: subject, bind: false,
                                  maxPerSubject: maxReplicasPerSubject, maxPerBoard: maxAuthorsPerBoard))
            return true
        }
        guard loadAuthors(for: id) else { return false }
        if let owner = authors?[replica], owner != subject { return refuse(id, subject, replica, .owned(owner)) }
        return true
    }

    /// Whether a writer's batch may be merged: the authors of its new operations (a handshake
    /// echoes some the board already holds) must be the session's subject's, and the session's
    /// own replica id is bound at its first operation. Its own replica refused closes the
    /// session; operations of other replicas its subject does not own are dropped and the rest
    /// merged. (Forged or carried, they never land; closing instead deadlocked two clients that
    /// each held the other's operations a crashed server had relayed but not saved, found by
    /// the cluster simulation: the owner sends its own again when it reconnects.)
    func authorship(of batch: OperationBatch, from id: SessionID) -> AuthorshipOutcome {
        guard let (subject, mine) = withPeer(id, { peer in peer.subject.flatMap { s in peer.helloReplica.map { (s, $0) } } }) ?? nil else { return .allowed(batch) }
        let replica = store.replica
        let authorsOfNew = Set(batch.operations.lazy.filter { !replica.hasIntegrated($0.id) }.map(\.id.replica))
        guard !authorsOfNew.isEmpty else { return .allowed(batch) }
        var dropped: [ReplicaID: String?] = [:]  // replica → its owner (nil: nobody)
        if sharesAuthorship {
            if authors == nil { authors = [:] }
        } else if !loadAuthors(for: id) {
            return .refused
        }
        var waiting = false
        for author in authorsOfNew.sorted(by: { $0.rawValue < $1.rawValue }) {
            if let owner = authors?[author] {
                if owner == subject { continue }
                guard author != mine else {
                    _ = refuse(id, subject, author, .owned(owner))
                    return .refused
                }
                dropped[author] = owner
                continue
            }
            let mayBind = author == mine && !replica.hasOperations(by: author)
            if sharesAuthorship {
                let request = AuthorshipRequest(replica: author, subject: subject, bind: mayBind,
                                                maxPerSubject: maxReplicasPerSubject, maxPerBoard: maxAuthorsPerBoard)
                switch authorshipAnswers[request] {
                case .owner?: continue  // (owners are in `authors`)
                case .unbound? where author != mine: dropped[author] = .some(nil)
                case .unbound?: _ = refuse(id, subject, author, .hasOperations); return .refused
                case .subjectLimit?: _ = refuse(id, subject, author, .subjectLimit); return .refused
                case .boardLimit?: _ = refuse(id, subject, author, .boardLimit); return .refused
                case nil:
                    ask(request)
                    waiting = true
                    continue
                }
            }
            if author != mine {
                dropped[author] = .some(nil)
                continue
            }
            guard mayBind else { _ = refuse(id, subject, author, .hasOperations); return .refused }
            if authorCounts[subject, default: 0] >= maxReplicasPerSubject { _ = refuse(id, subject, author, .subjectLimit); return .refused }
            if (authors?.count ?? 0) >= maxAuthorsPerBoard { _ = refuse(id, subject, author, .boardLimit); return .refused }
            do {
                try store.bindAuthor(author, to: subject)
            } catch {
                authors = nil  // read again (a torn line is cut off) before the next binding
                log?("session \(id): could not record that replica \(author) belongs to '\(subject)': \(error)")
                closeSession(id, SessionError(.internalError, "the server could not record this replica's author (its log says why)"))
                return .refused
            }
            authors?[author] = subject
            authorCounts[subject, default: 0] += 1
            log?("session \(id): replica \(author) bound to subject '\(subject)' at its first operation")
        }
        if waiting { return .waiting }
        guard !dropped.isEmpty else { return .allowed(batch) }
        for (author, owner) in dropped.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            let count = batch.operations.lazy.filter { $0.id.replica == author }.count
            log?("session \(id): dropped \(count) operations of replica \(author), which \(owner.map { "belongs to '\($0)'" } ?? "no subject owns"), sent by subject '\(subject)' without a peer token")
        }
        tellDropped(dropped, of: batch, to: id)
        // What is left claims nothing of the dropped replicas beyond what the board holds.
        let covers = batch.covers.map { covers in
            VersionVector(covers.entries.filter { dropped[$0.key] == nil }
                .merging(dropped.keys.compactMap { author in replica.versionVector[author] > 0 ? (author, min(covers[author], replica.versionVector[author])) : nil },
                         uniquingKeysWith: { $1 }))
        }
        return .allowed(OperationBatch(operations: batch.operations.filter { dropped[$0.id.replica] == nil }, base: batch.base, covers: covers))
    }

    /// Tells a writer that announced `Capabilities.refusalNotices` which operations were dropped
    /// (REFUSED; the session stays open), so a one-shot sync ends with an error naming them
    /// instead of waiting for an ACK that cannot come, and a live client's status says why.
    private func tellDropped(_ dropped: [ReplicaID: String?], of batch: OperationBatch, to id: SessionID) {
        var highest: [ReplicaID: UInt64] = [:]
        var counts: [ReplicaID: Int] = [:]
        for op in batch.operations where dropped[op.id.replica] != nil {
            highest[op.id.replica] = max(highest[op.id.replica] ?? 0, op.id.seq)
            counts[op.id.replica, default: 0] += 1
        }
        let named = dropped.sorted(by: { $0.key.rawValue < $1.key.rawValue }).map { author, owner in
            let count = counts[author] ?? 0
            return "\(count) operation\(count == 1 ? "" : "s") of replica \(author) (\(owner == nil ? "no subject owns it" : "another subject owns it"))"
        }
        let error = SessionError(.notAuthor, "dropped \(named.joined(separator: ", ")): a write token sends only operations of replica ids its subject owns. Have their owner sync them, or sync them with a peer token (`board-sync token --role peer`); this connection stays open and its own operations go through")
        _ = withSession(id) { $0.sendRefused(error, operations: VersionVector(highest)) }
    }

    /// The other side's REFUSED: kept (merged over the session) for `refusal(from:)`.
    func noteRefused(_ operations: VersionVector, _ error: SessionError, from id: SessionID) {
        log?("session \(id): the other side dropped operations \(operations): \(error.summary)")
        withPeer(id) { peer in
            peer.refused = ((peer.refused?.operations ?? .empty).merged(with: operations), error)
        }
    }

    /// Operations of this side the session's peer said it dropped (for each replica, the
    /// highest), and its latest reason; nil when it dropped none.
    public func refusal(from id: SessionID) -> (operations: VersionVector, error: SessionError)? {
        withPeer(id) { $0.refused } ?? nil
    }

    /// Keeps a writer's batch until its authorship is decided (`busy` past `maxHeldBatches`).
    func hold(_ batch: OperationBatch, from id: SessionID) {
        guard (withPeer(id, { $0.heldBatches?.count ?? 0 }) ?? 0) < maxHeldBatches else {
            peers[id]?.heldBatches = nil
            log?("session \(id): more than \(maxHeldBatches) batches waiting for the shared log to decide authorship; closed")
            closeSession(id, SessionError(.busy, "the server is waiting for its shared log to record this replica's author; retry in a few seconds"))
            return
        }
        withPeer(id) { peer in
            if peer.heldBatches == nil { peer.heldBatches = [] }
            peer.heldBatches?.append(batch)
        }
    }

    /// The shared log's answer to a `.decideAuthorship` request: sessions that said
    /// HELLO under a replica another subject owns are refused, and held batches go on in order.
    package func authorshipAnswered(_ request: AuthorshipRequest, _ answer: AuthorshipAnswer, now: Double) {
        self.now = now
        authorshipAsked.remove(request)
        if case .owner(let owner) = answer {
            if authors == nil { authors = [:] }
            authors?[request.replica] = owner
            for id in peers.keys.sorted() {
                guard let subject = withPeer(id, { peer in
                    peer.helloReplica == request.replica && !peer.relay && !peer.readOnly ? peer.subject : nil
                }) ?? nil, subject != owner else { continue }
                peers[id]?.heldBatches = nil
                _ = refuse(id, subject, request.replica, .owned(owner))
            }
        } else {
            authorshipAnswers[request] = answer
        }
        for id in peers.keys.sorted() where withPeer(id, { $0.heldBatches != nil }) == true { release(id) }
        authorshipAnswers = [:]
    }

    /// Merges a session's held batches in order until one has to wait again.
    private func release(_ id: SessionID) {
        guard var queue = withPeer(id, { peer in
            defer { peer.heldBatches = nil }
            return peer.heldBatches
        }) ?? nil else { return }
        while !queue.isEmpty {
            guard isOpen(id) else { return }
            let batch = queue.removeFirst()
            switch authorship(of: batch, from: id) {
            case .allowed(let authorized): mergeAuthorized(id, authorized)
            case .refused: return
            case .waiting:
                peers[id]?.heldBatches = [batch] + queue
                return
            }
        }
    }

    /// Requests to the shared log go out once until answered.
    private func ask(_ request: AuthorshipRequest) {
        guard authorshipAsked.insert(request).inserted else { return }
        emit(.sharedLog(.decideAuthorship(request)))
    }

    /// Loads the store's table once. A table that cannot be read refuses the writer with words
    /// that name nothing on the server (its path goes to the operator's log).
    private func loadAuthors(for id: SessionID) -> Bool {
        guard authors == nil else { return true }
        do {
            let table = try store.loadAuthors()
            authors = table
            authorCounts = [:]
            for subject in table.values { authorCounts[subject, default: 0] += 1 }
            return true
        } catch {
            log?("board '\(board)': the record of authors cannot be read (writers are refused until it is repaired): \(error)")
            closeSession(id, SessionError(.internalError, "the server cannot read this board's record of authors, so it accepts no writer for now (its log says why)"))
            return false
        }
    }

    enum Refusal {
        case owned(String), hasOperations, subjectLimit, boardLimit
    }

    /// Closes a writer's session for an authorship reason; returns false (for `guard`s).
    private func refuse(_ id: SessionID, _ subject: String, _ replica: ReplicaID, _ why: Refusal) -> Bool {
        switch why {
        case .owned(let owner):
            log?("session \(id): subject '\(subject)' tried to author as replica \(replica), which belongs to '\(owner)'")
            closeSession(id, SessionError(.notAuthor, "replica \(replica) belongs to another subject; this token may author only its own replicas"))
        case .hasOperations:
            log?("session \(id): subject '\(subject)' tried to take replica \(replica), whose operations the board already holds unbound")
            closeSession(id, SessionError(.notAuthor, "replica \(replica) already has operations on this board that no token subject owns (relayed through a peer token, or from before access control): a write token cannot take it over; give this replica a new id"))
        case .subjectLimit:
            log?("session \(id): subject '\(subject)' owns its limit of \(maxReplicasPerSubject) replica ids on board '\(board)'; replica \(replica) refused")
            closeSession(id, SessionError(.limitReached, "this token's subject owns its limit of \(maxReplicasPerSubject) replica ids on this board; edit from one of its replicas"))
        case .boardLimit:
            log?("session \(id): board '\(board)' holds its limit of \(maxAuthorsPerBoard) replica bindings; replica \(replica) refused")
            closeSession(id, SessionError(.limitReached, "this board holds its limit of \(maxAuthorsPerBoard) replicas with authors"))
        }
        return false
    }
}
