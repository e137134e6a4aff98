import BoardNet
import Foundation

/// `serve --webhook URL --webhook-secret-file FILE` (docs/DEPLOYMENT.md, "Webhooks").
enum ServeWebhooks {
    static let options = ["webhook", "webhook-secret-file", "webhook-queue", "webhook-timeout", "webhook-tls-ca"]

    static let help: [(String, String)] = [
        ("--webhook URL", "POST board.created, board.changed (after 2 s quiet, at most every 10 s per board), board.deleted, client.joined and client.left to this http:// or https:// URL (docs/DEPLOYMENT.md, Webhooks): JSON bodies signed with HMAC-SHA256 (X-BoardSync-Signature: sha256=HEX), an Idempotency-Key header, retried with backoff (1 s doubling to 60 s) from a thread of their own."),
        ("--webhook-secret-file FILE", "The webhook signing secret (a regular file, mode 0600, 16 bytes to 4 KB; or BOARD_SYNC_WEBHOOK_SECRET in the environment). Never logged."),
        ("--webhook-queue N", "Events waiting for a receiver that is down, at most (default 1000); beyond, the oldest is dropped with a log line."),
        ("--webhook-timeout S", "Seconds one delivery may take (default 5)."),
        ("--webhook-tls-ca CA", "For an https:// receiver with a private CA: verify its certificate against CA (PEM) instead of the system trust store."),
    ]

    /// The sender's options, checked before the server starts (nil: no --webhook).
    static func plan(_ args: Arguments) throws -> WebhookSender.Options? {
        guard let text = args.value("webhook") else {
            if let stray = options.dropFirst().first(where: { args.value($0) != nil }) { throw UsageError("--\(stray) needs --webhook URL") }
            return nil
        }
        let url: HTTPClient.URLParts
        do { url = try HTTPClient.URLParts(text) } catch { throw UsageError("--webhook: \(error)") }
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
        return options
    }

    static func start(_ options: WebhookSender.Options, host: SyncHost, data: String) -> WebhookNotifier {
        let sender = WebhookSender(options: options) { line in NetCommands.log(line) }
        NetCommands.log("webhooks: POSTing board and client events to \(options.url.tls ? "https" : "http")://\(options.url.hostHeader)\(options.url.path.split(separator: "?").first.map(String.init) ?? "/")")
        return WebhookNotifier(host: host, dataDirectory: data, sender: sender)
    }
}
