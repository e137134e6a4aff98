import BoardNet
import BoardStore
import BoardSync
import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `serve --backup-to DEST [--backup-every D]` (backups on a schedule and on SIGUSR1) and
/// `restore --from DEST --data DIR` (docs/DEPLOYMENT.md, "Backups").
enum ServeBackup {
    /// The options where a backup target is named (serve and restore).
    static let targetOptions = ["s3-endpoint", "s3-region", "s3-credentials-file", "backup-timeout"]
    static let serveOptions = ["backup-to", "backup-every", "backup-final-timeout"] + targetOptions

    /// What `serve` was asked for, checked before the server starts.
    struct Plan {
        var target: any BackupTarget
        var every: Double?
        /// Seconds the last run at SIGTERM or SIGINT may take (0: none).
        var finalTimeout: Double = ServeBackup.defaultFinalTimeout
    }

    /// `--backup-final-timeout` unless given: inside Kubernetes' default 30-second grace
    /// period (and the documented unit's TimeoutStopSec=60) with room for the saves.
    static let defaultFinalTimeout: Double = 20

    static func plan(_ args: Arguments) throws -> Plan? {
        guard let destination = args.value("backup-to") else {
            if let stray = serveOptions.first(where: { args.value($0) != nil }) { throw UsageError("--\(stray) needs --backup-to DIR|s3://BUCKET/PREFIX") }
            return nil
        }
        var every: Double? = 15 * 60
        if let text = args.value("backup-every") {
            if text == "never" {
                every = nil
            } else {
                guard let seconds = TokenAuthority.parseDuration(text), seconds >= 1, seconds <= 30 * 86_400 else {
                    throw UsageError("--backup-every '\(text)' is not a duration from 1s to 30d like 10s, 15m or 6h (or `never`: on SIGUSR1 only)")
                }
                every = seconds
            }
        }
        var plan = Plan(target: try target(destination, args), every: every)
        if let text = args.value("backup-final-timeout") {
            let number = try Parse.number(text, "--backup-final-timeout")
            guard number >= 0, number <= 3600 else { throw UsageError("--backup-final-timeout must be between 0 (no final backup) and 3600 seconds") }
            plan.finalTimeout = number
        }
        return plan
    }

    /// A directory, or `s3://BUCKET[/PREFIX]` with the --s3-... options.
    static func target(_ destination: String, _ args: Arguments) throws -> any BackupTarget {
        let timeout = try args.value("backup-timeout").map { text -> Double in
            let number = try Parse.number(text, "--backup-timeout")
            guard number >= 0.1, number <= 3600 else { throw UsageError("--backup-timeout must be between 0.1 and 3600 seconds") }
            return number
        } ?? 30
        guard destination.hasPrefix("s3://") else {
            if let stray = ["s3-endpoint", "s3-region", "s3-credentials-file"].first(where: { args.value($0) != nil }) {
                throw UsageError("--\(stray) is for an s3://BUCKET/PREFIX destination")
            }
            guard !destination.isEmpty, !destination.contains("://") else { throw UsageError("'\(destination)' is not a directory or s3://BUCKET/PREFIX") }
            return DirectoryBackupTarget(root: destination)
        }
        let rest = destination.dropFirst(5)
        let bucket = String(rest.prefix { $0 != "/" })
        let prefix = String(rest.dropFirst(bucket.count).drop { $0 == "/" })
        guard S3BackupTarget.isValidBucket(bucket) else { throw UsageError("'\(bucket)' in \(destination) is not an S3 bucket name (3-63 lower-case letters, digits, '-' and '.')") }
        guard prefix.utf8.count <= 512, !prefix.contains(where: { $0.isNewline || $0 == "\\" }), !prefix.split(separator: "/").contains("..") else {
            throw UsageError("the prefix in \(destination) must be a plain path (at most 512 bytes)")
        }
        let environment = ProcessInfo.processInfo.environment
        let region = args.value("s3-region") ?? environment["AWS_REGION"] ?? "us-east-1"
        guard !region.isEmpty, region.utf8.count <= 64, region.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" }) else {
            throw UsageError("--s3-region '\(region)' is not a region name like us-east-1")
        }
        let endpoint = args.value("s3-endpoint") ?? "https://s3.\(region).amazonaws.com"
        let credentials = try s3Credentials(args.value("s3-credentials-file"), environment)
        do {
            return try S3BackupTarget(endpoint: endpoint, bucket: bucket, prefix: prefix, region: region, credentials: credentials,
                                      client: HTTPClient(timeout: timeout))
        } catch {
            throw UsageError("\(error)")
        }
    }

    /// From the file (first line the access key id, second the secret) or the environment;
    /// never from argv.
    static func s3Credentials(_ file: String?, _ environment: [String: String]) throws -> S3Credentials {
        if let file {
            let lines = try secretText(at: file, what: "S3 credentials file").split(whereSeparator: \.isNewline)
                .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            guard lines.count == 2 else { throw Failure("the S3 credentials file \(file) must hold two lines: the access key id, then the secret access key") }
            return S3Credentials(accessKey: lines[0], secretKey: lines[1])
        }
        guard let key = environment["AWS_ACCESS_KEY_ID"], let secret = environment["AWS_SECRET_ACCESS_KEY"], !key.isEmpty, !secret.isEmpty else {
            throw UsageError("an s3:// destination needs credentials: --s3-credentials-file FILE (access key id, then secret, one a line; mode 0600) or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment")
        }
        return S3Credentials(accessKey: key, secretKey: secret)
    }

    /// A secret's text from a file that is regular, at most 4 KB and readable by its owner only
    /// (the checks the token secret gets). The text is never logged.
    static func secretText(at path: String, what: String) throws -> String {
        var info = stat()
        guard lstat(path, &info) == 0 else { throw Failure("no \(what) at \(path)") }
        guard info.st_mode & S_IFMT == S_IFREG else { throw Failure("the \(what) \(path) is not a regular file") }
        guard info.st_mode & 0o077 == 0 else {
            throw Failure("the \(what) \(path) can be read by other users (mode \(String(info.st_mode & 0o777, radix: 8))); run `chmod 600 \(path)`")
        }
        guard info.st_size <= 4096, let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw Failure("cannot read the \(what) \(path) (at most 4 KB of text)")
        }
        return text
    }

    /// SIGUSR1 (back up now), watched from before the server listens so one arriving while it
    /// starts is never the default action (which ends the process); until `start` fills the
    /// box it does nothing.
    static func watchSignal(_ loop: EventLoop) -> (SchedulerBox, DispatchSourceSignal) {
        let box = SchedulerBox()
        let source = DispatchSource.makeSignalSource(signal: SIGUSR1, queue: .global())
        source.setEventHandler { loop.execute { box.scheduler?.backupNow(reason: "SIGUSR1") } }
        source.resume()
        signal(SIGUSR1, SIG_IGN)
        return (box, source)
    }

    /// Starts the schedule on the server's loop; SIGUSR1 (`watchSignal`) reaches it from here on.
    static func start(_ plan: Plan, host: SyncHost, data: String, signal: (SchedulerBox, DispatchSourceSignal)) -> (BackupScheduler, DispatchSourceSignal) {
        let scheduler = BackupScheduler(host: host, dataDirectory: data, target: plan.target, every: plan.every, log: NetCommands.log)
        signal.0.scheduler = scheduler
        NetCommands.log("backups: every board to \(plan.target)\(plan.every.map { ", every \(Int($0)) s" } ?? "") and on SIGUSR1 (`kill -USR1 \(getpid())`)\(plan.finalTimeout > 0 ? "; a last one at SIGTERM (at most \(plan.finalTimeout == plan.finalTimeout.rounded() ? String(Int(plan.finalTimeout)) : String(plan.finalTimeout)) s)" : "")")
        return (scheduler, signal.1)
    }

    /// After the loop stopped (SIGTERM, SIGINT): the last run, bounded (`finalBackup`).
    static func finish(_ scheduler: BackupScheduler, _ plan: Plan) {
        guard plan.finalTimeout > 0 else {
            return NetCommands.log("final backup: off (--backup-final-timeout 0); operations acknowledged since the last completed backup are not in \(plan.target)")
        }
        _ = scheduler.finalBackup(timeout: plan.finalTimeout)
    }

    /// The scheduler SIGUSR1 reaches (set on the loop thread, read there).
    final class SchedulerBox: @unchecked Sendable {
        weak var scheduler: BackupScheduler?
    }

    /// `restore --from DEST --data DIR [--board NAME]... [--force] [--json]`.
    static func restore(_ raw: [String]) throws {
        let args = try Arguments(raw, options: Set(["from", "data", "board"] + targetOptions), flags: ["force", "json"])
        _ = try args.positionals([])
        guard let from = args.value("from") else { throw UsageError("missing --from DIR|s3://BUCKET/PREFIX") }
        guard let data = args.value("data") else { throw UsageError("missing --data DIR") }
        for board in args.values("board") where !Hello.isValidBoardName(board) {
            throw UsageError("--board '\(board)' is not a plain name (letters, digits, '-', '_', '.')")
        }
        let target = try target(from, args)
        var options = BackupRestore.Options()
        options.force = args.has("force")
        options.boards = args.values("board").isEmpty ? nil : args.values("board")
        let outcome: BackupRestore.Outcome
        do {
            outcome = try BackupRestore.restore(from: target, into: data, options: options)
        } catch let error as BackupRestore.PartlyRestored {
            throw Failure("restore from \(target) failed part-way in \(data): \(error)")
        } catch {
            throw Failure("restore from \(target) failed, nothing was changed in \(data): \(error)")
        }
        if args.has("json") {
            try printJSON(["data": data, "from": "\(target)", "movedAside": outcome.movedAside,
                           "boards": outcome.restored.map { ["board": $0.board, "operations": $0.operations, "images": $0.images, "takenAt": $0.takenAt] }])
        } else {
            for board in outcome.restored {
                print("restored board '\(board.board)': \(board.operations) operations, \(board.images) images (backed up \(board.takenAt))")
            }
            for path in outcome.movedAside { print("moved the board that was there aside to \(path)") }
            print("restored \(outcome.restored.count) boards into \(data); start `board-sync serve --data \(data)`")
        }
    }
}

extension ServeBackup {
    static let targetHelp: [(String, String)] = [
        ("--s3-endpoint URL", "For s3://: the S3-compatible service (default https://s3.REGION.amazonaws.com; http://HOST:PORT for MinIO or moto on a trusted network). Requests are path-style and signed with AWS SigV4."),
        ("--s3-region NAME", "For s3://: the region signed for (default $AWS_REGION, else us-east-1)."),
        ("--s3-credentials-file FILE", "For s3://: the access key id on the first line, the secret access key on the second (a regular file, mode 0600, at most 4 KB). Without it AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are read from the environment. Never given on the command line, never logged."),
        ("--backup-timeout S", "Seconds one request to the backup target may take (default 30)."),
    ]
    static let serveHelp: [(String, String)] = [
        ("--backup-to DIR|s3://BUCKET/PREFIX", "Back up every board while serving (docs/DEPLOYMENT.md, Backups): each board's acknowledged operations and images, a board whose backup is whole or absent (its manifest is written last), only boards changed since their last backup. Files and uploads run off the serving thread; a failed backup (unreachable or full target, refused credentials) is logged, keeps the previous one whole and is tried again at the next run. SIGUSR1 backs up now."),
        ("--backup-every D", "How often (1s to 30d, like 10s, 15m, 6h; default 15m; `never`: on SIGUSR1 only)."),
        ("--backup-final-timeout S", "On SIGTERM or SIGINT, after the server stopped serving and saved: one last backup of the boards changed since the last completed one, waiting at most S seconds (default 20; 0: none). The log says whether it completed."),
    ] + targetHelp
    static let restoreHelp: [(String, String)] = [
        ("--from DIR|s3://BUCKET/PREFIX", "Restore a server's backups (`serve --backup-to`) instead: every board (or each --board NAME) is fetched and checked (sizes, SHA-256 of the log and of every image, the log's records, every image the log shows present) before anything is moved into --data; a damaged, truncated or incomplete backup changes nothing."),
        ("--data DIR", "The data directory to restore into: new or empty unless --force."),
        ("--force", "Restore into a data directory that holds something: boards of the same names are moved aside to NAME.boardpkg.before-restore-TIME (never deleted); every one's lock is taken first, so a server holding any refuses the whole restore; all or none are moved."),
    ] + targetHelp
}
