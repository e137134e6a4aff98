import BoardCRDT
import BoardModel
import BoardStore
import Foundation
import Testing

/// A package written by `board-sync` before batch format 2 (the release build of d446d49:
/// `new`, two `stroke`s, `canvas --size 800x600`), file by file. Its op log holds format 1
/// batches; this build must open it, show the same board, and append format 2 records to it.
@Suite struct FormatOneFixtureTests {
    static let files: [(String, String)] = [
        ("manifest.json", "eyJjYW52YXNTaXplIjp7ImhlaWdodCI6NjAwLCJ3aWR0aCI6ODAwfSwicGFpbnRPcmRlciI6WyI3QjcyNTNFQS01MDM5LTUxNzUtMDAwMC0wMDAwMDAwMDAwMDEiLCI3QjcyNTNFQS01MDM5LTUxNzUtMDAwMC0wMDAwMDAwMDAwMDIiXSwic2NoZW1hVmVyc2lvbiI6Miwic3RpY2tlcnMiOltdLCJzdHJva2VzIjpbeyJjb2xvciI6eyJhbHBoYSI6MSwiYmx1ZSI6MCwiZ3JlZW4iOjAsInJlZCI6MX0sImlkIjoiN0I3MjUzRUEtNTAzOS01MTc1LTAwMDAtMDAwMDAwMDAwMDAxIiwicG9pbnRzIjpbeyJ4IjoxMCwieSI6MTB9LHsieCI6MTIuNSwieSI6MTF9LHsieCI6MTUsInkiOjEzLjI1fSx7IngiOjIwLCJ5IjoyMH0seyJ4IjoyMSwieSI6MjJ9LHsieCI6MzAsInkiOjE4LjV9XSwid2lkdGgiOjN9LHsiY29sb3IiOnsiYWxwaGEiOjEsImJsdWUiOjAsImdyZWVuIjowLCJyZWQiOjB9LCJpZCI6IjdCNzI1M0VBLTUwMzktNTE3NS0wMDAwLTAwMDAwMDAwMDAwMiIsInBvaW50cyI6W3sieCI6MTAwLCJ5IjoxMDB9LHsieCI6OTAsInkiOjk1fSx7IngiOjgwLCJ5Ijo5Mn0seyJ4Ijo3NSwieSI6ODV9XSwid2lkdGgiOjJ9XX0="),
        ("sync/oplog", "QlNPUExPRzImAAAAUviPE6OUTbgBAAF1UTlQ6lNyewEAAVAC/wAA/zACgAEGAlBQFAgUEig2CBBIGyYAAAAcnkl6C6USJgEAAXVROVDqU3J7AQABAAQEBAAAAP8gAoACBATIAcgBEwkTBQkNFQAAAMBTCmWU4/mOAQABdVE5UOpTcnsBAAEOBgaAZIBL"),
        ("sync/replica.json", "ewogICJkaXJlY3RvcnkiIDogIjY1MDI0OjE2NDE2NzkxIiwKICAiZm9ybWF0IiA6IDEsCiAgInJlcGxpY2FJRCIgOiAiN2I3MjUzZWE1MDM5NTE3NSIKfQ=="),
        ("sync/undo.bin", "AgMZAQACAAAAAAAAAAB1UTlQ6lNyewEAAVMDARkBAAIAAAAAAAAAAHVROVDqU3J7AQABVAMBGQEAAgAAAAAAAAAAdVE5UOpTcnsBAAFTAwIZAQACAAAAAAAAAAB1UTlQ6lNyewEAAVQDAhUBAAEAAAAAAAAAAAEAAV6AyAGAlgETAQABAAAAAAAAAAABAAFegGSASwA="),
        ("sync/view.json", "eyJzdGlja2VycyI6e30sInZlcnNpb24iOnsiN2I3MjUzZWE1MDM5NTE3NSI6M319"),
    ]
    static let root = "/boards/Old.boardpkg"

    static func install(_ fs: MemoryFileSystem) throws {
        for directory in ["/boards", root, root + "/sync"] { try fs.createDirectory(directory) }
        for (name, base64) in files {
            try fs.writeFile(root + "/" + name, [UInt8](Data(base64Encoded: base64)!))
        }
        try fs.writeFile(root + "/sync/lock", [])
    }

    static let first = [pt(10, 10), pt(12.5, 11), pt(15, 13.25), pt(20, 20), pt(21, 22), pt(30, 18.5)]
    static let second = [pt(100, 100), pt(90, 95), pt(80, 92), pt(75, 85)]

    @Test func aPackageWrittenInFormatOneOpensAndTakesFormatTwoRecords() throws {
        let fs = MemoryFileSystem()
        try Self.install(fs)
        let ids = IDSource()
        let package = try BoardPackage.open(at: Self.root, fileSystem: fs, newReplicaID: ids.make)
        let board = package.replica.snapshot()
        #expect(board.canvasSize.width == 800 && board.canvasSize.height == 600)
        #expect(board.strokes.map(\.points) == [Self.first, Self.second])
        #expect(board.strokes.map(\.width) == [3, 2])
        #expect(package.replica.versionVector.entries[ReplicaID(0x7b72_53ea_5039_5175)] == 3)
        // A new stroke goes into the same op log in format 2; both kinds of record read back.
        let third = [pt(1, 1), pt(1.25, 1.5), pt(2, 2.0625), pt(400, 300)]
        try package.commit { try $0.beginStroke(color: RGBAColor(red: 0, green: 0, blue: 1), width: 1, points: third) }
        try package.save()
        let expected = try package.replica.snapshot().canonicalJSON()
        package.close()
        // The op log now holds the three format 1 records, then one in format 2.
        let log = try fs.readFile(Self.root + "/sync/oplog")
        var versions: [UInt8] = []
        var offset = 8  // "BSOPLOG2"
        while offset + 12 <= log.count {
            let length = (0..<4).reduce(0) { $0 | Int(log[offset + $1]) << (8 * $1) }
            versions.append(log[offset + 12])
            offset += 12 + length
        }
        #expect(versions == [1, 1, 1, 2])
        let reopened = try BoardPackage.open(at: Self.root, fileSystem: fs, newReplicaID: ids.make)
        defer { reopened.close() }
        #expect(reopened.notices.isEmpty, "\(reopened.notices)")
        #expect(try reopened.replica.snapshot().canonicalJSON() == expected)
        #expect(reopened.replica.snapshot().strokes.map(\.points) == [Self.first, Self.second, third])
    }
}
