import Foundation
import Testing

/// `board-sync repair` as a real process lists what it reverted: every register whose value the
/// package showed before differs from the salvaged log's, before → after, in text and JSON.
@Suite struct RepairCLITests {
    /// A package whose third and fourth records (a canvas resize, a sticker's scale and rotation)
    /// are damaged; the stroke restyled after them survives. Returns the sticker's and stroke's ids.
    static func damagedPackage(_ name: String, in workspace: Workspace) throws -> (sticker: String, stroke: String) {
        let cli = workspace.cli
        #expect(try cli.run("new", name).status == 0)
        let sticker = try cli.run("sticker", name, "--image", "red.png", "--at", "10,20").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let stroke = try cli.run("stroke", name, "--points", "0,0 5,5").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try cli.run("canvas", name, "--size", "2000x1500").status == 0)
        #expect(try cli.run("transform", name, sticker, "--scale", "2.5", "--rotation", "0.25").status == 0)
        #expect(try cli.run("style", name, stroke, "--width", "4").status == 0)
        let path = workspace.path + "/" + name + "/sync/oplog"
        var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        var records: [Int] = []  // each record's offset: the magic, then 12-byte headers, length first
        var offset = 8
        while offset + 12 <= bytes.count {
            records.append(offset)
            offset += 12 + (0..<4).reduce(0) { $0 | Int(bytes[offset + $1]) << (8 * $1) }
        }
        #expect(records.count == 5)
        for record in records[2...3] { bytes[record + 12 + 2] ^= 0x10 }
        try bytes.write(to: URL(fileURLWithPath: path))
        #expect(try cli.run("show", name).status == 1, "the damaged log is refused")
        return (sticker, stroke)
    }

    @Test func repairPrintsEachRevertedValueBeforeAndAfter() throws {
        let workspace = try Workspace()
        let (sticker, _) = try Self.damagedPackage("B.boardpkg", in: workspace)
        let result = try workspace.cli.run("repair", "B.boardpkg")
        #expect(result.status == 0, "\(result.stderr)")
        let lines = result.stdout.components(separatedBy: "\n")
        let list = try #require(lines.firstIndex(of: "  what the package showed before → what it shows now:"), "\(result.stdout)")
        #expect(Array(lines[(list + 1)...].prefix(3)) == [
            "    canvas      2000x1500 → 1600x1200 points",
            "    sticker  \(sticker)  scale 2.5 → 1",
            "    sticker  \(sticker)  rotation 0.25 → 0",
        ], "\(result.stdout)")
        #expect(!lines[(list + 4)...].contains { $0.hasPrefix("    ") }, "nothing else is listed: \(result.stdout)")
        #expect(result.stdout.contains("3 value(s) differ from what the package showed before; sync with a peer or the server"), "\(result.stdout)")
        // What it shows now is what `show` prints.
        let board = try workspace.board("B.boardpkg")
        #expect(board.canvasSize.width == 1600 && board.canvasSize.height == 1200)
        #expect(board.stickers.first?.scale == 1)
        #expect(board.strokes.first?.width == 4, "the record after the damage is kept")
        let again = try workspace.cli.run("repair", "B.boardpkg")
        #expect(again.stdout.contains("nothing was changed") && !again.stdout.contains("→"), "\(again.stdout)")
    }

    @Test func repairJSONGivesEachChangeInBoardUnits() throws {
        let workspace = try Workspace()
        let (sticker, _) = try Self.damagedPackage("J.boardpkg", in: workspace)
        let result = try workspace.cli.run("repair", "J.boardpkg", "--json")
        #expect(result.status == 0, "\(result.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        #expect(report["comparedWithView"] as? Bool == true)
        #expect(report["logKnowsLess"] as? Bool == true)
        #expect((report["lostItems"] as? [Any])?.isEmpty == true)
        let changes = try #require(report["changes"] as? [[String: Any]], "\(result.stdout)")
        #expect(changes.count == 3, "\(result.stdout)")
        guard changes.count == 3 else { return }
        #expect(changes[0]["kind"] as? String == "board" && changes[0]["register"] as? String == "canvas")
        #expect(changes[0]["before"] as? [Double] == [2000, 1500] && changes[0]["after"] as? [Double] == [1600, 1200])
        #expect(changes[1]["item"] as? String == sticker && changes[1]["kind"] as? String == "sticker")
        #expect(changes[1]["register"] as? String == "scale" && changes[1]["before"] as? Double == 2.5 && changes[1]["after"] as? Double == 1)
        #expect(changes[2]["register"] as? String == "rotation" && changes[2]["before"] as? Double == 0.25 && changes[2]["after"] as? Double == 0)
    }

    @Test func aRepairThatRevertsNothingSaysTheBoardIsUnchanged() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        #expect(try cli.run("new", "U.boardpkg", "--canvas", "2000x1500").status == 0)
        #expect(try cli.run("stroke", "U.boardpkg", "--points", "0,0 5,5").status == 0)
        // Bytes after the last record that are not a record (a header whose checksum fails).
        let path = workspace.path + "/U.boardpkg/sync/oplog"
        var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        bytes += Data([0x01, 0, 0, 0, 0xDE, 0xAD, 0xBE, 0xEF, 0, 0, 0, 0, 0x42])
        try bytes.write(to: URL(fileURLWithPath: path))
        let result = try cli.run("repair", "U.boardpkg")
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("dropped 13 byte(s)"), "\(result.stdout)")
        #expect(result.stdout.contains("no canvas, background or item value changed"), "\(result.stdout)")
        #expect(!result.stdout.contains("→"), "\(result.stdout)")
        let json = try cli.run("repair", "U.boardpkg", "--json")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect((report["changes"] as? [Any])?.isEmpty == true, "a healthy package lists no changes either")
    }
}
