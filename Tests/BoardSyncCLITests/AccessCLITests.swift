import BoardModel
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `serve --secret-file`, `token`, and `sync --token` as real processes over real TCP.
@Suite struct AccessCLITests {
    @Test func aServerWithASecretLetsInOnlyTokensForTheBoard() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        // Minting needs the secret to exist.
        let early = try cli.run("token", "--secret-file", "secret", "--board", "team", "--role", "write")
        #expect(early.status == 1 && early.stderr.contains("no secret file at secret"), "\(early.stderr)")
        let server = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0", "--secret-file", "secret"], in: workspace.path)
        let address = try #require(server.listeningAddress(), "server log: \(server.log)")
        #expect(server.log.contains("access control on"), "\(server.log)")
        var info = stat()
        #expect(lstat(workspace.path + "/secret", &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600, "the secret is created readable by its owner only")

        let write = try cli.run("token", "--secret-file", "secret", "--board", "team", "--role", "write", "--expires", "1h")
        #expect(write.status == 0, "\(write.stderr)")
        let writeToken = write.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(writeToken.hasPrefix("bst1."))
        let readJSON = try cli.run("token", "--secret-file", "secret", "--board", "team", "--role", "read", "--subject", "rob", "--json")
        let readInfo = try #require(try JSONSerialization.jsonObject(with: Data(readJSON.stdout.utf8)) as? [String: Any])
        #expect(readInfo["role"] as? String == "read" && readInfo["subject"] as? String == "rob" && readInfo["expires"] as? String == "never")
        let readToken = try #require(readInfo["token"] as? String)
        let otherBoard = try cli.run("token", "--secret-file", "secret", "--board", "other", "--role", "write").stdout
            .trimmingCharacters(in: .whitespacesAndNewlines)

        try cli.run("new", "A.boardpkg")
        try cli.run("sticker", "A.boardpkg", "--image", "red.png", "--at", "10,10")
        // No token, another board's token, a tampered token: refused, nothing stored.
        for (label, extra) in [("none", [String]()), ("other board", ["--token", otherBoard]),
                               ("tampered", ["--token", String(writeToken.dropLast(2)) + "AA"])] {
            let refused = try cli.run(["sync", "A.boardpkg", "--server", address, "--board", "team", "--timeout", "10"] + extra)
            #expect(refused.status == 1, "\(label): \(refused.stdout)")
            #expect(refused.stderr.contains("access denied"), "\(label): \(refused.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: workspace.path + "/data/team.boardpkg"), "no board for the refused")
        // The write token syncs; the token can also come from a file.
        let synced = try cli.run("sync", "A.boardpkg", "--server", address, "--board", "team", "--token", writeToken)
        #expect(synced.status == 0, "\(synced.stderr)")
        try Data((readToken + "\n").utf8).write(to: URL(fileURLWithPath: workspace.path + "/read.token"))
        try cli.run("new", "B.boardpkg")
        let mirrored = try cli.run("sync", "B.boardpkg", "--server", address, "--board", "team", "--token-file", "read.token")
        #expect(mirrored.status == 0, "a reader with nothing of its own syncs: \(mirrored.stderr)")
        #expect(try cli.run("show", "B.boardpkg", "--json").stdout == cli.run("show", "A.boardpkg", "--json").stdout)
        // The reader edits and syncs again: refused, and the server's board is unchanged.
        try cli.run("stroke", "B.boardpkg", "--points", "1,1 5,5")
        let readerWrites = try cli.run("sync", "B.boardpkg", "--server", address, "--board", "team", "--token-file", "read.token", "--timeout", "10")
        #expect(readerWrites.status == 1)
        #expect(readerWrites.stderr.contains("read-only"), "\(readerWrites.stderr)")
        try cli.run("new", "C.boardpkg")
        try cli.run("sync", "C.boardpkg", "--server", address, "--board", "team", "--token", writeToken)
        #expect(try workspace.board("C.boardpkg").strokes.isEmpty, "the reader's stroke never reached the server")
        #expect(server.terminate() == 0)
        #expect(server.log.contains("access denied to board 'team': no token"), "\(server.log)")
        #expect(server.log.contains("refused operations from a read-only session"), "\(server.log)")

        let peerToken = try cli.run("token", "--secret-file", "secret", "--board", "team", "--role", "peer", "--json")
        #expect(peerToken.status == 0 && peerToken.stdout.contains("\"role\" : \"peer\""), "\(peerToken.stdout)")
        // Bad usage and unsafe secrets.
        #expect(try cli.run("token", "--secret-file", "secret", "--board", "team", "--role", "admin").status == 64)
        #expect(try cli.run("token", "--secret-file", "secret", "--board", "team", "--role", "read", "--expires", "soon").status == 64)
        #expect(try cli.run("sync", "A.boardpkg", "--server", address, "--board", "team", "--token", "x", "--token-file", "f").status == 64)
        chmod(workspace.path + "/secret", 0o644)
        let loose = try cli.run("token", "--secret-file", "secret", "--board", "team", "--role", "read")
        #expect(loose.status == 1 && loose.stderr.contains("chmod 600"), "\(loose.stderr)")
    }

    @Test func aServerWithoutASecretSaysSoLoudly() throws {
        let workspace = try Workspace()
        let server = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0"], in: workspace.path)
        _ = server.listeningAddress()
        #expect(server.log.contains("WARNING: no --secret-file"), "\(server.log)")
        #expect(server.terminate() == 0)
    }
}
