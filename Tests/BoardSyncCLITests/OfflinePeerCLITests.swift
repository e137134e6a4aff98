import BoardModel
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Offline-first through a running `peer --connect` (a LiveBoard): edits made through it while
/// its server is down are on disk before the command returns, survive a `kill -9` of the peer,
/// and reach the server once both are back.
@Suite(.serialized) struct OfflinePeerCLITests {
    @Test func editsMadeOfflineSurviveAKill9AndReachTheServerAfterRestart() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        try cli.run("new", "A.boardpkg")
        try cli.run("new", "C.boardpkg")
        // Nothing listens on the port yet: the peer is offline, retrying.
        let port = RedisProcess.freePort()
        let address = "127.0.0.1:\(port)"
        let first = try Daemon(["peer", "A.boardpkg", "--connect", address, "--board", "team"], in: workspace.path)
        #expect(first.waitFor("offline: ") != nil, "\(first.log)")
        // Commands work on the running peer's board through it, offline too.
        let stroke = try cli.run("stroke", "A.boardpkg", "--points", "3,3 40,50 80,20")
        #expect(stroke.status == 0, "\(stroke.stderr)")
        let sticker = try cli.run("sticker", "A.boardpkg", "--image", "red.png", "--at", "20,30")
        #expect(sticker.status == 0, "\(sticker.stderr)")
        kill(first.process.processIdentifier, SIGKILL)
        first.process.waitUntilExit()
        #expect(first.process.terminationReason == .uncaughtSignal)

        let server = try Daemon(["serve", "--data", "data", "--listen", address], in: workspace.path)
        #expect(server.listeningAddress() == address, "\(server.log)")
        let second = try Daemon(["peer", "A.boardpkg", "--connect", address, "--board", "team"], in: workspace.path)
        #expect(second.waitFor("live: in sync") != nil, "\(second.log)")
        #expect(second.terminate() == 0, "\(second.log)")

        // `show --json` names images by hash; the package's sticker file holds the bytes.
        func image(_ board: BoardSnapshot) -> Data? {
            board.stickers.first.flatMap { FileManager.default.contents(atPath: workspace.path + "/C.boardpkg/stickers/\($0.id.uuidString).png") }
        }
        let red = try Data(contentsOf: URL(fileURLWithPath: workspace.path + "/red.png"))
        var board = try workspace.board("C.boardpkg")
        for _ in 0..<50 where board.strokes.count + board.stickers.count < 2 || image(board) != red {
            let sync = try cli.run("sync", "C.boardpkg", "--server", address, "--board", "team")
            #expect(sync.status == 0, "\(sync.stderr)")
            board = try workspace.board("C.boardpkg")
            usleep(100_000)
        }
        #expect(board.strokes.map(\.points.count) == [3], "the offline stroke reached the server")
        #expect(board.stickers.count == 1 && image(board) == red, "and the sticker with its image")
        #expect(try cli.run("show", "A.boardpkg", "--json").stdout == cli.run("show", "C.boardpkg", "--json").stdout)
        #expect(server.terminate() == 0)
    }
}
