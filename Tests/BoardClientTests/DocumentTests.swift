import BoardClient
import BoardCRDT
import BoardModel
import BoardRender
import BoardStore
import Foundation
import Testing

/// The document side of `LiveBoardModel` (what `BoardDocument` was): the seed's save path,
/// `isDirty` and `autosave`, readers and `apply(snapshot:previous:)`, creation sources.
@MainActor @Suite struct DocumentTests {
    @Test func documentSnapshotPackageSnapshotDocumentRoundTripIncludingPendingAssets() async throws {
        let fs = MemoryFileSystem()
        try fs.createDirectory("/out")
        let board = try LiveBoard.open(storage: .memory, identity: LiveBoard.Identity(replicaID: ReplicaID(0x1001)))
        let document = LiveBoardModel(board: board)
        try await document.start(from: .photoBoard(Fixture.green))
        let sticker = try await document.commit { try $0.addSticker(imagePNG: Fixture.red, at: Fixture.point(12.5, 7.25), scale: 1.5, rotation: 0.25) }.item!
        let pendingHash = AssetHash.of(Array("arrives later".utf8))
        let pending = try await document.commit { try $0.addSticker(asset: pendingHash, at: Fixture.point(3, 3)) }.item!
        document.edit { replica in
            let edit = try replica.beginStroke(color: RGBAColor(red: 0.2, green: 0.4, blue: 0.6), width: 3, points: [Fixture.point(1, 1), Fixture.point(2, 3)])
            replica.finishStroke()
            return edit
        }
        document.edit { try $0.sendToBack(sticker) }
        await document.flush()
        #expect(document.isDirty)
        #expect(document.lastError == nil)

        let snapshot = try document.snapshot(contentType: .boardPackage)
        #expect(snapshot == document.snapshot, "flushed: the frozen board is the one shown")
        #expect(snapshot.canvasSize == CodableSize(width: 5, height: 5), "the photo sized the canvas")
        #expect(snapshot.pendingStickerIDs == [pending.uuid])
        let writer = document.writer(configuration: WriteConfiguration(contentType: .boardPackage, fileSystem: fs))
        try writer.write(content: snapshot, to: "/out/Round.boardpkg", previous: nil)
        document.markSaved()
        #expect(!document.isDirty)

        let read = try document.reader(configuration: ReadConfiguration(contentType: .boardPackage, fileSystem: fs)).read(from: "/out/Round.boardpkg")
        #expect(read == snapshot, "package → snapshot gives back the same board, pending sticker included")

        let copyBoard = try LiveBoard.open(storage: .memory, identity: LiveBoard.Identity(replicaID: ReplicaID(0x1002)))
        let copy = LiveBoardModel(board: copyBoard)
        try await copy.apply(snapshot: read, previous: nil)
        #expect(try copy.snapshot.canonicalJSON() == snapshot.canonicalJSON())
        #expect(await copyBoard.replica.missingAssets == [pendingHash])
        // Applying the same snapshot again changes nothing.
        #expect(try await copy.apply(snapshot: read, previous: nil).operations.isEmpty)
        _ = await board.close()
        _ = await copyBoard.close()
    }

    @Test func writeSavesOffTheMainActorRewritingOnlyWhatDiffersFromTheLastWrite() async throws {
        let fs = MemoryFileSystem()
        try fs.createDirectory("/out")
        let board = try LiveBoard.open(storage: .memory)
        let document = LiveBoardModel(board: board)
        try await document.start(from: .photoBoard(Fixture.green))
        let sticker = try await document.commit { try $0.addSticker(imagePNG: Fixture.red, at: Fixture.point(1, 1)) }.item!
        let configuration = WriteConfiguration(contentType: .boardPackage, fileSystem: fs)
        let first = try await document.write(to: "/out/Saved.boardpkg", configuration: configuration)
        #expect(first.written.count == 3, "manifest, background and sticker: \(first.written)")
        #expect(!document.isDirty)

        document.edit { try $0.move(sticker, to: Fixture.point(4, 4)) }  // queued: write waits for it
        let second = try await document.write(to: "/out/Saved.boardpkg", configuration: configuration)
        #expect(second.written == [first.written[0]], "only the manifest changed: \(second.written)")
        #expect(!document.isDirty)
        let read = try document.reader(configuration: ReadConfiguration(contentType: .boardPackage, fileSystem: fs)).read(from: "/out/Saved.boardpkg")
        #expect(read.stickers.first?.position == Fixture.point(4, 4))

        // An export is not a save: the document stays dirty.
        document.edit { try $0.move(sticker, to: Fixture.point(2, 2)) }
        _ = try await document.write(to: "/out/Saved.png", configuration: WriteConfiguration(contentType: .png, fileSystem: fs))
        #expect(document.isDirty)
        #expect(try fs.readFile("/out/Saved.png").starts(with: [0x89, 0x50, 0x4E, 0x47]))
        _ = await board.close()
    }

    @Test func theWriterRoutesExportsToTheirRenderersAndWritesThemWhole() async throws {
        let board = try LiveBoard.open(storage: .memory, identity: LiveBoard.Identity(replicaID: ReplicaID(1)))
        let document = LiveBoardModel(board: board)
        document.edit { try $0.addSticker(asset: AssetHash.of([1, 2, 3]), at: CodablePoint(x: 5, y: 5)) }
        await document.flush()
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
        let notWritable = ContentType(identifier: "public.jpeg", fileExtension: "jpg", isNative: false)
        #expect(throws: StoreError.unsupportedContentType(notWritable.description)) { _ = try document.snapshot(contentType: notWritable) }
        #expect(ContentType.forPath("/a/Weekend.boardpkg/") == .boardPackage)
        #expect(ContentType.forPath("export.PNG") == .png)
        _ = await board.close()
    }

    @Test func everyUserFacingChangeMarksTheDocumentAndCallsAutosave() async throws {
        let dir = TempDirectory()
        let path = dir.path + "/boards/A.boardpkg"
        let board = try LiveBoard.open(storage: .package(path: path), identity: LiveBoard.Identity(replicaID: ReplicaID(7)))
        let document = LiveBoardModel(board: board)
        let calls = AutosaveCalls()
        document.autosave = { _ in calls.value += 1 }
        let sticker = try await document.commit { try $0.addSticker(imagePNG: Fixture.red, at: Fixture.point(0, 0)) }.item!
        document.edit { try $0.move(sticker, to: Fixture.point(1, 1)) }
        document.undo()
        await document.flush()
        #expect(calls.value == 3)
        #expect(document.isDirty)
        try await document.saveView()
        #expect(!document.isDirty)
        document.undo()  // undoes the sticker's creation
        await document.flush()
        #expect(document.snapshot.stickers.isEmpty)
        document.undo()  // nothing left: no change, no call
        await document.flush()
        #expect(calls.value == 4)
        #expect(document.lastError == nil)
        _ = await board.close()
        // The package holds what the document showed.
        let reopened = try BoardPackage.open(at: path, fileSystem: PosixFileSystem(), newReplicaID: { ReplicaID(99) })
        #expect(reopened.replica.snapshot().stickers.isEmpty)
        reopened.close()
    }

    @Test func aPhotoThatIsNotAPNGIsRefused() async throws {
        let board = try LiveBoard.open(storage: .memory, identity: LiveBoard.Identity(replicaID: ReplicaID(1)))
        let document = LiveBoardModel(board: board)
        await #expect(throws: StoreError.self) {
            try await document.start(from: .photoBoard(Data("GIF89a".utf8)))
        }
        #expect(document.snapshot == board.snapshot && board.snapshot.backgroundPNG == nil, "nothing changed")
        #expect(document.lastError == nil, "commit's errors are thrown, not kept")
        #expect(!document.isDirty)
        _ = await board.close()
    }
}

@MainActor private final class AutosaveCalls {
    var value = 0
}

/// What these tests need of BoardStoreTests' support, kept private to this file.
private enum Fixture {
    static let red = Data(PNGEncoder.solid(width: 4, height: 3, red: 255, green: 0, blue: 0))
    static let green = Data(PNGEncoder.solid(width: 5, height: 5, red: 0, green: 200, blue: 0))
    static func point(_ x: Double, _ y: Double) -> CodablePoint { CodablePoint(x: x, y: y) }
}
