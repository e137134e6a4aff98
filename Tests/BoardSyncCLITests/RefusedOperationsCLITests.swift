import Foundation
import Testing

/// A package holding other replicas' operations (learned from a server without access control)
/// meets a server with tokens under a write token: `sync` exits 1 at once naming what the server
/// refused and what to do (it used to wait for its bound); `peer --connect` stays live and says
/// why; a peer token delivers them.
@Suite(.serialized) struct RefusedOperationsCLITests {
    @Test func aWriteTokenCarryingOthersOperationsEndsPromptlyAndSaysWhy() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        let open = try Daemon(["serve", "--data", "open", "--listen", "127.0.0.1:0"], in: workspace.path)
        let openAddress = try #require(open.listeningAddress(), "\(open.log)")
        try cli.run("new", "P.boardpkg")
        try cli.run("stroke", "P.boardpkg", "--points", "1,1 5,5")
        try cli.run("sync", "P.boardpkg", "--server", openAddress, "--board", "b")
        try cli.run("new", "Q.boardpkg")
        try cli.run("sync", "Q.boardpkg", "--server", openAddress, "--board", "b")
        try cli.run("stroke", "Q.boardpkg", "--points", "2,2 6,6")
        #expect(open.terminate() == 0)

        let guarded = try Daemon(["serve", "--data", "guarded", "--listen", "127.0.0.1:0", "--secret-file", "secret"], in: workspace.path)
        let address = try #require(guarded.listeningAddress(), "\(guarded.log)")
        let write = try cli.run("token", "--secret-file", "secret", "--board", "watch", "--role", "write", "--subject", "quinn")
        try Data(write.stdout.utf8).write(to: URL(fileURLWithPath: workspace.path + "/write.token"))
        let started = Date()
        let refused = try cli.run("sync", "Q.boardpkg", "--server", address, "--board", "watch", "--token-file", "write.token", "--timeout", "30")
        #expect(Date().timeIntervalSince(started) < 10, "it waited \(Date().timeIntervalSince(started)) s")
        #expect(refused.status == 1, "\(refused.stdout)")
        #expect(refused.stderr.contains("the server refused the operations of replica"), "\(refused.stderr)")
        #expect(refused.stderr.contains("this replica's own operations were acknowledged") && refused.stderr.contains("peer token"), "\(refused.stderr)")
        #expect(guarded.waitFor("which no subject owns") != nil, "the server dropped them: \(guarded.log)")

        // Live: connected and in sync, and the refusal logged once.
        let peer = try Daemon(["peer", "Q.boardpkg", "--connect", address, "--board", "watch", "--token-file", "write.token"], in: workspace.path)
        #expect(peer.waitFor("live: in sync") != nil, "\(peer.log)")
        #expect(peer.waitFor("the server dropped 1 operation(s) of other replicas this board holds") != nil, "\(peer.log)")
        #expect(peer.terminate() == 0, "\(peer.log)")

        // A peer token (a trusted relay) carries them.
        let relay = try cli.run("token", "--secret-file", "secret", "--board", "watch", "--role", "peer", "--subject", "relay")
        try Data(relay.stdout.utf8).write(to: URL(fileURLWithPath: workspace.path + "/peer.token"))
        let carried = try cli.run("sync", "Q.boardpkg", "--server", address, "--board", "watch", "--token-file", "peer.token", "--timeout", "30")
        #expect(carried.status == 0, "\(carried.stderr)")
        #expect(guarded.terminate() == 0)
    }
}
