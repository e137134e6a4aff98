import BoardCRDT
import BoardModel
import BoardSimulation
import BoardStore
import Foundation

/// `BENCH_ONLY=history board-bench`: what keeping history costs and how fast it is read, on the
/// workload board. Every operation of the workload is merged into a package as its own record
/// (as a live server logs one peer frame per edit), with a save (and so a compaction when the
/// log has grown past twice the state) every 500 records; once without history and once with.
/// Views are `BoardHistory.replica(at:)`, and `snapshot(at:)` where a page draws one (the web
/// view's time slider does).
enum HistoryBench {
    static func bytes(under path: String) -> Int {
        guard let enumerator = FileManager.default.enumerator(atPath: path) else { return 0 }
        var total = 0
        for case let file as String in enumerator {
            let attributes = try? FileManager.default.attributesOfItem(atPath: path + "/" + file)
            if attributes?[.type] as? FileAttributeType == .typeRegular { total += (attributes?[.size] as? Int) ?? 0 }
        }
        return total
    }

    static func fileBytes(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0
    }

    /// What a child mode of this binary prints (a number), or nil.
    static func childFigure(_ arguments: [String]) -> Double? {
        let child = Process()
        child.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
        child.arguments = arguments
        let pipe = Pipe()
        child.standardOutput = pipe
        guard (try? child.run()) != nil else { return nil }
        child.waitUntilExit()
        return String(data: pipe.fileHandleForReading.readDataToEndOfFile(), encoding: .utf8)
            .flatMap { Double($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
    }

    /// Times `snapshot(at:)` of 100 evenly spaced versions of `history`, taken in `order`, and
    /// prints p50, p99 and max under `name`.
    static func timeViews(_ history: BoardHistory, order: [Int], name: String) {
        let count = history.versions.count
        var times: [Double] = []
        for index in order {
            let version = history.versions[min(count - 1, index * count / 100)]
            let viewStart = ContinuousClock.now
            let board = history.snapshot(at: version.vector)
            times.append(seconds(ContinuousClock.now - viewStart))
            withExtendedLifetime(board) {}
        }
        // Every time in the order taken (BENCH_VERBOSE=1); the first view of a history builds its
        // item timelines and reads its images.
        if ProcessInfo.processInfo.environment["BENCH_VERBOSE"] != nil { print(name, times.map { String(format: "%.2f", $0 * 1000) }.joined(separator: " ")) }
        print("\(name)_first", times[0] * 1000, "ms")
        times.sort()
        print("\(name)_p50", times[49] * 1000, "ms")
        print("\(name)_p99", times[98] * 1000, "ms")
        print("\(name)_max", times[99] * 1000, "ms")
    }

    static func run(scratch: String) throws {
        let workload = Workload().generate(seed: 1)
        print("workload_operations", workload.operations.count, "ops")
        for keeping in [false, true] {
            let path = scratch + (keeping ? "/with.boardpkg" : "/without.boardpkg")
            var package = try BoardPackage.create(at: path, fileSystem: PosixFileSystem(), replicaID: ReplicaID(0x5E5E))
            package.keepsHistory = keeping
            for (_, data) in workload.assets { try package.addAsset(data) }
            let start = ContinuousClock.now
            for (index, op) in workload.operations.enumerated() {
                try package.merge(OperationBatch(operations: [op]), deferringSync: true)
                if index % 500 == 499 {
                    try package.syncMerges()
                    try package.save()
                }
            }
            try package.syncMerges()
            try package.save()
            let ingest = seconds(ContinuousClock.now - start)
            let name = keeping ? "with_history" : "without_history"
            print("\(name)_ingest_per_record", ingest / Double(workload.operations.count) * 1_000_000, "µs")
            print("\(name)_oplog_bytes", fileBytes(path + "/" + PackageLayout.opLog), "bytes")
            print("\(name)_archive_bytes", fileBytes(path + "/" + PackageLayout.history), "bytes")
            print("\(name)_index_bytes", fileBytes(path + "/" + PackageLayout.historyIndex), "bytes")
            print("\(name)_sync_bytes_without_assets", bytes(under: path + "/sync") - bytes(under: path + "/sync/assets"), "bytes")
            print("\(name)_package_bytes", bytes(under: path), "bytes")
            package.close()
            // Resident memory of a LiveBoard on the package, in a fresh process: the live board
            // never reads the archive, so keeping history should cost it nothing.
            if let bytes = childFigure(["--measure-liveboard", path]) { print("\(name)_liveboard_resident", bytes / 1_048_576, "MB") }
            guard keeping else { continue }
            if let bytes = childFigure(["--measure-history", path]) { print("history_read_and_100_views_resident", bytes / 1_048_576, "MB") }
            package = try BoardPackage.open(at: path, fileSystem: PosixFileSystem(), newReplicaID: { ReplicaID(0x5E5F) })

            // Where the archive's bytes go: checkpoints (the first whole, the rest as changes
            // from the one before) against segments (the archived operations).
            let archive = try PosixFileSystem().readFile(path + "/" + PackageLayout.history)
            let records = HistoryArchive.parse(archive).records
            var kinds: [Int: HistoryArchive.Kind] = [:]
            for record in records where kinds[record.offset] == nil || record.kind != .operations { kinds[record.offset] = record.kind }
            let starts = kinds.keys.sorted()
            var checkpointBytes = 0, operationBytes = 0
            for (at, offset) in starts.enumerated() {
                let size = (at + 1 < starts.count ? starts[at + 1] : archive.count) - offset
                if kinds[offset] == .operations { operationBytes += size } else { checkpointBytes += size }
            }
            print("archive_checkpoint_bytes", checkpointBytes, "bytes")
            print("archive_segment_bytes", operationBytes, "bytes")
            let loadStart = ContinuousClock.now
            let history = try package.history()
            print("history_read", seconds(ContinuousClock.now - loadStart), "s")
            print("history_versions", history.versions.count, "versions")
            print("history_checkpoints", history.checkpointCount, "checkpoints")
            let count = history.versions.count
            timeViews(history, order: Array(0..<100), name: "view_100_versions")
            // The same versions in a shuffled order (seeded), on a history read afresh: every
            // view far from the one before it.
            var order = Array(0..<100)
            var seed: UInt64 = 27
            for at in order.indices.reversed() where at > 0 {
                seed = seed &* 6364136223846793005 &+ 1442695040888963407
                order.swapAt(at, Int((seed >> 33) % UInt64(at + 1)))
            }
            timeViews(try package.history(), order: order, name: "view_100_versions_shuffled")
            let first = count / 2
            let scrubbed = Array(first..<min(count, first + 1000)) + Array((first..<min(count, first + 1000)).reversed())
            // The views alone (`replica(at:)`), then with the snapshot a page would draw.
            let viewsStart = ContinuousClock.now
            for number in scrubbed { withExtendedLifetime(history.replica(at: history.versions[number].vector)) {} }
            print("scrub_1000_versions_forward_and_back_replica_only", seconds(ContinuousClock.now - viewsStart), "s")
            let scrubStart = ContinuousClock.now
            for number in scrubbed {
                withExtendedLifetime(history.snapshot(at: history.versions[number].vector)) {}
            }
            print("scrub_1000_versions_forward_and_back", seconds(ContinuousClock.now - scrubStart), "s")
            package.close()
        }
    }
}
