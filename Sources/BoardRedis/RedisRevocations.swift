import BoardSync
import Foundation

/// Token revocations shared by every server of a cluster through one Redis set
/// (`bs:revocations`, each member a `Revocations` line), sans-IO: every `poll`, the lines of
/// this server's own revocation file not yet in Redis are added (`SADD`) and the whole set is
/// read back (`SMEMBERS`) into the list's "redis" part. One `board-sync token revoke` beside
/// any server's secret thus reaches every server within about two polls. A revocation is never
/// taken out of the set by a server; undoing one on a cluster means removing it from every
/// server's file and from Redis (`SREM`), docs/DEPLOYMENT.md.
///
/// It speaks over one link of its own that a driver owns (`RedisCluster.shareRevocations`, in
/// BoardRedisNet).
public final class RedisRevocations {
    public let list: RevocationList
    public let key: String
    private let authCommand: [[UInt8]]?
    private var pipeline = RedisPipeline()
    private var requests: [RedisPipeline.Ticket: (kind: Kind, lines: [String], sentAt: Double)] = [:]
    private var up = false
    /// Lines Redis confirmed it holds.
    private var stored: Set<String> = []
    private let log: (String) -> Void
    /// The last error Redis answered (logged once until a command succeeds).
    private var lastRefusal: String?
    /// A reply later than this (s) means the link is dead: `poll` says so and the driver drops it.
    public var replyTimeout = 10.0

    private enum Kind { case auth, add, read }

    public init(list: RevocationList, keyPrefix: String = "bs", password: String? = nil, user: String? = nil,
                log: @escaping (String) -> Void = { _ in }) {
        self.list = list
        self.key = "\(keyPrefix):revocations"
        self.authCommand = password.map { password in
            [Array("AUTH".utf8)] + (user.map { [Array($0.utf8)] } ?? []) + [Array(password.utf8)]
        }
        self.log = log
    }

    public func linkUp(now: Double) {
        up = true
        if let authCommand { requests[pipeline.send(authCommand)] = (.auth, [], now) }
        poll(now: now)
    }

    public func linkDown() {
        up = false
        requests = [:]
        _ = pipeline.reset()
    }

    /// Queues this round's commands (nothing while the previous round is unanswered). Returns
    /// false when a command has waited longer than `replyTimeout` (drop the link).
    @discardableResult
    public func poll(now: Double) -> Bool {
        guard up else { return true }
        if let oldest = requests.values.map(\.sentAt).min() {
            return now - oldest < replyTimeout
        }
        let local = list.revocations(from: "file").lines.filter { !stored.contains($0) }
        if !local.isEmpty {
            requests[pipeline.send([Array("SADD".utf8), Array(key.utf8)] + local.map { Array($0.utf8) })] = (.add, local, now)
        }
        requests[pipeline.send("SMEMBERS", key)] = (.read, [], now)
        return true
    }

    public func takeOutput() -> [UInt8] { pipeline.takeOutput() }

    /// Bytes from Redis. Throws on bytes that cannot be replies (drop the link).
    public func receive(_ bytes: [UInt8]) throws {
        for (ticket, reply) in try pipeline.receive(bytes) {
            guard let request = requests.removeValue(forKey: ticket) else { continue }
            if case .error(let text) = reply {
                // Once per reason, not every poll (a Redis without this server's password).
                if text != lastRefusal { log("Redis refused a revocation command: \(text)") }
                lastRefusal = text
                continue
            }
            lastRefusal = nil
            switch request.kind {
            case .auth: break
            case .add: stored.formUnion(request.lines)
            case .read:
                let members: [RESPValue]
                switch reply {
                case .array(let values?): members = values
                case .set(let values): members = values
                default: continue
                }
                var revocations = Revocations()
                var lines: Set<String> = []
                for member in members {
                    guard let line = member.text, let revocation = Revocations(line: line) else { continue }
                    revocations.merge(revocation)
                    lines.insert(line)
                }
                stored = lines
                let before = list.revocations(from: "redis")
                list.set(revocations, from: "redis")
                if revocations != before {
                    log("revocations: \(revocations.subjects.count) subject(s) and \(revocations.tokenIDs.count) token id(s) shared through Redis")
                }
            }
        }
    }
}
