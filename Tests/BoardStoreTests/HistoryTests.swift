import BoardCRDT
import BoardModel
@testable import BoardStore
import Foundation
import Testing

/// Issue 27: history kept beside the compacted state (`sync/history`), read back as versions,
/// views, diffs and restores.
@Suite struct HistoryTests {
    /// A small deterministic generator (SplitMix64), so a failing seed can be run again.
    struct Random {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        mutating func below(_ n: Int) -> Int { Int(next() % UInt64(max(n, 1))) }
        mutating func chance(_ percent: Int) -> Bool { below(100) < percent }
    }

    static let images = [pngRed, pngBlue, pngGreen]

    /// A fresh replica holding exactly `operations` covered by `version`, with the test images.
    static func oracle(_ operations: [Op], at version: VersionVector) throws -> BoardSnapshot {
        var replica = Replica(id: ReplicaID(0))
        for image in images { replica.assets.insert(image) }
        try replica.apply(OperationBatch(operations: operations.filter { version.covers($0.id) }), from: .ownLog)
        return replica.snapshot()
    }

    static func same(_ a: BoardSnapshot, _ b: BoardSnapshot) throws -> Bool {
        try a.canonicalJSON() == b.canonicalJSON()
    }

    /// One random edit on `replica` (nil when there was nothing to do).
    static func edit(_ replica: inout Replica, _ random: inout Random) throws -> LocalEdit {
        let items = replica.itemIDs
        let item = items.isEmpty ? nil : items[random.below(items.count)]
        switch random.below(9) {
        case 0, 1:
            let x = Double(random.below(400))
            let edit = try replica.beginStroke(color: RGBAColor(red: Double(random.below(2)), green: 0, blue: 1), width: 2,
                                               points: [pt(x, 1), pt(x + 5, 9), pt(x + 9, 20)])
            replica.finishStroke()
            return edit
        case 2:
            return try replica.addSticker(imagePNG: images[random.below(3)], at: pt(Double(random.below(300)), 40))
        case 3:
            guard let item, replica.kind(of: item) == .sticker else { return LocalEdit() }
            return try replica.move(item, to: pt(Double(random.below(500)), Double(random.below(500))))
        case 4:
            guard let item else { return LocalEdit() }
            return replica.kind(of: item) == .stroke ? try replica.setColor(item, to: RGBAColor(red: 0, green: 1, blue: 0))
                : try replica.setScale(item, to: Double(1 + random.below(4)))
        case 5:
            guard let item else { return LocalEdit() }
            return replica.isVisible(item) ? try replica.delete(item) : try replica.restore(item)
        case 6:
            guard let item else { return LocalEdit() }
            return try replica.bringToFront(item)
        case 7:
            return try replica.setCanvasSize(CodableSize(width: Double(500 + random.below(4) * 100), height: 700))
        default:
            return try replica.undo()
        }
    }

    /// A random history of a package and two in-memory replicas, with syncs, compactions and
    /// reopenings between edits. Returns the package (open), every operation it integrated, and
    /// the two peers.
    static func randomHistory(seed: UInt64, steps: Int, fs: MemoryFileSystem, path: String = "/h/board.boardpkg")
        throws -> (BoardPackage, received: [Op], peers: [Replica]) {
        var random = Random(state: seed)
        try fs.createDirectories("/h")
        var clock: Int64 = 1_000_000
        var package = try BoardPackage.create(at: path, fileSystem: fs, replicaID: ReplicaID(0xA))
        func configure(_ package: BoardPackage) {
            package.checkpointInterval = 7
            package.historyClock = { clock }
        }
        configure(package)
        for image in images { try package.addAsset(image) }
        var peers = [Replica(id: ReplicaID(0xB)), Replica(id: ReplicaID(0xC))]
        for index in peers.indices { for image in images { peers[index].assets.insert(image) } }
        var received: [Op] = []
        for _ in 0..<steps {
            clock += Int64(random.chance(10) ? 3_600_000 : 1_000)
            switch random.below(10) {
            case 0...3:
                let edit = try package.commit { replica in try Self.edit(&replica, &random) }
                received += edit.operations
            case 4, 5:
                let index = random.below(peers.count)
                _ = try Self.edit(&peers[index], &random)
            case 6, 7:
                let index = random.below(peers.count)
                received += try package.merging(peers[index].operations(since: package.replica.versionVector), deferringSync: false)
                try peers[index].apply(package.replica.operations(since: peers[index].versionVector))
            case 8:
                try peers[0].apply(peers[1].operations(since: peers[0].versionVector))
                try peers[1].apply(peers[0].operations(since: peers[1].versionVector))
            default:
                if random.chance(50) {
                    try package.compactLog()
                } else {
                    try package.save()
                    package.close()
                    package = try BoardPackage.open(at: path, fileSystem: fs, newReplicaID: { ReplicaID(0xDEAD) })
                    configure(package)
                }
            }
        }
        return (package, received, peers)
    }

    @Test(arguments: 1...24 as ClosedRange<UInt64>)
    func aViewOfAnyVersionIsAFreshReplicaWithExactlyTheOperationsUpToIt(seed: UInt64) throws {
        let fs = MemoryFileSystem()
        let (package, received, _) = try Self.randomHistory(seed: seed, steps: 160, fs: fs)
        defer { package.close() }
        let history = try package.history()
        #expect(!history.versions.isEmpty, "seed \(seed)")
        #expect(history.archivedRecords > 0 && !history.checkpoints.isEmpty, "seed \(seed): compactions archived records and checkpoints")
        #expect(history.latest == package.replica.versionVector, "seed \(seed): the last version is the package's")
        // The present, and every version the history lists.
        #expect(try Self.same(history.snapshot(at: history.latest), Self.oracle(received, at: history.latest)), "seed \(seed)")
        var random = Random(state: seed ^ 0x5EED)
        for version in history.versions where random.chance(30) || version.number == 1 {
            #expect(try Self.same(history.snapshot(at: version.vector), Self.oracle(received, at: version.vector)),
                    "seed \(seed): version \(version.number) \(version.vector)")
        }
        // Vectors no record ended at: any prefix of each author's operations.
        for _ in 0..<10 {
            var entries: [ReplicaID: UInt64] = [:]
            for (author, seq) in history.latest.entries { entries[author] = UInt64(random.below(Int(seq) + 1)) }
            let vector = VersionVector(entries)
            #expect(try Self.same(history.snapshot(at: vector), Self.oracle(received, at: vector)), "seed \(seed): \(vector)")
        }
        // Reading it again after a reopen gives the same versions.
        package.close()
        let reopened = try BoardPackage.open(at: "/h/board.boardpkg", fileSystem: fs, newReplicaID: { ReplicaID(0xDEAD) })
        defer { reopened.close() }
        #expect(try reopened.history().versions == history.versions, "seed \(seed)")
    }

    @Test(arguments: 1...12 as ClosedRange<UInt64>)
    func restoreShowsTheVersionAndUndoReturnsThePresent(seed: UInt64) throws {
        let fs = MemoryFileSystem()
        let (package, _, _) = try Self.randomHistory(seed: seed, steps: 120, fs: fs)
        defer { package.close() }
        let history = try package.history()
        var random = Random(state: seed)
        let version = history.versions[random.below(history.versions.count)]
        let present = package.replica.snapshot()
        let restore = try package.restore(to: version.vector)
        // No stroke in these histories gets points after its creation: a restore sets everything back.
        #expect(try Self.same(package.replica.snapshot(), history.snapshot(at: version.vector)), "seed \(seed): version \(version.number)")
        #expect(restore.operations.allSatisfy { $0.id.replica == package.replica.id }, "seed \(seed)")
        _ = try package.commit { try $0.undo() }
        #expect(try Self.same(package.replica.snapshot(), present), "seed \(seed): undo of the restore")
        // The restore and its undo are history too.
        #expect(try package.history().versions.count > history.versions.count, "seed \(seed)")
    }

    @Test(arguments: 1...12 as ClosedRange<UInt64>)
    func aRestoreConcurrentWithAnotherReplicasEditsConverges(seed: UInt64) throws {
        let fs = MemoryFileSystem()
        var (package, _, peers) = try Self.randomHistory(seed: seed, steps: 100, fs: fs)
        defer { package.close() }
        var peer = peers[0]
        // Bring the peer up to date, then both act without hearing of each other.
        _ = try package.merging(peer.operations(since: package.replica.versionVector), deferringSync: false)
        try peer.apply(package.replica.operations(since: peer.versionVector))
        let history = try package.history()
        var random = Random(state: seed)
        try package.restore(to: history.versions[random.below(history.versions.count)].vector)
        for _ in 0..<5 { _ = try Self.edit(&peer, &random) }
        _ = try package.merging(peer.operations(since: package.replica.versionVector), deferringSync: false)
        try peer.apply(package.replica.operations(since: peer.versionVector))
        #expect(try Self.same(package.replica.snapshot(), peer.snapshot()), "seed \(seed)")
        package.close()
        package = try BoardPackage.open(at: "/h/board.boardpkg", fileSystem: fs, newReplicaID: { ReplicaID(0xDEAD) })
        #expect(try Self.same(package.replica.snapshot(), peer.snapshot()), "seed \(seed): after reopening")
        peers[0] = peer
    }

    @Test func historySurvivesCompactionAndReopenWithTimesAndCheckpoints() throws {
        let fs = MemoryFileSystem()
        try fs.createDirectories("/h")
        var now: Int64 = 1_700_000_000_000
        var package = try BoardPackage.create(at: "/h/b.boardpkg", fileSystem: fs, replicaID: ReplicaID(0xA))
        package.historyClock = { now }
        package.checkpointInterval = 3
        var items: [ItemID] = []
        for index in 0..<6 {
            now += index == 3 ? 2 * BoardHistory.defaultSessionGap : 1000
            items.append(try package.commit { try $0.addSticker(imagePNG: pngRed, at: pt(Double(index * 10), 5)) }.item!)
        }
        try package.compactLog()
        #expect(try fs.fileSize("/h/b.boardpkg/sync/history") ?? 0 > HistoryArchive.magic.count)
        now += 1000
        _ = try package.commit { try $0.move(items[0], to: pt(99, 99)) }
        package.close()  // writes the last record's time
        package = try BoardPackage.open(at: "/h/b.boardpkg", fileSystem: fs, newReplicaID: { ReplicaID(0xDEAD) })
        defer { package.close() }
        let history = try package.history()
        #expect(history.versions.count == 7)
        #expect(history.versions.map(\.operationCount) == [1, 1, 1, 1, 1, 1, 1])
        #expect(history.versions.allSatisfy { $0.authors == [ReplicaID(0xA)] })
        #expect(history.versions[0].time == 1_700_000_001_000)
        #expect(history.versions[6].time == now)
        #expect(history.checkpoints.count == 1)
        #expect(history.archivedRecords == 6, "the six records compaction replaced")
        let sessions = history.sessions()
        #expect(sessions.map(\.first) == [1, 4])
        #expect(sessions.map(\.last) == [3, 7])
        // The third version shows three stickers, the first where it was put.
        let third = history.snapshot(at: history.versions[2].vector)
        #expect(third.stickers.count == 3)
        #expect(third.stickers.first { $0.id == items[0].uuid }?.position == pt(0, 5))
        #expect(!third.stickers[0].imagePNG.isEmpty, "images come from the package's store")
        let changes = history.diff(from: history.versions[5].vector, to: history.latest)
        #expect(changes.changed.map(\.id) == [items[0].uuid] && changes.added.isEmpty && changes.removed.isEmpty)
        let back = history.diff(from: history.latest, to: history.versions[1].vector)
        #expect(Set(back.removed) == Set(items[2...].map(\.uuid)))
    }

    @Test func aPackageWithoutAnArchiveKeepsWorkingAndStartsOne() throws {
        let fs = MemoryFileSystem()
        try fs.createDirectories("/h")
        var package = try BoardPackage.create(at: "/h/b.boardpkg", fileSystem: fs, replicaID: ReplicaID(0xA))
        for index in 0..<4 { _ = try package.commit { try $0.addSticker(imagePNG: pngRed, at: pt(Double(index), 5)) } }
        package.keepsHistory = false
        try package.compactLog()  // as a build before history did: the records are gone
        package.close()
        #expect(!fs.exists("/h/b.boardpkg/sync/history"))
        package = try BoardPackage.open(at: "/h/b.boardpkg", fileSystem: fs, newReplicaID: { ReplicaID(0xDEAD) })
        defer { package.close() }
        var history = try package.history()
        #expect(history.versions.count == 1, "the compacted state is where this history begins")
        #expect(history.versions[0].operationCount == 4)
        _ = try package.commit { try $0.setCanvasSize(CodableSize(width: 300, height: 300)) }
        try package.compactLog()
        _ = try package.commit { try $0.setCanvasSize(CodableSize(width: 400, height: 300)) }
        try package.compactLog()
        history = try package.history()
        #expect(history.versions.map(\.operationCount) == [4, 1, 1], "the state is archived once, not at every compaction")
        #expect(history.snapshot(at: history.versions[1].vector).canvasSize == CodableSize(width: 300, height: 300))
    }

    @Test func aDamagedArchiveIsReportedWithItsOffsetAndRepaired() throws {
        let fs = MemoryFileSystem()
        try fs.createDirectories("/h")
        let path = "/h/b.boardpkg"
        var package = try BoardPackage.create(at: path, fileSystem: fs, replicaID: ReplicaID(0xA))
        for round in 0..<3 {
            for index in 0..<3 { _ = try package.commit { try $0.addSticker(imagePNG: pngRed, at: pt(Double(round * 10 + index), 5)) } }
            try package.compactLog()
        }
        let before = try package.history()
        package.close()
        let archive = path + "/" + PackageLayout.history
        let bytes = try fs.readFile(archive)
        let records = HistoryArchive.parse(bytes).records
        #expect(records.count >= 4)
        let target = records[2].offset + 20
        fs.corrupt(archive) { bytes in var b = bytes; b[target] ^= 0x40; return b }
        package = try BoardPackage.open(at: path, fileSystem: fs, newReplicaID: { ReplicaID(0xDEAD) })
        var error: StoreError?
        do { _ = try package.history() } catch let caught as StoreError { error = caught }
        #expect(error?.code == .damagedFile && error?.path == archive && error?.offset == records[2].offset)
        #expect(error.map { "\($0)".contains("board-sync repair") } == true)
        #expect(package.replica.itemIDs.count == 9, "the live board does not depend on the archive")
        package.close()
        let report = try BoardPackage.repair(at: path, fileSystem: fs, newReplicaID: { ReplicaID(0xBEEF) })
        #expect(report.damagedArchiveCopy == archive + ".damaged")
        #expect(report.archiveDropped.first?.offset == records[2].offset)
        #expect(report.newReplica == nil, "the op log was healthy: no new identity")
        #expect(try fs.readFile(archive + ".damaged")[target] == bytes[target] ^ 0x40)
        package = try BoardPackage.open(at: path, fileSystem: fs, newReplicaID: { ReplicaID(0xDEAD) })
        defer { package.close() }
        let after = try package.history()
        #expect(after.versions.count < before.versions.count, "the lost record's version is gone")
        #expect(after.latest == before.latest, "the log's state still holds its operation")
        #expect(try Self.same(after.snapshot(at: after.latest), package.replica.snapshot()))
        // Repairing again finds nothing to do.
        package.close()
        let again = try BoardPackage.repair(at: path, fileSystem: fs, newReplicaID: { ReplicaID(0xBEEF) })
        #expect(!again.changedAnything)
    }

    @Test func anUnfinishedCompactionLeavesNoDuplicateAndLosesNothing() throws {
        let fs = MemoryFileSystem()
        try fs.createDirectories("/h")
        let path = "/h/b.boardpkg"
        let package = try BoardPackage.create(at: path, fileSystem: fs, replicaID: ReplicaID(0xA))
        defer { package.close() }
        for index in 0..<3 { _ = try package.commit { try $0.addSticker(imagePNG: pngRed, at: pt(Double(index), 5)) } }
        try package.compactLog()
        let committed = try fs.readFile(path + "/" + PackageLayout.history)
        // A compaction that appended to the archive and crashed before naming the new size.
        let stray = HistoryArchive.record(.operations, time: nil, package.replica.fullState())
        try fs.appendFile(path + "/" + PackageLayout.history, stray + [1, 2, 3])
        #expect(try package.history().versions.count == 3, "readers ignore what no finished compaction wrote")
        _ = try package.commit { try $0.setCanvasSize(CodableSize(width: 300, height: 300)) }
        try package.compactLog()
        let archive = try fs.readFile(path + "/" + PackageLayout.history)
        #expect(Array(archive.prefix(committed.count)) == committed, "the stray bytes were cut before appending")
        #expect(try package.history().versions.map(\.operationCount) == [1, 1, 1, 1])
    }

    @Test(arguments: 1...12 as ClosedRange<UInt64>)
    func pruningKeepsEveryViewAfterTheHorizonAndSyncGoesOn(seed: UInt64) throws {
        let fs = MemoryFileSystem()
        var (package, received, peers) = try Self.randomHistory(seed: seed, steps: 160, fs: fs)
        defer { package.close() }
        let before = try package.history()
        var random = Random(state: seed ^ 0xF00D)
        let horizon = before.versions[random.below(before.versions.count)].vector
        let bytes = try package.pruneHistory(before: horizon)
        #expect(bytes.after <= bytes.before + 64, "seed \(seed): \(bytes)")
        let after = try package.history()
        #expect(after.horizon == horizon && after.versions.first?.vector == horizon, "seed \(seed)")
        #expect(after.versions.map(\.vector) == before.versions.map(\.vector).filter { $0.dominates(horizon) && $0 != horizon } .reduce(into: [horizon]) { $0.append($1) },
                "seed \(seed): the versions after the horizon are kept")
        #expect(after.latest == before.latest)
        // Views of every vector from the horizon on are exact.
        for version in after.versions where random.chance(40) {
            #expect(try Self.same(after.snapshot(at: version.vector), Self.oracle(received, at: version.vector)), "seed \(seed): \(version.vector)")
        }
        for _ in 0..<5 {
            var entries = horizon.entries
            for (author, seq) in after.latest.entries { entries[author] = max(horizon[author], UInt64(random.below(Int(seq) + 1))) }
            let vector = VersionVector(entries)
            #expect(try Self.same(after.snapshot(at: vector), Self.oracle(received, at: vector)), "seed \(seed): \(vector)")
        }
        #expect(throws: HistoryError.self) { try package.pruneHistory(before: .empty) }
        // Editing, syncing, compacting and reopening go on as before.
        _ = try package.commit { try $0.setCanvasSize(CodableSize(width: 999, height: 999)) }
        received += try package.merging(peers[0].operations(since: package.replica.versionVector), deferringSync: false)
        try peers[0].apply(package.replica.operations(since: peers[0].versionVector))
        #expect(try Self.same(package.replica.snapshot(), peers[0].snapshot()), "seed \(seed)")
        try package.compactLog()
        package.close()
        package = try BoardPackage.open(at: "/h/board.boardpkg", fileSystem: fs, newReplicaID: { ReplicaID(0xDEAD) })
        let reread = try package.history()
        #expect(reread.horizon == horizon && reread.latest == package.replica.versionVector, "seed \(seed)")
        #expect(try Self.same(reread.snapshot(at: reread.latest), package.replica.snapshot()), "seed \(seed)")
        let all = received + package.replica.fullState().operations
        #expect(try Self.same(reread.snapshot(at: reread.latest), Self.oracle(all, at: reread.latest)), "seed \(seed)")
    }

    @Test func aForkHoldsTheBoardAtTheVersionUnderItsOwnID() throws {
        let fs = MemoryFileSystem()
        let (package, received, _) = try Self.randomHistory(seed: 77, steps: 120, fs: fs)
        defer { package.close() }
        let history = try package.history()
        let version = history.versions[history.versions.count / 2].vector
        let fork = try BoardPackage.fork(history, at: version, to: "/h/fork.boardpkg", fileSystem: fs, replicaID: ReplicaID(0xF0F0))
        defer { fork.close() }
        #expect(try Self.same(fork.replica.snapshot(), Self.oracle(received, at: version)))
        #expect(fork.replica.id == ReplicaID(0xF0F0))
        #expect(throws: StoreError.self) { try BoardPackage.fork(history, at: version, to: "/h/fork.boardpkg", fileSystem: fs, replicaID: ReplicaID(1)) }
    }

    @Test func aSegmentKeepsEachRecordsOperationsTimeAndVectors() throws {
        var a = Replica(id: ReplicaID(0xA)), b = Replica(id: ReplicaID(0xB))
        let first = try a.addSticker(imagePNG: pngRed, at: pt(1, 2)).operations
        let second = try a.setCanvasSize(CodableSize(width: 300, height: 200)).operations
        try b.apply(a.fullState())
        let third = try b.beginStroke(color: RGBAColor(red: 0, green: 0, blue: 0), width: 1, points: [pt(0, 0), pt(3, 4)]).operations
        let records: [(batch: OperationBatch, time: Int64?)] = [
            (OperationBatch(operations: first), 1_700_000_000_000),
            (OperationBatch(operations: second, base: .empty, covers: a.versionVector), nil),
            (OperationBatch(operations: []), 1_699_999_999_000),
            (OperationBatch(operations: third), 1_700_000_005_000),
        ]
        let bytes = HistoryArchive.magic + HistoryArchive.segments(records)
        let parsed = HistoryArchive.parse(bytes)
        #expect(parsed.end == .clean)
        #expect(parsed.records.map(\.batch) == records.map(\.batch))
        #expect(parsed.records.map(\.time) == records.map(\.time))
        #expect(parsed.records.allSatisfy { $0.kind == .operations && $0.offset == HistoryArchive.magic.count })
        // Every single-byte change of the segment is damage, never a different history.
        for index in HistoryArchive.magic.count..<bytes.count {
            var damaged = bytes
            damaged[index] ^= 0x20
            #expect(HistoryArchive.isDamaged(damaged), "byte \(index)")
        }
    }

    @Test(arguments: 1...4 as ClosedRange<UInt64>)
    func checkpointsAfterTheFirstAreWrittenAsChangesAndReadWhole(seed: UInt64) throws {
        let fs = MemoryFileSystem()
        let (package, _, _) = try Self.randomHistory(seed: seed, steps: 200, fs: fs)
        defer { package.close() }
        let bytes = try fs.readFile("/h/board.boardpkg/" + PackageLayout.history)
        let parsed = HistoryArchive.parse(bytes)
        #expect(parsed.end == .clean, "seed \(seed)")
        let checkpoints = parsed.records.filter { $0.kind == .checkpoint }
        #expect(checkpoints.count > 2, "seed \(seed)")
        // Frames: the first checkpoint whole (kind 2), the later ones as changes (kind 5).
        var kinds: [UInt8] = []
        var offset = HistoryArchive.magic.count
        while offset < bytes.count, case .payload(let range, let next) = OpLog.frameRecord(in: bytes, at: offset) {
            kinds.append(bytes[range.lowerBound])
            offset = next
        }
        #expect(kinds.filter { $0 == 2 || $0 == 5 } == [2] + Array(repeating: 5, count: checkpoints.count - 1), "seed \(seed): \(kinds)")
        // Each checkpoint reads whole, in operation-id order, as the full state it was written from.
        for checkpoint in checkpoints {
            let ops = checkpoint.batch.operations
            #expect(zip(ops, ops.dropFirst()).allSatisfy { $0.id < $1.id }, "seed \(seed)")
            var replica = Replica(id: ReplicaID(0))
            try replica.apply(OperationBatch(operations: ops), from: .ownLog)
            #expect(replica.fullState().operations == ops, "seed \(seed): a checkpoint holds a compacted state")
        }
        // A rewrite (repair, pruning) writes the same checkpoints again.
        let rewritten = HistoryArchive.parse(HistoryArchive.encode(parsed.records))
        #expect(rewritten.end == .clean)
        #expect(rewritten.records.map(\.batch) == parsed.records.map(\.batch), "seed \(seed)")
        // The first checkpoint damaged: salvage drops it and every change built on it, never
        // resolving one against another base.
        let first = try #require(checkpoints.first)
        var damaged = bytes
        damaged[first.offset + 14] ^= 0x20
        #expect(HistoryArchive.isDamaged(damaged))
        let salvaged = HistoryArchive.salvage(damaged)
        #expect(salvaged.records.filter { $0.kind == .checkpoint }.isEmpty, "seed \(seed)")
        #expect(salvaged.dropped.count == checkpoints.count, "seed \(seed): \(salvaged.dropped.map(\.reason))")
        #expect(salvaged.records.filter { $0.kind == .operations }.map(\.batch) == parsed.records.filter { $0.kind == .operations }.map(\.batch))
    }

    @Test(arguments: 1...4 as ClosedRange<UInt64>)
    func snapshotsScrubbedInStepsOfAnySizeMatchTheOracle(seed: UInt64) throws {
        let fs = MemoryFileSystem()
        let (package, received, _) = try Self.randomHistory(seed: seed, steps: 400, fs: fs)
        defer { package.close() }
        let history = try package.history()
        let vectors = history.versions.map(\.vector)
        var random = Random(state: seed ^ 0x5C4B)
        var at = vectors.count / 2
        // Steps of one version (replayed item by item) and of many (read from the whole view),
        // forward and back.
        for step in 0..<80 {
            let size = random.chance(60) ? 1 + random.below(3) : 1 + random.below(vectors.count / 2)
            at = random.chance(50) ? min(vectors.count - 1, at + size) : max(0, at - size)
            let vector = vectors[at]
            #expect(try Self.same(history.snapshot(at: vector), Self.oracle(received, at: vector)), "seed \(seed): step \(step) version \(at + 1)")
        }
    }

    @Test func compactionWritesOneSegmentForTheRecordsItReplaces() throws {
        let fs = MemoryFileSystem()
        try fs.createDirectories("/h")
        let path = "/h/b.boardpkg"
        let package = try BoardPackage.create(at: path, fileSystem: fs, replicaID: ReplicaID(0xA))
        defer { package.close() }
        for round in 0..<3 {
            for index in 0..<3 { _ = try package.commit { try $0.addSticker(imagePNG: pngRed, at: pt(Double(round * 10 + index), 5)) } }
            try package.compactLog()
        }
        let records = HistoryArchive.parse(try fs.readFile(path + "/" + PackageLayout.history)).records
        let offsets = Dictionary(grouping: records, by: \.offset)
        #expect(records.count == 9 && offsets.count == 3 && offsets.values.allSatisfy { $0.count == 3 },
                "three segments of three records each (the log's state record is not archived again)")
        #expect(try package.history().versions.count == 9)
    }

    /// The view cache (`ViewCache`): going forward from the last view, back to a checkpoint, and to
    /// versions that do not dominate the last view all give the oracle's board, and so do views
    /// of one history made from several threads at once.
    @Test(arguments: 1...6 as ClosedRange<UInt64>)
    func viewsForwardBackAndSidewaysFromTheLastViewMatchTheOracle(seed: UInt64) async throws {
        let fs = MemoryFileSystem()
        let (package, received, _) = try Self.randomHistory(seed: seed, steps: 160, fs: fs)
        defer { package.close() }
        let history = try package.history()
        #expect(history.checkpointCount > 1, "seed \(seed)")
        #expect(history.placesInOrder, "seed \(seed): views find operations by binary search")
        var scanning = history
        scanning.placesInOrder = false  // and by scanning, as when an author's numbers do not rise
        let vectors = history.versions.map(\.vector)
        for (step, vector) in (vectors + vectors.reversed()).enumerated() {
            let expected = try Self.oracle(received, at: vector)
            #expect(try Self.same(history.snapshot(at: vector), expected), "seed \(seed): step \(step) \(vector)")
            #expect(try Self.same(scanning.snapshot(at: vector), expected), "seed \(seed): step \(step) \(vector), scanning")
        }
        // Each vector from the one before: one author raised (forward), lowered (back), or one
        // raised and another lowered (neither dominates the other).
        var random = Random(state: seed ^ 0xCAC4E)
        let authors = history.latest.entries.keys.sorted()
        var entries = history.latest.entries
        for step in 0..<60 {
            let raised = authors[random.below(authors.count)], lowered = authors[random.below(authors.count)]
            switch random.below(3) {
            case 0: entries[raised] = entries[raised, default: 0] + UInt64(random.below(Int(history.latest[raised] - entries[raised, default: 0]) + 1))
            case 1: entries[lowered] = UInt64(random.below(Int(entries[lowered, default: 0]) + 1))
            default:
                entries[raised] = entries[raised, default: 0] + UInt64(random.below(Int(history.latest[raised] - entries[raised, default: 0]) + 1))
                entries[lowered] = UInt64(random.below(Int(entries[lowered, default: 0]) + 1))
            }
            let vector = VersionVector(entries)
            #expect(try Self.same(history.snapshot(at: vector), Self.oracle(received, at: vector)), "seed \(seed): step \(step) \(vector)")
        }
        // Several threads viewing one history at once.
        let samples = (0..<24).map { _ in
            VersionVector(Dictionary(uniqueKeysWithValues: authors.map { ($0, UInt64(random.below(Int(history.latest[$0]) + 1))) }))
        }
        let expected = try samples.map { try Self.oracle(received, at: $0).canonicalJSON() }
        let seen = await withTaskGroup(of: (Int, Data?).self) { group in
            for round in 0..<3 {
                for index in samples.indices {
                    let vector = samples[(index + round * 7) % samples.count]
                    group.addTask { ((index + round * 7) % samples.count, try? history.snapshot(at: vector).canonicalJSON()) }
                }
            }
            var seen: [(Int, Data?)] = []
            for await result in group { seen.append(result) }
            return seen
        }
        #expect(seen.count == samples.count * 3)
        for (index, json) in seen {
            #expect(json == expected[index], "seed \(seed): concurrent view of \(samples[index])")
        }
    }

    /// A copy of a package taken while a compaction appended (the admin API's tar streams the
    /// archive before the index): the archive ends torn and the index names more bytes than it
    /// holds, or there is no index. The next compaction cuts the torn tail before appending.
    @Test(arguments: [false, true])
    func aTornArchiveTheIndexCannotVouchForIsCutBeforeAppending(withoutIndex: Bool) throws {
        let fs = MemoryFileSystem()
        try fs.createDirectories("/h")
        let path = "/h/b.boardpkg"
        var package = try BoardPackage.create(at: path, fileSystem: fs, replicaID: ReplicaID(0xA))
        for index in 0..<3 { _ = try package.commit { try $0.addSticker(imagePNG: pngRed, at: pt(Double(index), 5)) } }
        try package.compactLog()
        package.close()
        let archive = path + "/" + PackageLayout.history, indexPath = path + "/" + PackageLayout.historyIndex
        let committed = try fs.readFile(archive)
        let torn = HistoryArchive.segments([(package.replica.fullState(), nil)])
        try fs.appendFile(archive, Array(torn.prefix(torn.count / 2)))
        if withoutIndex {
            try fs.removeFile(indexPath)
        } else {
            var index = try #require(HistoryIndex.read(indexPath, fs))
            index.archiveSize = committed.count + torn.count
            try fs.writeAtomically(indexPath, index.encoded())
        }
        package = try BoardPackage.open(at: path, fileSystem: fs, newReplicaID: { ReplicaID(0xDEAD) })
        defer { package.close() }
        _ = try package.commit { try $0.setCanvasSize(CodableSize(width: 300, height: 300)) }
        try package.save()
        try package.compactLog()
        let bytes = try fs.readFile(archive)
        #expect(Array(bytes.prefix(committed.count)) == committed)
        #expect(HistoryArchive.parse(bytes).end == .clean, "the torn bytes were cut, not left before the new records")
        #expect(try package.history().versions.count == 4)
    }
}
