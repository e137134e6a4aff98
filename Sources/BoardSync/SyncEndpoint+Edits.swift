import BoardCRDT
import BoardModel
import Foundation

/// Local edits, presence and shutdown.
extension SyncEndpoint {
    /// A local edit on a hosted board: made durable by its store, then streamed to peers.
    @discardableResult
    package func edit(_ name: String? = nil, now: Double, _ body: (inout Replica) throws -> LocalEdit) throws -> LocalEdit {
        self.now = now
        guard let name = name ?? boards.keys.sorted().first, let board = boards[name] else { return LocalEdit() }
        let edit = try board.store.commitEdit(body)
        board.hub.broadcast(edit.operations)
        board.scheduler.noteChange(now: now)
        timersMayHaveChanged(board)
        if !edit.operations.isEmpty { emit(.boardChanged(name)) }
        return edit
    }

    /// An edit made for one of the authors this host edits for (a web page): drafted on the
    /// board's replica as `author` (nothing of the board is copied), then merged the way a
    /// peer's operations are: durable with the board's next group commit, relayed to every
    /// session, into the shared log when there is one. `author` moves on only once the merge
    /// went through. The caller checks the author may edit (the hub's access and authorship
    /// checks are for sessions).
    @discardableResult
    package func edit(_ name: String, as author: inout Author, now: Double, _ body: (inout Replica) throws -> LocalEdit) throws -> LocalEdit {
        self.now = now
        guard let board = boards[name] else { throw BoardNotOpen(board: name) }
        let draft = try board.store.drafting { try $0.draft(as: author, body) }
        try board.hub.mergeAuthored(draft)
        author = draft.author
        return draft.edit
    }

    /// Announces what this host's replica (or one it edits for) is doing on a board: the
    /// endpoint stamps the presence with its next clock and the hub sends it to every peer that
    /// understands presence. `presence.ttl` 0 says the replica left.
    package func setPresence(_ presence: Presence, on name: String? = nil, now: Double) {
        self.now = now
        guard let name = name ?? boards.keys.sorted().first, let board = boards[name] else { return }
        presenceClock = max(presenceClock + 1, options.presenceClockStart)
        var stamped = presence
        stamped.clock = presenceClock
        board.hub.setLocalPresence(stamped, now: now)
    }

    /// Who is on a board (other replicas' live presences), by replica id order.
    package func presences(on name: String? = nil) -> [Presence] {
        guard let name = name ?? boards.keys.sorted().first, let board = boards[name] else { return [] }
        return board.hub.presences.values.filter { $0.from != nil }.map(\.presence).sorted { $0.replica < $1.replica }
    }

    /// Says goodbye on every session and saves every board (unless `save` is false).
    package func shutdown(save saving: Bool, now: Double) {
        self.now = now
        setReconnecting(false, now: now)
        for board in boards.values {
            board.hub.commitMerges()  // acknowledge what is saved before saying goodbye
            board.hub.closeAll(nil)
            if saving { saveNow(board) }  // a host with saves off its thread waits for them first
        }
        for id in links.keys.sorted() where links[id]?.isHandshaking == true {
            withHandshaking(id) { $0.close(SessionError(.shuttingDown, "the server is stopping")) }
            pendingChanged(id)
        }
    }

    /// Bytes sent and received by every session this endpoint has had.
    package var sessionBytes: (sent: Int, received: Int) {
        var sent = retiredBytes.sent
        var received = retiredBytes.received
        for board in boards.values {
            let bytes = board.hub.bytesTransferred
            sent += bytes.sent
            received += bytes.received
        }
        return (sent, received)
    }
}

/// An edit named a board this endpoint does not have open.
package struct BoardNotOpen: Error, CustomStringConvertible {
    package var board: String
    package var description: String { "board '\(board)' is not open on this server" }
}
