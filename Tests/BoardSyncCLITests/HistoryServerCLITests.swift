import BoardModel
import Foundation
import Testing

/// `history list|show --server` as real processes over real TCP (docs/CLIENT.md, "History from
/// the server"): a package-less reader lists the versions the server holds and shows an old one;
/// a token for another board is refused; bad usage is exit 64.
@Suite struct HistoryServerCLITests {
    @Test func aReaderListsTheServersVersionsAndShowsAnOldOne() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        let server = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0", "--secret-file", "secret"], in: workspace.path)
        let address = try #require(server.listeningAddress(), "server log: \(server.log)")
        func token(_ board: String, _ role: String) throws -> String {
            try cli.run("token", "--secret-file", "secret", "--board", board, "--role", role).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let write = try token("team", "write"), read = try token("team", "read"), other = try token("other", "read")
        try cli.run("new", "A.boardpkg")
        for index in 0..<3 {
            try cli.run("stroke", "A.boardpkg", "--points", "\(index * 10),1 \(index * 10 + 5),5")
            #expect(try cli.run("sync", "A.boardpkg", "--server", address, "--board", "team", "--token", write).status == 0)
        }
        let listed = try cli.run("history", "list", "--server", address, "--board", "team", "--token", read, "--json")
        #expect(listed.status == 0, "\(listed.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [String: Any])
        let versions = try #require(object["versions"] as? [[String: Any]])
        #expect(versions.count >= 3 && (object["total"] as? Int) == versions.count, "\(listed.stdout)")
        #expect(versions.map { $0["number"] as? Int } == Array(1...versions.count))
        // The board at each version: the number of strokes only grows, up to three.
        var counts: [Int] = []
        for number in 1...versions.count {
            let shown = try cli.run("history", "show", "--server", address, "--board", "team", "--token", read, "--at", "\(number)", "--json")
            #expect(shown.status == 0, "\(shown.stderr)")
            let board = try JSONDecoder().decode(BoardSnapshot.self, from: Data(shown.stdout.utf8))
            counts.append(board.strokes.count)
        }
        #expect(counts == counts.sorted() && counts.last == 3 && counts.first! < 3, "\(counts)")
        let latest = try cli.run("history", "show", "--server", address, "--board", "team", "--token", read, "--at", "latest")
        #expect(latest.status == 0 && latest.stdout.contains("version \(versions.count) of \(versions.count)"), "\(latest.stdout) \(latest.stderr)")
        let text = try cli.run("history", "list", "--server", address, "--board", "team", "--token", read)
        #expect(text.status == 0 && text.stdout.split(separator: "\n").count == versions.count, "\(text.stdout)")

        let refused = try cli.run("history", "list", "--server", address, "--board", "team", "--token", other, "--timeout", "10")
        #expect(refused.status == 1 && refused.stderr.contains("access denied"), "\(refused.stderr)")
        let beyond = try cli.run("history", "show", "--server", address, "--board", "team", "--token", read, "--at", "999")
        #expect(beyond.status == 1 && beyond.stderr.contains("outOfRange"), "\(beyond.stderr)")
        #expect(try cli.run("history", "show", "--server", address, "--board", "team", "--at", "3:1").status == 64)
        #expect(try cli.run("history", "list", "--server", address).status == 64)
        #expect(server.terminate() == 0)
    }

    /// `serve --max-history-mib`: a board whose history is over it is refused as too large,
    /// naming the bound; without the flag the same board is served (the default, 16 MiB).
    @Test func aHistoryOverTheServersBoundIsRefusedNamingIt() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        try cli.run("new", "A.boardpkg")
        for index in 0..<3 { try cli.run("stroke", "A.boardpkg", "--points", "\(index * 10),1 \(index * 10 + 5),5") }
        let small = try Daemon(["serve", "--data", "small", "--listen", "127.0.0.1:0", "--max-history-mib", "0.00001", "--max-history-boards", "1"],
                               in: workspace.path)
        let address = try #require(small.listeningAddress(), "server log: \(small.log)")
        #expect(try cli.run("sync", "A.boardpkg", "--server", address, "--board", "team").status == 0)
        let refused = try cli.run("history", "list", "--server", address, "--board", "team")
        #expect(refused.status == 1 && refused.stderr.contains("over the 10 this server reads"),
                "\(refused.stderr)")
        #expect(small.terminate() == 0)
        let usual = try Daemon(["serve", "--data", "usual", "--listen", "127.0.0.1:0"], in: workspace.path)
        let usualAddress = try #require(usual.listeningAddress(), "server log: \(usual.log)")
        #expect(try cli.run("sync", "A.boardpkg", "--server", usualAddress, "--board", "team").status == 0)
        let listed = try cli.run("history", "list", "--server", usualAddress, "--board", "team")
        #expect(listed.status == 0 && !listed.stdout.isEmpty, "\(listed.stderr)")
        #expect(usual.terminate() == 0)
        let bad = try cli.run("serve", "--data", "bad", "--max-history-boards", "1.5")
        #expect(bad.status == 64 && bad.stderr.contains("--max-history-boards"), "\(bad.stderr)")
    }
}
