import BoardClient
import BoardCRDT
import BoardModel
import BoardStore
import Dispatch
import Foundation
import Synchronization
import Testing

/// Real files (a temp dir) through a file system that can hold a view save's manifest write
/// until told to go on, or make it fail as a full disk would; it records the view files written.
final class GatedFileSystem: FileSystem {
    let base = PosixFileSystem()
    private struct State {
        var holding = false
        var held = 0
        var failing = false
        var written: [String] = []
    }
    private let state = Mutex(State())
    private let gate = DispatchSemaphore(value: 0)

    /// Manifest writes from now on wait for `release()`.
    func hold() { state.withLock { $0.holding = true } }
    /// Lets the waiting write (and later ones) go on.
    func release() {
        let waiting = state.withLock { s -> Int in
            s.holding = false
            defer { s.held = 0 }
            return s.held
        }
        for _ in 0..<waiting { gate.signal() }
    }
    /// How many manifest writes are waiting.
    var held: Int { state.withLock { $0.held } }
    func fail(_ failing: Bool) { state.withLock { $0.failing = failing } }
    /// The view files written (temp names of manifest and images) since the last `takeWritten`.
    func takeWritten() -> [String] { state.withLock { s in defer { s.written = [] }; return s.written } }

    func writeFile(_ path: String, _ bytes: [UInt8]) throws {
        let name = Path.name(of: path)
        if name == ".manifest.json.tmp" {
            let (wait, failing) = state.withLock { s -> (Bool, Bool) in
                if s.holding { s.held += 1 }
                return (s.holding, s.failing)
            }
            if wait { gate.wait() }
            if failing { throw FileSystemError(.io, path: path, "write: No space left on device (errno 28)") }
        }
        if name.hasSuffix(".png.tmp") || name == ".manifest.json.tmp" { state.withLock { $0.written.append(name) } }
        try base.writeFile(path, bytes)
    }

    func readFile(_ path: String) throws -> [UInt8] { try base.readFile(path) }
    func fileSize(_ path: String) throws -> Int? { try base.fileSize(path) }
    func isDirectory(_ path: String) -> Bool { base.isDirectory(path) }
    func isSymbolicLink(_ path: String) -> Bool { base.isSymbolicLink(path) }
    func listDirectory(_ path: String) throws -> [String] { try base.listDirectory(path) }
    func createDirectory(_ path: String) throws { try base.createDirectory(path) }
    func appendFile(_ path: String, _ bytes: [UInt8]) throws { try base.appendFile(path, bytes) }
    func truncateFile(_ path: String, to size: Int) throws { try base.truncateFile(path, to: size) }
    func syncFile(_ path: String) throws { try base.syncFile(path) }
    func syncDirectory(_ path: String) throws { try base.syncDirectory(path) }
    func rename(_ from: String, _ to: String) throws { try base.rename(from, to) }
    func removeFile(_ path: String) throws { try base.removeFile(path) }
    func identity(of path: String) throws -> String? { try base.identity(of: path) }
    func lock(_ path: String) throws -> FileLock { try base.lock(path) }
}

/// A LiveBoard's view saves run off its actor (LiveBoard+Saving.swift): edits go on while one
/// is in flight, close waits for it, a failing disk shows in the status and the next save is
/// whole, and a reopened package holds everything.
@Suite struct ViewSavingTests {
    /// Strokes in the package's view on disk (manifest.json), read as another app would.
    func viewStrokes(_ path: String) throws -> Int {
        try PackageReader(fileSystem: PosixFileSystem()).read(path).strokes.count
    }

    func reopened(_ path: String) throws -> BoardSnapshot {
        let package = try BoardPackage.open(at: path, fileSystem: PosixFileSystem(), newReplicaID: { ReplicaID(99) })
        defer { package.close() }
        return package.replica.snapshot()
    }

    @Test func editsGoOnWhileASaveIsInFlightAndAreSavedAfterIt() async throws {
        let dir = TempDirectory()
        let path = dir.path + "/Held.boardpkg"
        let files = GatedFileSystem()
        let package = try BoardPackage.create(at: path, fileSystem: files, replicaID: ReplicaID(0x5A1))
        let board = try LiveBoard.open(package: package)
        files.hold()
        defer { files.release() }
        try await board.edit { try $0.beginStroke(color: .black, width: 2, points: line(10)) }
        try await eventually("the first save to reach its manifest write") { files.held == 1 }
        // The save is stuck in the file system: edits, reads and undo still answer at once.
        let returned = Flag()
        let edits = Task {
            for index in 0..<5 { try await board.edit { try $0.beginStroke(color: .black, width: 2, points: line(20 + Double(index))) } }
            _ = try await board.undo()
            returned.set()
        }
        try await eventually("edits to return while the save is held", within: 10) { returned.isSet }
        try await edits.value
        #expect(await board.replica.snapshot().strokes.count == 5)
        #expect(board.snapshot.strokes.count == 5)
        #expect(files.held == 1, "a second save started while one was in flight")
        files.release()
        // The changes made meanwhile are saved by the next save, without another edit.
        try await eventually("the view on disk to show every edit") { (try? viewStrokes(path)) == 5 }
        _ = await board.close()
        #expect(try reopened(path).strokes.count == 5)
        #expect(try viewStrokes(path) == 5)
    }

    @Test(arguments: [false, true])
    func closeDuringASaveWaitsForItBeforeReleasingTheLock(running: Bool) async throws {
        let dir = TempDirectory()
        let path = dir.path + "/Closing.boardpkg"
        let files = GatedFileSystem()
        let package = try BoardPackage.create(at: path, fileSystem: files, replicaID: ReplicaID(0xC105E))
        let server = MemoryServer()
        let board = try LiveBoard.open(package: package, sync: LiveBoard.Sync(server: "memory", board: "closing"),
                                       transport: MemoryTransport(server: server))
        let run = running ? Running(board) : nil
        if running { try await live(board, "closing board") }
        files.hold()
        defer { files.release() }
        try await board.edit { try $0.beginStroke(color: .black, width: 2, points: line(10)) }
        try await eventually("a save to reach its manifest write") { files.held == 1 }
        try await board.edit { try $0.beginStroke(color: .black, width: 2, points: line(20)) }
        let closed = Task { await board.close(within: 10) }
        // With `run()` running, its end waits for the save on the board's actor (blocking that
        // pool thread): on a one-core pool this test's own task could not run to let the save
        // go, so a dispatch thread lets it go too, later.
        DispatchQueue.global().asyncAfter(deadline: .now() + 5) { files.release() }
        // While the save is held the package stays locked (close has not released it) ...
        try await Task.sleep(nanoseconds: 200_000_000)
        #expect(throws: StoreError.self) { _ = try BoardPackage.open(at: path, fileSystem: PosixFileSystem(), newReplicaID: { ReplicaID(1) }) }
        files.release()
        // ... and once it went on, close saves what came after and releases it.
        let report = await closed.value
        if running {
            #expect(report.allAcknowledged, "\(report)")
            guard case .returned = try await run!.ended() else { Issue.record("run() threw"); return }
        }
        #expect(try reopened(path).strokes.count == 2)
        #expect(try viewStrokes(path) == 2)
        #expect(board.currentStatus.state == .closed)
    }

    @Test func aFailingDiskIsReportedAndTheNextSaveIsWhole() async throws {
        let dir = TempDirectory()
        let path = dir.path + "/Failing.boardpkg"
        let files = GatedFileSystem()
        let package = try BoardPackage.create(at: path, fileSystem: files, replicaID: ReplicaID(0xFA11))
        let board = try LiveBoard.open(package: package)
        let image = incompressibleImage(bytes: 2048, seed: 25_500)
        try await board.edit { try $0.addSticker(imagePNG: image, at: CodablePoint(x: 10, y: 10)) }
        try await eventually("the sticker's save") { files.takeWritten().contains { $0.hasSuffix(".png.tmp") } }
        try await eventually("the view to show the sticker") { (try? PackageReader(fileSystem: PosixFileSystem()).read(path).stickers.count) == 1 }
        _ = files.takeWritten()

        files.fail(true)
        try await board.edit { try $0.beginStroke(color: .black, width: 2, points: line(10)) }
        let failed = try await first("a status naming the failed save", of: board.status) { $0.viewSaveError != nil }
        #expect(failed.viewSaveError?.contains("No space left on device") == true, "\(failed)")
        // Edits still go to the op log.
        try await board.edit { try $0.beginStroke(color: .black, width: 2, points: line(20)) }
        #expect(board.snapshot.strokes.count == 2)
        _ = files.takeWritten()

        files.fail(false)
        // The retry (after the backoff) succeeds, clears the error, and is whole: the sticker's
        // image, unchanged since the last good save, is written again.
        _ = try await first("the status clearing the error", of: board.status) { $0.viewSaveError == nil }
        let rewritten = files.takeWritten()
        #expect(rewritten.contains { $0.hasSuffix(".png.tmp") }, "\(rewritten)")
        #expect(try viewStrokes(path) == 2)
        _ = await board.close()
        let snapshot = try reopened(path)
        #expect(snapshot.strokes.count == 2 && snapshot.stickers.count == 1)
        #expect(snapshot.stickers.first?.imagePNG == image)
    }

    @Test func aDiskThatKeepsFailingLeavesTheEditsInTheLogAndCloseStillReleases() async throws {
        let dir = TempDirectory()
        let path = dir.path + "/Full.boardpkg"
        let files = GatedFileSystem()
        let package = try BoardPackage.create(at: path, fileSystem: files, replicaID: ReplicaID(0xF0))
        let board = try LiveBoard.open(package: package)
        files.fail(true)
        try await board.edit { try $0.beginStroke(color: .black, width: 2, points: line(10)) }
        _ = try await first("a status naming the failed save", of: board.status) { $0.viewSaveError != nil }
        _ = await board.close()
        // The lock is free, the stroke in the log (open rebuilds the view it finds behind).
        #expect(try reopened(path).strokes.count == 1)
        #expect(try viewStrokes(path) == 1)
    }

    @Test func saveViewWaitsForTheSaveInFlightAndThenSavesEverything() async throws {
        let dir = TempDirectory()
        let path = dir.path + "/Explicit.boardpkg"
        let files = GatedFileSystem()
        let package = try BoardPackage.create(at: path, fileSystem: files, replicaID: ReplicaID(0xE5))
        let board = try LiveBoard.open(package: package)
        let model = await LiveBoardModel(board: board)
        files.hold()
        defer { files.release() }
        try await board.edit { try $0.beginStroke(color: .black, width: 2, points: line(10)) }
        try await eventually("a save to reach its manifest write") { files.held == 1 }
        try await board.edit { try $0.beginStroke(color: .black, width: 2, points: line(20)) }
        let saved = Task { try await model.saveView() }
        try await Task.sleep(nanoseconds: 100_000_000)
        files.release()
        try await saved.value
        // When saveView returns, the view holds both strokes (the held save had only one).
        #expect(try viewStrokes(path) == 2)
        _ = await board.close()
    }
}

final class Flag: Sendable {
    private let state = Mutex(false)
    func set() { state.withLock { $0 = true } }
    var isSet: Bool { state.withLock { $0 } }
}
