/// Whether Redis can serve this server's boards, and why not. A link the driver cannot
/// connect (`connectFailed`), a link that stopped answering, a refused password or an error
/// reply that is Redis's own trouble (`NOAUTH`, `LOADING`, ...) makes `storageTrouble` say so;
/// every attached hub then turns new sessions away with `storageUnavailable` (their clients
/// learn what the server waits for instead of timing out), and the log says it once per change
/// of the reason, not per client or per retry.
extension RedisBoardLog {
    struct TroubleState {
        /// Per link (commands and tail: the links boards need): why it cannot be used;
        /// `untilReply`: cleared by the next reply on it (a link that stopped answering), else
        /// by connecting.
        var link: [Link: (detail: String, untilReply: Bool)] = [:]
        /// Redis refused this server's password.
        var password: String?
        /// An error reply of Redis's own (no password given, loading, out of memory, read-only).
        var reply: String?
        /// What was reported last (logged and handed to the hubs).
        var reported: String?

        mutating func connected(_ link: Link, waitingForReply: Bool) {
            if self.link[link]?.untilReply == false || !waitingForReply { self.link[link] = nil }
        }

        var current: String? {
            link[.commands]?.detail ?? link[.tail]?.detail ?? password ?? reply
        }
    }

    /// Why Redis cannot serve the boards now (nil: it can), in words fit for an operator and
    /// for clients with a token: "Redis at 10.0.0.5:6379 refused the connection". No password,
    /// no text Redis echoed.
    public var storageTrouble: String? { trouble.reported }

    /// The driver could not connect `link`: `why` is how Redis failed, after its name
    /// ("refused the connection", "cannot be reached (No route to host)").
    public func connectFailed(_ link: Link, because why: String, now: Double) {
        self.now = now
        guard link != .presence else { return }  // presence is a nicety; boards need the others
        trouble.link[link] = (detail: "\(options.redisName) \(why)", untilReply: false)
        troubleChanged()
    }

    /// Bookkeeping for every reply, before it is handled.
    func noteReply(to request: Request, _ value: RESPValue, on link: Link) {
        if trouble.link[link]?.untilReply == true { trouble.link[link] = nil }
        guard case .error(let message) = value else {
            if case .auth = request { trouble.password = nil } else { trouble.reply = nil }
            return
        }
        guard let detail = Self.troubleClass(message, for: request) else { return }
        if case .auth = request { trouble.password = "\(options.redisName) \(detail)" } else { trouble.reply = "\(options.redisName) \(detail)" }
    }

    /// What an error reply says about Redis itself (nil: it is about the one command). Only
    /// the reply's code is kept (Redis's text may echo a command's arguments).
    static func troubleClass(_ message: String, for request: Request) -> String? {
        let code = message.prefix { $0 != " " }
        if case .auth = request {
            // "ERR AUTH <password> called without any password configured" is no trouble: that
            // Redis needs none, and every command after the AUTH runs.
            let refused = code == "WRONGPASS" || message.contains("invalid password") || message.contains("invalid username-password")
            return refused ? "refused this server's password (\(code))" : nil
        }
        // An unauthenticated client's long command: Redis answers "ERR Protocol error:
        // unauthenticated multibulk length" (and closes the link) before any NOAUTH.
        if code == "NOAUTH" || message.contains("unauthenticated") { return "asks for a password (NOAUTH)" }
        switch code {
        case "WRONGPASS": return "refused this server's password (WRONGPASS)"
        case "LOADING", "MISCONF", "OOM", "READONLY", "MASTERDOWN", "BUSY", "CLUSTERDOWN", "NOREPLICAS", "TRYAGAIN":
            return "refuses commands (\(code))"
        default: return nil
        }
    }

    /// Logs a change of `storageTrouble` once and hands it to every attached hub (which turns
    /// away, or again greets, new sessions).
    func troubleChanged() {
        let current = trouble.current
        guard current != trouble.reported else { return }
        let before = trouble.reported
        trouble.reported = current
        if let current {
            let hint: String
            if current.hasSuffix("(NOAUTH)") {
                hint = " (give the server the password with --redis-password-file)"
            } else if current.contains("password") {
                hint = " (check --redis-password-file and --redis-user)"
            } else if current.hasSuffix("refused the connection") {
                hint = " (is redis-server running there?)"
            } else {
                hint = ""
            }
            options.log("storage unavailable: \(current)\(hint); clients are told to retry later until it is back")
        } else if before != nil {
            options.log("storage available again: \(options.redisName) answers")
        }
        for name in boards.keys.sorted() {
            guard let hub = boards[name]?.hub else { continue }
            hub.storageTrouble = current
        }
    }
}
