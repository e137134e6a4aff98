import BoardCRDT
import BoardModel
import BoardRedis
import BoardSync
import Foundation
import Testing

/// The pipelined client and the board log, sans-IO: commands are read off the links as RESP and
/// answered by the test (a scripted Redis), so every ordering and failure is exact.
@Suite struct RedisBoardLogTests {
    @Test func repliesLineUpWithCommandsInOrderAndALostLinkReturnsTheUnanswered() throws {
        var pipeline = RedisPipeline()
        let first = pipeline.send("PING")
        let second = pipeline.send("GET", "k")
        let third = pipeline.send("XADD", "s", "*", "o", "x")
        #expect(pipeline.takeOutput() == RESPValue.command("PING") + RESPValue.command("GET", "k") + RESPValue.command("XADD", "s", "*", "o", "x"))
        // Replies split anywhere: each goes to its own command.
        let bytes = RESPValue.simpleString("PONG").encoded() + RESPValue.bulkString(nil).encoded()
        let replies = try pipeline.receive(Array(bytes.prefix(5))) + pipeline.receive(Array(bytes.dropFirst(5)))
        #expect(replies.map(\.0) == [first, second])
        #expect(replies.map(\.1) == [.simpleString("PONG"), .bulkString(nil)])
        #expect(pipeline.outstandingCount == 1 && pipeline.oldest == third)
        #expect(pipeline.reset() == [third], "the XADD may or may not have happened")
        #expect(pipeline.outstandingCount == 0)
        // A reply nobody asked for means the stream is out of step: refused.
        #expect(throws: RESPError.self) { try pipeline.receive(RESPValue.integer(1).encoded()) }
    }

    /// A scripted Redis for one `RedisBoardLog`: parses the commands each link sent.
    struct Script {
        let log: RedisBoardLog
        /// What the attached hubs asked of the log since the last look (their `.sharedLog`
        /// events), handed to it as a host does; their other events are dropped.
        func handOn(now: Double = 0) {
            for board in log.attachedBoards {
                guard let hub = log.hub(of: board) else { continue }
                while let event = hub.pollEvent() {
                    if case .sharedLog(let request) = event { log.handle(request, on: board, now: now) }
                }
            }
        }

        func commands(_ link: RedisBoardLog.Link) throws -> [[String]] {
            handOn()
            var decoder = RESPDecoder()
            decoder.append(log.takeOutput(link))
            var found: [[String]] = []
            while let value = try decoder.next() {
                guard case .array(let parts?) = value else { continue }
                found.append(parts.map { part -> String in
                    guard case .bulkString(let bytes?) = part else { return "?" }
                    return String(decoding: bytes, as: UTF8.self)
                })
            }
            return found
        }
        func reply(_ link: RedisBoardLog.Link, _ values: [RESPValue], now: Double) throws {
            try log.receive(link, values.flatMap { $0.encoded() }, now: now)
        }
    }

    /// Answers an attached board's catch-up as an empty Redis does: no checkpoint, an empty
    /// stream, still no checkpoint.
    static func catchUpEmpty(_ redis: Script) throws {
        for reply: RESPValue in [.array([]), .array([]), .bulkString(nil)] {
            _ = try redis.commands(.commands)
            try redis.reply(.commands, [reply], now: 0)
        }
    }

    /// A log with every link up (the tail's client id answered) attached to `hub`.
    static func linkedLog(_ hub: BoardHub, _ options: RedisBoardLog.Options = RedisBoardLog.Options(node: "n1")) throws -> (RedisBoardLog, Script) {
        let log = RedisBoardLog(options: options)
        let redis = Script(log: log)
        for link in RedisBoardLog.Link.allCases { log.linkUp(link, now: 0) }
        _ = try redis.commands(.tail)
        try redis.reply(.tail, [.integer(5)], now: 0)
        log.attach("team", hub: hub, now: 0)
        return (log, redis)
    }

    static func hubWithSession() throws -> (BoardHub, MemoryReplicaStore) {
        let store = MemoryReplicaStore(replica: Replica(id: ReplicaID(1)))
        let hub = BoardHub(board: "team", store: store)
        hub.groupCommit = true
        return (hub, store)
    }

    static func clientOps() throws -> [Op] {
        var client = Replica(id: ReplicaID(0xC))
        let edit = try client.beginStroke(color: RGBAColor(red: 1, green: 0, blue: 0), width: 2,
                                          points: [CodablePoint(x: 1, y: 1), CodablePoint(x: 4, y: 2)])
        return edit.operations
    }

    /// Opens a session on the hub (HELLO, greeted) and returns its id.
    static func connect(_ hub: BoardHub, _ id: SessionID) {
        hub.addAcceptor(id, SyncSession(role: .acceptor, localReplica: ReplicaID(1)), now: 0)
        hub.receive(id, Message.hello(Hello(board: "team", replica: ReplicaID(0xC), capabilities: Capabilities.supported, version: .empty)).frame().encoded(), now: 0)
    }

    static func acks(_ hub: BoardHub, _ id: SessionID) throws -> [VersionVector] {
        var decoder = FrameDecoder(maxFrame: 1 << 20)
        decoder.append(hub.output(for: id, now: 0))
        var acks: [VersionVector] = []
        while let frame = try decoder.next() {
            if case .ack(let vector) = try Message(frame: frame, limits: SessionLimits()) { acks.append(vector) }
        }
        return acks
    }

    @Test func operationsAreAcknowledgedOnlyOnceRedisHoldsThemAndResentAfterALostLink() throws {
        let (hub, store) = try Self.hubWithSession()
        let log = RedisBoardLog(options: RedisBoardLog.Options(node: "n1"))
        let redis = Script(log: log)
        log.linkUp(.commands, now: 0)
        log.attach("team", hub: hub, now: 0)
        // Catch-up: the checkpoint (none yet), the stream from the start, the checkpoint again;
        // greetings wait for it.
        #expect(try redis.commands(.commands) == [["HGETALL", "bs:{team}:ckpt"]])
        Self.connect(hub, 1)
        try redis.reply(.commands, [.array([])], now: 0)
        #expect(try redis.commands(.commands) == [["XRANGE", "bs:{team}:log", "-", "+", "COUNT", "512"]])
        try redis.reply(.commands, [.array([])], now: 0)
        #expect(try redis.commands(.commands) == [["HGET", "bs:{team}:ckpt", "id"]])
        #expect(hub.session(1)?.isOpen == false, "held until the board caught up")
        try redis.reply(.commands, [.bulkString(nil)], now: 0)
        #expect(log.isCaughtUp("team") && hub.session(1)?.isOpen == true)
        _ = try Self.acks(hub, 1)
        // The client's stroke: merged, handed to the log at the group commit, not acknowledged.
        let ops = try Self.clientOps()
        hub.receive(1, Message.operations(OperationBatch(operations: ops).encoded()).frame().encoded(), now: 1)
        _ = hub.handleTimers(now: 1)
        #expect(store.replica.versionVector[ReplicaID(0xC)] == 1)
        let appends = try redis.commands(.commands)
        #expect(appends.count == 1 && appends[0].prefix(5) == ["XADD", "bs:{team}:log", "*", "n", "n1"])
        #expect(try Self.acks(hub, 1).isEmpty, "no ACK before Redis answered")
        // The link drops before the reply: the append goes again on the new link (it may have
        // happened; a duplicate is harmless), and the ACK follows the reply.
        log.linkDown(.commands, now: 2, reason: "test")
        log.linkUp(.commands, now: 3)
        let again = try redis.commands(.commands)
        #expect(again.count == 1 && again[0] == appends[0], "the same append, sent again")
        try redis.reply(.commands, [.bulkString(Array("5-0".utf8))], now: 3)
        _ = log.handleTimers(now: 3)
        #expect(try Self.acks(hub, 1).last?[ReplicaID(0xC)] == 1)
        #expect(log.unconfirmedAppends == 0)
    }

    @Test func errorRepliesAreRetriedLaterAndSilentRedisDropsTheLink() throws {
        let (hub, _) = try Self.hubWithSession()
        var options = RedisBoardLog.Options(node: "n1")
        options.retryDelay = 0.5
        options.replyTimeout = 4
        let log = RedisBoardLog(options: options)
        let redis = Script(log: log)
        log.linkUp(.commands, now: 0)
        log.attach("team", hub: hub, now: 0)
        #expect(try redis.commands(.commands) == [["HGETALL", "bs:{team}:ckpt"]])
        // Redis is loading its append-only file: the read is tried again after the delay.
        try redis.reply(.commands, [.error("LOADING Redis is loading the dataset in memory")], now: 0)
        #expect(try redis.commands(.commands).isEmpty)
        #expect(log.nextDeadline == 0.5)
        #expect(log.handleTimers(now: 0.5).isEmpty)
        #expect(try redis.commands(.commands) == [["HGETALL", "bs:{team}:ckpt"]])
        // No answer at all within the reply timeout: the link is reported dead.
        #expect(log.nextDeadline == 4.5)
        #expect(log.handleTimers(now: 4.6) == [.commands])
    }

    @Test func entriesFromOtherServersAreMergedAndRelayedAndOwnEntriesSkipped() throws {
        let (hub, store) = try Self.hubWithSession()
        let log = RedisBoardLog(options: RedisBoardLog.Options(node: "n1"))
        let redis = Script(log: log)
        log.linkUp(.commands, now: 0)
        log.linkUp(.tail, now: 0)
        log.attach("team", hub: hub, now: 0)
        #expect(try redis.commands(.tail) == [["CLIENT", "ID"]])
        try redis.reply(.tail, [.integer(77)], now: 0)
        _ = try redis.commands(.commands)
        try redis.reply(.commands, [.array([])], now: 0)  // no checkpoint
        _ = try redis.commands(.commands)
        try redis.reply(.commands, [.array([])], now: 0)  // an empty stream
        _ = try redis.commands(.commands)
        try redis.reply(.commands, [.bulkString(nil)], now: 0)  // still no checkpoint
        // Caught up: the tail read starts where the stream ended.
        #expect(try redis.commands(.tail) == [["XREAD", "COUNT", "512", "BLOCK", "2000", "STREAMS", "bs:{team}:log", "0-0"]])
        Self.connect(hub, 1)
        _ = hub.output(for: 1, now: 0)
        let ops = try Self.clientOps()
        let bytes = OperationBatch(operations: ops).encoded()
        func entry(_ id: String, _ node: String, _ bytes: [UInt8]) -> RESPValue {
            .array([.bulkString(Array(id.utf8)), .array([.bulkString(Array("n".utf8)), .bulkString(Array(node.utf8)),
                                                         .bulkString(Array("o".utf8)), .bulkString(bytes)])])
        }
        // Our own entry is skipped (already merged here); another server's is merged and relayed;
        // a corrupt one is skipped with a log line, never a crash.
        let corrupt: [UInt8] = [2, 0, 9, 9]
        try redis.reply(.tail, [.array([.array([.bulkString(Array("bs:{team}:log".utf8)),
                                                .array([entry("1-0", "n1", bytes), entry("2-0", "n9", corrupt), entry("3-0", "n2", bytes)])])])], now: 1)
        #expect(store.replica.versionVector[ReplicaID(0xC)] == 1)
        #expect(log.entriesMerged == 1)
        var decoder = FrameDecoder(maxFrame: 1 << 20)
        decoder.append(hub.output(for: 1, now: 1))
        var relayed: [Op] = []
        var link = BatchLink()  // the session announced linked batches: live ones come linked
        while let frame = try decoder.next() {
            if case .operations(let payload) = try Message(frame: frame, limits: SessionLimits()) {
                relayed += try OperationBatch(decoding: payload, link: &link).operations
            }
        }
        #expect(relayed == ops, "relayed to the hub's session")
        // The next read continues after the last entry.
        #expect(try redis.commands(.tail).first?.last == "3-0")
        // Nothing read from the stream is handed back to it.
        _ = hub.handleTimers(now: 2)
        #expect(try redis.commands(.commands).allSatisfy { $0.first != "XADD" })
    }

    /// Catch-up from a checkpoint, then (after enough entries) this server writes the next one
    /// through the lease and the fenced commit.
    @Test func catchUpLoadsTheCheckpointAndEnoughEntriesWriteTheNextOne() throws {
        let (hub, store) = try Self.hubWithSession()
        var options = RedisBoardLog.Options(node: "n1")
        options.checkpointEvery = 2
        options.retentionMilliseconds = 1000
        let (log, redis) = try Self.linkedLog(hub, options)
        _ = try redis.commands(.commands)
        var writer = Replica(id: ReplicaID(0xAB))
        _ = try writer.setCanvasSize(CodableSize(width: 900, height: 700))
        let checkpoint = writer.operations(since: .empty)
        try redis.reply(.commands, [.array([.bulkString(Array("id".utf8)), .bulkString(Array("1700-3".utf8)),
                                            .bulkString(Array("state".utf8)), .bulkString(checkpoint.encoded())])], now: 0)
        #expect(store.replica.snapshot().canvasSize.width == 900, "the checkpoint merged")
        #expect(try redis.commands(.commands) == [["XRANGE", "bs:{team}:log", "(1700-3", "+", "COUNT", "512"]])
        try redis.reply(.commands, [.array([])], now: 0)
        _ = try redis.commands(.commands)
        try redis.reply(.commands, [.bulkString(Array("1700-3".utf8))], now: 0)  // unchanged
        #expect(log.isCaughtUp("team"))
        #expect(try redis.commands(.tail).first?.last == "1700-3", "the tail starts after the checkpoint")
        // Two entries from another server: enough for a checkpoint.
        _ = try writer.setCanvasSize(CodableSize(width: 1000, height: 700))
        let more = writer.operations(since: checkpoint.covers ?? .empty).encoded()
        func entry(_ id: String) -> RESPValue {
            .array([.bulkString(Array(id.utf8)), .array([.bulkString(Array("n".utf8)), .bulkString(Array("n2".utf8)),
                                                         .bulkString(Array("o".utf8)), .bulkString(more)])])
        }
        try redis.reply(.tail, [.array([.array([.bulkString(Array("bs:{team}:log".utf8)), .array([entry("5000-0"), entry("5000-1")])])])], now: 1)
        // First: was anything trimmed past where that read started? Not yet a checkpoint.
        #expect(try redis.commands(.commands) == [["HMGET", "bs:{team}:ckpt", "minid", "id"]])
        try redis.reply(.commands, [.array([.bulkString(Array("1000-0".utf8)), .bulkString(Array("1700-3".utf8))])], now: 1)
        let acquire = try redis.commands(.commands)
        #expect(acquire.count == 1 && acquire[0].first == "EVAL" && acquire[0][2...] == ["2", "bs:{team}:lease", "bs:{team}:epoch", "n1", "30000"])
        try redis.reply(.commands, [.integer(7)], now: 1)
        let commit = try redis.commands(.commands)
        #expect(commit.count == 1 && commit[0].first == "EVAL")
        #expect(Array(commit[0][2...6]) == ["4", "bs:{team}:epoch", "bs:{team}:ckpt", "bs:{team}:log", "bs:{team}:lease"])
        #expect(commit[0][7] == "7" && commit[0][8] == "5000-1", "fenced by epoch 7, covering what was read")
        #expect(commit[0][10] == "4000-0" && commit[0][11] == "n1", "trimmed a retention window behind")
        // A stale epoch is refused by the script: nothing changes here, and the next try waits.
        try redis.reply(.commands, [.error("FENCED the compaction lease moved on (epoch 7 is stale)")], now: 1)
        #expect(try redis.commands(.commands).allSatisfy { $0.first != "EVAL" })
    }

    /// A server that stalled while the stream was trimmed past what it had read finds out from
    /// its next tail read, reloads from the checkpoint, and writes no checkpoint meanwhile.
    @Test func aReadAfterATrimPastItsStartReloadsFromTheCheckpoint() throws {
        let (hub, _) = try Self.hubWithSession()
        var options = RedisBoardLog.Options(node: "n1")
        options.checkpointEvery = 1
        let (log, redis) = try Self.linkedLog(hub, options)
        try Self.catchUpEmpty(redis)
        #expect(try redis.commands(.tail).first?.last == "0-0")
        var writer = Replica(id: ReplicaID(0xAB))
        _ = try writer.setCanvasSize(CodableSize(width: 1000, height: 700))
        let entry = RESPValue.array([.bulkString(Array("9000-0".utf8)),
                                     .array([.bulkString(Array("n".utf8)), .bulkString(Array("n2".utf8)),
                                             .bulkString(Array("o".utf8)), .bulkString(writer.operations(since: .empty).encoded())])])
        try redis.reply(.tail, [.array([.array([.bulkString(Array("bs:{team}:log".utf8)), .array([entry])])])], now: 1)
        #expect(try redis.commands(.commands) == [["HMGET", "bs:{team}:ckpt", "minid", "id"]], "no checkpoint before the check")
        // Trimmed up to 8000-0 while this server's read started at 0-0: reload.
        try redis.reply(.commands, [.array([.bulkString(Array("8000-0".utf8)), .bulkString(Array("8500-0".utf8))])], now: 1)
        #expect(!log.isCaughtUp("team"))
        #expect(try redis.commands(.commands) == [["HGETALL", "bs:{team}:ckpt"]])
    }

    /// A compaction lease another server holds delays this server's next lease request, not a
    /// reload: a trimmed tail read right after it reads the checkpoint at once (they shared one
    /// retry time, and the board's clients waited a lease's 30 s for their greeting).
    @Test func aLeaseHeldElsewhereDoesNotDelayAReload() throws {
        let (hub, _) = try Self.hubWithSession()
        var options = RedisBoardLog.Options(node: "n1")
        options.checkpointEvery = 1
        let (log, redis) = try Self.linkedLog(hub, options)
        try Self.catchUpEmpty(redis)
        var writer = Replica(id: ReplicaID(0xAB))
        func entry(_ id: String, width: Double) throws -> RESPValue {
            let before = writer.versionVector
            _ = try writer.setCanvasSize(CodableSize(width: width, height: 700))
            return .array([.bulkString(Array(id.utf8)), .array([.bulkString(Array("n".utf8)), .bulkString(Array("n2".utf8)),
                                                               .bulkString(Array("o".utf8)), .bulkString(writer.operations(since: before).encoded())])])
        }
        _ = try redis.commands(.tail)
        try redis.reply(.tail, [.array([.array([.bulkString(Array("bs:{team}:log".utf8)), .array([try entry("9000-0", width: 1000)])])])], now: 1)
        #expect(try redis.commands(.commands) == [["HMGET", "bs:{team}:ckpt", "minid", "id"]])
        try redis.reply(.commands, [.array([.bulkString(nil), .bulkString(nil)])], now: 1)  // nothing trimmed
        #expect(try redis.commands(.commands).first?.first == "EVAL", "a checkpoint is due: the lease is asked for")
        try redis.reply(.commands, [.bulkString(nil)], now: 1)  // another server holds it
        // The next tail read finds the stream trimmed past where it started: reload now.
        _ = try redis.commands(.tail)
        try redis.reply(.tail, [.array([.array([.bulkString(Array("bs:{team}:log".utf8)), .array([try entry("9500-0", width: 1100)])])])], now: 2)
        #expect(try redis.commands(.commands) == [["HMGET", "bs:{team}:ckpt", "minid", "id"]])
        try redis.reply(.commands, [.array([.bulkString(Array("9400-0".utf8)), .bulkString(Array("9400-1".utf8))])], now: 2)
        #expect(!log.isCaughtUp("team"))
        #expect(try redis.commands(.commands) == [["HGETALL", "bs:{team}:ckpt"]], "the checkpoint is read at once, not a lease's time later")
    }

    /// A writer session (access control) attached the way a server attaches it: HELLO under
    /// `replica` with a token of `subject`.
    static func attachWriter(_ hub: BoardHub, _ id: SessionID, replica: UInt64, subject: String) throws {
        var session = SyncSession(role: .acceptor, localReplica: ReplicaID(1))
        session.listen(now: 0)
        let hello = Hello(board: "team", replica: ReplicaID(replica), capabilities: Capabilities.supported, version: .empty)
        let events = session.receive(Message.hello(hello).frame().encoded(), now: 0)
        try #require(events.contains { if case .hello = $0 { return true } else { return false } })
        hub.attach(id, session, hello: hello, subject: subject)
    }

    /// Authorship shared through Redis: a writer's first operation waits, unmerged and
    /// unrelayed, until the board's authors script has bound its replica id; the append that
    /// follows records its author in the board's replica set; a HELLO under the bound id with
    /// another subject is refused once the owner is known, and an id the log has operations of
    /// cannot be bound.
    @Test func aWritersFirstOperationWaitsUntilRedisBindsItsReplica() throws {
        let (hub, store) = try Self.hubWithSession()
        var options = RedisBoardLog.Options(node: "n1")
        options.sharesAuthorship = true
        let (log, redis) = try Self.linkedLog(hub, options)
        try Self.catchUpEmpty(redis)
        try Self.attachWriter(hub, 1, replica: 0xC, subject: "alice")
        Self.connect(hub, 2)  // a session without a token (sees what is relayed)
        _ = hub.output(for: 2, now: 0)
        let script = RedisBoardLog.authorScript
        #expect(try redis.commands(.commands) == [["EVAL", script, "3", "bs:{team}:authors", "bs:{team}:authored", "bs:{team}:replicas",
                                                     "c", "alice", "0", "1024", "65536"]], "the HELLO looks its replica up")
        try redis.reply(.commands, [.array([.bulkString(Array("unbound".utf8))])], now: 0)
        _ = try Self.acks(hub, 1)
        hub.receive(1, Message.operations(OperationBatch(operations: try Self.clientOps()).encoded()).frame().encoded(), now: 1)
        _ = hub.handleTimers(now: 1)
        #expect(try redis.commands(.commands) == [["EVAL", script, "3", "bs:{team}:authors", "bs:{team}:authored", "bs:{team}:replicas",
                                                     "c", "alice", "1", "1024", "65536"]], "its first operation asks to bind it")
        #expect(store.replica.versionVector[ReplicaID(0xC)] == 0, "not merged before Redis decided")
        #expect(hub.output(for: 2, now: 1).isEmpty, "not relayed either")
        try redis.reply(.commands, [.array([.bulkString(Array("owner".utf8)), .bulkString(Array("alice".utf8))])], now: 1)
        #expect(store.replica.versionVector[ReplicaID(0xC)] == 1)
        #expect(!hub.output(for: 2, now: 1).isEmpty, "relayed once bound")
        _ = hub.handleTimers(now: 1)
        let append = try redis.commands(.commands)
        #expect(append.count == 1 && Array(append[0].prefix(6)) == ["EVAL", RedisBoardLog.appendScript, "2", "bs:{team}:log", "bs:{team}:replicas", "n1"]
                && append[0].last == "c", "the entry and its author, atomically: \(append.map { $0.prefix(6) })")
        try redis.reply(.commands, [.bulkString(Array("7-0".utf8))], now: 1)
        _ = log.handleTimers(now: 1)
        #expect(try Self.acks(hub, 1).last?[ReplicaID(0xC)] == 1)
        // Mallory says HELLO as alice's replica: refused once Redis names the owner.
        try Self.attachWriter(hub, 3, replica: 0xC, subject: "mallory")
        #expect(hub.session(3)?.closeReason?.code == .notAuthor, "\(String(describing: hub.session(3)?.closeReason))")
        #expect(try redis.commands(.commands).isEmpty, "alice's binding is known here: no need to ask")
        // Eve says HELLO as a replica the log holds operations of (another server relayed them):
        // her first operation asks only who owns it, and Redis says nobody.
        var other = Replica(id: ReplicaID(0xE))
        _ = try other.setCanvasSize(CodableSize(width: 3, height: 3))
        try hub.mergeReplicated(other.fullState(), now: 2)
        try Self.attachWriter(hub, 4, replica: 0xE, subject: "eve")
        _ = try redis.commands(.commands)
        try redis.reply(.commands, [.array([.bulkString(Array("unbound".utf8))])], now: 2)
        var forged = Replica(id: ReplicaID(0xE))
        let same = try forged.setCanvasSize(CodableSize(width: 3, height: 3))  // the relayed operation itself
        let edit = try forged.setCanvasSize(CodableSize(width: 66, height: 66))
        hub.receive(4, Message.operations(OperationBatch(operations: same.operations + edit.operations).encoded()).frame().encoded(), now: 3)
        let asked = try redis.commands(.commands)
        #expect(asked.count == 1 && asked[0][6...8] == ["e", "eve", "0"], "\(asked)")
        try redis.reply(.commands, [.array([.bulkString(Array("unbound".utf8))])], now: 3)
        #expect(hub.session(4)?.closeReason?.code == .notAuthor)
        #expect(store.replica.snapshot().canvasSize == CodableSize(width: 3, height: 3))
    }

    /// Presence crosses servers through pub/sub: a session's presence is published; another
    /// server's is taken and relayed; our own echo and undecodable payloads are dropped.
    @Test func presenceIsPublishedAndOtherServersPresenceRelayed() throws {
        let (hub, _) = try Self.hubWithSession()
        let (log, redis) = try Self.linkedLog(hub)
        #expect(try redis.commands(.presence) == [["SUBSCRIBE", "bs:{team}:presence"]])
        try Self.catchUpEmpty(redis)
        Self.connect(hub, 1)
        _ = hub.output(for: 1, now: 0)
        // The session's presence goes to Redis.
        let ana = Presence(replica: ReplicaID(0xC), name: "Ana", color: .black, ttl: 10, clock: 3)
        hub.receive(1, Message.presence(ana).frame().encoded(), now: 1)
        let published = try redis.commands(.commands).filter { $0.first == "PUBLISH" }
        #expect(published.count == 1 && published[0][1] == "bs:{team}:presence")
        // Another server's presence arrives: taken, relayed to the session.
        func message(_ node: String, _ payload: [UInt8]) -> RESPValue {
            var writer = ByteWriter()
            writer.write(lengthPrefixed: Array(node.utf8))
            writer.write(bytes: payload)
            return .array([.bulkString(Array("message".utf8)), .bulkString(Array("bs:{team}:presence".utf8)), .bulkString(writer.bytes)])
        }
        let bo = Presence(replica: ReplicaID(0xB0), name: "Bo", color: .black, ttl: 10, clock: 7)
        let echo = Presence(replica: ReplicaID(0xEC), name: "Echo", color: .black, ttl: 10, clock: 1)
        let bytes = [message("n2", Message.presence(bo).frame().encoded()), message("n1", Message.presence(echo).frame().encoded()),
                     message("n3", [1, 2, 3])].flatMap { $0.encoded() }
        try log.receive(.presence, bytes, now: 2)
        #expect(Set(hub.presences.keys) == [ReplicaID(0xC), ReplicaID(0xB0)], "Bo taken; our own echo and garbage dropped")
        #expect(hub.presences[ReplicaID(0xB0)]?.from == BoardHub.sharedLogSource)
        var decoder = FrameDecoder(maxFrame: 1 << 20)
        decoder.append(hub.output(for: 1, now: 2))
        var relayed: [Presence] = []
        while let frame = try decoder.next() {
            if case .presence(let presence) = try Message(frame: frame, limits: SessionLimits()) { relayed.append(presence) }
        }
        #expect(relayed.map(\.name) == ["Bo"])
        // Not published back (it came from the log).
        #expect(try redis.commands(.commands).allSatisfy { $0.first != "PUBLISH" })
    }

    /// A peer back from offline sends a complete delta whose compacted history leaves gaps; the
    /// entry appended for it must close them on the other servers too (found by the demo on
    /// three servers: the offline edits never reached the others).
    @Test func aReconnectingPeersCompleteDeltaReachesOtherServersWhole() throws {
        let (hub, store) = try Self.hubWithSession()
        let log = RedisBoardLog(options: RedisBoardLog.Options(node: "n1"))
        let redis = Script(log: log)
        log.linkUp(.commands, now: 0)
        log.attach("team", hub: hub, now: 0)
        try Self.catchUpEmpty(redis)
        // The peer's first edits reached this server and, through the log, the other one.
        var peer = Replica(id: ReplicaID(0xC))
        for width in 900..<905 { _ = try peer.setCanvasSize(CodableSize(width: Double(width), height: 700)) }
        let early = peer.operations(since: .empty)
        var other = Replica(id: ReplicaID(0x2))
        _ = try store.merge(early)
        try other.apply(early)
        // Offline, it overwrote the canvas five more times: its delta holds one operation and
        // covers all ten.
        for width in 1900..<1905 { _ = try peer.setCanvasSize(CodableSize(width: Double(width), height: 700)) }
        Self.connect(hub, 1)
        _ = hub.output(for: 1, now: 0)
        let delta = peer.operations(since: store.replica.versionVector)
        #expect(delta.operations.count == 1 && delta.covers?[ReplicaID(0xC)] == 10)
        hub.receive(1, Message.operations(delta.encoded()).frame().encoded(), now: 1)
        _ = hub.handleTimers(now: 1)
        redis.handOn(now: 1)
        // The entry, as another server reads it from the stream.
        var decoder = RESPDecoder()
        decoder.append(log.takeOutput(.commands))
        var entries: [[UInt8]] = []
        while let value = try decoder.next() {
            if case .array(let parts?) = value, parts.first?.text == "XADD", case .bulkString(let bytes?) = parts.last {
                entries.append(bytes)
            }
        }
        #expect(entries.count == 1)
        for bytes in entries { try other.apply(try OperationBatch(decoding: bytes)) }
        #expect(other.versionVector == peer.versionVector, "the gaps the peer compacted away are closed on the other server")
        #expect(other.snapshot().canvasSize.width == 1904)
    }

    /// An image over the chunk size goes to Redis as chunks, then a marker naming them; a
    /// server that lacks it reads the marker, then every chunk, and checks the hash.
    @Test func largeImagesTravelInChunks() throws {
        let (hub, store) = try Self.hubWithSession()
        var options = RedisBoardLog.Options(node: "n1")
        options.assetChunkBytes = 1000
        let (log, redis) = try Self.linkedLog(hub, options)
        try Self.catchUpEmpty(redis)
        let image = Data(PNGEncoder.solid(width: 30, height: 30, red: 1, green: 2, blue: 3))
        #expect(image.count > 2000)
        let hash = AssetHash.of(image)
        log.handle(.storeAsset(hash, image), on: "team", now: 0)
        var decoder = RESPDecoder()
        decoder.append(log.takeOutput(.commands))
        var sets: [(String, [UInt8])] = []
        while let value = try decoder.next() {
            if case .array(let parts?) = value, parts.first?.text == "SET", let key = parts[1].text, case .bulkString(let bytes?) = parts[2] {
                sets.append((key, bytes))
            }
        }
        let chunks = (image.count + 999) / 1000
        #expect(sets.count == chunks + 1)
        #expect(sets.dropLast().map(\.0) == (0..<chunks).map { "bs:asset:\(hash.hex):\($0)" })
        #expect(sets.last?.0 == "bs:asset:\(hash.hex)" && String(decoding: sets.last!.1, as: UTF8.self) == "BSCHUNKS:\(chunks):\(image.count)")
        #expect(Data(sets.dropLast().flatMap(\.1)) == image)
        // Another board's server lacks it: marker, then the chunks (one missing: asked again).
        try redis.reply(.commands, Array(repeating: RESPValue.simpleString("OK"), count: chunks + 1), now: 1)
        var other = Replica(id: ReplicaID(0xAB))
        _ = try other.addSticker(asset: hash, at: CodablePoint(x: 1, y: 1))
        try hub.mergeReplicated(other.operations(since: .empty), now: 1)
        #expect(try redis.commands(.commands) == [["GET", "bs:asset:\(hash.hex)"]])
        try redis.reply(.commands, [.bulkString(sets.last!.1)], now: 1)
        #expect(try redis.commands(.commands) == [["MGET"] + (0..<chunks).map { "bs:asset:\(hash.hex):\($0)" }])
        var parts = sets.dropLast().map { RESPValue.bulkString($0.1) }
        parts[1] = .bulkString(nil)
        try redis.reply(.commands, [.array(parts)], now: 1)
        #expect(!store.replica.assets.contains(hash))
        _ = log.handleTimers(now: 1.6)
        #expect(try redis.commands(.commands) == [["GET", "bs:asset:\(hash.hex)"]], "asked again")
        try redis.reply(.commands, [.bulkString(sets.last!.1)], now: 1.6)
        _ = try redis.commands(.commands)
        try redis.reply(.commands, [.array(sets.dropLast().map { .bulkString($0.1) })], now: 1.6)
        #expect(store.replica.assets.data(for: hash) == image)
    }

    /// What a broken or hostile Redis could hold: a checkpoint that does not decode is skipped
    /// (the stream is read instead, the board still catches up), and an image marker claiming
    /// absurd chunk counts is not followed (taken as the image's bytes, it fails the hash
    /// check: nothing is stored).
    @Test func aCorruptCheckpointAndAnAbsurdImageMarkerAreRefused() throws {
        let (hub, store) = try Self.hubWithSession()
        var lines: [String] = []
        var options = RedisBoardLog.Options(node: "n1")
        options.log = { lines.append($0) }
        let (log, redis) = try Self.linkedLog(hub, options)
        _ = try redis.commands(.commands)
        try redis.reply(.commands, [.array([.bulkString(Array("id".utf8)), .bulkString(Array("9-0".utf8)),
                                            .bulkString(Array("state".utf8)), .bulkString([2, 0, 9, 9, 9])])], now: 0)
        #expect(lines.contains { $0.contains("the checkpoint at 9-0 is unusable") }, "\(lines)")
        var writer = Replica(id: ReplicaID(0xAB))
        let hash = AssetHash.of([1, 2, 3])
        _ = try writer.addSticker(asset: hash, at: CodablePoint(x: 1, y: 1))
        let entry = RESPValue.array([.bulkString(Array("10-0".utf8)),
                                     .array([.bulkString(Array("n".utf8)), .bulkString(Array("n2".utf8)),
                                             .bulkString(Array("o".utf8)), .bulkString(writer.operations(since: .empty).encoded())])])
        #expect(try redis.commands(.commands) == [["XRANGE", "bs:{team}:log", "-", "+", "COUNT", "512"]], "the whole stream that is left")
        try redis.reply(.commands, [.array([entry])], now: 0)
        var commands = try redis.commands(.commands)
        #expect(commands.contains(["GET", "bs:asset:\(hash.hex)"]), "\(commands)")
        #expect(commands.contains(["HGET", "bs:{team}:ckpt", "id"]), "\(commands)")
        // Replies in the order sent: the image (an absurd marker), then the recheck.
        let order = commands.map { $0.first ?? "" }
        let replies: [RESPValue] = order.map { $0 == "GET" ? .bulkString(Array("BSCHUNKS:99999999:5".utf8)) : .bulkString(Array("9-0".utf8)) }
        try redis.reply(.commands, replies, now: 0)
        commands = try redis.commands(.commands)
        #expect(!commands.contains { $0.first == "MGET" }, "no read of 99,999,999 chunks")
        #expect(log.isCaughtUp("team") && store.replica.versionVector[ReplicaID(0xAB)] == 1)
        #expect(!store.replica.assets.contains(hash))
    }
}
