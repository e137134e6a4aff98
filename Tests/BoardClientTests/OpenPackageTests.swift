import BoardClient
import BoardCRDT
import BoardModel
import BoardStore
import Foundation
import Testing

/// `LiveBoard.open(package:)`: a board over a package the caller opened, which the board then
/// owns and closes.
@Suite struct OpenPackageTests {
    @Test func aBoardTakesOverAnOpenPackageAndClosesItOnClose() async throws {
        let dir = TempDirectory()
        let path = dir.path + "/Owned.boardpkg"
        let package = try BoardPackage.create(at: path, fileSystem: PosixFileSystem(), replicaID: ReplicaID(0x0A11))
        try package.commit { try $0.beginStroke(color: .black, width: 2, points: line(10)) }
        let server = MemoryServer()
        let sync = LiveBoard.Sync(server: "memory", board: "owned")
        let board = try LiveBoard.open(package: package, sync: sync, identity: LiveBoard.Identity(replicaID: ReplicaID(0xB0B)),
                                       transport: MemoryTransport(server: server))
        // The package's replica and what it held, not the identity's id.
        #expect(board.replicaID == ReplicaID(0x0A11))
        #expect(board.storage == .package(path: path))
        #expect(board.snapshot.strokes.count == 1)
        // Edits go to the package, synced as any board's.
        try await board.edit { try $0.beginStroke(color: .black, width: 2, points: line(30)) }
        let report = try await board.syncOnce(within: 20)
        #expect(report.operationsSent == 2, "\(report)")
        // The board holds the package's lock while open ...
        #expect(throws: StoreError.self) { _ = try BoardPackage.open(at: path, fileSystem: PosixFileSystem(), newReplicaID: { ReplicaID(1) }) }
        // ... and close() closes the package: the lock is free, the edits on disk.
        let closed = await board.close()
        #expect(closed.allAcknowledged)
        let reopened = try BoardPackage.open(at: path, fileSystem: PosixFileSystem(), newReplicaID: { ReplicaID(1) })
        #expect(reopened.replica.id == ReplicaID(0x0A11) && reopened.replica.snapshot().strokes.count == 2)
        reopened.close()
        // Another board on the server got both strokes.
        let other = try LiveBoard.open(storage: .memory, sync: sync, transport: MemoryTransport(server: server))
        #expect(try await other.syncOnce(within: 20).operationsReceived == 2)
        _ = await other.close()
    }

    @Test func aClosedPackageIsRefusedAtOpen() throws {
        let dir = TempDirectory()
        let package = try BoardPackage.create(at: dir.path + "/Closed.boardpkg", fileSystem: PosixFileSystem(), replicaID: ReplicaID(0xC))
        package.close()
        do {
            _ = try LiveBoard.open(package: package)
            Issue.record("a closed package was taken over")
        } catch let error as StoreError {
            #expect(error.code == .closed, "\(error)")
        }
    }
}
