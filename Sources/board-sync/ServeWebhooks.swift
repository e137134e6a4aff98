import BoardNet
import Foundation

/// `serve --webhook URL --webhook-secret-file FILE` (docs/DEPLOYMENT.md, "Webhooks"). The URL
/// may carry the receiver's own secret in its path or query (Slack's and Zapier's do), so it
/// is never logged or printed whole (`HTTPClient.URLParts.redacted`), and it may come from a
/// file (`--webhook-url-file`, checked like a secret file) or the environment
/// (`BOARD_SYNC_WEBHOOK`) instead of the command line, which every local user can read (`ps`).
enum ServeWebhooks {
    static let options = ["webhook", "webhook-url-file", "webhook-secret-file", "webhook-queue", "webhook-timeout", "webhook-tls-ca"]
    /// Settings `--print-config` shows redacted (`HTTPClient.URLParts.redacting`).
    static let redactedSettings: Set<String> = ["webhook"]

    static let help: [(String, String)] = [
        ("--webhook URL", "POST board.created, board.changed (after 2 s quiet, at most every 10 s per board), board.deleted and clients.changed (sessions that joined and left a board, debounced the same way) to this http:// or https:// URL (docs/DEPLOYMENT.md, Webhooks): JSON bodies signed with HMAC-SHA256 (X-BoardSync-Signature: sha256=HEX), an Idempotency-Key header, retried with backoff (1 s doubling to 60 s) from a thread of their own. Logs and --print-config show only its scheme, host and port. Every local user can read a command line (ps): a URL that holds a secret belongs in --webhook-url-file or BOARD_SYNC_WEBHOOK."),
        ("--webhook-url-file FILE", "The webhook URL from FILE instead (a regular file, mode 0600, at most 4 KB, one line)."),
        ("--webhook-secret-file FILE", "The webhook signing secret (a regular file, mode 0600, 16 bytes to 4 KB; or BOARD_SYNC_WEBHOOK_SECRET in the environment). Never logged."),
        ("--webhook-queue N", "Events waiting for a receiver that is down, at most (default 1000); beyond, the oldest of the lowest priority is dropped with a log line (clients.changed first, then board.changed; board.created and board.deleted last)."),
        ("--webhook-timeout S", "Seconds one delivery may take (default 5)."),
        ("--webhook-tls-ca CA", "For an https:// receiver with a private CA: verify its certificate against CA (PEM) instead of the system trust store."),
    ]

    /// The sender's options, checked before the server starts (nil: no webhook), and a
    /// warning to log when the URL came from the command line with a path or query.
    static func plan(_ args: Arguments, sources: [String: String] = [:]) throws -> (options: WebhookSender.Options, warning: String?)? {
        let text: String
        switch (args.value("webhook"), args.value("webhook-url-file")) {
        case (nil, nil):
            if let stray = options.dropFirst().first(where: { args.value($0) != nil }) { throw UsageError("--\(stray) needs --webhook URL") }
            return nil
        case (.some, .some):
            throw UsageError("--webhook and --webhook-url-file: give one of them")
        case (let url?, nil):
            text = url
        case (nil, let file?):
            let lines = try ServeBackup.secretText(at: file, what: "webhook URL file").split(whereSeparator: \.isNewline)
                .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            guard lines.count == 1 else { throw Failure("the webhook URL file \(file) must hold one line: the URL (it holds \(lines.count))") }
            text = lines[0]
        }
        let url: HTTPClient.URLParts
        do { url = try HTTPClient.URLParts(text) } catch { throw UsageError("--webhook\(args.value("webhook") == nil ? "-url-file" : ""): \(error)") }
        var warning: String?
        if args.value("webhook") != nil, sources["webhook"] ?? "command line" == "command line", url.path != "/" {
            warning = "WARNING: --webhook on the command line: every local user can read its path and query (ps, /proc); if they hold a secret, give the URL in --webhook-url-file FILE (mode 0600) or BOARD_SYNC_WEBHOOK"
        }
        let secretText: String
        if let file = args.value("webhook-secret-file") {
            secretText = try ServeBackup.secretText(at: file, what: "webhook secret file")
        } else if let value = ProcessInfo.processInfo.environment["BOARD_SYNC_WEBHOOK_SECRET"] {
            secretText = value
        } else {
            throw UsageError("--webhook needs a signing secret: --webhook-secret-file FILE (mode 0600) or BOARD_SYNC_WEBHOOK_SECRET in the environment")
        }
        let secret = Array(secretText.trimmingCharacters(in: .whitespacesAndNewlines).utf8)
        guard secret.count >= 16 else { throw Failure("the webhook secret is too short (\(secret.count) bytes; at least 16)") }
        var options = WebhookSender.Options(url: url, secret: secret)
        if let queue = args.value("webhook-queue") {
            let number = try Parse.number(queue, "--webhook-queue")
            guard number >= 1, number <= 1_000_000, number == number.rounded() else { throw UsageError("--webhook-queue '\(queue)' must be a whole number from 1 to 1000000") }
            options.maxQueued = Int(number)
        }
        if let timeout = args.value("webhook-timeout") {
            let number = try Parse.number(timeout, "--webhook-timeout")
            guard number >= 0.1, number <= 600 else { throw UsageError("--webhook-timeout must be between 0.1 and 600 seconds") }
            options.timeout = number
        }
        if let ca = args.value("webhook-tls-ca") {
            guard url.tls else { throw UsageError("--webhook-tls-ca is for an https:// --webhook") }
            do { options.tls = try TLSContext.client(ca: ca) } catch { throw Failure("--webhook-tls-ca: \(error)") }
        }
        return (options, warning)
    }

    static func start(_ plan: (options: WebhookSender.Options, warning: String?), host: SyncHost, data: String) -> WebhookNotifier {
        let options = plan.options
        let sender = WebhookSender(options: options) { line in NetCommands.log(line) }
        if let warning = plan.warning { NetCommands.log(warning) }
        NetCommands.log("webhooks: POSTing board and client events to \(options.url.redacted)")
        return WebhookNotifier(host: host, dataDirectory: data, sender: sender)
    }
}
