import BoardCRDT
import BoardSync

/// Appends: what a hub's sessions sent goes to the board's stream, and the hub's ticket
/// completes (its sessions are acknowledged) only once Redis took every append of it and of
/// the tickets before it.
extension RedisBoardLog {
    struct Append {
        let board: String
        let bytes: [UInt8]
        /// The replica ids of its operations, hex (for the `replicas` set).
        var authors: [String] = []
        var sent = false
        var notBefore = 0.0
    }

    struct Ticket {
        /// The hub's ticket (`SharedLogRequest.append`).
        let id: UInt64
        let board: String
        var waitingFor: Set<UInt64>
    }

    /// A hub's `.append`: queues the batches' appends; the ticket completes once Redis took
    /// them (and every ticket handed over before it).
    func replicate(_ board: String, _ batches: [OperationBatch], ticket: UInt64) {
        var waitingFor: Set<UInt64> = []
        for batch in batches where !batch.operations.isEmpty || batch.covers != nil {
            nextAppend += 1
            appends[nextAppend] = Append(board: board, bytes: batch.encoded(), authors: options.sharesAuthorship ? Self.authors(of: batch) : [])
            waitingFor.insert(nextAppend)
        }
        tickets.append(Ticket(id: ticket, board: board, waitingFor: acknowledgesBeforeRedis ? [] : waitingFor))
        // A ticket with nothing to append completes after the ones before it, at the log's
        // next deadline (now).
        pump()
    }

    /// Sends every append not sent yet and due, in order (`pump`).
    func sendAppends() {
        for seq in appends.keys.sorted() {
            guard let append = appends[seq], !append.sent, append.notBefore <= now else { continue }
            if options.sharesAuthorship {
                // The entry and its authors in the board's `replicas` set, atomically.
                send(.append(seq), ["EVAL", RedisBoardLog.appendScript, "2", streamKey(append.board),
                                    replicasKey(append.board), options.node].map { Array($0.utf8) }
                                   + [append.bytes] + append.authors.map { Array($0.utf8) })
            } else {
                send(.append(seq), [Array("XADD".utf8), Array(streamKey(append.board).utf8), Array("*".utf8),
                                    Array("n".utf8), Array(options.node.utf8), Array("o".utf8), append.bytes])
            }
            appends[seq]?.sent = true
        }
    }

    /// Redis took an append.
    func appended(_ seq: UInt64) {
        if appends.removeValue(forKey: seq) != nil { entriesAppended += 1 }
    }

    /// Whether the oldest ticket can complete (its appends are confirmed).
    var ticketReady: Bool {
        tickets.first.map { $0.waitingFor.allSatisfy { appends[$0] == nil } } ?? false
    }

    /// Completes every ticket whose appends, and every earlier ticket's, are confirmed.
    func completeTickets() {
        var completed = 0
        for ticket in tickets {
            guard ticket.waitingFor.allSatisfy({ appends[$0] == nil }) else { break }
            completed += 1
            if let state = boards[ticket.board] {
                state.hub.replicated(ticket.id)
            }
        }
        if completed > 0 { tickets.removeFirst(completed) }
    }

    /// The replica ids a batch carries operations of (and its `covers` reaches), hex, sorted.
    static func authors(of batch: OperationBatch) -> [String] {
        var ids = Set(batch.operations.map(\.id.replica))
        if let covers = batch.covers { for (replica, seq) in covers.entries where seq > 0 { ids.insert(replica) } }
        return ids.sorted { $0.rawValue < $1.rawValue }.map(hex)
    }

    /// Appends a batch to the board's stream and records its authors in the board's `replicas`
    /// set, atomically. KEYS: stream, replicas. ARGV: node, batch, then the authors (hex).
    /// Returns the entry id.
    public static let appendScript = """
        for i = 3, #ARGV do redis.call('SADD', KEYS[2], ARGV[i]) end
        return redis.call('XADD', KEYS[1], '*', 'n', ARGV[1], 'o', ARGV[2])
        """
}
