import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// While `peer PKG --connect SERVER` holds its package, the other commands run on its live board
/// through the package's control socket (issue 25): real binaries, a real server, real sockets.
@Suite(.serialized) struct ControlChannelCLITests {
    /// Waits up to `seconds` for `condition`.
    static func eventually(within seconds: Double = 10, _ condition: () throws -> Bool) rethrows -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        repeat {
            if try condition() { return true }
            usleep(50_000)
        } while Date() < deadline
        return false
    }

    /// The README's story: a stroke made in another terminal is live to others at once, `undo`
    /// undoes it; images are read and exports written by the command, in its own directory.
    @Test func commandsRunOnTheRunningPeersBoard() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        let server = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0"], in: workspace.path)
        let address = try #require(server.listeningAddress(), "server log: \(server.log)")
        for name in ["A", "B"] { try cli.run("new", "\(name).boardpkg") }
        let ana = try Daemon(["peer", "A.boardpkg", "--connect", address, "--board", "team", "--name", "Ana"], in: workspace.path)
        let ben = try Daemon(["peer", "B.boardpkg", "--connect", address, "--board", "team", "--name", "Ben"], in: workspace.path)
        #expect(ana.waitFor("live: in sync") != nil, "\(ana.log)")
        #expect(ben.waitFor("live: in sync") != nil, "\(ben.log)")
        #expect(ana.log.contains("control: other commands on this package run here"), "\(ana.log)")
        var mode = stat()
        #expect(stat(workspace.path + "/A.boardpkg/sync/control.sock", &mode) == 0)
        #expect(mode.st_mode & S_IFMT == S_IFSOCK && mode.st_mode & 0o777 == 0o600, "mode \(String(mode.st_mode, radix: 8))")

        let stroke = try cli.run("stroke", "A.boardpkg", "--points", "1,1 4,4 9,2")
        #expect(stroke.status == 0, "\(stroke.stderr)")
        let id = stroke.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(ana.waitFor("control: stroke: done") != nil, "\(ana.log)")
        // Live to the others at once: Ben's package (read through Ben's peer) has it.
        #expect(Self.eventually { (try? workspace.board("B.boardpkg"))?.strokes.map(\.id.uuidString) == [id] }, "\(ben.log)")
        #expect(try cli.run("show", "A.boardpkg").stdout.contains(id))
        #expect(try cli.run("log", "A.boardpkg").stdout.split(separator: "\n").count >= 1)

        #expect(try cli.run("undo", "A.boardpkg").status == 0)
        #expect(Self.eventually { (try? workspace.board("B.boardpkg"))?.strokes.isEmpty == true }, "the undo reached Ben: \(ben.log)")
        let nothing = try cli.run("undo", "A.boardpkg")
        #expect(nothing.status == 0 && nothing.stderr == "nothing to undo\n", "\(nothing.stderr)")
        let redo = try cli.run("redo", "A.boardpkg", "--json")
        #expect(redo.status == 0 && redo.stdout.contains("\"operations\" : 1"), "\(redo.stdout) \(redo.stderr)")

        // From another directory: the image is read there (the peer has no such file), the
        // export is written there (not in the peer's directory).
        let sub = CLI(directory: workspace.path + "/elsewhere")
        try FileManager.default.createDirectory(atPath: sub.directory, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: workspace.path + "/photo.png", toPath: sub.directory + "/pic.png")
        let sticker = try sub.run("sticker", "../A.boardpkg", "--image", "pic.png", "--at", "10,10")
        #expect(sticker.status == 0, "\(sticker.stderr)")
        #expect(Self.eventually { (try? workspace.board("B.boardpkg"))?.stickers.count == 1 }, "\(ben.log)")
        let export = try sub.run("export", "../A.boardpkg", "out.png", "--json")
        #expect(export.status == 0, "\(export.stderr)")
        let written = try Data(contentsOf: URL(fileURLWithPath: sub.directory + "/out.png"))
        #expect(export.stdout.contains("\"bytes\" : \(written.count)"), "\(export.stdout)")
        #expect(!FileManager.default.fileExists(atPath: workspace.path + "/out.png"), "the peer wrote nothing")
        let inside = try sub.run("export", "../A.boardpkg", "../A.boardpkg/sync/x.png")
        #expect(inside.status == 64 && inside.stderr.contains("is inside the package"), "\(inside.stderr)")
        #expect(!FileManager.default.fileExists(atPath: workspace.path + "/A.boardpkg/sync/x.png"))

        // Errors read as they would on an unheld package.
        let usage = try cli.run("move", "A.boardpkg")
        #expect(usage.status == 64 && usage.stderr.contains("Error: missing <id>") && usage.stderr.contains("Usage: board-sync move"), "\(usage.stderr)")
        let unknown = try cli.run("move", "A.boardpkg", "00000000-0000-0000-0000-000000000001", "--to", "1,1")
        #expect(unknown.status == 1 && unknown.stderr.contains("no item with id"), "\(unknown.stderr)")
        let fake = try cli.run("sticker", "A.boardpkg", "--image", "fake.png", "--at", "1,1")
        #expect(fake.status == 1 && fake.stderr.contains("fake.png"), "\(fake.stderr)")
        // `repair` needs the package itself.
        let repair = try cli.run("repair", "A.boardpkg")
        #expect(repair.status == 1 && repair.stderr.contains("open in another process"), "\(repair.stderr)")

        #expect(ana.terminate() == 0, "\(ana.log)")
        #expect(ana.log.contains("stopped: the server holds every edit"), "\(ana.log)")
        #expect(!FileManager.default.fileExists(atPath: workspace.path + "/A.boardpkg/sync/control.sock"), "removed on exit")
        #expect(ben.terminate() == 0)
        #expect(try workspace.board("A.boardpkg") == workspace.board("B.boardpkg"))
        #expect(server.terminate() == 0)
    }
}
