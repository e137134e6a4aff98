import Foundation
import Testing

/// `board-sync history list|show|diff|restore` as a real process on a package in a temp folder.
@Suite struct HistoryCLITests {
    static func json(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "\(text)")
    }

    /// Four edits: a sticker, a stroke, a canvas resize, the sticker's deletion.
    static func edited(_ name: String, in workspace: Workspace) throws -> (sticker: String, stroke: String) {
        let cli = workspace.cli
        #expect(try cli.run("new", name).status == 0)
        let sticker = try cli.run("sticker", name, "--image", "red.png", "--at", "10,20").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let stroke = try cli.run("stroke", name, "--points", "0,0 5,5").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try cli.run("canvas", name, "--size", "2000x1500").status == 0)
        #expect(try cli.run("delete", name, sticker).status == 0)
        return (sticker, stroke)
    }

    @Test func listShowDiffAndRestoreAVersion() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        let (sticker, stroke) = try Self.edited("H.boardpkg", in: workspace)

        let list = try cli.run("history", "list", "H.boardpkg", "--json")
        #expect(list.status == 0, "\(list.stderr)")
        let versions = try #require(try Self.json(list.stdout)["versions"] as? [[String: Any]])
        #expect(versions.map { $0["number"] as? Int } == [1, 2, 3, 4])
        #expect(versions.allSatisfy { $0["operations"] as? Int == 1 && ($0["authors"] as? [String])?.count == 1 })
        #expect(versions.allSatisfy { ($0["time"] as? String)?.hasSuffix("Z") == true }, "each record's wall time: \(list.stdout)")
        let sessions = try #require(try Self.json(list.stdout)["sessions"] as? [[String: Any]])
        #expect(sessions.count == 1 && sessions[0]["first"] as? Int == 1 && sessions[0]["last"] as? Int == 4)
        let text = try cli.run("history", "list", "H.boardpkg")
        #expect(text.status == 0 && text.stdout.contains("session of versions 1–4") && text.stdout.contains("  4  "), "\(text.stdout)")

        // Version 2: the sticker and the stroke on the default canvas.
        let shown = try cli.run("history", "show", "H.boardpkg", "--at", "2", "--json")
        #expect(shown.status == 0, "\(shown.stderr)")
        let board = try Self.json(shown.stdout)
        #expect((board["stickers"] as? [Any])?.count == 1 && (board["strokes"] as? [Any])?.count == 1)
        #expect((board["canvasSize"] as? [String: Any])?["width"] as? Double == 1600)
        // The same version named by its vector (a prefix of the replica id).
        let vector = try #require(versions[1]["vector"] as? String)
        let prefix = String(vector.prefix(6)) + vector.drop { $0 != ":" }
        #expect(try cli.run("history", "show", "H.boardpkg", "--at", prefix, "--json").stdout == shown.stdout, "\(prefix)")
        #expect(try cli.run("history", "show", "H.boardpkg", "--at", "2").stdout.contains(sticker))

        let diff = try Self.json(try cli.run("history", "diff", "H.boardpkg", "1", "4", "--json").stdout)
        #expect((diff["added"] as? [[String: String]])?.map { $0["id"] } == [stroke])
        #expect(diff["removed"] as? [String] == [sticker])
        #expect((diff["canvasSize"] as? [String: Any])?["width"] as? Double == 2000)
        #expect(try cli.run("history", "diff", "H.boardpkg", "3", "3").stdout == "no changes\n")

        // Restore version 2, then undo the restore.
        let present = try cli.run("show", "H.boardpkg", "--json").stdout
        let restore = try cli.run("history", "restore", "H.boardpkg", "2", "--json")
        #expect(restore.status == 0, "\(restore.stderr)")
        #expect(try Self.json(restore.stdout)["operations"] as? Int == 2, "the canvas and the sticker's existence: \(restore.stdout)")
        #expect(try cli.run("show", "H.boardpkg", "--json").stdout == shown.stdout, "the board is version 2 again")
        #expect(try cli.run("undo", "H.boardpkg").status == 0)
        #expect(try cli.run("show", "H.boardpkg", "--json").stdout == present, "undo takes the restore back")
        let after = try Self.json(try cli.run("history", "list", "H.boardpkg", "--json").stdout)
        #expect((after["versions"] as? [Any])?.count == 6, "the restore and its undo are versions too")
    }

    @Test func badVersionsAndSubcommandsAreUsageErrors() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        _ = try Self.edited("B.boardpkg", in: workspace)
        let before = try workspace.contents(of: "B.boardpkg")
        for (arguments, words) in [
            (["history", "show", "B.boardpkg", "--at", "99"], "there is no version 99 (the history has 4"),
            (["history", "show", "B.boardpkg", "--at", "zz:1"], "'zz' names no author"),
            (["history", "show", "B.boardpkg", "--at", "1:2:3"], "is not REPLICA:SEQ"),
            (["history", "show", "B.boardpkg"], "needs --at"),
            (["history", "restore", "B.boardpkg", "-1"], "is not REPLICA:SEQ"),
            (["history", "diff", "B.boardpkg", "1"], "<to>"),
            (["history", "frob", "B.boardpkg"], "unknown history subcommand 'frob'"),
            (["history"], "needs a subcommand"),
        ] {
            let result = try cli.run(arguments)
            #expect(result.status == 64, "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains(words), "\(arguments): \(result.stderr)")
        }
        #expect(try workspace.contents(of: "B.boardpkg") == before, "refused commands changed nothing")
        let missing = try cli.run("history", "list", "Nowhere.boardpkg")
        #expect(missing.status == 1 && missing.stderr.contains("Nowhere.boardpkg"), "\(missing.stderr)")
        let help = try cli.run("history", "list", "--help")
        #expect(help.status == 0 && help.stdout.contains("USAGE: board-sync history list"))
    }

    @Test func forkAVersionToANewPackageAndExportAVersion() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        let (sticker, _) = try Self.edited("F.boardpkg", in: workspace)
        let fork = try cli.run("history", "fork", "F.boardpkg", "2", "G.boardpkg", "--json")
        #expect(fork.status == 0, "\(fork.stderr)")
        let shown = try cli.run("history", "show", "F.boardpkg", "--at", "2", "--json").stdout
        #expect(try cli.run("show", "G.boardpkg", "--json").stdout == shown, "the fork is version 2")
        #expect(try Self.json(fork.stdout)["replica"] as? String != nil)
        #expect(try cli.run("move", "G.boardpkg", sticker, "--to", "1,1").status == 0, "the fork edits its own board")
        #expect(try workspace.board("F.boardpkg").stickers.isEmpty, "the original is untouched")
        let again = try cli.run("history", "fork", "F.boardpkg", "2", "G.boardpkg")
        #expect(again.status == 1 && again.stderr.contains("already exists"), "\(again.stderr)")

        let old = try cli.run("export", "F.boardpkg", "old.png", "--at", "2", "--json")
        #expect(old.status == 0, "\(old.stderr)")
        #expect(try cli.run("export", "F.boardpkg", "now.png").status == 0)
        let oldBytes = try Data(contentsOf: URL(fileURLWithPath: workspace.path + "/old.png"))
        let nowBytes = try Data(contentsOf: URL(fileURLWithPath: workspace.path + "/now.png"))
        // PNG width and height (bytes 16..<24): version 2 is 1600x1200, the board now 2000x1500.
        #expect(Array(oldBytes[16..<24]) == [0, 0, 0x06, 0x40, 0, 0, 0x04, 0xB0])
        #expect(Array(nowBytes[16..<24]) == [0, 0, 0x07, 0xD0, 0, 0, 0x05, 0xDC])
        let bad = try cli.run("export", "F.boardpkg", "x.png", "--at", "9")
        #expect(bad.status == 64 && !FileManager.default.fileExists(atPath: workspace.path + "/x.png"), "\(bad.stderr)")
    }

    @Test func pruneDropsTheVersionsBeforeAHorizon() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        _ = try Self.edited("P.boardpkg", in: workspace)
        let board = try cli.run("show", "P.boardpkg", "--json").stdout
        let pruned = try cli.run("history", "prune", "P.boardpkg", "--before", "3", "--json")
        #expect(pruned.status == 0, "\(pruned.stderr)")
        #expect(try Self.json(pruned.stdout)["versions"] as? Int == 2, "version 3 (the horizon) and version 4: \(pruned.stdout)")
        #expect(try cli.run("show", "P.boardpkg", "--json").stdout == board, "the board is untouched")
        let early = try cli.run("history", "show", "P.boardpkg", "--at", "0")
        #expect(early.status == 64 && early.stderr.contains("before the history's horizon"), "\(early.stderr)")
        #expect(try cli.run("history", "diff", "P.boardpkg", "1", "2", "--json").status == 0)
        let again = try cli.run("history", "prune", "P.boardpkg", "--before", "0")
        #expect(again.status == 64, "\(again.stderr)")
        #expect(try cli.run("history", "prune", "P.boardpkg").status == 64, "--before is required")
    }
}
