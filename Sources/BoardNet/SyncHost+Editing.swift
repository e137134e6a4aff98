import BoardCRDT
import BoardSync

/// Local edits, presence, going offline and stopping.
extension SyncHost {
    /// A local edit on a hosted board: saved durably by its store, then streamed to peers.
    @discardableResult
    public func edit(_ board: String? = nil, _ body: (inout Replica) throws -> LocalEdit) throws -> LocalEdit {
        let edit = try endpoint.edit(board, now: EventLoop.now(), body)
        flushSoon()
        return edit
    }

    /// An edit on a hosted board made for `author` (a web page editing through this host): its
    /// operations carry the author's replica id and its undo history is the author's, with
    /// nothing of the board copied; they are merged as a peer's are (group commit, relayed,
    /// into the shared log). `author` moves on only when the edit went through.
    @discardableResult
    public func edit(_ board: String, as author: inout Author, _ body: (inout Replica) throws -> LocalEdit) throws -> LocalEdit {
        let edit = try endpoint.edit(board, as: &author, now: EventLoop.now(), body)
        flushSoon()
        armTimer()
        return edit
    }

    /// Announces what this host's replica is doing on a board (`SyncEndpoint.setPresence`);
    /// refresh it before its time-to-live runs out.
    public func setPresence(_ presence: Presence, on board: String? = nil) {
        endpoint.setPresence(presence, on: board, now: EventLoop.now())
        flushSoon()
        armTimer()
    }

    /// Who else is on a board now.
    public func presences(on board: String? = nil) -> [Presence] {
        endpoint.presences(on: board)
    }

    /// Closes every link abruptly (a test's or demo's "go offline").
    public func dropConnections() {
        for connection in connections.values { connection.close(immediately: true) }
    }

    /// Stops at once, as a killed process would: no goodbyes, no saves (what was acknowledged is
    /// already in each package's log).
    public func abort() {
        guard !stopped else { return }
        stopped = true
        listener?.close()
        if let timer { loop.cancelTimer(timer.id) }
        for connection in connections.values { connection.close(immediately: true) }
        viewSaves.waitForAll()  // nothing of this host writes after it stopped
        abandonViewSaves()
    }

    /// Stops accepting, says goodbye to every peer, saves every board (unless `save` is false),
    /// and stops reconnecting.
    public func shutdown(save saving: Bool = true) {
        guard !stopped else { return }
        stopped = true
        listener?.close()
        if let timer { loop.cancelTimer(timer.id) }
        finishViewSaves(waiting: true)
        endpoint.shutdown(save: saving, now: EventLoop.now())
        drainEvents()
        flushAll()
        for connection in connections.values { connection.close() }
        options.log("stopped")
    }

    /// Open links (for statistics and tests).
    public var connectionCount: Int { connections.count }

    /// True when nothing waits to be written on any link of `board`.
    public func isQuiet(_ board: String) -> Bool {
        endpoint.sessions(of: board).allSatisfy { id in
            (connections[id]?.queuedBytes ?? 0) == 0 && endpoint.pendingOutput(for: id) == 0
        }
    }

    /// Takes this host off the network (closing links, no redialing) or back on (dialing again).
    public func setOffline(_ offline: Bool) {
        endpoint.setReconnecting(!offline, now: EventLoop.now())
        if offline {
            for connection in connections.values { connection.close(immediately: true) }
        } else {
            dialDue()
        }
        armTimer()
    }

    /// Bytes sent and received by every session this host has had.
    public var sessionBytes: (sent: Int, received: Int) { endpoint.sessionBytes }

    /// Server: opens a board now instead of on the first HELLO naming it. Returns whether it is open.
    @discardableResult
    public func preload(board name: String) -> Bool {
        let opened = endpoint.preload(board: name)
        flushNoted()
        armTimer()
        return opened
    }
}
