import BoardClient
import BoardCRDT
import BoardModel
import BoardRender
import BoardStore
import Foundation
import Testing

@Suite struct DocumentTests {
    @Test func documentSnapshotPackageSnapshotDocumentRoundTripIncludingPendingAssets() throws {
        let fs = MemoryFileSystem()
        try fs.createDirectory("/out")
        let ids = DocumentIDs()
        let document = try BoardDocument(replicaID: ids.make(), source: .photoBoard(Fixture.green))
        let sticker = try document.edit { try $0.addSticker(imagePNG: Fixture.red, at: Fixture.point(12.5, 7.25), scale: 1.5, rotation: 0.25) }.item!
        let pendingHash = AssetHash.of(Array("arrives later".utf8))
        let pending = try document.edit { try $0.addSticker(asset: pendingHash, at: Fixture.point(3, 3)) }.item!
        try document.edit { replica in
            let edit = try replica.beginStroke(color: RGBAColor(red: 0.2, green: 0.4, blue: 0.6), width: 3, points: [Fixture.point(1, 1), Fixture.point(2, 3)])
            replica.finishStroke()
            return edit
        }
        try document.edit { try $0.sendToBack(sticker) }
        #expect(document.isDirty)

        let snapshot = try document.snapshot(contentType: .boardPackage)
        #expect(snapshot.canvasSize == CodableSize(width: 5, height: 5), "the photo sized the canvas")
        #expect(snapshot.pendingStickerIDs == [pending.uuid])
        let writer = document.writer(configuration: WriteConfiguration(contentType: .boardPackage, fileSystem: fs))
        try writer.write(content: snapshot, to: "/out/Round.boardpkg", previous: nil)
        document.markSaved()
        #expect(!document.isDirty)

        let read = try document.reader(configuration: ReadConfiguration(contentType: .boardPackage, fileSystem: fs)).read(from: "/out/Round.boardpkg")
        #expect(read == snapshot, "package → snapshot gives back the same board, pending sticker included")

        let copy = try BoardDocument(replicaID: ids.make())
        try copy.apply(snapshot: read, previous: nil)
        #expect(try copy.replica.snapshot().canonicalJSON() == snapshot.canonicalJSON())
        #expect(copy.replica.missingAssets == [pendingHash])
        // Applying the same snapshot again changes nothing.
        #expect(try copy.apply(snapshot: read, previous: nil).operations.isEmpty)
    }

    @Test func theWriterRoutesExportsToTheirRenderersAndWritesThemWhole() throws {
        let document = try BoardDocument(replicaID: ReplicaID(1))
        _ = try document.edit { try $0.addSticker(asset: AssetHash.of([1, 2, 3]), at: CodablePoint(x: 5, y: 5)) }
        let fileSystem = MemoryFileSystem()
        let signatures: [ContentType: [UInt8]] = [.png: [0x89, 0x50, 0x4E, 0x47], .pdf: Array("%PDF".utf8), .svg: Array("<?xml".utf8)]
        for type in [ContentType.png, .pdf, .svg] {
            let snapshot = try document.snapshot(contentType: type)
            let writer = document.writer(configuration: WriteConfiguration(contentType: type, fileSystem: fileSystem,
                                                                           export: ExportPolicy(scale: 0.25)))
            let report = try writer.write(content: snapshot, to: "/x.\(type.fileExtension)", previous: nil)
            #expect(report.written == ["/x.\(type.fileExtension)"])
            #expect(report.warnings.count == 1 && report.warnings[0].contains("not arrived"), "the pending sticker: \(report.warnings)")
            #expect(try fileSystem.readFile("/x.\(type.fileExtension)").starts(with: signatures[type]!))
        }
        // A folder in the way is refused, not replaced; readers read packages only.
        try fileSystem.createDirectory("/folder.png")
        let writer = document.writer(configuration: WriteConfiguration(contentType: .png, fileSystem: fileSystem))
        #expect(throws: StoreError.self) { try writer.write(content: try document.snapshot(contentType: .png), to: "/folder.png", previous: nil) }
        #expect(fileSystem.isDirectory("/folder.png"))
        #expect(throws: StoreError.unsupportedContentType(ContentType.png.description)) {
            _ = try document.reader(configuration: ReadConfiguration(contentType: .png, fileSystem: fileSystem)).read(from: "/x.png")
        }
        #expect(ContentType.forPath("/a/Weekend.boardpkg/") == .boardPackage)
        #expect(ContentType.forPath("export.PNG") == .png)
    }

    @Test func everyUserFacingChangeMarksTheDocumentAndCallsAutosave() throws {
        let fs = MemoryFileSystem()
        try fs.createDirectory("/boards")
        let package = try BoardPackage.create(at: "/boards/A.boardpkg", fileSystem: fs, replicaID: ReplicaID(7))
        let document = BoardDocument(package: package)
        var calls = 0
        document.autosave = { _ in calls += 1 }
        let sticker = try document.edit { try $0.addSticker(imagePNG: Fixture.red, at: Fixture.point(0, 0)) }.item!
        try document.edit { try $0.move(sticker, to: Fixture.point(1, 1)) }
        _ = try document.undo()
        #expect(calls == 3)
        #expect(document.isDirty)
        try document.save()
        #expect(!document.isDirty)
        _ = try document.edit { try $0.undo() }  // undoes the sticker's creation
        #expect(document.replica.snapshot().stickers.isEmpty)
        _ = try document.edit { try $0.undo() }  // nothing left: no change, no call
        #expect(calls == 4)
    }

    @Test func aPhotoThatIsNotAPNGIsRefused() {
        #expect(throws: StoreError.self) {
            try BoardDocument(replicaID: ReplicaID(1), source: .photoBoard(Data("GIF89a".utf8)))
        }
    }
}

/// What these tests need of BoardStoreTests' support, kept private to this file.
private enum Fixture {
    static let red = Data(PNGEncoder.solid(width: 4, height: 3, red: 255, green: 0, blue: 0))
    static let green = Data(PNGEncoder.solid(width: 5, height: 5, red: 0, green: 200, blue: 0))
    static func point(_ x: Double, _ y: Double) -> CodablePoint { CodablePoint(x: x, y: y) }
}

/// Hands out distinct replica ids deterministically (one test's thread only).
private final class DocumentIDs {
    private var next: UInt64 = 0x1000
    func make() -> ReplicaID {
        next += 1
        return ReplicaID(next)
    }
}
