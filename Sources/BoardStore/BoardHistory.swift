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
    var entries: [Entry] = []
    /// Each author's operations in entry order, so a view finds the operations between two
    /// vectors by binary search instead of scanning every later entry; only while every author's
    /// sequence numbers rise in entry order (`placesInOrder`), else views scan.
    var places: [ReplicaID: [Place]] = [:]
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
        let authors = Set(fresh.map(\.id.replica))
        if let last = versions.last, last.vector == after {
            // Operations ahead of a gap: the same version, with more in it.
            versions[versions.count - 1].operationCount += fresh.count
            versions[versions.count - 1].authors = Array(Set(last.authors).union(authors)).sorted()
            if let time { versions[versions.count - 1].time = max(last.time ?? time, time) }
            return
        }
        versions.append(Version(number: versions.count + 1, vector: after, time: time,
                                authors: authors.sorted(), operationCount: fresh.count))
    }

    /// The version with this number (1-based), nil when there is none.
    public func version(_ number: Int) -> Version? {
        number >= 1 && number <= versions.count ? versions[number - 1] : nil
    }

    /// The board as it was at `version`: a fresh replica (id 0, never to be edited) holding
    /// exactly the history's operations that `version` covers. It starts from the last view when
    /// `version` dominates it and no checkpoint lies between them (scrubbing forward applies only
    /// the operations between), else from the newest checkpoint that holds nothing beyond
    /// `version` (materialized once and kept, `ViewCache`), else from nothing. Image bytes are not
    /// loaded (`snapshot(at:)` loads them). Safe to call from several threads at once.
    public func replica(at version: VersionVector) -> Replica {
        let checkpoint = checkpoints.lastIndex(where: { version.dominates($0.highest) })
        // Entries before `start` hold only operations the checkpoint covers.
        let start = checkpoint.map { checkpoints[$0].position } ?? 0
        if let last = cache.last, version.dominates(last.vector),
           checkpoint.map({ last.vector.dominates(checkpoints[$0].highest) }) ?? true {
            // The last view holds exactly the operations `last.vector` covers, among them every
            // one before `start`: add those `version` covers beyond it.
            var replica = last.replica
            let wanted = operations(from: start, coveredBy: version, beyond: last.vector)
            if wanted.isEmpty { return replica }
            // Operations read from checked records: applying them does not fail; if it did, the
            // view is not kept for the next one to build on.
            if (try? replica.apply(OperationBatch(operations: wanted), from: .ownLog)) != nil { cache.last = (version, replica) }
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
        if (try? replica.apply(OperationBatch(operations: wanted), from: .ownLog)) != nil { cache.last = (version, replica) }
        return replica
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
        // Per author, entry positions and sequence numbers both rise along its places: the ones
        // wanted are one contiguous run, found by two binary searches.
        func first(_ list: [Place], where above: (Place) -> Bool) -> Int {
            var low = 0, high = list.count
            while low < high {
                let middle = (low + high) / 2
                if above(list[middle]) { high = middle } else { low = middle + 1 }
            }
            return low
        }
        var found: [Place] = []
        for (author, upper) in version.entries {
            guard let list = places[author] else { continue }
            let lower = beyond?[author] ?? 0
            let from = first(list) { Int($0.entry) >= start && $0.seq > lower }
            let to = first(list) { $0.seq > upper }
            if from < to { found += list[from..<to] }
        }
        found.sort { $0.entry != $1.entry ? $0.entry < $1.entry : $0.index < $1.index }
        return found.map { entries[Int($0.entry)].operations[Int($0.index)] }
    }

    /// The board at `version` as a snapshot, with the images the package holds.
    public func snapshot(at version: VersionVector) -> BoardSnapshot {
        var replica = replica(at: version)
        loadAssets(into: &replica)
        return replica.snapshot()
    }

    /// Image bytes the replica refers to, from the package's asset store.
    public func loadAssets(into replica: inout Replica) {
        for hash in replica.missingAssets {
            guard let bytes = try? fileSystem.readFile(Path.join(assetDirectory, hash.hex)), AssetHash.of(bytes) == hash else { continue }
            replica.assets.insert(Data(bytes))
        }
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

/// What views of one history reuse: the boards of the checkpoints used most recently (applying a
/// checkpoint's full state costs far more than copying a replica, which shares its storage until
/// it is changed) and the last view, which a later version goes forward from (scrubbing). Its
/// entries are boards computed from the history's records, which never change once `read`
/// returns (copies of a `BoardHistory` share one cache). Every access takes the lock; a view is
/// computed outside it, so two threads may compute the same board and the later one is kept.
final class ViewCache: Sendable {
    /// Materialized checkpoints kept (each holds a whole board, sharing storage with the views
    /// made from it until they change).
    static let capacity = 4
    private struct State {
        var checkpoints: [(index: Int, replica: Replica)] = []
        var last: (vector: VersionVector, replica: Replica)?
    }
    private let state = Mutex(State())

    var last: (vector: VersionVector, replica: Replica)? {
        get { state.withLock { $0.last } }
        set { state.withLock { $0.last = newValue } }
    }

    func checkpoint(_ index: Int) -> Replica? {
        state.withLock { state in
            guard let at = state.checkpoints.firstIndex(where: { $0.index == index }) else { return nil }
            let found = state.checkpoints.remove(at: at)
            state.checkpoints.append(found)
            return found.replica
        }
    }

    func keep(_ replica: Replica, checkpoint index: Int) {
        state.withLock { state in
            state.checkpoints.removeAll { $0.index == index }
            state.checkpoints.append((index, replica))
            if state.checkpoints.count > Self.capacity { state.checkpoints.removeFirst() }
        }
    }
}
