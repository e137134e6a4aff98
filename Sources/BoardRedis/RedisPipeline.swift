/// One Redis connection's commands and replies, sans-IO: commands go out as bytes, bytes come
/// in and are matched to the commands in the order they were sent (Redis answers in order, so
/// any number may be in flight: pipelining). It never touches a socket; a driver writes
/// `takeOutput()` and feeds what it reads to `receive(_:)`.
public struct RedisPipeline: Sendable {
    public typealias Ticket = UInt64

    private var decoder: RESPDecoder
    private var output: [UInt8] = []
    /// Commands sent (or queued) and not answered yet, oldest first.
    private var outstanding: [Ticket] = []
    private var head = 0
    private var nextTicket: Ticket = 0

    public init(limits: RESPLimits = RESPLimits()) {
        decoder = RESPDecoder(limits: limits)
    }

    /// Commands waiting for their reply.
    public var outstandingCount: Int { outstanding.count - head }
    /// The oldest command still waiting.
    public var oldest: Ticket? { head < outstanding.count ? outstanding[head] : nil }

    /// Queues a command (an array of bulk strings); its reply comes back with the ticket.
    public mutating func send(_ parts: [[UInt8]]) -> Ticket {
        nextTicket += 1
        output += RESPValue.command(parts)
        outstanding.append(nextTicket)
        return nextTicket
    }

    public mutating func send(_ parts: String...) -> Ticket {
        send(parts.map { Array($0.utf8) })
    }

    public mutating func takeOutput() -> [UInt8] {
        defer { output = [] }
        return output
    }

    /// Feeds bytes read from the connection; returns each complete reply with its command's
    /// ticket. Throws on malformed bytes or a reply nobody asked for (the connection must then
    /// be dropped: nothing after it can be trusted to line up).
    public mutating func receive(_ bytes: [UInt8]) throws(RESPError) -> [(Ticket, RESPValue)] {
        decoder.append(bytes)
        var replies: [(Ticket, RESPValue)] = []
        while let value = try decoder.next() {
            if case .push = value { continue }  // out-of-band (RESP3): never a reply
            guard head < outstanding.count else {
                throw RESPError(reason: "a reply arrived with no command waiting for one", offset: 0)
            }
            replies.append((outstanding[head], value))
            head += 1
        }
        if head > 1024, head * 2 > outstanding.count {
            outstanding.removeFirst(head)
            head = 0
        }
        return replies
    }

    /// The connection is gone: returns the tickets that never got a reply (each command may or
    /// may not have taken effect) and starts over for a new connection.
    public mutating func reset() -> [Ticket] {
        let lost = Array(outstanding[head...])
        outstanding = []
        head = 0
        output = []
        decoder = RESPDecoder(limits: decoder.limits)
        return lost
    }
}
