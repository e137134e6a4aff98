import BoardCRDT
import BoardModel
import BoardStore
import Foundation
import Testing

/// `board-sync log` as the board's whole history, and `repair` of a damaged archive, as a real
/// process on a package in a temp folder that compacted.
@Suite struct HistoryLogCLITests {
    static func entries(_ text: String) throws -> [[String: Any]] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]], "\(text)")
    }

    /// A package with five edits made by the CLI, a peer's operation merged in, compacted (so the
    /// first canvas size, overwritten, survives only in the archive), then one more edit.
    static func compacted(_ name: String, in workspace: Workspace) throws -> (peer: ReplicaID, sticker: String) {
        let cli = workspace.cli
        let (sticker, _) = try HistoryCLITests.edited(name, in: workspace)
        #expect(try cli.run("canvas", name, "--size", "1800x1200").status == 0)
        let path = workspace.path + "/" + name
        let package = try BoardPackage.open(at: path, fileSystem: PosixFileSystem(), newReplicaID: { ReplicaID(0xDEAD) })
        var peer = Replica(id: ReplicaID(0xB0B))
        try peer.apply(package.replica.operations(since: peer.versionVector))
        _ = try peer.setCanvasSize(CodableSize(width: 900, height: 600))
        _ = try package.merging(peer.operations(since: package.replica.versionVector), deferringSync: false)
        try package.compactLog()
        try package.save()
        package.close()
        #expect(FileManager.default.fileExists(atPath: path + "/" + PackageLayout.history))
        #expect(try cli.run("canvas", name, "--size", "700x500").status == 0)
        return (peer.id, sticker)
    }

    @Test func logListsEveryOperationIncludingArchivedOnesWithAuthorAndTime() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        let (peer, sticker) = try Self.compacted("L.boardpkg", in: workspace)

        let result = try cli.run("log", "L.boardpkg", "--json")
        #expect(result.status == 0, "\(result.stderr)")
        let log = try Self.entries(result.stdout)
        // Four canvas sizes, though the board's state holds one: the overwritten ones come from the archive.
        let canvases = log.filter { $0["kind"] as? String == "setBoard" && $0["field"] as? String == "canvas" }
        #expect(canvases.compactMap { ($0["value"] as? [Double])?.first } == [2000, 1800, 900, 700], "\(result.stdout)")
        #expect(log.contains { $0["kind"] as? String == "addSticker" && $0["item"] as? String == sticker })
        // Every operation once: as many as the versions of `history list` hold.
        let list = try #require(try JSONSerialization.jsonObject(with: Data(try cli.run("history", "list", "L.boardpkg", "--json").stdout.utf8)) as? [String: Any])
        let versions = try #require(list["versions"] as? [[String: Any]])
        #expect(log.count == versions.reduce(0) { $0 + ($1["operations"] as? Int ?? 0) })
        #expect(Set(log.map { "\($0["replica"] ?? "")#\($0["seq"] ?? "")" }).count == log.count)
        // Authors: the CLI's replica, and the peer's for its one operation.
        let authors = log.compactMap { $0["author"] as? String }
        #expect(authors.count == log.count && authors == log.compactMap { $0["replica"] as? String })
        #expect(authors.filter { $0 == peer.description }.count == 1 && Set(authors).count == 2, "\(authors)")
        // Each with the wall time its record was saved and the version that first holds it, in order.
        let times = log.compactMap { $0["time"] as? String }
        #expect(times.count == log.count && times.allSatisfy { $0.hasSuffix("Z") }, "\(result.stdout)")
        let milliseconds = log.compactMap { $0["timeMilliseconds"] as? Int }
        #expect(milliseconds.count == log.count && milliseconds == milliseconds.sorted())
        let now = Int(Date().timeIntervalSince1970 * 1000)
        #expect(milliseconds.allSatisfy { $0 > now - 3_600_000 && $0 <= now }, "recorded by this machine's clock just now")
        let numbers = log.compactMap { $0["version"] as? Int }
        #expect(numbers.count == log.count && numbers == numbers.sorted() && numbers.last == versions.count)

        // The text form: a line per operation, time and version first.
        let text = try cli.run("log", "L.boardpkg")
        let lines = text.stdout.split(separator: "\n")
        #expect(text.status == 0 && lines.count == log.count, "\(text.stdout)")
        #expect(lines.allSatisfy { $0.prefix(20).hasSuffix("Z") && $0.dropFirst(22).hasPrefix("v") }, "\(text.stdout)")
        #expect(lines.contains { $0.contains("@\(peer.description)") })

        let help = try cli.run("log", "--help")
        #expect(help.status == 0 && help.stdout.contains("whole history") && help.stdout.contains("archived") && help.stdout.contains("author"))
    }

    @Test func aDamagedArchiveFailsTheLogAndHistoryUntilRepairSalvagesIt() throws {
        let workspace = try Workspace()
        let cli = workspace.cli
        _ = try Self.compacted("D.boardpkg", in: workspace)
        let before = try Self.entries(try cli.run("log", "D.boardpkg", "--json").stdout)
        let archive = workspace.path + "/D.boardpkg/" + PackageLayout.history
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: archive)))
        let records = HistoryArchive.parse(bytes).records
        #expect(records.count >= 5)
        // A flipped byte in the second record, and the last record cut short.
        bytes[records[1].offset + 12] ^= 0x20
        bytes.removeLast(3)
        try Data(bytes).write(to: URL(fileURLWithPath: archive))

        for command in [["log", "D.boardpkg"], ["history", "list", "D.boardpkg"]] {
            let failed = try cli.run(command)
            #expect(failed.status != 0 && failed.stderr.contains("history") && failed.stderr.contains("board-sync repair")
                    && failed.stderr.contains("\(records[1].offset)"), "\(command): \(failed.stderr)")
            #expect(failed.stdout.isEmpty, "no partial listing: \(failed.stdout)")
        }
        #expect(try cli.run("show", "D.boardpkg").status == 0, "the board itself does not depend on the archive")

        let repair = try cli.run("repair", "D.boardpkg", "--json")
        #expect(repair.status == 0, "\(repair.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(repair.stdout.utf8)) as? [String: Any])
        let dropped = try #require(report["archiveDropped"] as? [[String: Any]])
        // Each damaged record once: the second and the last may lie in one segment (a
        // compaction archives its records as one), which is dropped whole.
        var damagedOffsets: [Int] = []
        for offset in [records[1].offset, records[records.count - 1].offset] where !damagedOffsets.contains(offset) { damagedOffsets.append(offset) }
        #expect(dropped.compactMap { $0["offset"] as? Int } == damagedOffsets, "\(repair.stdout)")
        #expect((report["damagedArchiveCopy"] as? String)?.hasSuffix("D.boardpkg/sync/history.damaged") == true, "\(repair.stdout)")

        let after = try cli.run("log", "D.boardpkg", "--json")
        #expect(after.status == 0, "\(after.stderr)")
        let log = try Self.entries(after.stdout)
        // The damaged records' operations that the board's state still holds come back from the
        // log's state record; the ones overwritten are gone, as repair said.
        func ids(_ entries: [[String: Any]]) -> Set<String> { Set(entries.map { "\($0["replica"] ?? "")#\($0["seq"] ?? "")" }) }
        #expect(!log.isEmpty && ids(log).isSubset(of: ids(before)), "\(after.stdout)")
        #expect(try cli.run("repair", "D.boardpkg", "--json").stdout.contains("\"changed\" : false"), "a second repair finds nothing")
    }
}
