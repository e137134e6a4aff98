import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `sync` and `peer --connect` run on the library's live client (`LiveBoard`).
@Suite(.serialized) struct LiveClientCLITests {
    /// What one replica's sync sent is what the next replica's sync receives, and every sent
    /// operation is acknowledged.
    @Test func syncCountsAddUpAcrossReplicas() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        let server = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0"], in: workspace.path)
        let address = try #require(server.listeningAddress(), "server log: \(server.log)")
        for name in ["A", "B"] { try cli.run("new", "\(name).boardpkg") }
        try cli.run("stroke", "A.boardpkg", "--points", "1,1 4,4 9,2")
        try cli.run("stroke", "A.boardpkg", "--points", "5,5 6,6")
        try cli.run("sticker", "A.boardpkg", "--image", "red.png", "--at", "10,10")
        func sync(_ package: String) throws -> [String: Any] {
            let result = try cli.run("sync", package, "--server", address, "--board", "counts", "--json")
            #expect(result.status == 0, "\(result.stderr)")
            return try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], "\(result.stdout)")
        }
        let first = try sync("A.boardpkg")
        let sent = try #require(first["operationsSent"] as? Int)
        #expect(sent >= 3, "three edits' operations went up: \(first)")
        #expect(first["operationsAcknowledged"] as? Int == sent)
        #expect(first["operationsReceived"] as? Int == 0)
        #expect(first["imagesSent"] as? Int == 1, "the server asked for the sticker's image: \(first)")
        let second = try sync("B.boardpkg")
        #expect(second["operationsReceived"] as? Int == sent, "B receives what A sent: \(second)")
        #expect(second["operationsSent"] as? Int == 0)
        #expect(second["missingAssets"] as? Int == 0, "the image came along")
        // Nothing new: nothing moves either way.
        let again = try sync("A.boardpkg")
        #expect(again["operationsSent"] as? Int == 0 && again["operationsReceived"] as? Int == 0, "\(again)")
        #expect(try cli.run("show", "A.boardpkg", "--json").stdout == cli.run("show", "B.boardpkg", "--json").stdout)
        // People get the same in words.
        let words = try cli.run("sync", "B.boardpkg", "--server", address, "--board", "counts")
        #expect(words.stdout.contains("received 0 operations, sent 0 (0 acknowledged)"), "\(words.stdout)")
        #expect(try cli.run("sync", "B.boardpkg", "--server", address, "--board", "counts", "--timeout", "0").status == 64)
        #expect(server.terminate() == 0)
    }

    /// `peer --token-file F` reads F before every connect: a short-lived token rotated in the
    /// file keeps a running peer live across the old one's expiry.
    @Test func aPeerReadsItsTokenFileBeforeEveryConnect() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        let server = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0", "--secret-file", "secret"], in: workspace.path)
        let address = try #require(server.listeningAddress(), "server log: \(server.log)")
        func mint(_ expires: String) throws -> String {
            let result = try cli.run("token", "--secret-file", "secret", "--board", "team", "--role", "write", "--subject", "ann", "--expires", expires)
            #expect(result.status == 0, "\(result.stderr)")
            return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let tokenFile = workspace.path + "/token"
        try mint("3s").write(toFile: tokenFile, atomically: true, encoding: .utf8)
        try cli.run("new", "A.boardpkg")
        let peer = try Daemon(["peer", "A.boardpkg", "--connect", address, "--board", "team", "--token-file", "token", "--name", "Ana"], in: workspace.path)
        #expect(peer.waitFor("live: in sync") != nil, "\(peer.log)")
        // The operator rotates the token; the old one expires under the live session.
        try mint("1h").write(toFile: tokenFile, atomically: true, encoding: .utf8)
        #expect(peer.waitFor("live: in sync", count: 2, within: 30), "live again with the file's new token: \(peer.log)")
        #expect(peer.log.contains("token expired"), "the expiry was seen: \(peer.log)")
        // Still live: an edit made through another replica reaches this peer's package.
        try cli.run("new", "B.boardpkg")
        try cli.run("stroke", "B.boardpkg", "--points", "1,1 2,2")
        let token = try mint("1h")
        #expect(try cli.run("sync", "B.boardpkg", "--server", address, "--board", "team", "--token", token).status == 0)
        #expect(peer.terminate() == 0, "\(peer.log)")
        #expect(peer.log.contains("stopped: the server holds every edit"), "\(peer.log)")
        #expect(try workspace.board("A.boardpkg").strokes.count == 1)
        #expect(server.terminate() == 0)
    }

    /// A peer says what its connection is doing: offline and retrying while the server is away,
    /// live once it is back; a terminal refusal stops it with exit 1.
    @Test func aPeerPrintsItsStatusChanges() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        try cli.run("new", "A.boardpkg")
        // A free port with nothing on it yet.
        let probe = try Daemon(["serve", "--data", "probe", "--listen", "127.0.0.1:0"], in: workspace.path)
        let address = try #require(probe.listeningAddress(), "\(probe.log)")
        #expect(probe.terminate() == 0)
        let peer = try Daemon(["peer", "A.boardpkg", "--connect", address, "--board", "team"], in: workspace.path)
        #expect(peer.waitFor("offline: ") != nil, "\(peer.log)")
        #expect(peer.waitFor("retrying in") != nil, "\(peer.log)")
        let server = try Daemon(["serve", "--data", "data", "--listen", address], in: workspace.path)
        #expect(server.listeningAddress() != nil, "\(server.log)")
        #expect(peer.waitFor("live: in sync") != nil, "\(peer.log)")
        #expect(peer.terminate() == 0)
        #expect(server.terminate() == 0)
        // A server that wants tokens: no token is a refusal retrying cannot fix.
        let guarded = try Daemon(["serve", "--data", "data2", "--listen", "127.0.0.1:0", "--secret-file", "secret"], in: workspace.path)
        let guardedAddress = try #require(guarded.listeningAddress(), "\(guarded.log)")
        let refused = try Daemon(["peer", "A.boardpkg", "--connect", guardedAddress, "--board", "team"], in: workspace.path)
        #expect(refused.waitFor("refused the board for good") != nil, "\(refused.log)")
        #expect(refused.log.contains("failed: unauthorized"), "\(refused.log)")
        #expect(refused.terminate() == 1, "it stopped by itself, exit 1: \(refused.log)")
        #expect(guarded.terminate() == 0)
    }
}
