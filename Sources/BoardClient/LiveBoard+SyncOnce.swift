import BoardCRDT
import BoardSync
import Foundation

/// What `syncOnce` did. The counts add up across replicas: what one replica's sync sent is
/// what the next replica's sync of the same board receives (operations are counted by version
/// vectors, so operations compaction dropped on the way count too: their effect travels).
public struct SyncReport: Sendable, Equatable {
    /// Operations the server lacked at the handshake that this replica held (its own and any
    /// it learned from others), and so sent.
    public var operationsSent: Int
    /// Of those, the operations the server acknowledged (durable there): all of them once
    /// `syncOnce` returns.
    public var operationsAcknowledged: Int
    /// Operations this replica lacked and now holds.
    public var operationsReceived: Int
    /// Images the server asked for and this replica sent.
    public var imagesSent: Int
    /// Stickers' images still missing here: no one connected had their bytes (a later sync
    /// fetches them).
    public var imagesMissing: Int
    public var bytesSent: Int
    public var bytesReceived: Int
    public var seconds: Double
}

/// Why `syncOnce` did not finish.
public enum SyncOnceError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The connection could not be made.
    case unreachable(String)
    /// The connection ended after the handshake, before both sides were in sync.
    case closed(String)
    /// The server ended the session with an ERROR (`Refusal.isRetryable` says whether trying
    /// again later is worth it).
    case refused(Refusal)
    /// The server's token refusal survived one fresh ask of the credentials.
    case tokenExpired(String)
    /// This side ended the session: the server broke the protocol or went silent.
    case abandoned(String)
    /// Nothing decided within the bound; the text says what was still awaited.
    case timedOut(Double, waitingFor: String)
    /// Everything else is done (this replica's own operations acknowledged, the server's
    /// received), but the server dropped operations of other replicas this board holds: for
    /// each, how many it still lacks, counted by version vector like `SyncReport` (the
    /// refusal's text has the server's own count). A write token sends only operations of
    /// replica ids its subject owns; their owner (or a `peer` token) must sync them. Not worth
    /// retrying as is.
    case operationsRefused([ReplicaID: Int], Refusal)

    public var description: String {
        switch self {
        case .unreachable(let why): return "cannot reach the server: \(why)"
        case .closed(let why): return "the server closed the connection: \(why)"
        case .refused(let refusal): return "the server refused: \(refusal)"
        case .tokenExpired(let why): return "the token expired (\(why)): get a fresh token (`board-sync token`) and sync again"
        case .abandoned(let why): return "closed the connection to the server: \(why)"
        case .timedOut(let seconds, let awaited):
            return "no result after \(LiveBoard.seconds(seconds)) s (still waiting for \(awaited)); the server may be overloaded or unreachable"
        case .operationsRefused(let counts, let refusal):
            return "the server refused the \(LiveBoard.describe(counts.keys)) that this board holds from other replicas (\(refusal)); "
                + "everything else is in sync and this replica's own operations were acknowledged"
        }
    }

    /// Worth trying again later: the server was busy, stopping or waiting for its storage.
    public var isRetryable: Bool {
        if case .refused(let refusal) = self { return refusal.recovery == .retry }
        return false
    }
}

/// The state of a `syncOnce` in progress (the pump reads and updates it).
struct SyncOnceProgress {
    let started: Double
    let deadline: Double
    let startVector: VersionVector
    /// What the server held at the handshake.
    var serverHad: VersionVector?
    var sawOpen = false
    var done = false
    var awaiting = "the connection"
    /// Traffic when the sync began (the report counts what crossed since, over every attempt).
    let startTraffic: LiveBoard.Traffic
    /// Images sent on earlier attempts (a token refresh redials) and on this one.
    var imagesSentEarlier = 0
    var imagesSent = 0
    /// Done, except for operations of other replicas the server dropped (REFUSED).
    var refused: (counts: [ReplicaID: Int], refusal: Refusal)?
}

extension LiveBoard {
    /// Meets the server once, both directions, images included, and returns when each side
    /// holds the other's operations: the server has acknowledged everything this replica holds,
    /// this replica has everything the server held (its SYNCED), every image the server asked
    /// for is written and every image this side asked for answered. Then it says goodbye. The
    /// board stays open (status `.idle`): edit on, `syncOnce` again, or `run()`.
    ///
    /// One connection, no retries: a refusal, a dropped link or the bound passing throws
    /// `SyncOnceError` (a `token expired` refusal asks `credentials` once more and redials).
    /// What was merged before a failure stays merged and saved.
    @discardableResult
    public func syncOnce(within timeout: Double = 60) async throws -> SyncReport {
        guard store != nil else { throw LiveBoardError.closed }
        guard let sync else { throw LiveBoardError.noServer }
        guard !running else { throw LiveBoardError.alreadyRunning }
        running = true
        let start = now()
        oneShot = SyncOnceProgress(started: start, deadline: start + max(0, timeout), startVector: replica.versionVector, startTraffic: trafficSoFar)
        let clock = self.clock
        let timer = Task { [weak self] in
            // Measured from when the timer starts (as a `Task.sleep` of `timeout` would be).
            try? await clock.sleep(until: clock.now() + max(0, timeout))
            if Task.isCancelled { return }
            await self?.interruptAttempt()
        }
        defer {
            timer.cancel()
            running = false
            oneShot = nil
            // A close() that came meanwhile waits for the run to release the board: this was it.
            if closeDeadline != nil { release(final: .closed) } else if store != nil { setState(.idle) }
        }
        var refreshedToken = false
        while true {
            setState(.connecting(attempt: 1))
            let outcome = await connectOnce(sync, attempt: 1)
            let shot = oneShot!
            if shot.done {
                if let refused = shot.refused { throw SyncOnceError.operationsRefused(refused.counts, refused.refusal) }
                return report(shot)
            }
            if Task.isCancelled { throw CancellationError() }
            if closeDeadline != nil { throw LiveBoardError.closed }
            guard let outcome, now() < shot.deadline, case .dropped(let reason, let refusal, _, _, let closeReason) = outcome else {
                throw SyncOnceError.timedOut(timeout, waitingFor: shot.awaiting)
            }
            if let error = closeReason ?? refusal {
                if error.remote {
                    if error.code == .tokenExpired {
                        if !refreshedToken, now() < shot.deadline {
                            refreshedToken = true
                            oneShot?.imagesSentEarlier += shot.imagesSent
                            oneShot?.imagesSent = 0
                            oneShot?.serverHad = nil
                            continue
                        }
                        throw SyncOnceError.tokenExpired(error.message)
                    }
                    throw SyncOnceError.refused(Refusal(error))
                }
                throw SyncOnceError.abandoned(error.summary)
            }
            throw shot.sawOpen ? SyncOnceError.closed(reason) : SyncOnceError.unreachable(reason)
        }
    }

    private func report(_ shot: SyncOnceProgress) -> SyncReport {
        let replica = self.replica
        let had = shot.serverHad ?? .empty
        // What this replica held that the server lacked: what it held at the start, and its
        // own edits made while the sync ran.
        let sent = heldByThisReplica(shot).entries.reduce(0) { $0 + Int($1.value > had[$1.key] ? $1.value - had[$1.key] : 0) }
        // Received: others' operations this replica gained (its own edits meanwhile are not).
        let received = replica.versionVector.entries.reduce(0) { total, entry in
            entry.key == replicaID ? total : total + Int(entry.value &- min(entry.value, shot.startVector[entry.key]))
        }
        return SyncReport(operationsSent: sent, operationsAcknowledged: sent, operationsReceived: received,
                          imagesSent: shot.imagesSentEarlier + shot.imagesSent, imagesMissing: replica.missingAssets.count,
                          bytesSent: trafficSoFar.sent - shot.startTraffic.sent,
                          bytesReceived: trafficSoFar.received - shot.startTraffic.received, seconds: now() - shot.started)
    }

    /// The pump's look at a one-shot sync: notes progress, and whether both sides are in sync.
    func noteOneShot(_ session: SyncSession, hub: BoardHub?, id: SessionID) {
        // A closed session (the goodbye at the bound, or the server's end) says nothing new
        // about what was awaited.
        guard var shot = oneShot, !shot.done, !session.isClosed else { return }
        defer { oneShot = shot }
        guard session.isOpen, let peer = session.peer, let hub else {
            shot.awaiting = "the server's answer to the handshake"  // connected, HELLO sent
            return
        }
        shot.sawOpen = true
        if shot.serverHad == nil { shot.serverHad = peer.version }
        shot.imagesSent = session.sentAssets.count
        let serverHolds = (hub.acknowledged(by: id) ?? .empty).merged(with: peer.version)
        let held = heldByThisReplica(shot)
        // Operations the server said it dropped are not waited for (no ACK will cover them).
        let refusal = hub.refusal(from: id)
        let refused = refusal.map { refusedCounts($0.operations, held: held, serverHolds: serverHolds) } ?? [:]
        let covered = serverHolds.merged(with: VersionVector(held.entries.filter { refused[$0.key] != nil }))
        if !hub.hasSynced(id) {
            shot.awaiting = "the server's operations"
        } else if !session.outstandingWants.isEmpty {
            shot.awaiting = "images asked for"
        } else if !covered.dominates(held) {
            let others = held.entries.filter { $0.key != replicaID && $0.value > covered[$0.key] }
                .map { ($0.key, Int($0.value - covered[$0.key])) }
            if serverHolds[replicaID] >= held[replicaID], !others.isEmpty {
                // A server of an older build drops what a write token may not send without saying so.
                shot.awaiting = "the server to acknowledge the \(Self.describe(others.map(\.0))) that this board holds from other replicas "
                    + "(this replica's own are acknowledged): a server with access control drops those a write token's subject does not own; "
                    + "let their owner sync them, or sync with a peer token"
            } else {
                shot.awaiting = "the server to acknowledge this replica's operations: it does so once its storage holds them"
            }
        } else if !session.queuedAssets.isEmpty || session.hasOutput {
            shot.awaiting = "the last bytes to be written"
        } else {
            shot.done = true
            if let refusal, !refused.isEmpty { shot.refused = (refused, Refusal(refusal.error)) }
        }
    }

    /// Of the replicas the server said it dropped operations of, how many operations of each
    /// this side holds and the server still lacks (`ClientEngine.refusedCounts`).
    func refusedCounts(_ operations: VersionVector, held: VersionVector, serverHolds: VersionVector) -> [ReplicaID: Int] {
        engine.refusedCounts(operations, held: held, serverHolds: serverHolds)
    }

    /// "operations of replica a1b2…", "operations of replicas a1b2…, c3d4…" (counts by version
    /// vector can differ from the operations a server counts, so the server's text has those).
    static func describe<S: Sequence<ReplicaID>>(_ replicas: S) -> String {
        let names = replicas.sorted { $0.rawValue < $1.rawValue }.map { "\($0)" }
        return "operations of replica\(names.count == 1 ? "" : "s") \(names.joined(separator: ", "))"
    }

    var oneShotIsDone: Bool { oneShot?.done == true }

    /// What the server must hold for the sync to be done: what this replica held when it began,
    /// and its own edits since (others' operations relayed meanwhile are the server's anyway;
    /// no ACK covers them).
    private func heldByThisReplica(_ shot: SyncOnceProgress) -> VersionVector {
        var entries = shot.startVector.entries
        entries[replicaID] = replica.versionVector[replicaID]
        return VersionVector(entries)
    }
}
