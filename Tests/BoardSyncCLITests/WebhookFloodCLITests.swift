import BoardCRDT
import BoardSync
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `serve --webhook` with a small `--webhook-queue` while a client reconnects in a loop and
/// the receiver is down: the client's comings and goings cannot push out a board's creation or
/// deletion (docs/DEPLOYMENT.md, "Webhooks").
@Suite(.serialized) struct WebhookFloodCLITests {
    /// Connects to the sync port, says HELLO for `board` as `replica`, ends its side and waits
    /// for the server to close (5 s at most).
    static func hello(_ address: String, board: String, replica: UInt64) {
        guard let fd = dialLoopback(address) else { return }
        defer { close(fd) }
        let bytes = Message.hello(Hello(board: board, replica: ReplicaID(replica), version: .empty)).frame().encoded()
        _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        shutdown(fd, Int32(SHUT_WR))
        var buffer = [UInt8](repeating: 0, count: 4096)
        while recv(fd, &buffer, buffer.count, 0) > 0 {}
    }

    @Test func aFlappingClientCannotPushOutBoardEventsFromASmallQueue() throws {
        let workspace = try Workspace()
        let secret = try WebhookCLITests.secret(workspace)
        let port = RedisProcess.freePort()
        let server = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--admin-token-file", "admin.token",
                                 "--webhook", "http://127.0.0.1:\(port)/hook", "--webhook-secret-file", secret,
                                 "--webhook-queue", "8", "--webhook-timeout", "1"], in: workspace.path)
        let sync = try #require(server.syncAddress(), "\(server.log)")
        let admin = try #require(server.adminAddress(), "\(server.log)")
        let adminToken = try String(contentsOfFile: workspace.path + "/admin.token", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        for board in ["b0", "b1", "b2"] { Self.hello(sync, board: board, replica: 0xB0A7D) }
        for index in 0..<300 {
            Self.hello(sync, board: "flap", replica: 0x1000 + UInt64(index))
            if index == 100 { #expect(adminRequest(admin, "DELETE", "/boards/b0?force=1", token: adminToken).status == 200) }
            if index == 200 { #expect(adminRequest(admin, "DELETE", "/boards/b1?force=1", token: adminToken).status == 200) }
        }
        // 4 board.created, 2 board.deleted and a clients.changed per board: more than 8.
        #expect(server.waitFor("dropped clients.changed") != nil, "\(server.log)")
        let receiver = try WebhookReceiver(in: workspace.path, secret: secret, mode: "ok", port: port)
        let expected: Set<String> = ["board.created b0", "board.created b1", "board.created b2", "board.created flap", "board.deleted b0", "board.deleted b1"]
        func names(_ events: [[String: Any]]) -> [String] {
            events.filter { $0["status"] as? Int == 200 }.map { "\($0["event"] as? String ?? "?") \(($0["body"] as? [String: Any])?["board"] as? String ?? "?")" }
        }
        // The sender's backoff may have reached 16 s while the receiver was down.
        var events = receiver.received()
        let deadline = Date().addingTimeInterval(60)
        while !expected.isSubset(of: Set(names(events))), Date() < deadline {
            usleep(100_000)
            events = receiver.received()
        }
        #expect(expected.isSubset(of: Set(names(events))), "\(names(events)) \(server.log)")
        for board in ["b0", "b1"] {
            let order = names(events)
            #expect((order.firstIndex(of: "board.created \(board)") ?? .max) < (order.firstIndex(of: "board.deleted \(board)") ?? -1), "\(order)")
        }
        #expect(events.allSatisfy { $0["signature"] as? Bool == true })
        #expect(server.terminate() == 0)
        #expect(!server.log.contains("dropped board.created") && !server.log.contains("dropped board.deleted"), "\(server.log)")
    }
}
