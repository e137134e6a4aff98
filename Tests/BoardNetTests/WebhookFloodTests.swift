import BoardCRDT
import BoardModel
import BoardNet
import BoardSync
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Lines a sender logged, kept for a test to read.
final class LoggedLines: @unchecked Sendable {  // `lines` only under `lock`
    private let lock = NSLock()
    private var lines: [String] = []

    func append(_ line: String) { lock.withLock { lines.append(line) } }
    var all: [String] { lock.withLock { lines } }

    /// Waits until some line holds `text` (or 20 s pass).
    func waitFor(_ text: String) -> String? {
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if let line = all.first(where: { $0.contains(text) }) { return line }
            usleep(20_000)
        }
        return nil
    }
}

/// What a webhook receiver cannot make the server do, and what a flapping client cannot push
/// out of the queue (docs/DEPLOYMENT.md, "Webhooks").
@Suite(.serialized) struct WebhookFloodTests {
    static let secret = Array("sixteen-bytes-or-more-secret".utf8)

    static func events(_ received: [(head: String, body: [UInt8], status: Int)]) -> [[String: Any]] {
        received.filter { $0.status == 200 }.compactMap { try? JSONSerialization.jsonObject(with: Data($0.body)) as? [String: Any] }
    }

    /// Boards that come and go (found by review: the notifier kept every board's debouncing
    /// state for good, so a server whose boards are created and deleted in a loop grew without
    /// end): 300 boards changed once, and a client that came and went, are forgotten an
    /// interval after their events.
    @Test func quietBoardsAreForgotten() throws {
        let directory = TempDirectory()
        let receiver = try HookReceiver()
        let server = try ServerFixture(data: directory.path)
        defer { server.stop() }
        var options = WebhookSender.Options(url: try HTTPClient.URLParts("http://127.0.0.1:\(receiver.port)/hook"), secret: Self.secret)
        options.maxQueued = 1000
        let sender = WebhookSender(options: options) { _ in }
        defer { sender.stop() }
        let host = server.host
        let notifier = try server.thread.onLoop { WebhookNotifier(host: host, dataDirectory: directory.path, sender: sender, quiet: 0.01, interval: 0.05) }
        try server.thread.onLoop {
            for index in 0..<300 { host.onBoardChange?("board-\(index)") }
        }
        #expect(try server.thread.onLoop { notifier.trackedBoards } == 300)
        let hello = Message.hello(Hello(board: "visited", replica: ReplicaID(0x77), version: .empty)).frame().encoded()
        _ = rawExchange(server.address, hello, closeWrite: true)
        #expect(try server.thread.wait { host.connectionCount == 0 })
        #expect(try server.thread.wait { notifier.trackedBoards == 0 }, "every board's state is dropped once its interval passed")
        func changedBoards() -> Set<String> {
            Set(Self.events(receiver.received).filter { $0["event"] as? String == "board.changed" }.compactMap { $0["board"] as? String })
        }
        let sent = Date().addingTimeInterval(20)
        while changedBoards().count < 300, Date() < sent { usleep(20_000) }
        #expect(changedBoards().count == 300, "each board's change was sent before it was forgotten")
        // A board edited again after it was forgotten is reported again.
        try server.thread.onLoop { host.onBoardChange?("board-7") }
        let deadline = Date().addingTimeInterval(20)
        func sevens() -> Int { Self.events(receiver.received).filter { $0["event"] as? String == "board.changed" && $0["board"] as? String == "board-7" }.count }
        while sevens() < 2, Date() < deadline { usleep(20_000) }
        #expect(sevens() == 2)
        withExtendedLifetime(notifier) {}
    }

    /// A client reconnecting 300 times (each under a new replica id) while the receiver is
    /// down and the queue holds 8: every board.created and board.deleted still arrives, in
    /// order per board, and the client's comings and goings are a handful of clients.changed.
    @Test func aFlappingClientCannotPushOutBoardEvents() throws {
        let directory = TempDirectory()
        let receiver = try HookReceiver()
        receiver.answer(status: 503)
        let server = try ServerFixture(data: directory.path)
        defer { server.stop() }
        var options = WebhookSender.Options(url: try HTTPClient.URLParts("http://127.0.0.1:\(receiver.port)/hook"), secret: Self.secret)
        options.maxQueued = 8
        options.retryFirst = 0.01
        options.retryMax = 0.05
        let lines = LoggedLines()
        let sender = WebhookSender(options: options) { lines.append($0) }
        defer { sender.stop() }
        let host = server.host
        let notifier = try server.thread.onLoop { WebhookNotifier(host: host, dataDirectory: directory.path, sender: sender, quiet: 0.02, interval: 0.05) }
        func changed(_ board: String) throws { try server.thread.onLoop { host.onBoardChange?(board) } }
        func deleted(_ board: String) throws { try server.thread.onLoop { notifier.boardDeleted(board) } }
        func flap(_ index: Int) {
            let hello = Message.hello(Hello(board: "flap", replica: ReplicaID(UInt64(0x1000 + index)), version: .empty)).frame().encoded()
            _ = rawExchange(server.address, hello, closeWrite: true)
        }
        try changed("b0")
        try changed("b1")
        for index in 0..<300 {
            flap(index)
            if index == 100 {
                try changed("b2")
                try deleted("b0")
            }
            if index == 200 {
                try changed("b3")
                try deleted("b1")
            }
        }
        #expect(try server.thread.wait { host.connectionCount == 0 })
        usleep(300_000)  // the last clients.changed is due
        let dropped = lines.all.filter { $0.contains("dropped ") }
        #expect(!dropped.isEmpty, "the queue of 8 overflowed: \(sender.counts)")
        #expect(!dropped.contains { $0.contains("dropped board.created") || $0.contains("dropped board.deleted") }, "\(dropped)")
        receiver.answer(status: 200)
        let expected: Set<String> = ["board.created b0", "board.created b1", "board.created b2", "board.created b3", "board.created flap",
                                     "board.deleted b0", "board.deleted b1"]
        func delivered() -> [String] {
            Self.events(receiver.received).map { "\($0["event"] as? String ?? "?") \($0["board"] as? String ?? "?")" }
        }
        let deadline = Date().addingTimeInterval(30)
        while !expected.isSubset(of: Set(delivered())), Date() < deadline { usleep(20_000) }
        let names = delivered()
        #expect(expected.isSubset(of: Set(names)), "\(names) \(lines.all.suffix(5))")
        for board in ["b0", "b1"] {
            let created = names.firstIndex(of: "board.created \(board)") ?? Int.max
            let deletedAt = names.firstIndex(of: "board.deleted \(board)") ?? -1
            #expect(created < deletedAt, "\(board) created before it is deleted: \(names)")
        }
        let summaries = Self.events(receiver.received).filter { $0["event"] as? String == "clients.changed" }
        #expect(summaries.count < 20, "300 connections are a few summaries, not 600 events: \(summaries.count)")
        for summary in summaries {
            #expect(summary["board"] as? String == "flap")
            #expect((summary["joined_replicas"] as? [String])?.count ?? 99 <= WebhookNotifier.maxReplicasListed)
            #expect((summary["left_replicas"] as? [String])?.count ?? 99 <= WebhookNotifier.maxReplicasListed)
        }
        // With the receiver back and the queue empty, one more connection is reported: it
        // joined and left, and none is left connected.
        let drained = Date().addingTimeInterval(20)
        while sender.counts.waiting > 0, Date() < drained { usleep(20_000) }
        func allSummaries() -> [[String: Any]] { Self.events(receiver.received).filter { $0["event"] as? String == "clients.changed" } }
        let before = allSummaries().count
        flap(1000)
        let late = Date().addingTimeInterval(20)
        func since() -> [[String: Any]] { Array(allSummaries().dropFirst(before)) }
        func total(_ key: String) -> Int { since().reduce(0) { $0 + ($1[key] as? Int ?? 0) } }
        while Date() < late, total("left") < 1 { usleep(20_000) }
        let id = "\(ReplicaID(0x1000 + 1000))"
        #expect(total("joined") == 1 && total("left") == 1 && since().last?["connected"] as? Int == 0, "\(since())")
        #expect(since().flatMap { $0["joined_replicas"] as? [String] ?? [] } == [id], "\(since())")
        #expect(since().flatMap { $0["left_replicas"] as? [String] ?? [] } == [id])
        withExtendedLifetime(notifier) {}
    }

    /// A full queue drops the oldest of the lowest priority; waiting board.changed and
    /// clients.changed of one board fold into one.
    @Test func aFullQueueDropsTheLeastImportantAndFoldsRepeats() throws {
        let receiver = try HookReceiver()
        receiver.answer(status: 503)
        var options = WebhookSender.Options(url: try HTTPClient.URLParts("http://127.0.0.1:\(receiver.port)/h"), secret: Self.secret)
        options.maxQueued = 3
        options.retryFirst = 0.01
        options.retryMax = 0.02
        let lines = LoggedLines()
        let sender = WebhookSender(options: options) { lines.append($0) }
        defer { sender.stop() }
        sender.enqueue(event: "board.created", board: "a")
        #expect(lines.waitFor("answered 503") != nil, "the first is being tried")
        sender.enqueue(event: "clients.changed", board: "a", fields: ["joined": 1], merge: { old, new in ["joined": (old["joined"] as! Int) + (new["joined"] as! Int)] })
        sender.enqueue(event: "clients.changed", board: "a", fields: ["joined": 2], merge: { old, new in ["joined": (old["joined"] as! Int) + (new["joined"] as! Int)] })
        sender.enqueue(event: "board.changed", board: "a", fields: ["operations": 1]) { _, new in new }
        sender.enqueue(event: "board.changed", board: "a", fields: ["operations": 5]) { _, new in new }
        #expect(sender.counts.waiting == 3 && sender.counts.merged == 2 && sender.counts.dropped == 0, "\(sender.counts)")
        sender.enqueue(event: "board.deleted", board: "a")
        #expect(lines.waitFor("dropped clients.changed of board 'a'") != nil, "\(lines.all)")
        sender.enqueue(event: "board.created", board: "b")
        #expect(lines.waitFor("dropped board.changed of board 'a'") != nil, "\(lines.all)")
        receiver.answer(status: 200)
        let deadline = Date().addingTimeInterval(20)
        while sender.counts.waiting > 0, Date() < deadline { usleep(20_000) }
        let names = Self.events(receiver.received).map { "\($0["event"] as? String ?? "?") \($0["board"] as? String ?? "?")" }
        #expect(names == ["board.created a", "board.deleted a", "board.created b"], "\(names)")
    }

    /// What a failing delivery logs names the receiver by scheme, host and port only (the
    /// path and query may hold its secret), and quotes at most 200 characters of what it
    /// answered, escaped: a hostile receiver cannot forge log lines or flood the log.
    @Test func failuresNeverLogTheURLsPathOrTheReceiversRawAnswer() throws {
        let receiver = try HookReceiver()
        let forged = "no\n2026-12-05T00:00:00Z webhook: FORGED \u{1B}[31mred " + String(repeating: "x", count: 5000)
        receiver.answer(status: 400, body: forged)
        let path = "/hooks/T000/B000/S3CR3TPATH?token=QU3RYS3CR3T"
        var options = WebhookSender.Options(url: try HTTPClient.URLParts("http://127.0.0.1:\(receiver.port)\(path)"), secret: Self.secret)
        options.retryFirst = 0.01
        options.retryMax = 0.02
        options.timeout = 2
        let lines = LoggedLines()
        let sender = WebhookSender(options: options) { lines.append($0) }
        defer { sender.stop() }
        sender.enqueue(event: "board.created", board: "a")
        let refused = try #require(lines.waitFor("refused it with 400"))
        #expect(refused.contains("to http://127.0.0.1:\(receiver.port)/…"), "\(refused)")
        #expect(refused.contains("'no\\u{A}2026-12-05T00:00:00Z webhook: FORGED \\u{1B}[31mred xxx"), "\(refused)")
        #expect(!refused.contains("\n") && !refused.contains("\u{1B}"), "\(refused)")
        #expect(refused.count < 500, "at most 200 characters of the answer: \(refused.count)")
        receiver.answer(status: 503, body: "busy")
        sender.enqueue(event: "board.created", board: "b")
        #expect(lines.waitFor("answered 503: 'busy'; retrying") != nil, "\(lines.all)")
        receiver.answer(raw: Array("NOT HTTP \u{1B}[2J\r\n\r\n".utf8))
        #expect(lines.waitFor("not an HTTP response") != nil, "\(lines.all)")
        // A receiver that is gone: a refused connection.
        receiver.close()
        #expect(lines.waitFor("Connection refused") != nil, "\(lines.all)")
        // A name that does not resolve (.invalid never does).
        var unresolved = options
        unresolved.url = try HTTPClient.URLParts("http://receiver.invalid\(path)")
        let lost = WebhookSender(options: unresolved) { lines.append($0) }
        defer { lost.stop() }
        lost.enqueue(event: "board.created", board: "c")
        #expect(lines.waitFor("cannot resolve receiver.invalid") != nil, "\(lines.all)")
        #expect(lines.all.contains { $0.contains("to http://receiver.invalid/…") })
        for line in lines.all {
            #expect(!line.contains("S3CR3TPATH") && !line.contains("QU3RYS3CR3T") && !line.contains("/hooks"), "\(line)")
            #expect(!line.contains("\n") && !line.contains("\u{1B}"), "\(line)")
        }
    }

    @Test func urlsAreShownWithoutTheirPathOrQuery() throws {
        #expect(try HTTPClient.URLParts("https://hooks.slack.com/services/T0/B0/XYZ").redacted == "https://hooks.slack.com/…")
        #expect(try HTTPClient.URLParts("http://10.0.0.1:8080/?key=abc").redacted == "http://10.0.0.1:8080/…")
        #expect(try HTTPClient.URLParts("http://[::1]:9000").redacted == "http://[::1]:9000/")
        #expect(HTTPClient.URLParts.redacting("hooks.example/SECRET") == "hooks.example/…")
        #expect(HTTPClient.URLParts.redacting("https://user:pw@host.example/x?y") == "https://…@host.example/…")
        #expect(HTTPClient.URLParts.redacting("https://h.example?q=SECRET") == "https://h.example/…")
        #expect(HTTPClient.URLParts.redacting("https://" + String(repeating: "h", count: 500)).count < 240)
        for bad in ["ftp://h.example/SECRET", "http://h.example:99999/SECRET", "http://u@h.example/SECRET", "http:///SECRET",
                    "http://[::1/SECRET", "http://h.example/SECRET#frag", "hooks.example/SECRET"] {
            do {
                _ = try HTTPClient.URLParts(bad)
                Issue.record("\(bad) should be refused")
            } catch {
                #expect(!"\(error)".contains("SECRET"), "\(bad): \(error)")
            }
        }
    }
}
