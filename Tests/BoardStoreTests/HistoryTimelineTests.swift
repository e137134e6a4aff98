import BoardCRDT
import BoardModel
@testable import BoardStore
import Foundation
import Testing

/// Item timelines (`ItemTimelines`, docs/ARCHITECTURE.md "History"): a listed version is shown
/// from each item's own operations folded as a replica integrates them. Every listed version,
/// visited in a random order, then forward and back one by one, must show exactly the board of a
/// fresh replica holding the operations up to it: with strokes drawn over several records,
/// stickers moved and re-imaged, deletes, restores, reorders, canvas and background writes and
/// labels from three authors, delivered to the package in records that leave operations ahead
/// of a gap (such versions are viewed from a replica instead) and operations on items whose
/// creation has not arrived.
@Suite struct HistoryTimelineTests {
    typealias Random = HistoryTests.Random
    static let images = HistoryTests.images

    /// One random edit by `replica`; strokes are drawn over several edits (`drawing`).
    static func edit(_ replica: inout Replica, drawing: inout ItemID?, _ random: inout Random) throws {
        if let stroke = drawing {
            if random.chance(70) {
                _ = try replica.appendPoints([pt(Double(random.below(300)), Double(random.below(300)))], to: stroke)
            } else {
                replica.finishStroke(stroke)
                drawing = nil
            }
            return
        }
        let items = replica.itemIDs
        let item = items.isEmpty ? nil : items[random.below(items.count)]
        switch random.below(12) {
        case 0, 1:
            let edit = try replica.beginStroke(color: RGBAColor(red: 1, green: 0, blue: Double(random.below(2))), width: 2,
                                               points: [pt(Double(random.below(300)), 3)])
            drawing = edit.operations.first?.payload.item
        case 2:
            _ = try replica.addSticker(imagePNG: images[random.below(3)], at: pt(Double(random.below(300)), 40))
        case 3, 4:
            guard let item, replica.kind(of: item) == .sticker else { return }
            _ = try replica.move(item, to: pt(Double(random.below(500)), Double(random.below(500))))
        case 5:
            guard let item else { return }
            _ = replica.kind(of: item) == .stroke ? try replica.setWidth(item, to: Double(1 + random.below(5)))
                : try replica.replaceImage(item, withPNG: images[random.below(3)])
        case 6:
            guard let item else { return }
            _ = replica.isVisible(item) ? try replica.delete(item) : try replica.restore(item)
        case 7:
            guard let item else { return }
            _ = random.chance(50) ? try replica.bringToFront(item) : try replica.sendToBack(item)
        case 8:
            _ = try replica.setCanvasSize(CodableSize(width: Double(400 + random.below(5) * 100), height: 600))
        case 9:
            _ = random.chance(70) ? try replica.setBackground(imagePNG: images[random.below(3)]) : try replica.setBackground(asset: nil)
        case 10:
            _ = try replica.setLabel(text: "v\(random.below(100))", version: replica.versionVector, time: 1_000)
        default:
            _ = try replica.undo()
        }
    }

    /// A package that only hears three peers, in records of any size; some records hold an
    /// author's later operations before its earlier ones (ahead of a gap, filled later).
    static func history(seed: UInt64, steps: Int, fs: MemoryFileSystem) throws -> (BoardPackage, received: [Op]) {
        var random = Random(state: seed)
        try fs.createDirectories("/t")
        let path = "/t/board.boardpkg"
        var package = try BoardPackage.create(at: path, fileSystem: fs, replicaID: ReplicaID(0xA))
        package.checkpointInterval = 9
        for image in images { try package.addAsset(image) }
        var peers = [Replica(id: ReplicaID(0xB)), Replica(id: ReplicaID(0xC)), Replica(id: ReplicaID(0xD))]
        var drawing: [ItemID?] = [nil, nil, nil]
        for index in peers.indices { for image in images { peers[index].assets.insert(image) } }
        var received: [Op] = []
        for _ in 0..<steps {
            let index = random.below(peers.count)
            switch random.below(10) {
            case 0...4:
                try edit(&peers[index], drawing: &drawing[index], &random)
            case 5, 6:
                // What the package lacks, as a peer sends it (a complete delta).
                received += try package.merging(peers[index].operations(since: package.replica.versionVector), deferringSync: false)
            case 7:
                // Only the last few of those operations, alone: ahead of a gap that a later
                // delivery fills.
                let operations = peers[index].operations(since: package.replica.versionVector).operations
                guard operations.count >= 2 else { continue }
                received += try package.merging(OperationBatch(operations: Array(operations.suffix(1 + random.below(operations.count - 1)))),
                                                deferringSync: false)
            case 8:
                let other = (index + 1) % peers.count
                try peers[other].apply(peers[index].operations(since: peers[other].versionVector))
            default:
                if random.chance(50) {
                    try package.compactLog()
                } else {
                    try package.save()
                    package.close()
                    package = try BoardPackage.open(at: path, fileSystem: fs, newReplicaID: { ReplicaID(0xDEAD) })
                    package.checkpointInterval = 9
                }
            }
        }
        for peer in peers { received += try package.merging(peer.operations(since: package.replica.versionVector), deferringSync: false) }
        return (package, received)
    }

    static func oracle(_ operations: [Op], at version: VersionVector) throws -> Data {
        var replica = Replica(id: ReplicaID(0))
        for image in images { replica.assets.insert(image) }
        try replica.apply(OperationBatch(operations: operations.filter { version.covers($0.id) }), from: .ownLog)
        return try replica.snapshot().canonicalJSON()
    }

    @Test(arguments: 1...12 as ClosedRange<UInt64>)
    func everyListedVersionFromTimelinesIsAFreshReplicaWithItsOperations(seed: UInt64) throws {
        let rerun = "seed \(seed) (re-run: swift test --skip-build --filter HistoryTimelineTests)"
        let fs = MemoryFileSystem()
        let (package, received) = try Self.history(seed: seed, steps: 400, fs: fs)
        defer { package.close() }
        let history = try package.history()
        let versions = history.versions
        #expect(versions.count > 40, "\(rerun): \(versions.count) versions")
        let exact = history.versionEntries.filter { $0 >= 0 }.count
        #expect(exact > versions.count / 3, "\(rerun): versions read from timelines: \(exact) of \(versions.count)")

        var random = Random(state: seed ^ 0x7173)
        var shuffled = Array(versions.indices)
        for at in shuffled.indices.reversed() where at > 0 { shuffled.swapAt(at, random.below(at + 1)) }
        let order = shuffled + Array(versions.indices) + Array(versions.indices.reversed())
        var expected: [Int: Data] = [:]
        for (step, at) in order.enumerated() {
            let vector = versions[at].vector
            if expected[at] == nil { expected[at] = try Self.oracle(received, at: vector) }
            #expect(try history.snapshot(at: vector).canonicalJSON() == expected[at],
                    "\(rerun): step \(step), version \(at + 1) of \(versions.count)\(history.versionEntries[at] < 0 ? " (ahead of a gap)" : "")")
        }
        // The empty vector: an empty board with the default canvas, from timelines too.
        #expect(try history.snapshot(at: .empty).canonicalJSON() == Replica(id: ReplicaID(0)).snapshot().canonicalJSON(), "\(rerun)")
        // A copy of the history shares the timelines and views them the same.
        let copy = history
        let middle = versions[versions.count / 2].vector
        #expect(try copy.snapshot(at: middle).canonicalJSON() == Self.oracle(received, at: middle), "\(rerun)")
    }

    /// Operations ahead of a gap happened in some seeds' records, and their versions are still
    /// right (checked above): here at least one seed must have made such a version.
    @Test func recordsAheadOfAGapMakeVersionsViewedFromAReplica() throws {
        var gapped = 0
        for seed in 1...12 as ClosedRange<UInt64> {
            let fs = MemoryFileSystem()
            let (package, _) = try Self.history(seed: seed, steps: 400, fs: fs)
            defer { package.close() }
            gapped += try package.history().versionEntries.filter { $0 < 0 }.count
        }
        #expect(gapped > 0, "no seed left operations ahead of a gap")
    }

    /// Views of one history from several threads at once agree with the oracle.
    @Test func viewsFromSeveralThreadsAtOnceAgree() async throws {
        let fs = MemoryFileSystem()
        let (package, received) = try Self.history(seed: 77, steps: 200, fs: fs)
        defer { package.close() }
        let history = try package.history()
        let vectors = history.versions.map(\.vector)
        let expected = try vectors.map { try Self.oracle(received, at: $0) }
        let mismatches = await withTaskGroup(of: Int.self) { group in
            for task in 0..<4 {
                group.addTask {
                    var wrong = 0
                    for at in stride(from: task, to: vectors.count, by: 1) where (try? history.snapshot(at: vectors[at]).canonicalJSON()) != expected[at] {
                        wrong += 1
                    }
                    return wrong
                }
            }
            return await group.reduce(0, +)
        }
        #expect(mismatches == 0)
    }
}
