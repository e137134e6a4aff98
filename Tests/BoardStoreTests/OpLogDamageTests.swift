import BoardCRDT
import BoardModel
@testable import BoardStore
import Foundation
import Testing

/// Issue 7, finding 8 and the invariants behind it: the op log trusts nothing it reads. Every
/// single-byte corruption is refused (and salvageable), every truncation is a torn tail cut back
/// to whole records, and a replica never reuses a sequence number after losing records.
@Suite struct OpLogDamageTests {
    static let path = "/log/oplog"

    /// A log of three records on a fresh memory file system, with each record's byte range.
    static func threeRecordLog() throws -> (MemoryFileSystem, [UInt8], [OperationBatch], [Range<Int>]) {
        let fs = MemoryFileSystem()
        try fs.createDirectory("/log")
        var (log, _, _) = try OpLog.open(path, fileSystem: fs)
        var replica = Replica(id: ReplicaID(0xA))
        var batches: [OperationBatch] = []
        var ranges: [Range<Int>] = []
        for x in 0..<3 {
            let edit = try replica.setCanvasSize(CodableSize(width: Double(100 + x), height: 50))
            let batch = OperationBatch(operations: edit.operations)
            let start = log.size
            try log.append(batch)
            batches.append(batch)
            ranges.append(start..<log.size)
        }
        return (fs, try fs.readFile(path), batches, ranges)
    }

    @Test func everySingleByteCorruptionIsRefusedAndSalvageKeepsTheOtherRecords() throws {
        let (_, bytes, batches, ranges) = try Self.threeRecordLog()
        for index in bytes.indices {
            for mask: UInt8 in [0x01, 0x80, 0xFF] {
                let fs = MemoryFileSystem()
                try fs.createDirectory("/log")
                var damaged = bytes
                damaged[index] ^= mask
                try fs.writeFile(Self.path, damaged)
                do {
                    _ = try OpLog.open(Self.path, fileSystem: fs)
                    Issue.record("byte \(index) ^ \(mask): a damaged log opened")
                } catch let error as StoreError {
                    guard error.code == .damagedLog else { Issue.record("byte \(index): \(error)"); continue }
                }
                #expect(try fs.readFile(Self.path) == damaged, "byte \(index): the damaged log was changed")
                let salvaged = OpLog.salvage(damaged)
                let untouched = zip(batches, ranges).filter { !$0.1.contains(index) }.map(\.0)
                #expect(salvaged.batches == untouched, "byte \(index) ^ \(mask): salvage kept \(salvaged.batches.count)")
                #expect(!salvaged.dropped.isEmpty, "byte \(index): salvage reports what it dropped")
            }
        }
    }

    @Test func everyTruncationIsATornTailCutBackToWholeRecords() throws {
        let (_, bytes, batches, ranges) = try Self.threeRecordLog()
        for length in 0..<bytes.count {
            let fs = MemoryFileSystem()
            try fs.createDirectory("/log")
            try fs.writeFile(Self.path, Array(bytes.prefix(length)))
            let (log, read, recovery) = try OpLog.open(Self.path, fileSystem: fs)
            let whole = ranges.filter { $0.upperBound <= length }.count
            #expect(read == Array(batches.prefix(whole)), "cut at \(length)")
            let boundary = whole == 0 ? OpLog.magic.count : ranges[whole - 1].upperBound
            #expect(log.size == boundary, "cut at \(length)")
            #expect(try fs.readFile(Self.path).count == boundary)
            if length > boundary { #expect(recovery.truncatedBytes == length - boundary) }
        }
    }

    @Test func zeroBytesAfterTheLastRecordAreATornTail() throws {
        let (fs, bytes, batches, _) = try Self.threeRecordLog()
        try fs.writeFile(Self.path, bytes + [UInt8](repeating: 0, count: 4096))
        let (_, read, recovery) = try OpLog.open(Self.path, fileSystem: fs)
        #expect(read == batches)
        #expect(recovery.truncatedBytes == 4096)
        #expect(try fs.readFile(Self.path) == bytes)
    }

    @Test func aFailedAppendLeavesNoTornRecordBehind() throws {
        let (fs, bytes, batches, _) = try Self.threeRecordLog()
        var (log, _, _) = try OpLog.open(Self.path, fileSystem: fs)
        // The disk fills up in the middle of the next record.
        fs.setCapacity(bytes.count + 5)
        var replica = Replica(id: ReplicaID(0xB))
        let big = OperationBatch(operations: try replica.setCanvasSize(CodableSize(width: 7, height: 7)).operations)
        #expect(throws: FileSystemError.self) { try log.append(big) }
        #expect(try fs.readFile(Self.path) == bytes, "the partial record was cut back")
        // Later appends land after whole records, and everything reads back.
        fs.setCapacity(nil)
        try log.append(big)
        let (_, read, _) = try OpLog.open(Self.path, fileSystem: fs)
        #expect(read == batches + [big])
    }

    @Test func aServerOnAFullDiskNeverAcknowledgesBehindATornRecordAndReopens() throws {
        let fs = MemoryFileSystem()
        try fs.createDirectory("/boards")
        let ids = IDSource()
        let (package, sticker, _, _) = try makeSamplePackage(fs, ids: ids)
        var peer = Replica(id: ReplicaID(0xFEED))
        try peer.apply(package.replica.fullState())
        var acknowledged = package.replica.versionVector
        var refused = 0
        for round in 0..<40 {
            if round == 10 { fs.setCapacity(try Self.usedBytes(fs) + 7) }  // a few bytes stay free
            if round == 30 { fs.setCapacity(nil) }
            let edit = try peer.move(sticker, to: pt(Double(round), 1))
            do {
                try package.merge(OperationBatch(operations: edit.operations))
                acknowledged = package.replica.versionVector
            } catch {
                // Not acknowledged: the peer keeps it and sends it again with the next delta.
                refused += 1
                continue
            }
        }
        try package.merge(peer.operations(since: package.replica.versionVector))
        #expect(refused == 20, "every merge on the full disk was refused")
        package.close()
        let reopened = try BoardPackage.open(at: "/boards/Test.boardpkg", fileSystem: fs, newReplicaID: ids.make)
        #expect(reopened.replica.versionVector.dominates(acknowledged), "every acknowledged operation is there")
        #expect(reopened.replica.versionVector == peer.versionVector, "and the resent ones")
    }

    static func usedBytes(_ fs: MemoryFileSystem) throws -> Int {
        func walk(_ directory: String) throws -> Int {
            var total = 0
            for name in try fs.listDirectory(directory) {
                let path = Path.join(directory, name)
                if fs.isDirectory(path) { total += try walk(path) } else { total += try fs.fileSize(path) ?? 0 }
            }
            return total
        }
        return try walk("/")
    }

    @Test func aReplicaThatLostItsLogTailNeverReusesASequenceNumber() throws {
        let fs = MemoryFileSystem()
        try fs.createDirectory("/boards")
        let ids = IDSource()
        let (package, sticker, _, _) = try makeSamplePackage(fs, ids: ids)
        var used = Set(package.replica.fullState().operations.map(\.id))
        // A crash tears the next append.
        fs.crash(atStep: 1, tornWrite: true)
        var torn: [OpID] = []
        do {
            try package.commit { replica in
                let edit = try replica.move(sticker, to: pt(3, 3))
                torn = edit.operations.map(\.id)
                return edit
            }
        } catch {}
        fs.restart(.powerLoss(tornTail: true))
        package.close()
        used.formUnion(torn)
        let reopened = try BoardPackage.open(at: "/boards/Test.boardpkg", fileSystem: fs, newReplicaID: ids.make)
        #expect(reopened.notices.contains { $0.contains("torn") })
        let next = try reopened.commit { try $0.move(sticker, to: pt(4, 4)) }
        for op in next.operations { #expect(!used.contains(op.id), "sequence number \(op.id) reused") }

        // Damage in the middle of the log: open refuses; repair salvages under a new identity.
        reopened.close()
        let logPath = "/boards/Test.boardpkg/sync/oplog"
        let clean = try fs.readFile(logPath)
        fs.corrupt(logPath) { bytes in var b = bytes; b[OpLog.magic.count + 20] ^= 0x40; return b }
        #expect(throws: StoreError.self) { try BoardPackage.open(at: "/boards/Test.boardpkg", fileSystem: fs, newReplicaID: ids.make) }
        let report = try BoardPackage.repair(at: "/boards/Test.boardpkg", fileSystem: fs, newReplicaID: ids.make)
        #expect(report.damagedLogCopy != nil)
        #expect(try fs.readFile(report.damagedLogCopy!) != clean, "the damaged bytes are kept as they were")
        let repaired = try BoardPackage.open(at: "/boards/Test.boardpkg", fileSystem: fs, newReplicaID: ids.make)
        #expect(repaired.replica.id == report.newReplica)
        #expect(!repaired.replica.canUndo, "undo history went with the old identity")
        used.formUnion(next.operations.map(\.id))
        let after = try repaired.commit { try $0.setCanvasSize(CodableSize(width: 10, height: 10)) }
        for op in after.operations { #expect(!used.contains(op.id)) }
    }
}

/// Found by the network simulator (seeds 4443 and 5845 of 10,000): a server that lost power
/// before an image reached `sync/assets` restarted on a full disk, and copying the image back
/// from the view failed the whole open, so the board stayed closed to every peer.
@Suite struct FullDiskOpenTests {
    @Test func anImageRecoveredFromTheViewOnAFullDiskStillOpensTheBoard() throws {
        let fs = MemoryFileSystem()
        try fs.createDirectory("/b")
        let package = try BoardPackage.create(at: "/b/B.boardpkg", fileSystem: fs, replicaID: ReplicaID(0xA1))
        let edit = try package.commit { try $0.addSticker(imagePNG: pngRed, at: CodablePoint(x: 1, y: 1)) }
        try package.save()
        package.close()
        // The image's file in sync/assets is gone; only the view's sticker file holds it.
        let hash = AssetHash.of(pngRed)
        try fs.removeFile("/b/B.boardpkg/\(PackageLayout.assets)/\(hash.hex)")
        fs.setCapacity(0)
        let reopened = try BoardPackage.open(at: "/b/B.boardpkg", fileSystem: fs, newReplicaID: { ReplicaID(0xA2) })
        #expect(reopened.replica.assets.data(for: hash) == pngRed, "the image serves from memory")
        #expect(reopened.replica.missingAssets.isEmpty)
        #expect(reopened.notices.contains { $0.contains("in memory only") && $0.contains(String(hash.hex.prefix(12))) }, "\(reopened.notices)")
        #expect(reopened.replica.snapshot().stickers.first?.id == edit.item?.uuid)
        reopened.close()
        // With room again, the next open stores it.
        fs.setCapacity(nil)
        let later = try BoardPackage.open(at: "/b/B.boardpkg", fileSystem: fs, newReplicaID: { ReplicaID(0xA3) })
        #expect(later.notices.contains { $0.hasPrefix("recovered asset \(hash.hex.prefix(12))") && !$0.contains("in memory") }, "\(later.notices)")
        #expect(try fs.readFile("/b/B.boardpkg/\(PackageLayout.assets)/\(hash.hex)") == Array(pngRed))
        later.close()
    }
}

/// `sync/authors` (which token subject owns each replica id) against what a crash or a damaged
/// disk could leave.
@Suite struct AuthorsFileTests {
    @Test func aTornLastLineIsIgnoredAndTheFirstOwnerWins() throws {
        let fs = MemoryFileSystem()
        try fs.createDirectory("/b")
        let package = try BoardPackage.create(at: "/b/B.boardpkg", fileSystem: fs, replicaID: ReplicaID(0xA1))
        #expect(try package.loadAuthors().isEmpty, "no file yet")
        try package.bindAuthor(ReplicaID(0xA), to: "ann")
        try package.bindAuthor(ReplicaID(0xB), to: "bob")
        // A second line for 0xA (never written by the hub, which binds once) does not change the owner,
        // and a torn append (no newline) never took effect.
        try fs.appendFile("/b/B.boardpkg/sync/authors", Array("a eve\nc ca".utf8))
        #expect(try package.loadAuthors() == [ReplicaID(0xA): "ann", ReplicaID(0xB): "bob"])
        package.close()
    }

    @Test func aDamagedOrAbsurdFileIsAClearErrorNamingIt() throws {
        let fs = MemoryFileSystem()
        try fs.createDirectory("/b")
        let package = try BoardPackage.create(at: "/b/B.boardpkg", fileSystem: fs, replicaID: ReplicaID(0xA1))
        for bad in [Array("zz not-hex\n".utf8), Array("a\n".utf8), [UInt8](repeating: 0x61, count: (8 << 20) + 1)] {
            try fs.writeFile("/b/B.boardpkg/sync/authors", bad)
            #expect {
                _ = try package.loadAuthors()
            } throws: { error in
                "\(error)".contains("sync/authors")
            }
        }
        // The board itself is untouched: it still opens and edits.
        _ = try package.commit { try $0.setCanvasSize(CodableSize(width: 3, height: 3)) }
        package.close()
    }
}
