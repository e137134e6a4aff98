import Foundation
import Testing

/// `board-sync history label` as real processes: name a version, see it in `history list` (text
/// and JSON), rename and delete it, refusals; and a label carried by `sync` through `serve` to
/// another package.
@Suite(.serialized) struct HistoryLabelCLITests {
    static func labels(_ cli: CLI, _ package: String) throws -> [[String: Any]] {
        let list = try cli.run("history", "list", package, "--json")
        #expect(list.status == 0, "\(list.stderr)")
        return try #require(try HistoryCLITests.json(list.stdout)["labels"] as? [[String: Any]], "\(list.stdout)")
    }

    @Test func labelListRenameAndDeleteAVersion() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        _ = try HistoryCLITests.edited("L.boardpkg", in: workspace)
        let board = try cli.run("show", "L.boardpkg", "--json").stdout

        let made = try cli.run("history", "label", "L.boardpkg", "2", "Sticker and stroke", "--json")
        #expect(made.status == 0, "\(made.stderr)")
        let id = try #require(try HistoryCLITests.json(made.stdout)["label"] as? String)
        #expect(try cli.run("show", "L.boardpkg", "--json").stdout == board, "a label never changes the board")

        var labels = try Self.labels(cli, "L.boardpkg")
        #expect(labels.count == 1 && labels[0]["id"] as? String == id && labels[0]["text"] as? String == "Sticker and stroke")
        #expect(labels[0]["version"] as? Int == 2, "it names version 2: \(labels)")
        #expect((labels[0]["time"] as? String)?.hasSuffix("Z") == true)
        let text = try cli.run("history", "list", "L.boardpkg").stdout
        let lines = text.split(separator: "\n").map(String.init)
        let at = try #require(lines.firstIndex { $0.hasPrefix("  2  ") }, "\(text)")
        #expect(lines[at + 1].contains("label \(id)") && lines[at + 1].contains("\"Sticker and stroke\""), "under version 2: \(text)")
        // A label's id names its version wherever a version is asked for.
        #expect(try cli.run("history", "show", "L.boardpkg", "--at", id, "--json").stdout
                == cli.run("history", "show", "L.boardpkg", "--at", "2", "--json").stdout)
        let noSuch = try cli.run("history", "show", "L.boardpkg", "--at", "00000000000000ff#9")
        #expect(noSuch.status != 0 && noSuch.stderr.contains("no label 00000000000000ff#9"), "\(noSuch.stderr)")
        // The label is an operation: a version of its own, and in the whole log.
        #expect(try cli.run("log", "L.boardpkg").stdout.contains("setLabel"))

        let renamed = try cli.run("history", "label", "L.boardpkg", "--rename", id, "Reviewed")
        #expect(renamed.status == 0 && renamed.stdout.contains("renamed \(id)"), "\(renamed.stderr)")
        labels = try Self.labels(cli, "L.boardpkg")
        #expect(labels.map { $0["text"] as? String } == ["Reviewed"] && labels[0]["version"] as? Int == 2)

        // Refusals: a clear error, nothing written.
        let long = try cli.run("history", "label", "L.boardpkg", "1", String(repeating: "x", count: 201))
        #expect(long.status != 0 && long.stderr.contains("at most 200"), "\(long.stderr)")
        let empty = try cli.run("history", "label", "L.boardpkg", "1", "")
        #expect(empty.status != 0 && empty.stderr.contains("empty"), "\(empty.stderr)")
        let unknown = try cli.run("history", "label", "L.boardpkg", "--delete", "00000000000000ff#3")
        #expect(unknown.status != 0 && unknown.stderr.contains("no label with id 00000000000000ff#3"), "\(unknown.stderr)")
        let malformed = try cli.run("history", "label", "L.boardpkg", "--delete", "nope")
        #expect(malformed.status != 0 && malformed.stderr.contains("not a label id"), "\(malformed.stderr)")
        let noVersion = try cli.run("history", "label", "L.boardpkg", "99", "later")
        #expect(noVersion.status != 0 && noVersion.stderr.contains("no version 99"), "\(noVersion.stderr)")
        #expect(try Self.labels(cli, "L.boardpkg").count == 1)

        let deleted = try cli.run("history", "label", "L.boardpkg", "--delete", id)
        #expect(deleted.status == 0 && deleted.stdout.contains("deleted label \(id)"), "\(deleted.stderr)")
        #expect(try Self.labels(cli, "L.boardpkg").isEmpty)
        #expect(try cli.run("show", "L.boardpkg", "--json").stdout == board)
    }

    @Test func aLabelTravelsThroughAServerToAnotherPackage() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        let server = try Daemon(["serve", "--data", "data", "--listen", "127.0.0.1:0"], in: workspace.path)
        let address = try #require(server.listeningAddress(), "server log: \(server.log)")
        try cli.run("new", "A.boardpkg")
        try cli.run("new", "B.boardpkg")
        try cli.run("sticker", "A.boardpkg", "--image", "red.png", "--at", "10,10")
        let made = try cli.run("history", "label", "A.boardpkg", "latest", "First sticker", "--json")
        let id = try #require(try HistoryCLITests.json(made.stdout)["label"] as? String, "\(made.stderr)")
        for package in ["A.boardpkg", "B.boardpkg"] {
            let result = try cli.run("sync", package, "--server", address, "--board", "team")
            #expect(result.status == 0, "\(package): \(result.stderr)")
        }
        let labels = try Self.labels(cli, "B.boardpkg")
        #expect(labels.map { $0["id"] as? String } == [id] && labels.first?["text"] as? String == "First sticker", "\(labels)")
        #expect(try cli.run("show", "A.boardpkg", "--json").stdout == cli.run("show", "B.boardpkg", "--json").stdout)
        _ = server.terminate()
    }
}
