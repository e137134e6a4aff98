import BoardCRDT
import BoardModel
@testable import BoardStore
import Dispatch
import Foundation
import Synchronization
import Testing

/// What item timelines cost the reader of a history (the web view's history queue, the CLI),
/// against what the history holds: bounds a peer's operations must not break.
@Suite struct HistoryTimelineCostTests {
    /// Points the timelines hold: each stroke's kept points, and the points of every step
    /// that holds its own.
    static func pointsHeld(_ timelines: ItemTimelines) -> Int {
        var held = timelines.points.reduce(0) { $0 + $1.count }
        for steps in timelines.steps {
            for step in steps {
                if case .stroke(let stroke)? = step.look { held += stroke.points.count }
            }
        }
        return held
    }

    /// A peer draws one stroke of 1 + `appends` points, then sends its appends one per
    /// message, last first (each waits ahead of a gap until the first append arrives): every
    /// record is an entry, and each entry's look of the stroke is no prefix of the final one.
    /// The timelines must hold the stroke's points a bounded number of times, not once per
    /// entry (the history on disk holds each point once; `docs/PROTOCOL.md` bounds a parsed
    /// history at about 8x its bytes on disk).
    @Test func aStrokeWhoseAppendsArriveLastFirstIsHeldOnceNotOncePerEntry() throws {
        let appends = 300
        let fs = MemoryFileSystem()
        try fs.createDirectories("/t")
        let package = try BoardPackage.create(at: "/t/board.boardpkg", fileSystem: fs, replicaID: ReplicaID(0xA))
        defer { package.close() }
        var peer = Replica(id: ReplicaID(0xB))
        let begin = try peer.beginStroke(color: RGBAColor(red: 1, green: 0, blue: 0), width: 2, points: [pt(0, 0)]).operations
        let stroke = begin[0].payload.item!
        var operations: [Op] = []
        for index in 0..<appends {
            operations += try peer.appendPoints([pt(Double(index + 1), 1)], to: stroke).operations
        }
        var received = try package.merging(OperationBatch(operations: begin), deferringSync: false)
        for op in operations.reversed() {
            received += try package.merging(OperationBatch(operations: [op]), deferringSync: false)
        }
        #expect(received.count == appends + 1)
        let history = try package.history()
        #expect(history.entries.count == appends + 1)
        // The latest version is right (and builds the timelines).
        #expect(try history.snapshot(at: history.latest).canonicalJSON() == HistoryTimelineTests.oracle(received, at: history.latest))
        let held = Self.pointsHeld(history.cache.timelines(of: history))
        #expect(held <= 4 * (appends + 1), "the timelines hold \(held) points for a stroke of \(appends + 1)")
    }

    /// A damaged or hand-written log: a stroke drawn by one author over many records, then a
    /// creation of the same id by another author with an earlier timestamp, which takes the
    /// item over. Every step before it showed the first creation's points, which are no
    /// prefix of the final ones, so each keeps its own: in all far more than the bound, and the
    /// history is then viewed from replicas (still exactly the oracle), its timelines holding
    /// no more than the bound. Below the bound (a short stroke) the timelines are used.
    @Test(arguments: [(20, true), (1_600, false)])
    func creationsReplacingEachOtherUnderALongStrokeStayWithinTheBound(appends: Int, usable: Bool) throws {
        let item = ItemID(high: 0x77, low: 1)
        let a = ReplicaID(0xB), b = ReplicaID(0xC)
        let start = StrokeStart(color: Color8(red: 255, green: 0, blue: 0, alpha: 255), width: 32, z: ZKey.initial, points: [GridPoint(x: 0, y: 0)])
        var batches = [OperationBatch(operations: [Op(id: OpID(replica: a, seq: 1), lamport: 10, payload: .beginStroke(item, start))])]
        for index in 0..<appends {
            let points = (0..<2).map { GridPoint(x: Int64(index * 2 + $0), y: 1) }
            batches.append(OperationBatch(operations: [Op(id: OpID(replica: a, seq: UInt64(index + 2)), lamport: UInt64(index + 11), payload: .appendPoints(item, points))]))
        }
        var earlier = start
        earlier.points = [GridPoint(x: 9, y: 9)]
        batches.append(OperationBatch(operations: [Op(id: OpID(replica: b, seq: 1), lamport: 1, payload: .beginStroke(item, earlier))]))
        let fs = MemoryFileSystem()
        let history = try HistoryTimelineHostileTests.package(batches, fs: fs)
        let operations = HistoryTimelineHostileTests.historyOperations(batches)
        let timelines = history.cache.timelines(of: history)
        #expect(timelines.usable == usable)
        #expect(Self.pointsHeld(timelines) <= ItemTimelines.maxOwnPoints + 4 * (2 * appends + 1))
        for at in [0, history.versions.count / 3, history.versions.count - 2, history.versions.count - 1] {
            let vector = history.versions[at].vector
            #expect(try history.snapshot(at: vector).canonicalJSON() == HistoryTimelineHostileTests.oracle(operations, at: vector), "version \(at + 1)")
        }
    }

    /// The web view reads and views histories on one queue so that "history work never takes
    /// more than one core" (docs/DEPLOYMENT.md, docs/PROTOCOL.md; `WebView+History.swift`):
    /// `snapshot(at:)` must do its work on the thread that calls it. Every image read is
    /// recorded with the thread that made it (the first waits a little for a read on another
    /// thread, which a parallel read would make at once).
    @Test func aViewReadsItsImagesOnTheCallersThreadOnly() throws {
        let fs = ThreadRecordingFileSystem()
        try fs.base.createDirectories("/t")
        let path = "/t/board.boardpkg"
        let package = try BoardPackage.create(at: path, fileSystem: fs.base, replicaID: ReplicaID(0xA))
        for index in 0..<8 {
            let image = Data(PNGEncoder.solid(width: 3 + index, height: 3, red: UInt8(30 * index), green: 0, blue: 0))
            _ = try package.commit { try $0.addSticker(imagePNG: image, at: pt(Double(index * 10), 5)) }
        }
        try package.save()
        package.close()
        let history = try BoardHistory.read(package: path, fileSystem: fs)
        fs.start(caller: pthread_self())
        let board = history.snapshot(at: history.latest)
        #expect(board.stickers.count == 8 && board.stickers.allSatisfy { !$0.imagePNG.isEmpty })
        let (reads, elsewhere) = fs.imageReads
        #expect(reads >= 8)
        #expect(elsewhere == 0, "\(elsewhere) of \(reads) image reads ran on other threads than the caller's")
    }
}

/// A memory file system that records which threads read the package's images.
final class ThreadRecordingFileSystem: FileSystem {
    let base = MemoryFileSystem()
    private struct State: @unchecked Sendable {  // pthread_t is a plain integer on Linux
        var caller: pthread_t?
        var reads = 0
        var elsewhere = 0
        var waited = false
    }
    private let state = Mutex(State())
    private let another = DispatchSemaphore(value: 0)

    func start(caller: pthread_t) { state.withLock { $0 = State(caller: caller) } }
    var imageReads: (Int, Int) { state.withLock { ($0.reads, $0.elsewhere) } }

    func readFile(_ path: String) throws -> [UInt8] {
        if path.contains("/" + PackageLayout.assets + "/") {
            let (onCaller, wait) = state.withLock { s -> (Bool, Bool) in
                guard let caller = s.caller else { return (true, false) }
                s.reads += 1
                let onCaller = pthread_equal(caller, pthread_self()) != 0
                if !onCaller { s.elsewhere += 1 }
                defer { s.waited = true }
                return (onCaller, !s.waited)
            }
            if !onCaller { another.signal() }
            if wait { _ = another.wait(timeout: .now() + 1) }
        }
        return try base.readFile(path)
    }

    func fileSize(_ path: String) throws -> Int? { try base.fileSize(path) }
    func isDirectory(_ path: String) -> Bool { base.isDirectory(path) }
    func isSymbolicLink(_ path: String) -> Bool { base.isSymbolicLink(path) }
    func listDirectory(_ path: String) throws -> [String] { try base.listDirectory(path) }
    func createDirectory(_ path: String) throws { try base.createDirectory(path) }
    func writeFile(_ path: String, _ bytes: [UInt8]) throws { try base.writeFile(path, bytes) }
    func appendFile(_ path: String, _ bytes: [UInt8]) throws { try base.appendFile(path, bytes) }
    func truncateFile(_ path: String, to size: Int) throws { try base.truncateFile(path, to: size) }
    func syncFile(_ path: String) throws { try base.syncFile(path) }
    func syncDirectory(_ path: String) throws { try base.syncDirectory(path) }
    func rename(_ from: String, _ to: String) throws { try base.rename(from, to) }
    func removeFile(_ path: String) throws { try base.removeFile(path) }
    func identity(of path: String) throws -> String? { try base.identity(of: path) }
    func lock(_ path: String) throws -> FileLock { try base.lock(path) }
}
