import BoardCRDT
import BoardModel
@testable import BoardStore
import Foundation
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
}
