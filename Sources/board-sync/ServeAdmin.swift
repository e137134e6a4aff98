import BoardClient
import BoardModel
import BoardNet
import BoardRender
import BoardStore
import BoardRedisNet
import BoardSync
import Foundation

/// `serve --admin HOST:PORT`: the operator's port (probes and metrics, `AdminServer`), its
/// flags, and `token --role admin`.
enum ServeAdmin {
    static let options = ["admin", "admin-token-file", "admin-host", "admin-connections", "admin-connections-per-address",
                          "admin-request-timeout", "drain-seconds", "log-format"]

    static let help: [(String, String)] = [
        ("--admin HOST:PORT", "Serve the operator's port here (off by default): /healthz and /readyz open to anyone who can reach it (Kubernetes probes send no token), /metrics (Prometheus text format) and the admin API (`board-sync admin`) only with `Authorization: Bearer TOKEN`: an admin token (`token --role admin`) with --secret-file, otherwise the token in --admin-token-file. With --tls-cert it speaks HTTPS."),
        ("--admin-token-file FILE", "Without --secret-file (then required with --admin): the bearer token /metrics and the admin API need, read from FILE, created with a random token (mode 0600) when missing."),
        ("--admin-host NAME", "A host name (besides IP addresses and localhost) requests to the admin port may name; repeatable. Others are refused (DNS rebinding)."),
        ("--admin-connections N", "Admin connections open at once (default 64); strangers that have sent no whole request make room oldest first."),
        ("--admin-connections-per-address N", "Admin connections from one IP address (default 16)."),
        ("--admin-request-timeout S", "Seconds an admin connection has to send its request (default 5)."),
        ("--drain-seconds S", "With --admin: on SIGTERM, /readyz answers 503 at once, the server keeps serving S seconds (default 0) so load balancers stop sending clients, then stops as always (goodbyes, saves, exit 0)."),
        ("--log-format text|json", "text (default): `TIME line`; json: one object per line with time, level, event, board, replica, subject, peer, code and message (tokens never appear: a web view's run token shows as token=REDACTED)."),
    ]

    struct Settings {
        var listen: SocketAddress
        var tokenFile: String?
        var hosts: [String]
        var maxConnections = 64
        var maxPerAddress = 16
        var requestTimeout: Double = 5
        var drainSeconds: Double = 0

        /// Nil without --admin (the other admin flags then refused).
        init?(_ args: Arguments) throws {
            guard let text = args.value("admin") else {
                for option in options where option != "log-format" && args.value(option) != nil {
                    throw UsageError("--\(option) needs --admin HOST:PORT")
                }
                return nil
            }
            do { listen = try SocketAddress(parsing: text) } catch { throw UsageError("--admin \(error)") }
            tokenFile = args.value("admin-token-file")
            if tokenFile == nil, args.value("secret-file") == nil {
                throw UsageError("--admin without --secret-file needs --admin-token-file FILE (the token /metrics needs; created when missing)")
            }
            if tokenFile != nil, args.value("secret-file") != nil {
                throw UsageError("--admin-token-file is for servers without --secret-file (with it, /metrics needs an admin token: `token --role admin`)")
            }
            hosts = args.values("admin-host")
            func whole(_ name: String, _ range: ClosedRange<Double>) throws -> Int? {
                guard let text = args.value(name) else { return nil }
                let number = try Parse.number(text, "--\(name)")
                guard range.contains(number), number == number.rounded() else {
                    throw UsageError("--\(name) '\(text)' must be a whole number from \(Int(range.lowerBound)) to \(Int(range.upperBound))")
                }
                return Int(number)
            }
            func seconds(_ name: String, _ range: ClosedRange<Double>) throws -> Double? {
                guard let text = args.value(name) else { return nil }
                let number = try Parse.number(text, "--\(name)")
                guard range.contains(number) else { throw UsageError("--\(name) '\(text)' must be between \(range.lowerBound) and \(range.upperBound) seconds") }
                return number
            }
            maxConnections = try whole("admin-connections", 1...10_000) ?? maxConnections
            maxPerAddress = try whole("admin-connections-per-address", 1...10_000) ?? maxPerAddress
            requestTimeout = try seconds("admin-request-timeout", 0.1...300) ?? requestTimeout
            drainSeconds = try seconds("drain-seconds", 0...3600) ?? drainSeconds
        }
    }

    /// What the admin API's calls reach besides the host: backups, webhooks, the revocations file.
    struct Extras {
        var backups: BackupScheduler?
        var webhooks: WebhookNotifier?
        var secretFile: String?
    }

    static func start(_ settings: Settings, host: SyncHost, web: WebView?, cluster: RedisCluster?, data: String,
                      loop: EventLoop, access: SyncEndpoint.AccessControl?, tls: TLSContext?, extras: Extras = Extras()) throws -> AdminServer {
        var options = AdminServer.Options()
        options.render = { snapshot, format, scale in
            // As `board-sync export` renders (BoardWriter into memory), on a worker thread.
            guard let type = ContentType.forPath("export.\(format)") else { throw Failure("unknown format \(format)") }
            let memory = MemoryFileSystem()
            let writer = BoardWriter(configuration: WriteConfiguration(contentType: type, fileSystem: memory, export: ExportPolicy(scale: scale, transparent: false)))
            _ = try writer.write(content: snapshot, to: "/export.\(format)", previous: nil)
            return try memory.readFile("/export.\(format)")
        }
        if let backups = extras.backups {
            options.backupNow = { [weak backups] in backups?.backupNow(reason: "admin API") }
            options.extraMetrics.append({ [weak backups] in backups.map { backupMetrics($0.status) } ?? "" })
        }
        if let webhooks = extras.webhooks { options.onBoardDeleted = { [weak webhooks] board in webhooks?.boardDeleted(board) } }
        if let secretFile = extras.secretFile {
            // The file `token revoke` appends to: this server's watcher applies it within a
            // second, and with --redis every server applies it (shared through Redis).
            options.revoke = { subject, tokenID in
                let line = subject.map { Revocations.line(subject: $0, at: Date().timeIntervalSince1970) } ?? Revocations.line(tokenID: tokenID ?? "")
                try Access.appendRevocation(line, to: Access.revocationFile(for: secretFile))
                NetCommands.log("admin: revoked \(line)")
                return line
            }
        }
        options.access = access
        options.log = NetCommands.log
        options.tls = tls
        options.allowedHosts = settings.hosts
        options.maxConnections = settings.maxConnections
        options.maxConnectionsPerAddress = settings.maxPerAddress
        options.maxUnanswered = min(options.maxUnanswered, settings.maxConnections)
        options.requestTimeout = settings.requestTimeout
        if let file = settings.tokenFile {
            options.runToken = String(decoding: try Access.secret(at: file, create: true, bearer: "admin token (`board-sync admin --token-file FILE`)"), as: UTF8.self)
        }
        if let cluster {
            // Deletes and undeletes reach every server: the tombstone is kept in Redis.
            options.sharedTombstones = cluster
            options.readinessChecks.append(("redis", { [weak cluster] in
                guard let cluster else { return "stopped" }
                return cluster.isConnected ? nil : "not connected to Redis at \(cluster.address)"
            }))
            options.extraMetrics.append({ [weak cluster] in
                guard let cluster else { return "" }
                var out = MetricsText()
                out.family("boardsync_redis_round_trips_total", .counter, "Replies received from Redis (commands answered).",
                           [([], Double(cluster.boardLog.repliesReceived))])
                out.family("boardsync_redis_errors_total", .counter, "Redis error replies, and links lost or not connected.", [
                    ([("kind", "reply")], Double(cluster.boardLog.errorReplies)), ([("kind", "link")], Double(cluster.linkFailures)),
                ])
                out.family("boardsync_redis_unconfirmed_appends", .gauge, "Appends sent to Redis and not confirmed yet.",
                           [([], Double(cluster.boardLog.unconfirmedAppends))])
                out.family("boardsync_redis_connected", .gauge, "1 when every Redis link is connected.", [([], cluster.isConnected ? 1 : 0)])
                return out.text
            })
        }
        let server: AdminServer
        do {
            server = try AdminServer(listen: settings.listen, host: host, web: web, dataDirectory: data, loop: loop, options: options)
        } catch {
            throw Failure("cannot start the admin port on \(settings.listen): \(error)")
        }
        let guardText = access != nil ? "/metrics needs an admin token (board-sync token --role admin)"
            : "/metrics needs the token in \(settings.tokenFile!) (Authorization: Bearer ...)"
        NetCommands.log("admin port at \(tls == nil ? "http" : "https")://\(server.listenAddress)/ (/healthz and /readyz open; \(guardText))")
        return server
    }

    /// `boardsync_backup_*`: what `serve --backup-to` has done (docs/DEPLOYMENT.md, "Backups").
    static func backupMetrics(_ status: BackupStatus) -> String {
        var out = MetricsText()
        out.family("boardsync_backup_runs_total", .counter, "Backup runs that ended (scheduled, on demand, final).", [([], Double(status.runs))])
        out.family("boardsync_backup_last_finished_timestamp_seconds", .gauge, "When the last backup run ended (0: none yet).", [([], status.lastFinishedAt)])
        out.family("boardsync_backup_last_run_boards", .gauge, "Boards of the last backup run, by result.", [
            ([("result", "written")], Double(status.lastWritten)), ([("result", "unchanged")], Double(status.lastUnchanged)),
            ([("result", "failed")], Double(status.lastFailed)),
        ])
        out.family("boardsync_backup_boards_failing", .gauge, "Boards whose last backup attempt failed (their previous backup stays).", [([], Double(status.failing.count))])
        out.family("boardsync_backup_boards_too_large", .gauge, "Boards refused by the backup for a size over BackupLimits (not backed up until under it).", [([], Double(status.tooLarge.count))])
        return out.text
    }

    /// The board field of a token for `role`: admin tokens name none (`*`), others need --board.
    static func tokenBoard(_ board: String?, role: AccessRole) throws -> String {
        if role == .admin {
            guard board == nil else { throw UsageError("--role admin names no board: leave out --board") }
            return TokenAuthority.adminScope
        }
        guard let board else { throw UsageError("missing --board NAME") }
        guard Hello.isValidBoardName(board) else { throw UsageError("--board '\(board)' is not a plain name (letters, digits, '-', '_', '.')") }
        return board
    }
}
