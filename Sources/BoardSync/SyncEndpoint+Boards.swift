import BoardCRDT
import BoardModel
import Foundation

/// Opening, saving and closing boards: a server opens a board when a HELLO (or a view) first names it
/// and closes it when nobody has been connected for a while.
extension SyncEndpoint {
    @discardableResult
    func install(_ store: any HostedStore, as name: String) -> Board {
        let board = Board(name: name, store: store,
                          scheduler: SaveScheduler(quietPeriod: options.saveQuietPeriod, maxDelay: options.saveMaxDelay), now: now)
        let log = options.log
        board.hub.log = { line in log("board '\(name)': \(line)") }
        board.hub.activity = activity
        if boardsShareALog {
            board.hub.sharedLog = true
            board.hub.sharesAuthorship = boardsShareAuthorship
            board.hub.holdsGreetings = true  // until the replication layer has read the board's log
        }
        board.hub.dropsRelayedPresence = options.dropsRelayedPresence
        board.hub.maxOperationsPerSecond = options.maxOperationsPerSecond
        board.hub.groupCommit = options.groupCommit
        board.hub.maxAssets = options.maxAssetsPerBoard
        board.hub.fetchesImages = options.fetchesImages
        board.hub.metrics = metrics
        boards[name] = board
        timersMayHaveChanged(board)
        emit(.boardOpened(board))
        return board
    }

    /// Server: opens a board now instead of on the first HELLO naming it.
    @discardableResult
    public func preload(board name: String) -> Bool {
        openBoard(name) != nil
    }

    /// Opens `name` for a view and keeps it open until `removeViewer`; false when it cannot be
    /// opened.
    public func addViewer(board name: String, now: Double) -> Bool {
        self.now = now
        guard let board = openBoard(name) else { return false }
        viewers[name, default: 0] += 1
        board.lastActive = now
        timersMayHaveChanged(board)
        return true
    }

    public func removeViewer(board name: String, now: Double) {
        self.now = now
        guard Hello.isValidBoardName(name), let count = viewers[name] else { return }
        viewers[name] = count > 1 ? count - 1 : nil
        if let board = boards[name] {
            board.lastActive = now
            timersMayHaveChanged(board)
        }
    }

    func openBoard(_ name: String) -> Board? {
        // The name is checked before it is looked up: `boards` is keyed by `String`, whose
        // equality is canonical equivalence (KELVIN SIGN + "x" would find board "Kx"); plain
        // names are ASCII, where it is byte equality.
        guard Hello.isValidBoardName(name) else { return nil }
        if let board = boards[name] { return board }
        guard let opener else { return nil }
        if boards.count >= options.maxOpenBoards {
            closeIdleBoards(olderThan: 0)
            guard boards.count < options.maxOpenBoards else {
                openFailures[name] = ("the server has \(boards.count) boards open with peers connected (limit \(options.maxOpenBoards)); retry later", .busy)
                options.log("board '\(name)': not opened: \(boards.count) boards open, the limit")
                return nil
            }
        }
        do {
            let store = try opener(name)
            openFailures[name] = nil
            return install(store, as: name)
        } catch {
            // The client hears what kind of trouble, never the server's paths (its log has them).
            // A package another process holds or that cannot be written is the storage's
            // trouble, worth a retry (`storageUnavailable`). Logged once per reason, not per client.
            if let deleted = error as? BoardDeletedError {
                if openFailures[name]?.why != deleted.description { options.log("board '\(name)': refused: \(deleted)") }
                openFailures[name] = (deleted.description, .boardDeleted)
                return nil
            }
            let why = (error as? PeerSafeError)?.descriptionWithoutPaths ?? (error is LimitError ? "\(error)" : "the server could not open it (see its log)")
            if openFailures[name]?.why != why { options.log("board '\(name)': cannot open: \(error)") }
            openFailures[name] = (why, error is LimitError ? .limitReached : (error as? PeerSafeError)?.isStorageTrouble == true ? .storageUnavailable : .badBoardName)
            return nil
        }
    }

    /// Server: saves and closes every board nobody has been connected to for `age` seconds
    /// (opening one more board at the limit closes every idle one: `age` 0). The timed closes
    /// come from `handleTimers`, one board at its deadline (`closeIfIdle`).
    func closeIdleBoards(olderThan age: Double) {
        guard isServer else { return }
        for name in boards.keys.sorted() {
            if let board = boards[name] { closeIfIdle(board, olderThan: age) }
        }
    }

    /// Saves and closes `board` if nobody has been connected to it or looked at it for `age`
    /// seconds; returns whether it closed.
    @discardableResult
    func closeIfIdle(_ board: Board, olderThan age: Double) -> Bool {
        guard isServer, !board.scheduler.isSaving, board.hub.sessionCount == 0, board.routed == 0, now >= board.lastActive + age,
              viewers[board.name, default: 0] == 0 else { return false }
        let name = board.name
        board.hub.commitMerges()
        absorb(board.hub)  // what it queued goes before its `.boardClosed`
        saveNow(board)
        board.store.closeStore()
        metrics.retiredOperations.received += board.hub.operationsMerged
        metrics.retiredOperations.sent += board.hub.operationsSent
        boards[name] = nil
        timers.cancel(.board(name))
        emit(.boardClosed(name))
        options.log("board '\(name)': closed (no peers for \(Int(now - board.lastActive)) s)")
        return true
    }

    func save(_ board: Board) {
        guard !board.scheduler.isSaving else { return }
        timersMayHaveChanged(board)
        if options.viewSavesOffThread {
            board.scheduler.didStartSave()
            do {
                if let job = try board.store.beginViewSave() {
                    emit(.saveView(board: board.name, job))
                    return
                }
            } catch {
                options.log("board '\(board.name)': save failed: \(error)")
            }
            board.scheduler.didFinishSave()
            return
        }
        saveNow(board)
    }

    /// Saves a board's view inside this call (closing and shutting down, when no save of the
    /// board is in flight).
    func saveNow(_ board: Board) {
        board.scheduler.didSave()
        do {
            try board.store.saveView()
        } catch {
            options.log("board '\(board.name)': save failed: \(error)")
        }
    }

    /// The host ran a `.saveView` job: `error` is what it threw, nil when it succeeded. The
    /// board may save again (changes made meanwhile are due at once) and close when idle.
    public func viewSaveFinished(board name: String, _ job: ViewSaveJob, error: (any Error)?, now: Double) {
        self.now = now
        guard let board = boards[name] else { return }
        board.scheduler.didFinishSave()
        if let error { options.log("board '\(name)': save failed: \(error)") }
        do {
            try board.store.endViewSave(job, error: error)
        } catch {
            options.log("board '\(name)': after saving: \(error)")
        }
        timersMayHaveChanged(board)
    }
}
