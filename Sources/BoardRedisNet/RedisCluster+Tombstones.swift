import BoardNet
import BoardRedis
import BoardSync

/// The admin API's deletes and undeletes with `--redis`: the tombstone is kept in Redis for
/// every server (`RedisBoardLog+Deletion.swift`; the log's `checksTombstones` must be on).
extension RedisCluster: SharedTombstones {
    public var tombstoneStore: String { "Redis at \(address)" }

    public func deleteBoard(_ board: String, deletedAt: String, subject: String?, hasCopy: Bool,
                            done: @escaping (SharedTombstoneAnswer) -> Void) {
        boardLog.deleteBoard(board, deletedAt: deletedAt, subject: subject, hasCopy: hasCopy) { [loop] answer in
            // Answered on the next turn: the caller closes boards, which reaches the log again.
            _ = loop.schedule(after: 0) { done(Self.shared(answer)) }
        }
        flushCommands()
    }

    public func undeleteBoard(_ board: String, done: @escaping (SharedTombstoneAnswer) -> Void) {
        boardLog.undeleteBoard(board) { [loop] answer in _ = loop.schedule(after: 0) { done(Self.shared(answer)) } }
        flushCommands()
    }

    static func shared(_ answer: RedisBoardLog.TombstoneAnswer) -> SharedTombstoneAnswer {
        switch answer {
        case .done(let at): return .done(deletedAt: at)
        case .unchanged(let at): return .unchanged(deletedAt: at)
        case .noSuchBoard: return .noSuchBoard
        case .full(let count): return .full(count: count)
        case .failed(let why): return .failed(why)
        }
    }
}
