/// Checkpoints: a server that has seen `checkpointEvery` entries of a tailed board since the
/// last checkpoint takes the board's compaction lease (with a fencing epoch), writes the
/// board's state as the new checkpoint and trims the stream `retentionMilliseconds` before it.
/// A stale epoch is refused (`FENCED`), so a compactor that stalled past its lease writes
/// nothing.
extension RedisBoardLog {
    /// Takes the lease when a checkpoint is due (`pump`, for a tailed board).
    func startCompactionIfDue(_ name: String, _ state: BoardState) {
        guard state.checkpoint.compaction == .idle, options.checkpointEvery > 0, state.checkpoint.unverifiedReads == 0,
              state.checkpoint.entriesSince >= options.checkpointEvery, state.checkpoint.leaseNotBefore <= now else { return }
        send(.acquireLease(name), strings: ["EVAL", RedisBoardLog.acquireScript, "2", leaseKey(name), epochKey(name),
                                            options.node, String(options.leaseMilliseconds)])
        boards[name]?.checkpoint.compaction = .acquiringLease
    }

    /// The lease's answer: an epoch (write the checkpoint) or nil (another server is
    /// compacting: try again after a lease's time).
    func leaseAnswered(_ board: String, _ value: RESPValue) {
        guard boards[board] != nil else { return }
        guard case .integer(let epoch) = value else {
            let retryAt = now + Double(options.leaseMilliseconds) / 1000
            boards.modify(board) { state in
                state.checkpoint.compaction = .idle
                state.checkpoint.leaseNotBefore = retryAt
            }
            return
        }
        writeCheckpoint(board, epoch: epoch)
    }

    /// With the lease (epoch `epoch`): the board's compacted state, covering every entry up to
    /// the last one read, goes to Redis through the fenced commit.
    func writeCheckpoint(_ board: String, epoch: Int64) {
        guard let state = boards[board], up.contains(.commands) else {
            boards[board]?.checkpoint.compaction = .idle
            return
        }
        let id = state.lastID
        let (ms, _) = Self.streamID(id)
        let minID = "\(ms > UInt64(options.retentionMilliseconds) ? ms - UInt64(options.retentionMilliseconds) : 0)-0"
        let full = state.hub.store.replica.operations(since: .empty).encoded()
        let parts: [[UInt8]] = ["EVAL", RedisBoardLog.commitScript, "4", epochKey(board), checkpointKey(board), streamKey(board),
                                leaseKey(board), String(epoch), id].map { Array($0.utf8) }
            + [full] + [minID, options.node].map { Array($0.utf8) }
        send(.commitCheckpoint(board, id), parts)
        boards[board]?.checkpoint.compaction = .committing(upTo: id)
    }

    /// The commit's answer: 1 (written), 0 (an equal or newer checkpoint is there).
    func checkpointCommitted(_ board: String, upTo id: String, _ value: RESPValue) {
        guard boards[board] != nil else { return }
        boards[board]?.checkpoint.compaction = .idle
        if case .integer(0) = value { boards[board]?.checkpoint.entriesSince = 0 }  // a newer one is there
        if case .integer(1) = value {
            boards.modify(board) { state in
                state.checkpoint.entriesSince = 0
                state.checkpoint.id = id
            }
            options.log("board '\(board)': checkpoint at \(id) written; entries older than \(options.retentionMilliseconds / 1000) s before it trimmed")
        }
    }

    /// Takes the board's compaction lease if nobody holds it, and only then a new fencing epoch.
    /// KEYS: lease, epoch. ARGV: node, lease ms. Returns the epoch, or nil when held.
    public static let acquireScript = """
        if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
          return redis.call('INCR', KEYS[2])
        end
        return false
        """

    /// Writes a checkpoint only for the current epoch and never behind the one there, then
    /// trims the stream before `minid` and releases the lease. KEYS: epoch, checkpoint, stream,
    /// lease. ARGV: epoch, stream id covered, state, minid, node. Returns 1 (written), 0 (an
    /// equal or newer checkpoint is there), or an error `FENCED` for a stale epoch.
    public static let commitScript = """
        if redis.call('GET', KEYS[1]) ~= ARGV[1] then
          return redis.error_reply('FENCED the compaction lease moved on (epoch ' .. ARGV[1] .. ' is stale)')
        end
        local function parse(id)
          local ms, seq = string.match(id, '^(%d+)-(%d+)$')
          return tonumber(ms), tonumber(seq)
        end
        local current = redis.call('HGET', KEYS[2], 'id')
        if current then
          local cms, cseq = parse(current)
          local nms, nseq = parse(ARGV[2])
          if cms > nms or (cms == nms and cseq >= nseq) then return 0 end
        end
        redis.call('HSET', KEYS[2], 'id', ARGV[2], 'state', ARGV[3], 'epoch', ARGV[1], 'minid', ARGV[4])
        redis.call('XTRIM', KEYS[3], 'MINID', ARGV[4])
        if redis.call('GET', KEYS[4]) == ARGV[5] then redis.call('DEL', KEYS[4]) end
        return 1
        """
}
