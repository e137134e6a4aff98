import BoardModel
import BoardNet
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A one-thread HTTP receiver on a free loopback port: reads each request whole (head and
/// Content-Length body), answers it (200 unless `answer` says otherwise), and keeps what it
/// got with the status it answered.
final class HookReceiver: @unchecked Sendable {  // `requests` and the answer only under `lock`
    let port: UInt16
    private let fd: Int32
    private let lock = NSLock()
    private var requests: [(head: String, body: [UInt8], status: Int)] = []
    private var status = 200
    private var body = ""
    private var raw: [UInt8]?
    private var closed = false

    init() throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let fd = self.fd
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        listen(fd, 16)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        port = UInt16(bigEndian: address.sin_port)
        Thread { [self] in self.serve() }.start()
    }

    /// What later requests are answered: `status` with `body`, or `raw` bytes as they are.
    func answer(status: Int = 200, body: String = "", raw: [UInt8]? = nil) {
        lock.withLock { (self.status, self.body, self.raw) = (status, body, raw) }
    }

    private func serve() {
        while true {
            let client = accept(fd, nil, nil)
            guard client >= 0 else { return }
            var raw: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = recv(client, &buffer, buffer.count, 0)
                if count <= 0 { break }
                raw += buffer[0..<count]
                if let end = raw.firstRange(of: [13, 10, 13, 10]) {
                    let head = String(decoding: raw[..<end.lowerBound], as: UTF8.self)
                    let length = head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
                        .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
                    if raw.count - end.upperBound >= length {
                        let reply: [UInt8] = lock.withLock {
                            requests.append((head, Array(raw[end.upperBound..<(end.upperBound + length)]), status))
                            if let raw = self.raw { return raw }
                            return Array("HTTP/1.1 \(status) Answer\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)".utf8)
                        }
                        _ = reply.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                        break
                    }
                }
            }
            Glibc.close(client)
        }
    }

    var received: [(head: String, body: [UInt8], status: Int)] { lock.withLock { requests } }

    /// Stops listening: later deliveries find the port closed.
    func close() {
        let first = lock.withLock { () -> Bool in
            defer { closed = true }
            return !closed
        }
        if first { shutdown(fd, Int32(SHUT_RDWR)); Glibc.close(fd) }
    }

    deinit { close() }
}

/// The library side of webhooks: `WebhookSender` signs and delivers; `WebhookNotifier.boardDeleted`
/// (the admin API's entry) sends `board.deleted` and drops the board's waiting `board.changed`.
@Suite struct WebhookNotifierTests {
    @Test func aDeletedBoardIsReportedSignedAndItsWaitingChangeDropped() throws {
        let directory = TempDirectory()
        let receiver = try HookReceiver()
        let secret = Array("sixteen-bytes-or-more-secret".utf8)
        let server = try ServerFixture(data: directory.path)
        defer { server.stop() }
        let url = try HTTPClient.URLParts("http://127.0.0.1:\(receiver.port)/hook?source=test")
        let sender = WebhookSender(options: WebhookSender.Options(url: url, secret: secret)) { _ in }
        defer { sender.stop() }
        let host = server.host
        // The change would be reported 0.3 s later; the deletion, right after it, drops it.
        let notifier = try server.thread.onLoop { WebhookNotifier(host: host, dataDirectory: directory.path, sender: sender, quiet: 0.3, interval: 0.3) }
        try server.thread.onLoop {
            host.onBoardChange?("team")
            notifier.boardDeleted("team")
        }
        let deadline = Date().addingTimeInterval(20)
        while receiver.received.count < 2, Date() < deadline { usleep(20_000) }
        usleep(1_000_000)  // well past when the change was due
        let received = receiver.received
        #expect(received.count == 2, "board.created, then board.deleted, and no board.changed: \(received.map(\.head))")
        let events = received.compactMap { try? JSONSerialization.jsonObject(with: Data($0.body)) as? [String: Any] }
        #expect(events.map { $0["event"] as? String } == ["board.created", "board.deleted"])
        #expect(events.allSatisfy { $0["board"] as? String == "team" })
        for request in received {
            #expect(request.head.hasPrefix("POST /hook?source=test HTTP/1.1"))
            let signature = WebhookSender.signature(request.body, secret: secret)
            #expect(signature == "sha256=" + SigV4.hex(HMAC.sha256(key: secret, message: request.body)))
            #expect(request.head.contains("X-BoardSync-Signature: \(signature)"), "\(request.head)")
            #expect(request.head.contains("Idempotency-Key: "))
        }
        #expect(sender.counts.delivered == 2 && sender.counts.dropped == 0)
        withExtendedLifetime(notifier) {}
    }
}
