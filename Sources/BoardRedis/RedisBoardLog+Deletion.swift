import BoardCRDT
import BoardSync
import Foundation

/// Deleted boards' tombstones, shared by every server of a cluster (`Options.checksTombstones`):
///
/// - a tombstone is a key of the board's own (`bs:{board}:deleted`, a line of JSON: board,
///   deletedAt, node, subject), written by `deleteScript` in the same step that removes the
///   board's stream, checkpoint and authorship keys and publishes a deletion notice on the
///   board's presence channel; its name is also added to `bs:deleted` (a set: counted against
///   `maxTombstones` before a delete, so what an admin can store is bounded);
/// - every board attached is checked (`GET`) before its catch-up starts: a tombstoned board is
///   never caught up, greeted or appended to from this server's cache; it is reported in
///   `takeDeletedBoards()` and the host closes it (`boardDeleted`, terminal) and drops its cache;
/// - a board already served hears the deletion notice on its presence channel, and is checked
///   again each time that subscription is confirmed (a notice published while this server's
///   presence link was down is found then);
/// - `undeleteBoard` removes the tombstone and whatever a lagging server appended meanwhile.
///
/// While Redis cannot be reached nothing is checked, so nothing is caught up or greeted: an
/// unknown tombstone is never taken for "not deleted".
extension RedisBoardLog {
    /// What a delete or undelete asked of Redis came to.
    public enum TombstoneAnswer: Equatable, Sendable {
        /// Done; a delete's time (ISO 8601) as written in the tombstone.
        case done(deletedAt: String)
        /// A delete of a board deleted already (its tombstone's time), or an undelete of one
        /// that has no tombstone (nil).
        case unchanged(deletedAt: String?)
        /// A delete of a board Redis holds nothing of (and this server has no copy).
        case noSuchBoard
        /// `maxTombstones` boards are deleted already.
        case full(count: Int)
        /// Redis cannot be reached, refused the command, or the link dropped before it answered
        /// (then it may or may not have taken effect).
        case failed(String)
    }

    /// A delete or undelete waiting for Redis.
    struct TombstoneCall {
        let board: String
        /// A delete's tombstone (nil: an undelete).
        let record: String?
        let deletedAt: String
        let hasCopy: Bool
        let done: (TombstoneAnswer) -> Void
    }

    /// Where a board is in being checked against its tombstone before its catch-up.
    enum TombstoneCheck: Equatable {
        case unchecked(asked: Bool)
        case clear
        case deleted
    }

    func deletedKey(_ board: String) -> String { "\(options.keyPrefix):{\(board)}:deleted" }
    var tombstoneSetKey: String { "\(options.keyPrefix):deleted" }

    /// Every key of a board's data (removed with it, and again when it is undeleted).
    func dataKeys(_ board: String) -> [String] {
        [streamKey(board), checkpointKey(board), leaseKey(board), epochKey(board), authorsKey(board), authoredKey(board), replicasKey(board)]
    }

    /// The deletion notice's payload after the node id (then the tombstone's JSON).
    static let deletionMarker = Array("BSDELETED ".utf8)

    // MARK: The admin's calls

    /// Deletes `board` for every server: its tombstone is written, its data in Redis removed,
    /// and the servers serving it told (`done` on the driver's thread, once). `hasCopy`: this
    /// server holds the board (without it, a name Redis holds nothing of is `noSuchBoard`).
    public func deleteBoard(_ board: String, deletedAt: String, subject: String?, hasCopy: Bool, done: @escaping (TombstoneAnswer) -> Void) {
        guard up.contains(.commands) else { return done(.failed("not connected to \(options.redisName)")) }
        var object = ["board": board, "deletedAt": deletedAt, "node": options.node]
        if let subject { object["subject"] = subject }
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
        nextTombstoneCall += 1
        tombstoneCalls[nextTombstoneCall] = TombstoneCall(board: board, record: String(decoding: data, as: UTF8.self), deletedAt: deletedAt,
                                                          hasCopy: hasCopy, done: done)
        send(.countTombstones(nextTombstoneCall), strings: ["SCARD", tombstoneSetKey])
        pump()
    }

    /// Removes `board`'s tombstone (and what was appended under it) for every server.
    public func undeleteBoard(_ board: String, done: @escaping (TombstoneAnswer) -> Void) {
        guard up.contains(.commands) else { return done(.failed("not connected to \(options.redisName)")) }
        nextTombstoneCall += 1
        tombstoneCalls[nextTombstoneCall] = TombstoneCall(board: board, record: nil, deletedAt: "", hasCopy: false, done: done)
        let keys = [deletedKey(board)] + dataKeys(board)
        send(.undelete(nextTombstoneCall), strings: ["EVAL", Self.undeleteScript, String(keys.count)] + keys)
        send(.tombstoneSet, strings: ["SREM", tombstoneSetKey, board])
        pump()
    }

    /// Boards found deleted since the last call (a tombstone at attach, a notice, a recheck),
    /// each once, with the tombstone's time: the host closes them and drops its copy.
    public func takeDeletedBoards() -> [(board: String, deletedAt: String)] {
        defer { deletedBoards = [] }
        return deletedBoards
    }

    // MARK: Replies

    func tombstonesCounted(_ call: Int, _ value: RESPValue) {
        guard let entry = tombstoneCalls[call], let record = entry.record else { return }
        guard case .integer(let count) = value else { return finishCall(call, .failed("Redis answered SCARD with \(value)")) }
        if count >= options.maxTombstones { return finishCall(call, .full(count: Int(count))) }
        let keys = [deletedKey(entry.board)] + dataKeys(entry.board)
        var payload = ByteWriter()
        payload.write(lengthPrefixed: Array(options.node.utf8))
        payload.write(bytes: Self.deletionMarker + Array(record.utf8))
        let parts: [[UInt8]] = ([Array("EVAL".utf8), Array(Self.deleteScript.utf8), Array(String(keys.count).utf8)] + keys.map { Array($0.utf8) })
            + [Array(record.utf8), Array(presenceChannel(entry.board).utf8), payload.bytes, Array((entry.hasCopy ? "1" : "0").utf8)]
        send(.delete(call), parts)
    }

    func deleteAnswered(_ call: Int, _ value: RESPValue) {
        guard let entry = tombstoneCalls[call] else { return }
        switch value {
        case .integer(1):
            send(.tombstoneSet, strings: ["SADD", tombstoneSetKey, entry.board])
            options.log("board '\(entry.board)': deleted for every server (tombstone \(deletedKey(entry.board)))")
            finishCall(call, .done(deletedAt: entry.deletedAt))
        case .integer(0): finishCall(call, .noSuchBoard)
        default:
            finishCall(call, .unchanged(deletedAt: value.text.flatMap(Self.deletedAt) ?? "an unknown time"))
        }
    }

    func undeleteAnswered(_ call: Int, _ value: RESPValue) {
        guard let entry = tombstoneCalls[call] else { return }
        if case .integer(1) = value {
            options.log("board '\(entry.board)': tombstone removed for every server")
            finishCall(call, .done(deletedAt: ""))
        } else {
            finishCall(call, .unchanged(deletedAt: nil))
        }
    }

    /// A call's command was refused or lost with its link.
    func tombstoneCallFailed(_ call: Int, _ why: String) {
        finishCall(call, .failed(why))
    }

    private func finishCall(_ call: Int, _ answer: TombstoneAnswer) {
        guard let entry = tombstoneCalls.removeValue(forKey: call) else { return }
        entry.done(answer)
    }

    /// A board's tombstone (`GET`): none lets its catch-up start; one closes it.
    func tombstoneRead(_ board: String, _ value: RESPValue) {
        guard let state = boards[board] else { return }
        if let record = value.text {
            markDeleted(board, at: Self.deletedAt(record) ?? "an unknown time")
        } else if case .unchecked = state.tombstone {
            boards[board]?.tombstone = .clear
        }
    }

    /// `board` was deleted (by another server): nothing more is read, appended or greeted for
    /// it here; the host is told (`takeDeletedBoards`).
    func markDeleted(_ board: String, at: String) {
        guard let state = boards[board], state.tombstone != .deleted else { return }
        boards[board]?.tombstone = .deleted
        state.hub.holdsGreetings = true
        options.log("board '\(board)': deleted by its operator at \(at) (a tombstone in \(options.redisName)); closing it here")
        deletedBoards.append((board, at))
    }

    /// The board's tombstone is asked for again (its presence subscription was confirmed: a
    /// notice published while it was not would have been missed).
    func recheckTombstone(_ board: String) {
        guard options.checksTombstones, boards[board]?.tombstone == .clear, up.contains(.commands) else { return }
        send(.tombstone(board), strings: ["GET", deletedKey(board)])
    }

    /// A deletion notice on a board's presence channel (after the node id): the tombstone's JSON.
    func deletionNotice(_ board: String, _ rest: ArraySlice<UInt8>) -> Bool {
        guard rest.starts(with: Self.deletionMarker) else { return false }
        guard options.checksTombstones else { return true }
        let record = String(decoding: rest.dropFirst(Self.deletionMarker.count), as: UTF8.self)
        markDeleted(board, at: Self.deletedAt(record) ?? "an unknown time")
        return true
    }

    static func deletedAt(_ record: String) -> String? {
        guard record.utf8.count <= 4096, let object = try? JSONSerialization.jsonObject(with: Data(record.utf8)) as? [String: Any],
              let at = object["deletedAt"] as? String else { return nil }
        return String(at.prefix(64))
    }

    // MARK: Scripts

    /// KEYS: tombstone, then the board's data keys. ARGV: tombstone, presence channel, notice,
    /// "1" when the deleting server holds a copy. Returns the tombstone there already, 0 when
    /// there is no such board, or 1 (written, data removed, notice published).
    static let deleteScript = """
        local old = redis.call('GET', KEYS[1])
        if old then return old end
        if ARGV[4] ~= '1' then
          local any = 0
          for i = 2, #KEYS do any = any + redis.call('EXISTS', KEYS[i]) end
          if any == 0 then return 0 end
        end
        redis.call('SET', KEYS[1], ARGV[1])
        for i = 2, #KEYS do redis.call('DEL', KEYS[i]) end
        redis.call('PUBLISH', ARGV[2], ARGV[3])
        return 1
        """

    /// KEYS: tombstone, then the board's data keys (what a lagging server appended under the
    /// tombstone goes too: the name starts empty). Returns 1, or 0 when there was no tombstone.
    static let undeleteScript = """
        if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
        for i = 1, #KEYS do redis.call('DEL', KEYS[i]) end
        return 1
        """
}
