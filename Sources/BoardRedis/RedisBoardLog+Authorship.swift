import BoardCRDT
import BoardSync

/// Shared authorship (`Options.sharesAuthorship`, servers with access control): who owns a
/// replica id is decided in Redis, once for every server (`authorScript`), and the replica ids
/// a board's hub holds at catch-up are marked in its `replicas` set.
extension RedisBoardLog {
    struct AuthorKey: Hashable {
        let board: String
        let request: AuthorshipRequest
    }

    /// A hub's `.decideAuthorship`.
    func askAuthorship(_ request: AuthorshipRequest, on board: String) {
        authorRequests[AuthorKey(board: board, request: request)] = (false, 0)
        pump()
    }

    /// Replica marks, then authorship requests, not sent yet and due (`pump`: after the
    /// appends, as Redis runs one link's commands in order).
    func sendAuthorship() {
        for board in replicaMarks.keys.sorted() {
            guard let entry = replicaMarks[board], !entry.sent, entry.notBefore <= now else { continue }
            send(.markReplicas(board), strings: ["SADD", replicasKey(board)] + entry.replicas)
            replicaMarks[board]?.sent = true
        }
        for key in authorRequests.keys.sorted(by: { ($0.board, $0.request.replica.rawValue, $0.request.subject, $0.request.bind ? 1 : 0)
                                                    < ($1.board, $1.request.replica.rawValue, $1.request.subject, $1.request.bind ? 1 : 0) }) {
            guard let entry = authorRequests[key], !entry.sent, entry.notBefore <= now else { continue }
            let request = key.request
            send(.author(key.board, request), strings: ["EVAL", RedisBoardLog.authorScript, "3", authorsKey(key.board), authoredKey(key.board),
                                                        replicasKey(key.board), Self.hex(request.replica), request.subject, request.bind ? "1" : "0",
                                                        String(request.maxPerSubject), String(request.maxPerBoard)])
            authorRequests[key]?.sent = true
        }
    }

    /// `authorScript`'s answer, handed to the hub that asked.
    func authorshipAnswered(_ board: String, _ request: AuthorshipRequest, _ value: RESPValue) {
        let key = AuthorKey(board: board, request: request)
        guard authorRequests.removeValue(forKey: key) != nil, let hub = boards[board]?.hub else { return }
        guard let answer = Self.authorshipAnswer(value) else {
            options.log("board '\(board)': an unexpected answer to \(request): \(value); asking again")
            authorRequests[key] = (false, now + options.retryDelay)
            return
        }
        hub.authorshipAnswered(request, answer, now: now)
    }

    /// Authorship, decided once for every server: who owns a replica id, and (with bind 1) the
    /// id bound to the subject when nobody owns it, the log holds no operation of it, the
    /// subject owns fewer than its limit and the board holds fewer bindings than its limit.
    /// KEYS: authors (hash replica → subject), authored (hash subject → count), replicas (set).
    /// ARGV: replica (hex), subject, bind (1 or 0), max per subject, max per board. Returns
    /// `{owner, SUBJECT}`, `{unbound}`, `{subject-limit}` or `{board-limit}`.
    public static let authorScript = """
        local owner = redis.call('HGET', KEYS[1], ARGV[1])
        if owner then return {'owner', owner} end
        if ARGV[3] ~= '1' or redis.call('SISMEMBER', KEYS[3], ARGV[1]) == 1 then return {'unbound'} end
        if tonumber(redis.call('HGET', KEYS[2], ARGV[2]) or '0') >= tonumber(ARGV[4]) then return {'subject-limit'} end
        if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[5]) then return {'board-limit'} end
        redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
        redis.call('HINCRBY', KEYS[2], ARGV[2], 1)
        return {'owner', ARGV[2]}
        """

    static func authorshipAnswer(_ value: RESPValue) -> AuthorshipAnswer? {
        guard case .array(let items?) = value, let status = items.first?.text else { return nil }
        switch status {
        case "owner": return items.count == 2 ? items[1].text.map(AuthorshipAnswer.owner) : nil
        case "unbound": return .unbound
        case "subject-limit": return .subjectLimit
        case "board-limit": return .boardLimit
        default: return nil
        }
    }
}
