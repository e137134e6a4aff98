import BoardCRDT
import BoardSync

/// Sessions joining and leaving boards, for hosts that report them (webhooks): a session
/// joins once its handshake attached it to a board, and leaves when its connection closes.
final class SessionWatch {
    var joined: [SessionID: (board: String, replica: ReplicaID)] = [:]
    var onJoined: (String, ReplicaID) -> Void
    var onLeft: (String, ReplicaID) -> Void

    init(onJoined: @escaping (String, ReplicaID) -> Void, onLeft: @escaping (String, ReplicaID) -> Void) {
        self.onJoined = onJoined
        self.onLeft = onLeft
    }
}

extension SyncHost {
    /// Calls `joined` with the board and the client's replica id when a session attaches to a
    /// board, and `left` when its connection closes. Loop thread; one watcher per host.
    public func watchSessions(joined: @escaping (String, ReplicaID) -> Void, left: @escaping (String, ReplicaID) -> Void) {
        sessionWatch = SessionWatch(onJoined: joined, onLeft: left)
    }

    func noteJoined(_ id: SessionID) {
        guard let watch = sessionWatch, watch.joined[id] == nil, let board = endpoint.board(of: id),
              let replica = endpoint.session(id)?.peer?.replica else { return }
        watch.joined[id] = (board, replica)
        watch.onJoined(board, replica)
    }

    func noteLeft(_ id: SessionID) {
        guard let watch = sessionWatch, let entry = watch.joined.removeValue(forKey: id) else { return }
        watch.onLeft(entry.board, entry.replica)
    }
}
