import BoardCRDT
import Foundation

/// What the endpoint has for its host, polled: boards opened and closed, boards changed,
/// presences, and the shared-log work of replicated boards. The endpoint calls nothing of its
/// host's; the host drains `pollEvent` after each call (a `SyncHost` after every read, timer
/// and edit) and hands `.boardOpened`, `.boardClosed` and `.sharedLog` to its replication layer.
extension SyncEndpoint {
    public enum Event {
        /// A server opened a board (a replication layer attaches to `board.hub` here; with
        /// `boardsShareALog` the board already holds its greetings until the layer lets go).
        case boardOpened(Board)
        /// A board was saved and closed; events it queued before closing came before this one.
        case boardClosed(String)
        /// A board's replica changed (merged operations or images, local edits): for views that
        /// show boards live. One event stands for every change since the previous one.
        case boardChanged(String)
        /// A presence a board's hub took (arrivals, updates, and "gone" ones when a replica
        /// leaves, expires or its connection closes).
        case presence(board: String, Presence)
        /// Work for the replication layer of a board that shares a log (`BoardHub.sharedLog`).
        case sharedLog(board: String, SharedLogRequest)
        /// A view save's file writes for the host to run off its thread
        /// (`Options.viewSavesOffThread`); it calls `viewSaveFinished` with the outcome.
        case saveView(board: String, ViewSaveJob)
        /// A session asks for the board's history (docs/PROTOCOL.md, "History on demand"):
        /// the host answers with `answerHistory` (a host that keeps none answers `unavailable`;
        /// one that does reads it off its thread). The session already bounded the request.
        case historyRequested(board: String, session: SessionID, HistoryRequest)
        /// The answer to a history request sent with `requestHistory`.
        case historyAnswered(board: String, session: SessionID, HistoryAnswer)
    }

    /// The oldest event not drained yet (nil: none).
    package func pollEvent() -> Event? {
        absorbHubActivity()
        guard let event = events.pop() else { return nil }
        if case .boardChanged(let name) = event { changedBoards.remove(name) }
        return event
    }

    func emit(_ event: Event) {
        if case .boardChanged(let name) = event {
            guard changedBoards.insert(name).inserted else { return }
        }
        events.append(event)
    }

    /// The host says how many bytes of a connection's output its transport holds, not yet
    /// written (after each write and as the socket drains): each board counts its sessions'
    /// against `BoardHub.maxQueuedOutput` before handing a newcomer a full delta.
    package func noteTransportQueued(_ id: SessionID, _ bytes: Int) {
        guard let name = links[id]?.board, let board = boards[name] else { return }
        board.hub.noteTransportQueued(id, bytes)
    }

    /// Takes what the hubs listed in `activity` have: moved deadlines (re-armed before the next
    /// answer), sessions with output (for `takeSessionsWithOutput`) and events (in order, into
    /// this endpoint's queue). Work in proportion to the hubs that did something.
    func absorbHubActivity() {
        while !activity.hubs.isEmpty {
            let hubs = activity.hubs
            activity.hubs.removeAll(keepingCapacity: true)
            for hub in hubs {
                hub.activityNoted = false
                absorb(hub)
            }
        }
    }

    /// One hub's activity (also taken at once from a board that is closing, so what it queued
    /// precedes its `.boardClosed`).
    func absorb(_ hub: BoardHub) {
        let board = boards[hub.board].flatMap { $0.hub === hub ? $0 : nil }
        if let board {
            if hub.timersMayHaveMoved {
                hub.timersMayHaveMoved = false
                timersMayHaveChanged(board)
            }
            if hub.hasSessionsWithOutput, !board.outputNoted {
                board.outputNoted = true
                boardsWithOutput.append(board)
            }
        }
        while let event = hub.pollEvent() {
            switch event {
            case .changed:
                guard let board else { continue }
                board.scheduler.noteChange(now: now)
                timersMayHaveChanged(board)
                emit(.boardChanged(hub.board))
            case .presence(let presence): emit(.presence(board: hub.board, presence))
            case .sharedLog(let request): emit(.sharedLog(board: hub.board, request))
            case .historyRequested(let id, let request): emit(.historyRequested(board: hub.board, session: id, request))
            case .historyAnswered(let id, let answer): emit(.historyAnswered(board: hub.board, session: id, answer))
            }
        }
    }

    /// Answers a session's history request (`.historyRequested`); ignored when the session or
    /// its board is gone.
    public func answerHistory(_ id: SessionID, _ answer: HistoryAnswer) {
        guard let name = links[id]?.board, let board = boards[name] else { return }
        board.hub.answerHistory(id, answer)
        absorbHubActivity()
    }

    /// Asks the peer of an open session for history; the answer arrives as `.historyAnswered`.
    /// False when it cannot be sent (no such open session, the peer did not announce
    /// `Capabilities.history`, an id already waiting, or the requests in flight at the limit).
    public func requestHistory(_ id: SessionID, _ request: HistoryRequest) -> Bool {
        guard let name = links[id]?.board, let board = boards[name] else { return false }
        let sent = board.hub.requestHistory(id, request)
        absorbHubActivity()
        return sent
    }
}
