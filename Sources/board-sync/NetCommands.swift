import BoardCRDT
import BoardModel
import BoardNet
import BoardRedis
import BoardRedisNet
import BoardStore
import BoardSync
import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// serve, sync, peer and demo: the commands that talk TCP.
struct NetCommands {
    func run(_ name: String, _ raw: [String]) throws {
        switch name {
        case "serve": try serve(raw)
        case "sync": try sync(raw)
        case "peer": try peer(raw)
        case "demo": try Demo(raw).run()
        case "token": try token(raw)
        case "admin": try AdminCommands.run(raw)
        default: throw UsageError("unknown subcommand '\(name)'")
        }
    }

    static func log(_ line: String) {
        // The UTC time by hand: an ISO8601DateFormatter made per line was most of a busy
        // server's CPU (found under load with many clients reconnecting).
        var seconds = time(nil)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let stamp = "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))Z"
        if ServeLog.isJSON { return FileHandle.standardError.write(Data((ServeLog.json(line, stamp: stamp) + "\n").utf8)) }
        FileHandle.standardError.write(Data("\(stamp) \(LogText.escaped(line))\n".utf8))
    }

    /// The host a signal stops, set once it exists (signals are watched from before it is
    /// made, so one arriving while it starts is not lost). Loop thread only, after `host` is set.
    final class HostSlot: @unchecked Sendable {
        var host: SyncHost?
        /// `serve --admin`: told first, so /readyz fails before the host stops (`--drain-seconds` later).
        var admin: AdminServer?
        var drainSeconds: Double = 0
        var stopping = false
    }

    /// Stops the slot's host cleanly on SIGINT or SIGTERM: no new connections, goodbyes, saves,
    /// exit 0. Call before making the host.
    static func stopOnSignals(_ slot: HostSlot, _ loop: EventLoop) -> [DispatchSourceSignal] {
        [SIGINT, SIGTERM].map { number in
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            // The host lives on the loop thread; the handler only posts work to that thread.
            source.setEventHandler {
                loop.execute {
                    NetCommands.log("signal \(number == SIGINT ? "SIGINT" : "SIGTERM"): stopping")
                    func stop() {
                        slot.host?.shutdown()
                        loop.schedule(after: 0.2) { loop.stop() }
                    }
                    // Readiness fails first; a second signal while draining stops at once.
                    slot.admin?.beginDraining()
                    guard !slot.stopping, slot.drainSeconds > 0 else { return stop() }
                    slot.stopping = true
                    loop.schedule(after: slot.drainSeconds) { stop() }
                }
            }
            // The source first, then stop the default action: the other way round, a signal
            // arriving in between was ignored and the server kept running (found by a test
            // that stopped a server the moment it listened).
            source.resume()
            signal(number, SIG_IGN)
            return source
        }
    }

    private func address(_ text: String, _ option: String) throws -> SocketAddress {
        do {
            return try SocketAddress(parsing: text)
        } catch {
            throw UsageError("\(option) \(error)")
        }
    }

    static let serveOptions = Set(["data", "listen", "secret-file", "web", "redis", "node-id", "checkpoint-every", "checkpoint-lease", "checkpoint-retention", "redis-password-file", "redis-user", "web-host", "web-origin", "web-token-file", "web-pages-per-address"] + Access.serverTLSOptions + ServeLimits.flags.map(\.name) + ServeAdmin.options + ServeBackup.serveOptions + ServeWebhooks.options)

    /// `serve`: its settings from the command line, `BOARD_SYNC_*` and `--config FILE` (ServeConfig).
    private func serve(_ raw: [String]) throws {
        let config = try ServeConfig(raw, options: Self.serveOptions, flags: [], environment: ProcessInfo.processInfo.environment)
        do {
            try serve(config)
        } catch let error as UsageError {
            throw config.explained(error)
        }
    }

    private func serve(_ config: ServeConfig) throws {
        let args = try Arguments(config.arguments, options: Self.serveOptions.union(["config"]), flags: ["print-config"])
        _ = try args.positionals([])
        try ServeLog.configure(args.value("log-format"))
        let adminSettings = try ServeAdmin.Settings(args)
        guard let data = args.value("data") else { throw UsageError("missing --data DIR") }
        let listen = try address(args.value("listen") ?? "127.0.0.1:7420", "--listen")
        let webAddress = try args.value("web").map { try address($0, "--web") }
        let redisAddress = try args.value("redis").map { try address($0, "--redis") }
        if webAddress == nil, ["web-host", "web-origin", "web-token-file", "web-pages-per-address"].contains(where: { args.value($0) != nil }) {
            throw UsageError("--web-host, --web-origin, --web-token-file and --web-pages-per-address need --web HOST:PORT")
        }
        if args.value("web-token-file") != nil, args.value("secret-file") != nil {
            throw UsageError("--web-token-file is for servers without --secret-file (with it, pages present board tokens)")
        }
        for origin in args.values("web-origin") where !(origin.hasPrefix("http://") || origin.hasPrefix("https://")) || origin.dropFirst(8).contains("/") {
            throw UsageError("--web-origin '\(origin)' must be an origin: http(s)://HOST[:PORT], no path")
        }
        for option in ["node-id", "checkpoint-every", "checkpoint-lease", "checkpoint-retention", "redis-password-file", "redis-user"]
        where args.value(option) != nil && redisAddress == nil {
            throw UsageError("--\(option) needs --redis HOST:PORT")
        }
        if args.value("redis-user") != nil, args.value("redis-password-file") == nil {
            throw UsageError("--redis-user needs --redis-password-file FILE")
        }
        let checkpointEvery = try args.value("checkpoint-every").map { try Parse.number($0, "--checkpoint-every") }
        let lease = try args.value("checkpoint-lease").map { try Parse.number($0, "--checkpoint-lease") }
        let retention = try args.value("checkpoint-retention").map { try Parse.number($0, "--checkpoint-retention") }
        if let checkpointEvery, checkpointEvery < 0 || checkpointEvery != checkpointEvery.rounded() || checkpointEvery > 1e9 {
            throw UsageError("--checkpoint-every must be a whole number of entries (0: never)")
        }
        for (name, value) in [("--checkpoint-lease", lease), ("--checkpoint-retention", retention)] {
            if let value, !(value >= 0.1 && value <= 86_400) { throw UsageError("\(name) must be between 0.1 and 86400 seconds") }
        }
        if let id = args.value("node-id"), id.isEmpty || id.utf8.count > 128 || id.contains(where: { $0.isWhitespace }) {
            throw UsageError("--node-id '\(id)' must be 1 to 128 characters without spaces")
        }
        let backupPlan = try ServeBackup.plan(args)
        let webhookPlan = try ServeWebhooks.plan(args, sources: config.sources)
        var options = SyncHost.Options()
        options.log = NetCommands.log
        try ServeLimits.apply(args, to: &options)
        if args.has("print-config") { return try config.printed(args, options: Self.serveOptions, defaults: ServeConfig.defaults) }
        options.serverTLS = try Access.serverTLS(args)
        let loop = try EventLoop()
        var revocationWatcher: RevocationWatcher?
        if let secretFile = args.value("secret-file") {
            (options.access, revocationWatcher) = try Access.control(secretFile: secretFile, loop: loop)
            NetCommands.log("access control on: every connection needs a token for its board (secret in \(secretFile), revocations in \(Access.revocationFile(for: secretFile)))")
        } else {
            NetCommands.log("WARNING: no --secret-file: anyone who can reach \(listen) can read and write every board (fine for loopback development only)")
        }
        if options.serverTLS != nil {
            NetCommands.log("TLS on: certificate \(args.value("tls-cert")!); clients connect with --tls")
        } else if options.access != nil {
            NetCommands.log("WARNING: no --tls-cert: tokens and boards cross the network unencrypted (fine on loopback or behind a TLS proxy)")
        }
        let slot = HostSlot()
        let signals = NetCommands.stopOnSignals(slot, loop)
        let backupSignal = backupPlan.map { _ in ServeBackup.watchSignal(loop) }
        let host: SyncHost
        do {
            host = try SyncHost(serverDataDirectory: data, listen: listen, loop: loop, options: options)
        } catch {
            throw Failure("cannot start the server: \(error)")
        }
        slot.host = host
        var cluster: RedisCluster?
        if let redisAddress {
            // Two processes must never share a node id (each skips entries with its own id).
            let name = args.value("node-id") ?? ProcessInfo.processInfo.hostName
            let node = "\(name)/\(String(UInt32.random(in: .min ... .max), radix: 16))"
            var redisOptions = RedisBoardLog.Options(node: node)
            redisOptions.log = NetCommands.log
            if let checkpointEvery { redisOptions.checkpointEvery = Int(checkpointEvery) }
            if let file = args.value("redis-password-file") {
                guard let text = try? String(contentsOfFile: file, encoding: .utf8),
                      let password = text.split(whereSeparator: \.isNewline).first.map(String.init), !password.isEmpty else {
                    throw Failure("cannot read a password from --redis-password-file \(file) (its first line)")
                }
                redisOptions.password = password
            }
            redisOptions.user = args.value("redis-user")
            // With tokens, authorship is one fact per board for every server (in Redis).
            redisOptions.sharesAuthorship = options.access != nil
            // Deleted boards' tombstones live in Redis: every server checks them before it
            // serves a board, and a delete on one server closes the board on every server.
            redisOptions.checksTombstones = true
            if let lease { redisOptions.leaseMilliseconds = Int(lease * 1000) }
            if let retention { redisOptions.retentionMilliseconds = Int(retention * 1000) }
            cluster = RedisCluster(address: redisAddress, options: redisOptions, loop: loop)
            cluster!.attach(to: host)
            // One `token revoke` reaches every server: each shares its file's revocations
            // through Redis and applies everyone's.
            if let revocations = options.access?.revocations { cluster!.shareRevocations(revocations) }
            NetCommands.log("scale-out: boards are kept in Redis at \(redisAddress) as node \(node); \(data) is this server's cache")
        }
        NetCommands.log("serving boards from \(data) on \(host.listenAddress!) (SIGINT or SIGTERM stops)")
        var web: WebView?
        if let webAddress {
            var webOptions = WebView.Options()
            webOptions.access = options.access
            webOptions.log = NetCommands.log
            webOptions.tls = options.serverTLS  // HTTPS with the sync port's certificate
            webOptions.allowedHosts = args.values("web-host")
            webOptions.allowedOrigins = args.values("web-origin")
            if let text = args.value("web-pages-per-address") {
                let number = try Parse.number(text, "--web-pages-per-address")
                guard number >= 1, number <= 1_000_000, number == number.rounded() else {
                    throw UsageError("--web-pages-per-address '\(text)' must be a whole number from 1 to 1000000")
                }
                webOptions.maxPagesPerAddress = Int(number)
                webOptions.maxPages = max(webOptions.maxPages, Int(number))
            }
            if let file = args.value("web-token-file") {
                // A token kept across restarts (pages reconnect with it), created when missing.
                webOptions.runToken = String(decoding: try Access.secret(at: file, create: true, bearer: "web view token (the page's ?token=)"), as: UTF8.self)
            }
            do {
                web = try WebView(listen: webAddress, host: host, dataDirectory: data, loop: loop, options: webOptions)
            } catch {
                throw Failure("cannot start the web view on \(webAddress): \(error)")
            }
            // Without a secret the view mints a token for this run: the URL carries it, so no
            // other web site a browser visits can reach the boards.
            NetCommands.log("web view at \(web!.url)\(options.access == nil ? "" : " (pages need ?token=... for their board)")")
        }
        let backups = backupPlan.map { ServeBackup.start($0, host: host, data: data, signal: backupSignal!) }
        let webhooks = webhookPlan.map { ServeWebhooks.start($0, host: host, data: data) }
        let admin = try adminSettings.map {
            try ServeAdmin.start($0, host: host, web: web, cluster: cluster, data: data, loop: loop, access: options.access, tls: options.serverTLS,
                                 extras: .init(backups: backups?.0, webhooks: webhooks, secretFile: args.value("secret-file")))
        }
        slot.admin = admin
        slot.drainSeconds = adminSettings?.drainSeconds ?? 0
        loop.run()
        admin?.close()
        if let backups, let backupPlan { ServeBackup.finish(backups.0, backupPlan) }  // the last run, bounded
        withExtendedLifetime((signals, web, cluster, revocationWatcher, admin, backups, webhooks)) {}
    }

    private func sync(_ raw: [String]) throws {
        let args = try Arguments(raw, options: Set(["server", "board", "timeout", "token", "token-file"] + Access.clientTLSOptions), flags: ["json", "tls"])
        let path = try args.positionals(["<package>"])[0]
        guard let serverText = args.value("server") else { throw UsageError("missing --server HOST:PORT") }
        guard let board = args.value("board") else { throw UsageError("missing --board NAME") }
        guard Hello.isValidBoardName(board) else { throw UsageError("--board '\(board)' is not a plain name (letters, digits, '-', '_', '.')") }
        let server = try address(serverText, "--server")
        let timeout = try args.value("timeout").map { try Parse.number($0, "--timeout") } ?? 60
        guard timeout > 0, timeout <= 86_400 else { throw UsageError("--timeout must be between 0 and 86400 seconds") }
        try ClientCommands.sync(path: path, board: board, server: server, timeout: timeout, args: args)
    }

    /// How long a minted token is valid unless `--expires` says otherwise.
    static let defaultTokenLifetime: Double = 24 * 3600

    /// Prints a signed token for one board and role (`token revoke ...`: revokes tokens).
    private func token(_ raw: [String]) throws {
        if raw.first == "revoke" { return try revoke(Array(raw.dropFirst())) }
        let args = try Arguments(raw, options: ["secret-file", "board", "role", "expires", "subject"], flags: ["json"])
        _ = try args.positionals([])
        guard let secretFile = args.value("secret-file") else { throw UsageError("missing --secret-file FILE") }
        guard let roleText = args.value("role") else { throw UsageError("missing --role read|write|peer|admin") }
        guard let role = AccessRole(rawValue: roleText) else { throw UsageError("--role must be read, write, peer or admin, not '\(roleText)'") }
        let board = try ServeAdmin.tokenBoard(args.value("board"), role: role)
        let now = Date().timeIntervalSince1970
        var expires: Double? = now + NetCommands.defaultTokenLifetime
        if let text = args.value("expires") {
            if text == "never" {
                expires = nil
            } else {
                guard let seconds = TokenAuthority.parseDuration(text) else {
                    throw UsageError("--expires '\(text)' is not a duration like 90s, 15m, 12h or 30d (or `never`)")
                }
                expires = now + seconds
            }
        }
        var generator = SystemRandomNumberGenerator()
        let subject = args.value("subject") ?? String(format: "%016llx", UInt64.random(in: 1...UInt64.max, using: &generator))
        guard TokenAuthority.isValidSubject(subject) else { throw UsageError("--subject is 1-64 letters, digits, '-', '_' or '.'") }
        let authority = try TokenAuthority(secret: Access.secret(at: secretFile, create: false))
        // The token id is drawn here, by the host: the sans-IO layer draws no randomness.
        let tokenID = TokenAuthority.hex16(UInt64.random(in: 1...UInt64.max, using: &generator))
        let token = try authority.mint(board: board, role: role, expires: expires, subject: subject, tokenID: tokenID, issued: now)
        let expiry = expires.map { ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: $0)) } ?? "never"
        if args.has("json") {
            try printJSON(["token": token, "board": board, "role": role.rawValue, "subject": subject, "tokenId": tokenID,
                           "expires": expiry])
        } else {
            print(token)
            FileHandle.standardError.write(Data("token id \(tokenID) for subject '\(subject)', expires \(expiry) (revoke: board-sync token revoke --secret-file \(secretFile) --token-id \(tokenID))\n".utf8))
        }
    }

    /// `token revoke --secret-file F (--subject S | --token-id ID | --token T)`: appends the
    /// revocation to F.revoked, which servers using F re-read.
    private func revoke(_ raw: [String]) throws {
        let args = try Arguments(raw, options: ["secret-file", "subject", "token-id", "token"], flags: [])
        _ = try args.positionals([])
        guard let secretFile = args.value("secret-file") else { throw UsageError("missing --secret-file FILE") }
        let line: String
        switch (args.value("subject"), args.value("token-id"), args.value("token")) {
        case (let subject?, nil, nil):
            guard TokenAuthority.isValidSubject(subject) else { throw UsageError("--subject is 1-64 letters, digits, '-', '_' or '.'") }
            _ = try Access.secret(at: secretFile, create: false)  // the right file, before writing beside it
            line = Revocations.line(subject: subject, at: Date().timeIntervalSince1970)
        case (nil, let id?, nil):
            guard TokenAuthority.isValidSubject(id) else { throw UsageError("--token-id is 1-64 letters, digits, '-', '_' or '.'") }
            _ = try Access.secret(at: secretFile, create: false)
            line = Revocations.line(tokenID: id)
        case (nil, nil, let token?):
            let authority = try TokenAuthority(secret: Access.secret(at: secretFile, create: false))
            switch authority.decode(Array(token.trimmingCharacters(in: .whitespacesAndNewlines).utf8)) {
            case .success(let grant):
                line = grant.tokenID.map(Revocations.line(tokenID:)) ?? Revocations.line(subject: grant.subject, at: Date().timeIntervalSince1970)
            case .failure(let refusal):
                throw Failure("cannot revoke \(refusal): it is not a token signed with the secret in \(secretFile)")
            }
        default:
            throw UsageError("give one of --subject, --token-id or --token")
        }
        let path = Access.revocationFile(for: secretFile)
        try Access.appendRevocation(line, to: path)
        print("revoked: \(line) (in \(path); servers using \(secretFile) apply it within a second)")
    }

    private func peer(_ raw: [String]) throws {
        let args = try Arguments(raw, options: Set(["listen", "connect", "board", "token", "token-file", "secret-file", "name", "color"] + Access.serverTLSOptions + Access.clientTLSOptions), flags: ["tls"])
        let path = try args.positionals(["<package>"])[0]
        let listen = try args.value("listen").map { try address($0, "--listen") }
        let dials = try args.values("connect").map { try address($0, "--connect") }
        guard listen != nil || !dials.isEmpty else { throw UsageError("give --listen, --connect or both") }
        let defaultBoard = Path.name(of: path).replacingOccurrences(of: ".boardpkg", with: "")
        let board = args.value("board") ?? (Hello.isValidBoardName(defaultBoard) ? defaultBoard : "board")
        guard Hello.isValidBoardName(board) else { throw UsageError("--board '\(board)' is not a plain name") }
        guard FileManager.default.fileExists(atPath: path) else {
            throw Failure("no board package at \(path) (create one with `board-sync new \(path)`)")
        }
        let name = Presence.clipped(args.value("name") ?? ProcessInfo.processInfo.environment["USER"] ?? "peer")
        let color = try args.value("color").map { text -> Color8 in
            guard let color = Color8(hex: text) else { throw UsageError("--color '\(text)' is not #RRGGBB or #RRGGBBAA") }
            return color
        } ?? Color8(red: 90, green: 90, blue: 90, alpha: 255)
        if listen == nil, dials.count == 1 {
            // A replica of one server's board: the library's live client.
            if Access.serverTLSOptions.contains(where: { args.value($0) != nil }) { throw UsageError("--tls-cert and --tls-key serve --listen; give both") }
            if args.value("secret-file") != nil { throw UsageError("--secret-file guards --listen; give both") }
            return try ClientCommands.peer(path: path, board: board, server: dials[0], name: name, color: color, args: args)
        }
        // A mesh peer (accepting peers, or relaying between several): a host of its own.
        let credentials = try Access.token(args)
        let package = try BoardPackage.open(at: path, fileSystem: PosixFileSystem(), newReplicaID: Commands.randomReplicaID)
        defer { package.close() }
        let loop = try EventLoop()
        let slot = HostSlot()
        let signals = NetCommands.stopOnSignals(slot, loop)
        var options = SyncHost.Options()
        options.log = NetCommands.log
        options.credentials = credentials
        options.serverTLS = try Access.serverTLS(args)
        options.clientTLS = try Access.clientTLS(args)
        if options.serverTLS != nil && listen == nil { throw UsageError("--tls-cert and --tls-key serve --listen; give both") }
        if options.clientTLS != nil && dials.isEmpty { throw UsageError("--tls is for --connect; give both") }
        var revocationWatcher: RevocationWatcher?
        if let secretFile = args.value("secret-file") {
            guard listen != nil else { throw UsageError("--secret-file guards --listen; give both") }
            (options.access, revocationWatcher) = try Access.control(secretFile: secretFile, loop: loop)
        } else if listen != nil {
            NetCommands.log("WARNING: no --secret-file: anyone who can reach the --listen address can read and write this board")
        }
        let host = try SyncHost(board: board, store: package, listen: listen, loop: loop, options: options)
        slot.host = host
        // Who is on the board: logged as replicas arrive and leave (not every pointer move).
        var present: [ReplicaID: String] = [:]
        host.onPresence = { _, presence in
            if presence.isGone {
                if let left = present.removeValue(forKey: presence.replica) {
                    NetCommands.log("presence: \(left) (\(presence.replica)) left; on the board: \(NetCommands.names(present))")
                }
            } else if present.updateValue(presence.name, forKey: presence.replica) == nil {
                NetCommands.log("presence: \(presence.name) (\(presence.replica)) is here; on the board: \(NetCommands.names(present))")
            }
        }
        // This peer's own presence, refreshed before its time-to-live runs out.
        func announce() {
            host.setPresence(Presence(replica: package.replica.id, name: name, color: color, ttl: Presence.defaultTTL))
            loop.schedule(after: Presence.defaultTTL / 2) { announce() }
        }
        announce()
        for dial in dials { host.connect(to: dial) }
        // The other commands on this package run on this host's board (ControlServer).
        let runner = MeshBoardRunner(host: host, package: package, loop: loop)
        let control = ControlServer(package: path, runner: runner, log: NetCommands.log)
        control.start()
        NetCommands.log("peer \(package.replica.id) for \(path) (board '\(board)') as '\(name)'\(host.listenAddress.map { ", listening on \($0)" } ?? "")")
        loop.run()
        runner.stop()
        control.beginStopping()
        control.stop()
        withExtendedLifetime((signals, revocationWatcher)) {}
    }
}

extension NetCommands {
    /// "ann, bob" for a log line (or "nobody else").
    static func names(_ present: [ReplicaID: String]) -> String {
        present.isEmpty ? "nobody else" : present.sorted { $0.key < $1.key }.map(\.value).joined(separator: ", ")
    }
}
