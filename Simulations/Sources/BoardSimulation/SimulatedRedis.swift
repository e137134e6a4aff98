import BoardCRDT
import BoardRedis
import Foundation

/// An in-memory Redis for the cluster simulation: the commands the board log sends (streams,
/// hashes, strings, sets, the board log's Lua scripts by their text, pub/sub, CLIENT ID/UNBLOCK), answered
/// over RESP exactly as Redis would, in virtual time. Its data survives a restart (as with
/// `appendfsync always`); its connections do not.
final class SimulatedRedis {
    struct Entry {
        let id: (UInt64, UInt64)
        let fields: [[UInt8]]
    }

    final class Connection {
        let id: Int64
        var decoder = RESPDecoder()
        var output: [UInt8] = []
        var subscriptions: Set<String> = []
        /// A blocked XREAD: keys with the ids to read after, and when it times out.
        var blocked: (keys: [(String, (UInt64, UInt64))], count: Int, until: Double)?
        var open = true

        init(id: Int64) {
            self.id = id
        }
    }

    private(set) var streams: [String: [Entry]] = [:]
    private var lastID: [String: (UInt64, UInt64)] = [:]
    private var hashes: [String: [String: [UInt8]]] = [:]
    private var sets: [String: Set<String>] = [:]
    private var strings: [String: (value: [UInt8], expires: Double?)] = [:]
    private var connections: [Int64: Connection] = [:]
    private var nextConnection: Int64 = 0
    var now = 0.0
    /// Commands answered and checkpoints written (for reports).
    private(set) var commands = 0
    private(set) var checkpointCommits = 0

    /// While down (a restart that takes a while), connections are refused.
    var downUntil = 0.0

    func connect() -> Connection {
        nextConnection += 1
        let connection = Connection(id: nextConnection)
        guard now >= downUntil else {
            connection.open = false
            return connection
        }
        connections[connection.id] = connection
        return connection
    }

    func disconnect(_ connection: Connection) {
        connection.open = false
        connections[connection.id] = nil
    }

    /// A restart: every connection drops; the data stays (append-only file, fsync always).
    func restart() {
        for connection in connections.values { connection.open = false }
        connections = [:]
    }

    /// Bytes a client wrote: every complete command is answered (into `output`).
    func receive(_ connection: Connection, _ bytes: [UInt8]) {
        guard connection.open else { return }
        connection.decoder.append(bytes)
        while let value = try? connection.decoder.next() {
            guard case .array(let items?) = value else { continue }
            let parts = items.compactMap { item -> [UInt8]? in
                if case .bulkString(let b?) = item { return b }
                return nil
            }
            commands += 1
            if let reply = execute(parts, on: connection) { connection.output += reply.encoded() }
        }
    }

    /// How far each author's operations reach in what Redis holds for a board (its stream and
    /// its checkpoint): what a server may have acknowledged.
    func durableVersion(board: String) -> VersionVector {
        var vector = VersionVector.empty
        func add(_ bytes: [UInt8]) {
            guard let batch = try? OperationBatch(decoding: bytes) else { return }
            vector = vector.raised(by: batch)
        }
        if let state = hashes["bs:{\(board)}:ckpt"]?["state"] { add(state) }
        for entry in streams["bs:{\(board)}:log"] ?? [] {
            var index = 0
            while index + 1 < entry.fields.count {
                if Self.text(entry.fields[index]) == "o" { add(entry.fields[index + 1]) }
                index += 2
            }
        }
        return vector
    }

    /// A hash's fields (for oracles).
    func hash(_ key: String) -> [String: [UInt8]] { hashes[key] ?? [:] }

    /// Blocked reads whose time ran out answer nil; reads that can be served are.
    func tick() {
        for connection in connections.values.sorted(by: { $0.id < $1.id }) {
            guard let blocked = connection.blocked else { continue }
            if let reply = readStreams(blocked.keys, count: blocked.count) {
                connection.blocked = nil
                connection.output += reply.encoded()
            } else if now >= blocked.until {
                connection.blocked = nil
                connection.output += RESPValue.array(nil).encoded()
            }
        }
    }

    /// The earliest blocked read's timeout.
    var nextDeadline: Double? {
        connections.values.compactMap { $0.blocked?.until }.min()
    }

    private static func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    private static func parseID(_ text: String) -> (UInt64, UInt64)? {
        let parts = text.split(separator: "-")
        guard parts.count == 2, let ms = UInt64(parts[0]), let seq = UInt64(parts[1]) else { return nil }
        return (ms, seq)
    }

    private static func idText(_ id: (UInt64, UInt64)) -> String { "\(id.0)-\(id.1)" }

    private static func entryValue(_ entry: Entry) -> RESPValue {
        .array([.bulkString(Array(idText(entry.id).utf8)), .array(entry.fields.map { .bulkString($0) })])
    }

    private func readStreams(_ keys: [(String, (UInt64, UInt64))], count: Int) -> RESPValue? {
        var result: [RESPValue] = []
        for (key, after) in keys {
            let entries = (streams[key] ?? []).filter { $0.id > after }.prefix(count)
            if !entries.isEmpty {
                result.append(.array([.bulkString(Array(key.utf8)), .array(entries.map(Self.entryValue))]))
            }
        }
        return result.isEmpty ? nil : .array(result)
    }

    private func liveString(_ key: String) -> [UInt8]? {
        guard let entry = strings[key] else { return nil }
        if let expires = entry.expires, now >= expires {
            strings[key] = nil
            return nil
        }
        return entry.value
    }

    /// XADD with an automatic id.
    private func append(to key: String, _ fields: [[UInt8]]) -> (UInt64, UInt64) {
        let ms = UInt64(now * 1000)
        var id = (ms, UInt64(0))
        if let last = lastID[key], !(id > last) { id = (last.0, last.1 + 1) }
        lastID[key] = id
        streams[key, default: []].append(Entry(id: id, fields: fields))
        return id
    }

    private func execute(_ parts: [[UInt8]], on connection: Connection) -> RESPValue? {
        guard let name = parts.first.map({ Self.text($0).uppercased() }) else { return .error("ERR empty command") }
        let args = Array(parts.dropFirst())
        func arg(_ index: Int) -> String { index < args.count ? Self.text(args[index]) : "" }
        switch name {
        case "PING": return .simpleString("PONG")
        case "CLIENT":
            if arg(0).uppercased() == "ID" { return .integer(connection.id) }
            if arg(0).uppercased() == "UNBLOCK", let id = Int64(arg(1)), let target = connections[id], target.blocked != nil {
                target.blocked = nil
                target.output += RESPValue.array(nil).encoded()
                return .integer(1)
            }
            return .integer(0)
        case "XADD":
            return .bulkString(Array(Self.idText(append(to: arg(0), Array(args.dropFirst(2)))).utf8))
        case "SADD":
            var added: Int64 = 0
            for member in args.dropFirst().map(Self.text) where sets[arg(0), default: []].insert(member).inserted { added += 1 }
            return .integer(added)
        case "XRANGE":
            let key = arg(0)
            let start = arg(1)
            let count = args.count >= 5 ? Int(arg(4)) ?? Int.max : Int.max
            let entries = (streams[key] ?? []).filter { entry in
                if start == "-" { return true }
                if start.hasPrefix("("), let after = Self.parseID(String(start.dropFirst())) { return entry.id > after }
                if let from = Self.parseID(start) { return entry.id >= from }
                return true
            }.prefix(count)
            return .array(entries.map(Self.entryValue))
        case "XREAD":
            guard let streamsAt = args.firstIndex(where: { Self.text($0).uppercased() == "STREAMS" }) else { return .error("ERR syntax") }
            let count = Int(arg(1)) ?? 512
            let block = Double(arg(3)) ?? 0
            let rest = Array(args[(streamsAt + 1)...])
            let half = rest.count / 2
            let keys = (0..<half).map { (Self.text(rest[$0]), Self.parseID(Self.text(rest[half + $0])) ?? (0, 0)) }
            if let reply = readStreams(keys, count: count) { return reply }
            connection.blocked = (keys, count, now + block / 1000)
            return nil
        case "HGETALL":
            return .array((hashes[arg(0)] ?? [:]).sorted { $0.key < $1.key }.flatMap { [.bulkString(Array($0.key.utf8)), .bulkString($0.value)] })
        case "HGET":
            return .bulkString(hashes[arg(0)]?[arg(1)])
        case "HMGET":
            return .array((1..<max(1, args.count)).map { .bulkString(hashes[arg(0)]?[arg($0)]) })
        case "SET":
            let key = arg(0)
            let nx = args.dropFirst(2).contains { Self.text($0).uppercased() == "NX" }
            if nx, liveString(key) != nil { return .bulkString(nil) }
            strings[key] = (args.count > 1 ? args[1] : [], nil)
            return .simpleString("OK")
        case "GET":
            return .bulkString(liveString(arg(0)))
        case "PUBLISH":
            let channel = arg(0)
            var receivers = 0
            for other in connections.values.sorted(by: { $0.id < $1.id }) where other.subscriptions.contains(channel) {
                other.output += RESPValue.array([.bulkString(Array("message".utf8)), .bulkString(Array(channel.utf8)),
                                                 .bulkString(args.count > 1 ? args[1] : [])]).encoded()
                receivers += 1
            }
            return .integer(Int64(receivers))
        case "SUBSCRIBE":
            for channel in args.map(Self.text) {
                connection.subscriptions.insert(channel)
                connection.output += RESPValue.array([.bulkString(Array("subscribe".utf8)), .bulkString(Array(channel.utf8)),
                                                      .integer(Int64(connection.subscriptions.count))]).encoded()
            }
            return nil
        case "UNSUBSCRIBE":
            for channel in args.map(Self.text) { connection.subscriptions.remove(channel) }
            return nil
        case "EVAL":
            let script = arg(0)
            if script == RedisBoardLog.acquireScript {
                // KEYS: lease, epoch. ARGV: node, ms.
                let lease = arg(2), epoch = arg(3)
                if liveString(lease) != nil { return .bulkString(nil) }
                strings[lease] = (args[4], now + (Double(arg(5)) ?? 0) / 1000)
                let next = (Int64(liveString(epoch).map(Self.text) ?? "0") ?? 0) + 1
                strings[epoch] = (Array(String(next).utf8), nil)
                return .integer(next)
            }
            if script == RedisBoardLog.commitScript {
                // KEYS: epoch, checkpoint, stream, lease. ARGV: epoch, id, state, minid, node.
                let epochKey = arg(2), checkpoint = arg(3), stream = arg(4), lease = arg(5)
                guard liveString(epochKey).map(Self.text) == arg(6) else {
                    return .error("FENCED the compaction lease moved on (epoch \(arg(6)) is stale)")
                }
                let newID = Self.parseID(arg(7)) ?? (0, 0)
                if let current = hashes[checkpoint]?["id"].flatMap({ Self.parseID(Self.text($0)) }), !(newID > current) {
                    return .integer(0)
                }
                hashes[checkpoint] = ["id": args[7], "state": args[8], "epoch": args[6], "minid": args[9]]
                let minID = Self.parseID(arg(9)) ?? (0, 0)
                streams[stream] = (streams[stream] ?? []).filter { !($0.id < minID) }
                if liveString(lease).map(Self.text) == arg(10) { strings[lease] = nil }
                checkpointCommits += 1
                return .integer(1)
            }
            if script == RedisBoardLog.appendScript {
                // KEYS: stream, replicas. ARGV: node, batch, authors.
                let stream = arg(2), replicas = arg(3)
                for member in args.dropFirst(6).map(Self.text) { sets[replicas, default: []].insert(member) }
                let id = append(to: stream, [Array("n".utf8), args[4], Array("o".utf8), args[5]])
                return .bulkString(Array(Self.idText(id).utf8))
            }
            if script == RedisBoardLog.authorScript {
                // KEYS: authors, authored, replicas. ARGV: replica, subject, bind, max per subject, max per board.
                let authors = arg(2), authored = arg(3), replicas = arg(4)
                let replica = arg(5), subject = arg(6)
                func reply(_ parts: String...) -> RESPValue { .array(parts.map { .bulkString(Array($0.utf8)) }) }
                if let owner = hashes[authors]?[replica] { return reply("owner", Self.text(owner)) }
                if arg(7) != "1" || sets[replicas]?.contains(replica) == true { return reply("unbound") }
                let count = Int(hashes[authored]?[subject].map(Self.text) ?? "0") ?? 0
                if count >= Int(arg(8)) ?? 0 { return reply("subject-limit") }
                if (hashes[authors]?.count ?? 0) >= Int(arg(9)) ?? 0 { return reply("board-limit") }
                hashes[authors, default: [:]][replica] = Array(subject.utf8)
                hashes[authored, default: [:]][subject] = Array(String(count + 1).utf8)
                return reply("owner", subject)
            }
            return .error("NOSCRIPT the simulated Redis knows only the board log's scripts")
        default:
            return .error("ERR unknown command '\(name)'")
        }
    }
}
