import BoardCRDT
import BoardModel
@testable import BoardStore
import Foundation
import Testing

/// Item timelines against hostile or damaged op logs written straight to a package's log
/// (nothing admits them: a damaged package, or a peer's operations as they were logged).
@Suite struct HistoryTimelineHostileTests {
    typealias Random = HistoryTests.Random
    static let images = HistoryTests.images
    static let path = "/h/board.boardpkg"

    /// A package whose op log holds exactly `batches`, one record each, and the test images.
    static func package(_ batches: [OperationBatch], fs: some FileSystem, images: [Data] = images) throws -> BoardHistory {
        try fs.createDirectories(Path.join(path, PackageLayout.assets))
        for image in images { try fs.writeFile(Path.join(Path.join(path, PackageLayout.assets), AssetHash.of(image).hex), Array(image)) }
        var (log, _, _) = try OpLog.open(Path.join(path, PackageLayout.opLog), fileSystem: fs)
        for batch in batches { _ = try log.append(batch, sync: false) }
        return try BoardHistory.read(package: path, fileSystem: fs)
    }

    /// The history's operations (each once, in record order), as the package integrated them.
    static func historyOperations(_ batches: [OperationBatch]) -> [Op] {
        var tracker = VersionTracker()
        return batches.flatMap { tracker.note($0) }
    }

    static func oracle(_ operations: [Op], at version: VersionVector) throws -> Data {
        var replica = Replica(id: ReplicaID(0))
        for image in images { replica.assets.insert(image) }
        try replica.apply(OperationBatch(operations: operations.filter { version.covers($0.id) }), from: .ownLog)
        return try replica.snapshot().canonicalJSON()
    }

    static let authors = [ReplicaID(0xB), ReplicaID(0xC), ReplicaID(0xD), ReplicaID(0xE)]
    static let itemIDs = (1...4).map { ItemID(high: 0x77, low: UInt64($0)) }

    static func randomPayload(_ random: inout Random) -> Payload {
        let item = itemIDs[random.below(itemIDs.count)]
        let z = ZKey(bytes: [UInt8(0x40 + random.below(8)), UInt8(1 + random.below(3))])!
        let point = GridPoint(x: Int64(random.below(50)), y: Int64(random.below(50)))
        switch random.below(11) {
        case 0, 1:
            return .beginStroke(item, StrokeStart(color: Color8(red: UInt8(random.below(3)), green: 0, blue: 0, alpha: 255),
                                                  width: Int64(1 + random.below(4)), z: z, points: [point]))
        case 2:
            return .addSticker(item, StickerStart(asset: AssetHash.of(images[random.below(3)]), position: point,
                                                  scale: 1, rotation: 0, z: z))
        case 3, 4:
            return .appendPoints(item, (0...random.below(2)).map { _ in GridPoint(x: Int64(random.below(50)), y: 7) })
        case 5:
            return .setItem(item, .exists(random.chance(50)))
        case 6:
            return .setItem(item, .z(z))
        case 7:
            return random.chance(50) ? .setItem(item, .asset(AssetHash.of(images[random.below(3)]))) : .setItem(item, .position(point))
        case 8:
            return .setItem(item, .width(Int64(1 + random.below(9))))
        case 9:
            return random.chance(50) ? .setBoard(.canvas(width: Int64(100 + random.below(4)), height: 50))
                : .setBoard(.background(random.chance(70) ? AssetHash.of(images[random.below(3)]) : nil))
        default:
            return .setLabel(LabelID(replica: authors[0], number: UInt64(1 + random.below(2))),
                             Label(text: "l\(random.below(9))", version: VersionVector([authors[0]: UInt64(random.below(5))]), time: 1))
        }
    }

    /// Records by three authors, each author's operations numbered 1, 2, 3... but delivered in
    /// any grouping and order, some twice, some as complete deltas that cover operations never
    /// sent; lamport clocks at random (two creations of one id are common).
    static func randomBatches(seed: UInt64, records: Int) -> [OperationBatch] {
        var random = Random(state: seed)
        var made: [ReplicaID: [Op]] = [:]
        // Some seeds number every author's operations just below the codec's limit (2^62), so
        // that vector totals saturate.
        let base: [ReplicaID: UInt64] = seed % 3 == 0 ? Dictionary(uniqueKeysWithValues: authors.map { ($0, (1 << 62) - 200) }) : [:]
        var batches: [OperationBatch] = []
        var sentVector = VersionVector.empty
        for _ in 0..<records {
            // New operations by some authors.
            for _ in 0..<random.below(4) {
                let author = authors[random.below(authors.count)]
                let seq = (base[author] ?? 0) + UInt64((made[author]?.count ?? 0) + 1)
                made[author, default: []].append(Op(id: OpID(replica: author, seq: seq), lamport: UInt64(1 + random.below(30)),
                                                    payload: randomPayload(&random)))
            }
            var operations: [Op] = []
            for _ in 0..<(1 + random.below(4)) {
                let author = authors[random.below(authors.count)]
                guard let list = made[author], !list.isEmpty else { continue }
                operations.append(list[random.below(list.count)])
            }
            if random.chance(15) {
                // A complete delta from the vector so far: skips some operations.
                var covers = sentVector
                for author in authors { covers[author] = max(covers[author], made[author]?.last?.id.seq ?? 0) }
                batches.append(OperationBatch(operations: operations.filter { !sentVector.covers($0.id) },
                                              base: sentVector, covers: covers))
            } else {
                batches.append(OperationBatch(operations: operations))
            }
            var tracker = VersionTracker()
            for batch in batches { tracker.note(batch) }
            sentVector = tracker.vector
        }
        return batches
    }

    @Test(arguments: 1...300 as ClosedRange<UInt64>)
    func hostileLogsViewedFromTimelinesMatchTheOracle(seed: UInt64) throws {
        let batches = Self.randomBatches(seed: seed, records: 40)
        let fs = MemoryFileSystem()
        let history = try Self.package(batches, fs: fs)
        let operations = Self.historyOperations(batches)
        var random = Random(state: seed ^ 0x55)
        var order = Array(history.versions.indices)
        for at in order.indices.reversed() where at > 0 { order.swapAt(at, random.below(at + 1)) }
        order += Array(history.versions.indices) + Array(history.versions.indices.reversed())
        for at in order {
            let vector = history.versions[at].vector
            let expected = try Self.oracle(operations, at: vector)
            let got = try history.snapshot(at: vector).canonicalJSON()
            #expect(got == expected, "seed \(seed): version \(at + 1) of \(history.versions.count), entry \(history.versionEntries[at])")
            if got != expected { return }
        }
    }

    @Test(arguments: 1...12 as ClosedRange<UInt64>)
    func prunedHistoriesViewedFromTimelinesMatchTheOracle(seed: UInt64) throws {
        let fs = MemoryFileSystem()
        let (package, received, _) = try HistoryTests.randomHistory(seed: seed, steps: 160, fs: fs)
        defer { package.close() }
        let before = try package.history()
        var random = Random(state: seed ^ 0xF00D)
        let horizon = before.versions[random.below(before.versions.count)].vector
        _ = try package.pruneHistory(before: horizon)
        let history = try package.history()
        var order = Array(history.versions.indices)
        for at in order.indices.reversed() where at > 0 { order.swapAt(at, random.below(at + 1)) }
        order += Array(history.versions.indices) + Array(history.versions.indices.reversed())
        for at in order {
            let vector = history.versions[at].vector
            let expected = try HistoryTimelineTests.oracle(received, at: vector)
            let got = try history.snapshot(at: vector).canonicalJSON()
            #expect(got == expected, "seed \(seed): version \(at + 1) of \(history.versions.count), entry \(history.versionEntries[at])")
            if got != expected { return }
        }
    }
}
