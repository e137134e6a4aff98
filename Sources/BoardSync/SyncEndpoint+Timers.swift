import BoardCRDT
import Foundation

/// Time: keep-alives, idle timeouts, view saves and idle boards, kept in one `DeadlineQueue`
/// (`timers`) so a host's question "when next?" and each timer turn visit only what is due.
extension SyncEndpoint {
    /// Keep-alives, idle timeouts, view saves and idle boards. Returns session events that
    /// fired (timeouts), by connection. Visits only the boards and pending sessions whose
    /// deadline has come (`timers`): boards by name, then pending sessions by id.
    @discardableResult
    public func handleTimers(now: Double) -> [(SessionID, SessionEvent)] {
        self.now = now
        lastTimersRun = now
        rearmChangedTimers()
        var dueBoards: [Board] = []
        var duePending: [SessionID] = []
        for key in timers.popDue(now: now) {
            switch key {
            case .board(let name): if let board = boards[name] { dueBoards.append(board) }
            case .pending(let id): duePending.append(id)
            }
        }
        dueBoards.sort { $0.name < $1.name }
        // Idle boards close first, then the others' timers run (the order of old, when every
        // board was visited).
        dueBoards.removeAll { closeIfIdle($0, olderThan: options.idleBoardTimeout) }
        var fired: [(SessionID, SessionEvent)] = []
        for board in dueBoards {
            for (id, event) in board.hub.handleTimers(now: now) {
                if case .closed(let error?) = event { options.log("board '\(board.name)': session \(id) closed: \(error)") }
                fired.append((id, event))
            }
            if board.scheduler.isDue(now: now) { save(board) }
            timersMayHaveChanged(board)
        }
        for id in duePending.sorted() {
            guard let events = withHandshaking(id, { $0.handleTimer(now: now) }) else { continue }
            fired += events.map { (id, $0) }
            pendingChanged(id)
        }
        if let earliest = earliestGrantExpiry, let access = options.access, access.wallClock() >= earliest {
            fired += enforceAccess(now: now)
        }
        rearmChangedTimers()
        return fired
    }

    /// When to call `handleTimers` next: never later than the earliest time it has work to do,
    /// sometimes earlier (each hub answers from a bound, see `BoardHub.nextDeadline`); a call
    /// that finds nothing due makes the next answer exact. Cheap enough to ask after every
    /// event: the boards whose deadline changed since the last answer are re-armed in
    /// `timers`, whose earliest entry is the answer (with the dial targets').
    public var nextDeadline: Double? {
        rearmChangedTimers()
        var earliest = timers.earliest()?.deadline
        for target in dialTargets { if let due = target.due { earliest = min(earliest ?? due, due) } }
        return earliest
    }

    /// A board's next deadline: its hub's, its next view save, and (a server's board nobody is
    /// connected to or looking at, with no save in flight) when it closes as idle.
    func deadline(of board: Board) -> Double? {
        var earliest = board.hub.nextDeadline
        if let save = board.scheduler.deadline { earliest = min(earliest ?? save, save) }
        if isServer, board.hub.sessionCount == 0, viewers[board.name, default: 0] == 0, !board.scheduler.isSaving {
            let idle = board.lastActive + options.idleBoardTimeout
            earliest = min(earliest ?? idle, idle)
        }
        return earliest
    }

    /// Something may have moved `board`'s deadline: it is re-armed before the next answer.
    func timersMayHaveChanged(_ board: Board) {
        guard !board.timersChanged else { return }
        board.timersChanged = true
        timersChanged.append(board)
    }

    func rearmChangedTimers() {
        absorbHubActivity()
        guard !timersChanged.isEmpty else { return }
        for board in timersChanged {
            board.timersChanged = false
            guard boards[board.name] === board else { continue }  // closed meanwhile
            timers.schedule(.board(board.name), at: deadline(of: board))
        }
        timersChanged.removeAll(keepingCapacity: true)
    }

    /// A pending session was touched: its deadline re-armed, its output noted.
    func pendingChanged(_ id: SessionID) {
        guard case .handshaking(let session)? = links[id]?.phase else {
            timers.cancel(.pending(id))
            pendingWithOutput.remove(id)
            return
        }
        timers.schedule(.pending(id), at: session.nextDeadline)
        if session.hasOutput || session.isClosed { pendingWithOutput.insert(id) }
    }
}
