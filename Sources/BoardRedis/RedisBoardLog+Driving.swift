/// The driver's side: links going up and down, bytes in and out, timers. Every entry point
/// ends by sending what can be sent now (`pump`).
extension RedisBoardLog {
    /// A link connected: what was waiting is sent on it.
    public func linkUp(_ link: Link, now: Double) {
        self.now = now
        if link == .presence {
            presenceDecoder = RESPDecoder()
            presenceOutput = authCommand.map { RESPValue.command($0) } ?? []
            subscribed = []
            up.insert(link)
            pump()
            return
        }
        withChannel(link) { channel in
            _ = channel.pipeline.reset()
            channel.requests = [:]
        }
        up.insert(link)
        if let auth = authCommand {
            // Pipelined: Redis runs commands in order, so everything after it is authenticated.
            send(.auth, auth, on: link)
        }
        if link == .tail {
            tailState.linkReset()
            send(.clientID, strings: ["CLIENT", "ID"], on: .tail)
        }
        pump()
        // Connected: its trouble is over, unless it stopped answering before and now has a
        // command out whose reply will tell.
        trouble.connected(link, waitingForReply: !withChannel(link) { $0.requests.isEmpty })
        troubleChanged()
    }

    /// A link dropped (or the driver gave up on it): every command on it may or may not have
    /// taken effect, so appends and image stores are sent again once it is back.
    public func linkDown(_ link: Link, now: Double, reason: String) {
        self.now = now
        guard up.remove(link) != nil else { return }
        options.log("Redis \(link) link lost: \(reason)")
        if link == .presence {
            subscribed = []
            presenceOutput = []
            return
        }
        let lost = withChannel(link) { channel in
            _ = channel.pipeline.reset()
            defer { channel.requests = [:] }
            return channel.requests.values.map(\.request)
        }
        for request in lost { forget(request) }
        if link == .tail { tailState.linkReset() }
    }

    /// Bytes to write on a link.
    public func takeOutput(_ link: Link) -> [UInt8] {
        if link == .presence {
            defer { presenceOutput = [] }
            return presenceOutput
        }
        return withChannel(link) { $0.pipeline.takeOutput() }
    }

    /// Bytes read from a link. Throws when they are not RESP or do not line up with the
    /// commands sent: the driver drops the link.
    public func receive(_ link: Link, _ bytes: [UInt8], now: Double) throws(RESPError) {
        self.now = now
        if link == .presence {
            presenceDecoder.append(bytes)
            while let value = try presenceDecoder.next() { presenceMessage(value) }
            return
        }
        let replies = try withChannel(link) { channel throws(RESPError) in try channel.pipeline.receive(bytes) }
        defer { troubleChanged() }
        repliesReceived += replies.count
        for (ticket, value) in replies {
            guard let entry = withChannel(link, { $0.requests.removeValue(forKey: ticket) }) else { continue }
            noteReply(to: entry.request, value, on: link)
            handle(entry.request, value)
        }
        completeTickets()
        pump()
    }

    /// When a command's reply is overdue: the reply timeout after it was sent (a blocking read:
    /// after its block time too).
    private func replyDeadline(_ entry: (request: Request, sentAt: Double)) -> Double {
        if case .read = entry.request { return entry.sentAt + Double(options.blockMilliseconds) / 1000 + options.replyTimeout }
        return entry.sentAt + options.replyTimeout
    }

    /// When `handleTimers` should next run.
    public var nextDeadline: Double? {
        var deadlines: [Double] = []
        if ticketReady { deadlines.append(now) }
        for link in Self.pipelined where up.contains(link) {
            for entry in withChannel(link, { $0.requests.values }) { deadlines.append(replyDeadline(entry)) }
        }
        for append in appends.values where !append.sent && append.notBefore > now { deadlines.append(append.notBefore) }
        for state in boards.values where state.notBefore > now {
            switch state.phase {
            case .loadingCheckpoint(_, asked: false), .readingStream(_, asked: false): deadlines.append(state.notBefore)
            default: break
            }
        }
        for entry in assetSets.values where !entry.sent && entry.notBefore > now { deadlines.append(entry.notBefore) }
        for entry in assetGets.values where !entry.sent { deadlines.append(max(entry.notBefore, now)) }
        for entry in authorRequests.values where !entry.sent && entry.notBefore > now { deadlines.append(entry.notBefore) }
        for entry in replicaMarks.values where !entry.sent && entry.notBefore > now { deadlines.append(entry.notBefore) }
        if let notBefore = tailState.notBefore, notBefore > now { deadlines.append(notBefore) }
        return deadlines.min()
    }

    /// Retries what is due; returns the links that stopped answering (the driver drops them and
    /// reconnects).
    public func handleTimers(now: Double) -> [Link] {
        self.now = now
        completeTickets()
        var dead: [Link] = []
        for link in Self.pipelined where up.contains(link) && withChannel(link, { $0.requests.values }).contains(where: { now > replyDeadline($0) }) {
            dead.append(link)
            trouble.link[link] = (detail: "\(options.redisName) does not answer", untilReply: true)
        }
        defer { troubleChanged() }
        expireAssetFetches()
        pump()
        return dead.sorted { $0.description < $1.description }
    }

    /// Sends whatever can be sent now, in this order on the commands link (Redis runs one
    /// link's commands in order): appends, each board's catch-up or compaction (by name),
    /// replica marks and authorship (after the appends and marks), images; then presence
    /// subscriptions and the tail read.
    func pump() {
        if up.contains(.commands) {
            sendAppends()
            for name in boards.keys.sorted() { sendBoardCommand(name) }
            sendAuthorship()
            sendAssetCommands()
        }
        if up.contains(.presence) { sendSubscriptions() }
        sendTailRead()
    }
}
