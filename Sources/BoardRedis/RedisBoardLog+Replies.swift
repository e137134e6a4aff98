/// Replies and lost commands: each reply goes to the concern that asked (an error reply is
/// retried later); each command lost with its link is marked to be sent again.
extension RedisBoardLog {
    func handle(_ request: Request, _ value: RESPValue) {
        if case .error(let message) = value {
            errorReplies += 1
            // Trouble of Redis itself (no password, loading...) is logged once, when it starts.
            retryLater(request, because: message, quietly: Self.troubleClass(message, for: request) != nil)
            return
        }
        switch request {
        case .append(let seq): appended(seq)
        case .range(let board): rangeRead(board, value)
        case .loadCheckpoint(let board): checkpointLoaded(board, value)
        case .recheck(let board): rechecked(board, value)
        case .acquireLease(let board): leaseAnswered(board, value)
        case .commitCheckpoint(let board, let id): checkpointCommitted(board, upTo: id, value)
        case .verify(let board, let start): verified(board, from: start, value)
        case .setAsset(let hash): assetStored(hash)
        case .setChunk: break
        case .getChunks(let hash, let size): chunksRead(hash, size: size, value)
        case .getAsset(let hash): assetRead(hash, value)
        case .author(let board, let request): authorshipAnswered(board, request, value)
        case .markReplicas(let board): replicaMarks[board] = nil
        case .clientID: if case .integer(let id) = value { tailState.clientIDAnswered(id) }
        case .unblock, .publish, .auth: break
        case .read(let starts): tailRead(starts, value)
        case .tombstone(let board): tombstoneRead(board, value)
        case .countTombstones(let call): tombstonesCounted(call, value)
        case .delete(let call): deleteAnswered(call, value)
        case .undelete(let call): undeleteAnswered(call, value)
        case .tombstoneSet: break
        }
    }

    /// A command lost with its link (it may or may not have taken effect): sent again once the
    /// link is back.
    func forget(_ request: Request) {
        switch request {
        case .append(let seq): appends[seq]?.sent = false
        case .range(let board), .loadCheckpoint(let board), .recheck(let board): boards[board]?.phase.askAgain()
        case .acquireLease(let board), .commitCheckpoint(let board, _): boards[board]?.checkpoint.compaction = .idle
        case .verify(let board, _):
            boards[board]?.checkpoint.unverifiedReads -= 1
            reload(board, because: "a tail read could not be checked against the trim point")
        case .setAsset(let hash), .setChunk(let hash): assetSets[hash]?.sent = false
        case .getAsset(let hash), .getChunks(let hash, _): assetGets[hash]?.sent = false
        case .author(let board, let request): authorRequests[AuthorKey(board: board, request: request)]?.sent = false
        case .markReplicas(let board): replicaMarks[board]?.sent = false
        case .read: tailState.readEnded()
        case .unblock: tailState.unblockEnded()
        case .clientID, .publish, .auth, .tombstoneSet: break
        case .tombstone(let board):
            if case .unchecked? = boards[board]?.tombstone { boards[board]?.tombstone = .unchecked(asked: false) }
        case .countTombstones(let call), .delete(let call), .undelete(let call):
            tombstoneCallFailed(call, "the link to \(options.redisName) dropped before it answered (it may or may not have taken effect: look, then retry)")
        }
    }

    /// An error reply: the command is sent again after `retryDelay` (a lease: after a lease's
    /// time; a trim-point check: the board reloads instead).
    func retryLater(_ request: Request, because message: String, quietly: Bool = false) {
        let at = now + options.retryDelay
        let options = quietly ? Options.quiet(self.options) : self.options
        switch request {
        case .append(let seq):
            appends.modify(seq) { append in
                append.sent = false
                append.notBefore = at
            }
            options.log("Redis refused an append (retrying): \(message)")
        case .range(let board), .loadCheckpoint(let board), .recheck(let board):
            boards.modify(board) { state in
                state.phase.askAgain()
                state.notBefore = at
            }
            options.log("board '\(board)': Redis refused reading the stream (retrying): \(message)")
        case .acquireLease(let board), .commitCheckpoint(let board, _):
            let leaseAt = now + Double(options.leaseMilliseconds) / 1000
            boards.modify(board) { state in
                state.checkpoint.compaction = .idle
                state.checkpoint.leaseNotBefore = leaseAt
            }
            options.log("board '\(board)': checkpoint not written: \(message)")
        case .verify(let board, _):
            boards[board]?.checkpoint.unverifiedReads -= 1
            reload(board, because: "Redis refused checking the trim point: \(message)")
        case .setAsset(let hash), .setChunk(let hash):
            assetSets.modify(hash) { entry in
                entry.sent = false
                entry.notBefore = at
            }
        case .getAsset(let hash), .getChunks(let hash, _):
            assetGets.modify(hash) { entry in
                entry.sent = false
                entry.notBefore = at
            }
        case .read:
            tailState.readEnded(retryAt: at)
            // An unblocked read ends with an error reply when unblocked with ERROR; plain
            // UNBLOCK gives a null reply. Either way the next read starts.
            if !message.hasPrefix("UNBLOCKED") { options.log("Redis refused the tail read (retrying): \(message)") }
        case .author(let board, let request):
            authorRequests.modify(AuthorKey(board: board, request: request)) { entry in
                entry.sent = false
                entry.notBefore = at
            }
            options.log("board '\(board)': Redis refused to \(request) (retrying): \(message)")
        case .markReplicas(let board):
            replicaMarks.modify(board) { entry in
                entry.sent = false
                entry.notBefore = at
            }
        case .clientID:
            options.log("Redis refused CLIENT ID: \(message)")
        case .unblock:
            tailState.unblockEnded()
        case .publish, .tombstoneSet:
            break
        case .tombstone(let board):
            boards.modify(board) { state in
                if case .unchecked = state.tombstone { state.tombstone = .unchecked(asked: false) }
                state.notBefore = at
            }
            options.log("board '\(board)': Redis refused reading its tombstone (retrying): \(message)")
        case .countTombstones(let call), .delete(let call), .undelete(let call):
            tombstoneCallFailed(call, "\(self.options.redisName) refused it: \(message)")
        case .auth:
            options.log("Redis refused the password (check --redis-password-file): \(message)")
        }
    }
}
