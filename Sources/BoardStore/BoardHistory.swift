import BoardCRDT
import BoardModel
import Foundation
import Synchronization

/// A board's history as its package holds it on disk: every record compaction archived
/// (`sync/history`) followed by the live op log's records, each with the wall time it was
/// integrated when known. Read once (`BoardPackage.history()` or `read(package:fileSystem:)`);
/// the package's replica is never consulted.
///
/// A *version* is a version vector. `versions` names the one reached after each record that
/// brought new operations (numbered from 1); `replica(at:)` accepts any vector and shows
/// exactly the operations of the history it covers. History holds what this package
/// integrated: a peer's catch-up carries only the surviving operations, so a write the peer
/// had overwritten before this package heard of it is not in this package's history.
public struct BoardHistory: Sendable {
    /// Operations archived between two checkpoints (`BoardPackage.checkpointInterval`).
    public static let defaultCheckpointInterval = 2_000
    /// Versions whose times are at most this far apart are one editing session (`sessions`).
    public static let defaultSessionGap: Int64 = 30 * 60 * 1000
    /// Bytes of history (archive plus log) a read accepts.
    public static let maxBytes = 1 << 32

    /// Milliseconds since 1970 by this machine's clock.
    @Sendable public static func wallClock() -> Int64? {
        Int64((Date().timeIntervalSince1970 * 1000).rounded())
    }

    /// One version: the vector after a record, when it was integrated (milliseconds since
    /// 1970, nil when not known), who wrote its operations and how many there were.
    public struct Version: Sendable, Equatable {
        public var number: Int
        public var vector: VersionVector
        public var time: Int64?
        public var authors: [ReplicaID]
        public var operationCount: Int
    }

    /// Consecutive versions no more than a quiet gap apart.
    public struct Session: Sendable, Equatable {
        /// The first and last version numbers.
        public var first: Int
        public var last: Int
        public var start: Int64?
        public var end: Int64?
        public var authors: [ReplicaID]
        public var operationCount: Int
    }

    /// The records' new operations in order (each operation once).
    struct Entry: Sendable {
        var operations: [Op]
    }

    struct Checkpoint: Sendable {
        /// Entries before it.
        var position: Int
        var state: [Op]
        /// No operation the checkpoint holds lies beyond this.
        var highest: VersionVector
    }

    /// Where one operation is in `entries`.
    struct Place: Sendable {
        var seq: UInt64
        var entry: Int32
        var index: Int32
    }

    public private(set) var versions: [Version] = []
    /// Per version: the last entry it holds, when it covers every operation of the entries up to
    /// there (no operation among them waits ahead of a gap), else -1. Such a version shows
    /// exactly the operations of a prefix of `entries`, which item timelines answer
    /// (`ItemTimelines`).
    var versionEntries: [Int32] = []
    /// Per version, its vector's `totalCount` (saturating): it rises with every version, so a vector's
    /// version is found by binary search (`versionNumber(of:)`).
    var versionTotals: [UInt64] = []
    var entries: [Entry] = []
    /// Each author's operations in entry order, so a view finds the operations between two
    /// vectors by binary search instead of scanning every later entry; only while every author's
    /// sequence numbers rise in entry order (`placesInOrder`), else views scan.
    var places: [ReplicaID: [Place]] = [:]
    /// Each item's operations in entry order, and the board's own (canvas, background): what a
    /// snapshot next to the last one replays to read one item again (`ShownBoard`).
    var itemPlaces: [ItemID: [Place]] = [:]
    var boardPlaces: [Place] = []
    var placesInOrder = true
    var checkpoints: [Checkpoint] = []
    /// Materialized checkpoints and the last view (`ViewCache`).
    let cache = ViewCache()
    /// Where images are read from (the package's `sync/assets`).
    let assetDirectory: String
    let fileSystem: any FileSystem
    /// The op-log records the archive holds (each record of a segment counts) and the archive's
    /// checked bytes, for reports.
    public private(set) var archivedRecords = 0
    public private(set) var archiveBytes = 0

    /// Where a pruned history begins (`BoardPackage.pruneHistory(before:)`): views of vectors
    /// that do not dominate it are not kept (nil: nothing was pruned).
    public private(set) var horizon: VersionVector?

    /// Checkpoints read from the archive.
    public var checkpointCount: Int { checkpoints.count }

    /// The latest version (the empty vector for an empty history).
    public var latest: VersionVector { versions.last?.vector ?? .empty }

    /// Reads a package's history. Damage in the archive or the log throws
    /// `StoreError.damagedFile`/`damagedLog` naming the file and byte offset (`board-sync repair`
    /// salvages both); a torn tail is ignored.
    public static func read(package path: String, fileSystem: any FileSystem) throws -> BoardHistory {
        try read(package: path, fileSystem: fileSystem, pendingTimes: [])
    }

    static func read(package path: String, fileSystem: any FileSystem, pendingTimes: [HistoryIndex.Entry]) throws -> BoardHistory {
        var history = BoardHistory(assetDirectory: Path.join(path, PackageLayout.assets), fileSystem: fileSystem)
        let archivePath = Path.join(path, PackageLayout.history)
        let index = HistoryIndex.read(Path.join(path, PackageLayout.historyIndex), fileSystem)
        var tracker = VersionTracker()
        if let size = try fileSystem.fileSize(archivePath) {
            guard size <= maxBytes else {
                throw StoreError.damagedFile(path: archivePath, "\(size) bytes of history (at most \(maxBytes) are read)")
            }
            var bytes = try fileSystem.readFile(archivePath)
            // Bytes past the committed size are an unfinished compaction's: its records are
            // still in the log.
            if let committed = index?.archiveSize, committed >= HistoryArchive.magic.count, committed < bytes.count {
                bytes.removeLast(bytes.count - committed)
            }
            let parsed = HistoryArchive.parse(bytes)
            if case .damaged(let offset, let why) = parsed.end {
                throw StoreError(.damagedFile, path: archivePath,
                                 "the history archive is damaged at byte \(offset): \(why); run `board-sync repair` on the package to keep every record that still checks out",
                                 offset: offset)
            }
            history.archiveBytes = parsed.validBytes
            for record in parsed.records {
                switch record.kind {
                case .operations:
                    history.archivedRecords += 1
                    history.add(record.batch, time: record.time, tracker: &tracker)
                case .checkpoint:
                    history.checkpoints.append(Checkpoint(position: history.entries.count, state: record.batch.operations,
                                                          highest: record.batch.covers ?? .empty))
                case .horizon where history.entries.isEmpty && history.horizon == nil:
                    // The board at the horizon: a version, and a checkpoint for every view after it.
                    let horizon = record.batch.covers ?? .empty
                    history.horizon = horizon
                    history.add(OperationBatch(operations: record.batch.operations, base: .empty, covers: horizon),
                                time: record.time, tracker: &tracker)
                    history.checkpoints.append(Checkpoint(position: history.entries.count, state: record.batch.operations, highest: horizon))
                case .segment:
                    break  // parsing gives a segment's records one by one
                case .horizon:
                    throw StoreError(.damagedFile, path: archivePath,
                                     "the history archive has a horizon record at byte \(record.offset) after other records; run `board-sync repair` on the package",
                                     offset: record.offset)
                }
            }
        }
        let logPath = Path.join(path, PackageLayout.opLog)
        let logBytes = (try? fileSystem.readFile(logPath)) ?? []
        guard logBytes.count <= maxBytes else { throw StoreError.damagedLog(path: logPath, offset: 0, "\(logBytes.count) bytes (at most \(maxBytes) are read)") }
        if logBytes.count > OpLog.magic.count, case .damaged(let offset, let why) = OpLog.parse(logBytes).end, logBytes.starts(with: OpLog.magic) {
            throw StoreError.damagedLog(path: logPath, offset: offset, why)
        }
        var times = index?.times ?? [:]
        for entry in pendingTimes { times[entry.mark] = entry.time }
        for (mark, batch) in OpLog.records(in: logBytes) {
            history.add(batch, time: times[mark], tracker: &tracker)
        }
        return history
    }

    private init(assetDirectory: String, fileSystem: any FileSystem) {
        self.assetDirectory = assetDirectory
        self.fileSystem = fileSystem
    }

    /// One record: its new operations become an entry; a version when the vector moved or
    /// operations arrived.
    private mutating func add(_ batch: OperationBatch, time: Int64?, tracker: inout VersionTracker) {
        let before = tracker.vector
        let fresh = tracker.note(batch)
        let after = tracker.vector
        guard !fresh.isEmpty || after != before else { return }
        entries.append(Entry(operations: fresh))
        if placesInOrder, entries.count <= Int(Int32.max), fresh.count <= Int(Int32.max) {
            for (index, op) in fresh.enumerated() {
                if let previous = places[op.id.replica]?.last, previous.seq >= op.id.seq { placesInOrder = false; places = [:]; break }
                places[op.id.replica, default: []].append(Place(seq: op.id.seq, entry: Int32(entries.count - 1), index: Int32(index)))
            }
        } else if placesInOrder {
            placesInOrder = false
            places = [:]
        }
        if entries.count <= Int(Int32.max), fresh.count <= Int(Int32.max) {
            for (index, op) in fresh.enumerated() {
                let place = Place(seq: op.id.seq, entry: Int32(entries.count - 1), index: Int32(index))
                if let item = op.payload.item { itemPlaces[item, default: []].append(place) } else { boardPlaces.append(place) }
            }
        }
        let authors = Set(fresh.map(\.id.replica))
        let entry = !tracker.holdsOperationsAhead && entries.count <= Int(Int32.max) ? Int32(entries.count - 1) : -1
        if let last = versions.last, last.vector == after {
            // Operations ahead of a gap: the same version, with more in it.
            versionEntries[versions.count - 1] = entry
            versions[versions.count - 1].operationCount += fresh.count
            versions[versions.count - 1].authors = Array(Set(last.authors).union(authors)).sorted()
            if let time { versions[versions.count - 1].time = max(last.time ?? time, time) }
            return
        }
        versions.append(Version(number: versions.count + 1, vector: after, time: time,
                                authors: authors.sorted(), operationCount: fresh.count))
        versionEntries.append(entry)
        versionTotals.append(after.totalCount)
    }

    /// The version with this number (1-based), nil when there is none.
    public func version(_ number: Int) -> Version? {
        number >= 1 && number <= versions.count ? versions[number - 1] : nil
    }

    /// The board as it was at `version`: a fresh replica (id 0, never to be edited) holding
    /// exactly the history's operations that `version` covers. It starts from whichever costs
    /// the fewest operations to apply: one of the views made last that `version` dominates
    /// (`ViewCache` keeps a few, spread over the versions they show, so scrubbing back starts
    /// from a nearby earlier view), or the newest checkpoint that holds nothing beyond `version`
    /// (materialized once and kept), else nothing. Image bytes are not loaded (`snapshot(at:)`
    /// loads them). Safe to call from several threads at once.
    public func replica(at version: VersionVector) -> Replica {
        let checkpoint = checkpoints.lastIndex(where: { version.dominates($0.highest) })
        // Entries before `start` hold only operations the checkpoint covers.
        let start = checkpoint.map { checkpoints[$0].position } ?? 0
        var views = cache.views
        if placesInOrder {
            // From a kept view: the operations `version` covers beyond it, wherever they are.
            var best: Int?
            var bestCost = count(from: start, coveredBy: version, beyond: nil)
                + (checkpoint.map { cache.hasCheckpoint($0) ? 0 : checkpoints[$0].state.count } ?? 0)
            for at in views.indices.reversed() where version.dominates(views[at].vector) {
                let cost = count(from: 0, coveredBy: version, beyond: views[at].vector)
                if cost < bestCost || (cost == bestCost && best == nil) { (best, bestCost) = (at, cost) }
                if cost == 0 { break }
            }
            if let best {
                let from = views[best].vector
                if bestCost == 0 { return views[best].replica }
                // Going on from the newest view (scrubbing forward, or a jump ahead): take it out
                // of the cache, so that applying copies nothing; on a small step, one far from
                // every other view stays, to start later views from (scrubbing back).
                let newest = best == views.count - 1
                let spaced = bestCost < ViewCache.viewSpacing && views.indices.allSatisfy { at in
                    at == best || Self.distance(views[at].vector, from) >= ViewCache.viewSpacing
                }
                var replica: Replica
                if newest && !spaced {
                    views = []
                    replica = cache.take(from) ?? self.replica(at: from)
                } else {
                    replica = views[best].replica
                    views = []
                }
                let wanted = operations(from: 0, coveredBy: version, beyond: from)
                // Operations read from checked records: applying them does not fail; if it did,
                // the view is not kept for the next one to build on.
                if (try? replica.apply(OperationBatch(operations: wanted), from: .ownLog)) != nil { cache.remember(version, replica) }
                return replica
            }
        } else if let last = views.last, version.dominates(last.vector),
                  checkpoint.map({ last.vector.dominates(checkpoints[$0].highest) }) ?? true {
            // The last view holds exactly the operations `last.vector` covers, among them every
            // one before `start`: add those `version` covers beyond it.
            var replica = last.replica
            let wanted = operations(from: start, coveredBy: version, beyond: last.vector)
            if wanted.isEmpty { return replica }
            if (try? replica.apply(OperationBatch(operations: wanted), from: .ownLog)) != nil { cache.remember(version, replica) }
            return replica
        }
        var replica = Replica(id: ReplicaID(0))
        if let index = checkpoint {
            if let kept = cache.checkpoint(index) {
                replica = kept
            } else if (try? replica.apply(OperationBatch(operations: checkpoints[index].state), from: .ownLog)) != nil {
                // A full state read from a checked record.
                cache.keep(replica, checkpoint: index)
            }
        }
        let wanted = operations(from: start, coveredBy: version, beyond: nil)
        if (try? replica.apply(OperationBatch(operations: wanted), from: .ownLog)) != nil { cache.remember(version, replica) }
        return replica
    }

    /// How many operations lie between two vectors' totals.
    static func distance(_ a: VersionVector, _ b: VersionVector) -> UInt64 {
        let (x, y) = (a.totalCount, b.totalCount)
        return x > y ? x - y : y - x
    }

    /// Binary search: the first index of `list` whose place is `above`, in a list where `above`
    /// turns true once and stays true.
    private func first(_ list: [Place], where above: (Place) -> Bool) -> Int {
        var low = 0, high = list.count
        while low < high {
            let middle = (low + high) / 2
            if above(list[middle]) { high = middle } else { low = middle + 1 }
        }
        return low
    }

    /// Per author, the run of its places at entries from `start` on with sequence numbers in
    /// (`lower`, `upper`]: entry positions and sequence numbers both rise along its places, so
    /// the run is contiguous (only while `placesInOrder`).
    func runs(from start: Int, above lower: VersionVector?, upTo upper: VersionVector) -> [(list: [Place], range: Range<Int>)] {
        var found: [(list: [Place], range: Range<Int>)] = []
        for (author, high) in upper.entries {
            guard let list = places[author] else { continue }
            let low = lower?[author] ?? 0
            guard high > low else { continue }
            let from = start == 0 ? first(list) { $0.seq > low } : first(list) { Int($0.entry) >= start && $0.seq > low }
            let to = first(list) { $0.seq > high }
            if from < to { found.append((list, from..<to)) }
        }
        return found
    }

    /// How many operations `operations(from:coveredBy:beyond:)` gives (only while `placesInOrder`).
    private func count(from start: Int, coveredBy version: VersionVector, beyond: VersionVector?) -> Int {
        runs(from: start, above: beyond, upTo: version).reduce(0) { $0 + $1.range.count }
    }

    /// The operations of `entries[start...]` that `version` covers and `beyond` (when given) does
    /// not, in history order.
    func operations(from start: Int, coveredBy version: VersionVector, beyond: VersionVector?) -> [Op] {
        guard placesInOrder else {
            var wanted: [Op] = []
            for entry in entries[start...] {
                for op in entry.operations where version.covers(op.id) && !(beyond?.covers(op.id) ?? false) { wanted.append(op) }
            }
            return wanted
        }
        var found: [Place] = []
        for (list, range) in runs(from: start, above: beyond, upTo: version) { found += list[range] }
        found.sort { $0.entry != $1.entry ? $0.entry < $1.entry : $0.index < $1.index }
        return found.map { entries[Int($0.entry)].operations[Int($0.index)] }
    }

    /// What changed from `old` to `new`, item by item.
    public func diff(from old: VersionVector, to new: VersionVector) -> BoardChanges {
        BoardChanges(from: snapshot(at: old), to: snapshot(at: new))
    }

    /// The versions grouped into editing sessions: a version more than `quietGap` milliseconds
    /// after the one before it starts a new session (versions without a time stay in the
    /// session they follow).
    public func sessions(quietGap: Int64 = BoardHistory.defaultSessionGap) -> [Session] {
        var sessions: [Session] = []
        var lastTime: Int64?
        for version in versions {
            var startsNew = sessions.isEmpty
            if let time = version.time, let lastTime, time - lastTime > quietGap { startsNew = true }
            if startsNew {
                sessions.append(Session(first: version.number, last: version.number, start: version.time, end: version.time,
                                        authors: version.authors, operationCount: version.operationCount))
            } else {
                var current = sessions[sessions.count - 1]
                current.last = version.number
                if let time = version.time { current.start = current.start ?? time; current.end = time }
                current.authors = Array(Set(current.authors).union(version.authors)).sorted()
                current.operationCount += version.operationCount
                sessions[sessions.count - 1] = current
            }
            if let time = version.time { lastTime = time }
        }
        return sessions
    }
}
