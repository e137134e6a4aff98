import Foundation

/// What an opener throws for a board its operator deleted (a tombstone names it): the HELLO
/// is refused with `boardDeleted`, a terminal code, naming the board.
public struct BoardDeletedError: Error, CustomStringConvertible, Sendable {
    public let board: String
    /// When it was deleted (ISO 8601, UTC), as the tombstone says.
    public let deletedAt: String

    public init(board: String, deletedAt: String) {
        self.board = board
        self.deletedAt = deletedAt
    }

    public var description: String {
        "board '\(board)' was deleted by the server's operator at \(deletedAt); it cannot be opened or re-created by a client (keep your copy; the operator re-creates the name)"
    }
}

/// Deleting an open board (the admin API): its sessions end with `boardDeleted`, then the
/// board is dropped without saving. The host writes the sessions' ERROR between the two
/// calls (`SyncHost.deleteOpenBoard`).
extension SyncEndpoint {
    public enum Removal: Equatable, Sendable {
        /// Not open: nothing to close (its files are the caller's to remove).
        case notOpen
        /// Open with sessions or views and not forced: nothing changed.
        case held(sessions: Int, viewers: Int)
        /// A save of its view is running off the loop: retry in a moment.
        case saving
        /// Its sessions were ended (their count); call `discardBoard` once their ERROR is written.
        case ended(sessions: Int)
    }

    /// Ends the sessions of `name` with `boardDeleted` when `force` (or when there are none).
    public func endSessionsForDeletion(_ name: String, force: Bool, now: Double) -> Removal {
        self.now = now
        guard Hello.isValidBoardName(name), let board = boards[name] else { return .notOpen }
        let ids = board.hub.sessionIDs
        let watching = viewers[name, default: 0]
        if !force, !ids.isEmpty || watching > 0 { return .held(sessions: ids.count, viewers: watching) }
        if board.scheduler.isSaving { return .saving }
        let error = SessionError(.boardDeleted, "board '\(name)' was deleted by the server's operator; keep your copy, it will not be served again under this name")
        for id in ids {
            options.log("board '\(name)': session \(id) closed: the board was deleted")
            board.hub.close(id, error)
        }
        absorb(board.hub)
        return .ended(sessions: ids.count)
    }

    /// Drops `name` from the open boards without saving it (it is being deleted): its store is
    /// closed (its lock released), its timers cancelled, the replication layer told `.boardClosed`.
    public func discardBoard(_ name: String, now: Double) {
        self.now = now
        guard let board = boards[name] else { return }
        board.store.closeStore()
        metrics.retiredOperations.received += board.hub.operationsMerged
        metrics.retiredOperations.sent += board.hub.operationsSent
        boards[name] = nil
        viewers[name] = nil
        openFailures[name] = nil
        timers.cancel(.board(name))
        emit(.boardClosed(name))
        options.log("board '\(name)': closed and discarded (deleted)")
    }

    /// Sessions and web views holding `name` now (0, 0 when it is not open).
    public func holders(of name: String) -> (sessions: Int, viewers: Int) {
        guard let board = boards[name] else { return (0, 0) }
        return (board.hub.sessionCount, viewers[name, default: 0])
    }

    /// Forgets a remembered open failure (a deleted name re-created by its operator).
    public func forgetOpenFailure(_ name: String) {
        openFailures[name] = nil
    }
}
