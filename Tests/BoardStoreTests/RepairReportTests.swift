import BoardCRDT
import BoardModel
@testable import BoardStore
import Foundation
import Testing

/// `repair` lists every register the salvaged log knows less about, with the value the package
/// showed before and the one it shows after (issue: a repair reverted the canvas from 2000x1500
/// to 1600x1200 and reported only lost items).
@Suite struct RepairReportTests {
    /// Byte ranges of the log's records: the magic, then 12-byte headers (length u32 LE first).
    static func records(_ bytes: [UInt8]) -> [Range<Int>] {
        var ranges: [Range<Int>] = []
        var offset = OpLog.magic.count
        while offset + 12 <= bytes.count {
            let length = (0..<4).reduce(0) { $0 | Int(bytes[offset + $1]) << (8 * $1) }
            ranges.append(offset..<(offset + 12 + length))
            offset += 12 + length
        }
        return ranges
    }

    struct Board {
        var path: String
        var stroke, a, b, c, d, lostStroke, later: UUID
        var damagedRecord: Range<Int>
    }

    /// A package on disk whose seventh record (index 6) holds, in one batch, a canvas change, a
    /// new background, a sticker's move, scale and rotation, a stroke's colour, width, appended
    /// points and bring-to-front, another sticker's delete, a deleted sticker's restore and new
    /// image, and a whole new stroke; a record after it draws one more stroke. The view is
    /// saved, so it shows all of it.
    static func makeBoard(in directory: String, fileSystem: any FileSystem) throws -> Board {
        let path = directory + "/Repair.boardpkg"
        let package = try BoardPackage.create(at: path, fileSystem: fileSystem, replicaID: ReplicaID(0xB0A4D))
        let stroke = try package.commit { try $0.beginStroke(color: .black, width: 2, points: [pt(0, 0), pt(5, 5)]) }.item!
        let a = try package.commit { try $0.addSticker(imagePNG: pngRed, at: pt(10, 10)) }.item!
        let b = try package.commit { try $0.addSticker(imagePNG: pngBlue, at: pt(50, 50)) }.item!
        let c = try package.commit { try $0.addSticker(imagePNG: pngRed, at: pt(80, 80)) }.item!
        let d = try package.commit { try $0.addSticker(imagePNG: pngRed, at: pt(5, 5)) }.item!
        try package.commit { try $0.delete(d) }
        var lostStroke: ItemID?
        try package.commit { replica in
            var made: [Op] = []
            made += try replica.setCanvasSize(CodableSize(width: 2000, height: 1500)).operations
            made += try replica.setBackground(imagePNG: pngGreen).operations
            made += try replica.move(a, to: pt(30, 40)).operations
            made += try replica.transform(a, scale: 2, rotation: 0.5).operations
            made += try replica.setColor(stroke, to: RGBAColor(red: 1, green: 0, blue: 0)).operations
            made += try replica.setWidth(stroke, to: 4).operations
            made += try replica.appendPoints([pt(7, 7), pt(9, 9), pt(11, 3)], to: stroke).operations
            replica.finishStroke(stroke)
            made += try replica.bringToFront(stroke).operations
            made += try replica.delete(b).operations
            made += try replica.restore(d).operations
            made += try replica.replaceImage(d, withPNG: pngBlue).operations
            let edit = try replica.beginStroke(color: .black, width: 1, points: [pt(1, 1), pt(2, 2)])
            replica.finishStroke()
            lostStroke = edit.item
            made += edit.operations
            return LocalEdit(operations: made)
        }
        let later = try package.commit { replica in
            let edit = try replica.beginStroke(color: .black, width: 3, points: [pt(100, 100), pt(120, 90)])
            replica.finishStroke()
            return edit
        }.item!
        try package.save()
        package.close()
        let records = Self.records(try fileSystem.readFile(path + "/sync/oplog"))
        #expect(records.count == 8)
        return Board(path: path, stroke: stroke.uuid, a: a.uuid, b: b.uuid, c: c.uuid, d: d.uuid, lostStroke: lostStroke!.uuid,
                     later: later.uuid, damagedRecord: records[6])
    }

    /// Flips one payload byte of the record at `range`.
    static func corrupt(_ path: String, _ range: Range<Int>) throws {
        var bytes = try Data(contentsOf: URL(fileURLWithPath: path + "/sync/oplog"))
        bytes[range.lowerBound + 12 + 3] ^= 0x5A
        try bytes.write(to: URL(fileURLWithPath: path + "/sync/oplog"))
    }

    @Test func aRepairNamesEveryRevertedRegisterWithItsValueBeforeAndAfter() throws {
        let temp = TempDirectory()
        let fs = PosixFileSystem()
        let board = try Self.makeBoard(in: temp.path, fileSystem: fs)
        let before = try PackageReader(fileSystem: fs).read(board.path)
        #expect(before.canvasSize == CodableSize(width: 2000, height: 1500), "the view shows the damaged record's edits")
        try Self.corrupt(board.path, board.damagedRecord)
        let ids = IDSource()
        #expect(throws: StoreError.self) { try BoardPackage.open(at: board.path, fileSystem: fs, newReplicaID: ids.make) }

        let report = try BoardPackage.repair(at: board.path, fileSystem: fs, newReplicaID: ids.make)
        #expect(report.keptRecords == 7)
        #expect(report.dropped.count == 1)
        #expect(report.comparedWithView)
        #expect(report.logKnowsLess)
        let green = AssetHash.of(pngGreen).hex, blueImage = AssetHash.of(pngBlue).hex, redImage = AssetHash.of(pngRed).hex
        let red = RGBAColor(red: 1, green: 0, blue: 0)
        let expected: [RegisterChange] = [
            RegisterChange(.board, .canvas, before: .size(CodableSize(width: 2000, height: 1500)), after: .size(CodableSize(width: 1600, height: 1200))),
            RegisterChange(.board, .background, before: .image(sha256: green), after: .image(sha256: nil)),
            // Bottom to top as the view painted them: a, c, d, the stroke (brought to front), ...
            RegisterChange(.item(board.a, .sticker), .position, before: .point(pt(30, 40)), after: .point(pt(10, 10))),
            RegisterChange(.item(board.a, .sticker), .scale, before: .number(2), after: .number(1)),
            RegisterChange(.item(board.a, .sticker), .rotation, before: .number(0.5), after: .number(0)),
            RegisterChange(.item(board.d, .sticker), .shown, before: .shown(true), after: .shown(false)),
            RegisterChange(.item(board.d, .sticker), .image, before: .image(sha256: blueImage), after: .image(sha256: redImage)),
            RegisterChange(.item(board.stroke, .stroke), .color, before: .color(red), after: .color(.black)),
            RegisterChange(.item(board.stroke, .stroke), .width, before: .number(4), after: .number(2)),
            RegisterChange(.item(board.stroke, .stroke), .points, before: .count(5), after: .count(2)),
            RegisterChange(.item(board.stroke, .stroke), .paintOrder, before: .place(4, of: 6), after: .place(1, of: 5)),
            // ... then what only the salvaged board shows: b, whose delete was lost.
            RegisterChange(.item(board.b, .sticker), .shown, before: .shown(false), after: .shown(true)),
        ]
        #expect(report.changes == expected)
        #expect(report.lost == [RepairReport.LostItem(id: board.lostStroke, kind: .stroke)])
        #expect(report.missingItems == [board.lostStroke])
        #expect(report.viewCopy != nil)
        #expect(report.notes.contains { $0.contains("12 value(s) differ") && $0.contains("1 item(s)") }, "\(report.notes)")

        // "After" is what the package shows now.
        let reopened = try BoardPackage.open(at: board.path, fileSystem: fs, newReplicaID: ids.make)
        defer { reopened.close() }
        let after = try PackageReader(fileSystem: fs).read(board.path)
        #expect(after.canvasSize == CodableSize(width: 1600, height: 1200))
        #expect(after.backgroundSHA256 == nil)
        #expect(after.paintOrder == [board.stroke, board.a, board.b, board.c, board.later])
        #expect(try PackageReader(fileSystem: fs).read(report.viewCopy!).canvasSize == CodableSize(width: 2000, height: 1500))
    }

    @Test func aRepairThatChangesNothingTheBoardShowsSaysSo() throws {
        let temp = TempDirectory()
        let fs = PosixFileSystem()
        let board = try Self.makeBoard(in: temp.path, fileSystem: fs)
        // Damage past the last record (bytes that are not a record): the records all check
        // out, so the salvaged board is the board the view shows.
        var bytes = try fs.readFile(board.path + "/sync/oplog")
        bytes += [0x01, 0x00, 0x00, 0x00, 0xDE, 0xAD, 0xBE, 0xEF, 0x00, 0x00, 0x00, 0x00, 0x42]
        try fs.writeFile(board.path + "/sync/oplog", bytes)
        let ids = IDSource()
        #expect(throws: StoreError.self) { try BoardPackage.open(at: board.path, fileSystem: fs, newReplicaID: ids.make) }
        let report = try BoardPackage.repair(at: board.path, fileSystem: fs, newReplicaID: ids.make)
        #expect(report.changedAnything, "the log was rewritten under a new identity")
        #expect(report.comparedWithView)
        #expect(!report.logKnowsLess)
        #expect(report.changes.isEmpty && report.lost.isEmpty)
        #expect(report.viewCopy == nil)
        #expect(report.notes.contains { $0.contains("no canvas, background or item value changed") }, "\(report.notes)")
    }

    /// Without `sync/view.json` the package cannot tell the log knows less, but the manifest
    /// still shows what the package showed: the changes are listed and that view is kept.
    @Test func aRepairWithoutViewIndexStillComparesWithTheManifest() throws {
        let temp = TempDirectory()
        let fs = PosixFileSystem()
        let board = try Self.makeBoard(in: temp.path, fileSystem: fs)
        try Self.corrupt(board.path, board.damagedRecord)
        try fs.removeFile(board.path + "/sync/view.json")
        let report = try BoardPackage.repair(at: board.path, fileSystem: fs, newReplicaID: IDSource().make)
        #expect(!report.logKnowsLess)
        #expect(report.comparedWithView)
        #expect(report.changes.first == RegisterChange(.board, .canvas, before: .size(CodableSize(width: 2000, height: 1500)),
                                                       after: .size(CodableSize(width: 1600, height: 1200))))
        #expect(report.changes.count == 12)
        #expect(report.viewCopy != nil, "the manifest that showed more is kept before open rebuilds it")
        let reopened = try BoardPackage.open(at: board.path, fileSystem: fs, newReplicaID: IDSource(start: 0x9000).make)
        reopened.close()
        #expect(try PackageReader(fileSystem: fs).read(board.path).canvasSize == CodableSize(width: 1600, height: 1200))
    }

    @Test func aRepairWithoutAReadableViewSaysItCannotList() throws {
        let temp = TempDirectory()
        let fs = PosixFileSystem()
        let board = try Self.makeBoard(in: temp.path, fileSystem: fs)
        try Self.corrupt(board.path, board.damagedRecord)
        try fs.writeFile(board.path + "/manifest.json", Array("{ not json".utf8))
        let report = try BoardPackage.repair(at: board.path, fileSystem: fs, newReplicaID: IDSource().make)
        #expect(!report.comparedWithView)
        #expect(report.changes.isEmpty)
        #expect(report.notes.contains { $0.contains("could not be read") && $0.contains("cannot be listed") }, "\(report.notes)")
        #expect(!report.notes.contains { $0.contains("no canvas, background or item value changed") }, "never claims nothing changed")
    }

    /// The comparison takes whatever manifest a reader accepted: duplicate ids, a paint order
    /// naming unknown or repeated ids, an id the log holds as the other kind. None crashes.
    @Test func anOddViewIsComparedWithoutCrashing() throws {
        var replica = Replica(id: ReplicaID(7))
        let sticker = try replica.addSticker(imagePNG: pngRed, at: pt(1, 1)).item!.uuid
        let stroke = try replica.beginStroke(color: .black, width: 2, points: [pt(0, 0)]).item!.uuid
        let unknown = UUID()
        let view = BoardSnapshot(
            strokes: [InkStroke(id: sticker, color: .black, width: 2, points: []),            // the log's sticker, as a stroke
                      InkStroke(id: stroke, color: .black, width: 2, points: [pt(0, 0)]),
                      InkStroke(id: stroke, color: .black, width: 9, points: [])],           // a duplicate
            stickers: [PlacedSticker(id: unknown, imagePNG: Data(), position: pt(0, 0))],
            paintOrder: [unknown, stroke, stroke, UUID(), sticker])
        let (changes, lost) = RepairReport.compare(shown: view, salvaged: replica)
        #expect(lost == [RepairReport.LostItem(id: unknown, kind: .sticker), RepairReport.LostItem(id: sticker, kind: .stroke)])
        #expect(changes == [RegisterChange(.item(sticker, .sticker), .shown, before: .shown(false), after: .shown(true))],
                "the first copy of a duplicate counts; the sticker the view called a stroke shows up as new")

        // A seed-format view (no paint order): its lists put the stroke below both stickers, but
        // it does not know the order across kinds, so that is not claimed as a change.
        let other = try replica.addSticker(imagePNG: pngBlue, at: pt(2, 2)).item!.uuid
        let seedView = BoardSnapshot(schemaVersion: 1,
            strokes: [InkStroke(id: stroke, color: .black, width: 2, points: [pt(0, 0)])],
            stickers: [PlacedSticker(id: sticker, imagePNG: pngRed, position: pt(1, 1)),
                       PlacedSticker(id: other, imagePNG: pngBlue, position: pt(2, 2))])
        #expect(RepairReport.compare(shown: seedView, salvaged: replica).changes == [],
                "hashes come from the images' bytes; the stickers' order within their kind is known and held")
        var swapped = seedView
        swapped.stickers.reverse()
        #expect(RepairReport.compare(shown: swapped, salvaged: replica).changes
                == [RegisterChange(.item(other, .sticker), .paintOrder, before: .place(1, of: 2), after: .place(2, of: 2))],
                "within a kind the seed's lists keep the paint order; places count that kind's items")
    }

    @Test(arguments: [
        ([], []), ([0], [0]), ([3, 1, 2], [1, 2]), ([1, 0], [1]), ([0, 1, 2], [0, 1, 2]), ([2, 1, 0], [2]),
        ([5, 0, 1, 6, 2, 3], [1, 2, 4, 5]),
    ] as [([Int], [Int])])
    func theLongestIncreasingRunIsFound(values: [Int], run: [Int]) {
        #expect(RepairReport.longestIncreasingRun(values) == run)
    }
}
