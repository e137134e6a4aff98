import BoardClient
import BoardClientTesting
import BoardCRDT
import BoardModel
import Foundation
import Testing

/// Three live boards (two in memory, one package on disk) edit one board on a `MemoryServer`
/// through a `FaultTransport` with latency, jitter, link drops, a kill and a partition in the
/// middle; after the partition heals they converge, to the server's board too, with every
/// edit kept. Seeded: re-run one seed with
///     BOARDSYNC_SEED=<seed> swift test --filter BoardClientTestingTests
@Suite(.serialized) struct FaultConvergenceTests {
    static var seeds: [UInt64] {
        if let pinned = ProcessInfo.processInfo.environment["BOARDSYNC_SEED"].flatMap({ UInt64($0) }) { return [pinned] }
        return [1, 2, 3]
    }

    @Test(arguments: seeds) func threeBoardsConvergeThroughFaults(seed: UInt64) async throws {
        let rerun = "seed \(seed) (re-run: BOARDSYNC_SEED=\(seed) swift test --filter BoardClientTestingTests)"
        print("FaultConvergenceTests: \(rerun)")
        var random = SplitMix64(seed: seed)
        let dir = TempDirectory()
        let server = MemoryServer()
        let faults = FaultTransport(wrapping: MemoryTransport(server: server), seed: seed,
                                    faults: .init(latency: 0.002, jitter: 0.004, dropProbability: 0.02))
        var sync = LiveBoard.Sync(server: "memory", board: "faults-\(seed)")
        sync.firstDelay = 0.02  // redial quickly: the drops come often
        sync.maximumDelay = 0.25
        let storages: [LiveBoard.Storage] = [.memory, .memory, .package(path: dir.path + "/carol.boardpkg")]
        var editors: [Editor] = []
        for (index, storage) in storages.enumerated() {
            let identity = LiveBoard.Identity(replicaID: ReplicaID(random.next() | 1), name: "editor \(index)")
            let board = try LiveBoard.open(storage: storage, sync: sync, identity: identity, transport: faults)
            editors.append(Editor(board: board, random: SplitMix64(seed: random.next()), color: UInt8(60 * index + 40)))
        }
        let boards = editors.map(\.board)
        let runs = boards.map(Running.init)

        func round(_ count: Int) async throws {
            for _ in 0..<count {
                for index in editors.indices { try await editors[index].step() }
                try await Task.sleep(nanoseconds: 3_000_000)
            }
        }

        // Edits while latency, jitter and drops happen; then every connection killed at once.
        try await round(8)
        faults.killConnections()
        try await round(6)

        // A partition while every board is live: their connections are cut, redials refused.
        try await eventually("every board to be live before the partition (\(rerun))", within: 300) {
            boards.allSatisfy { $0.currentStatus.state == .live }
        }
        // (A link can drop between that look and the partition: at least one is cut.)
        #expect(faults.partition() >= 1, "\(rerun)")
        try await eventually("every board to be offline (\(rerun))", within: 120) {
            boards.allSatisfy { $0.currentStatus.state != .live } && faults.counters.connectionsRefused > 0
        }
        try await round(6)  // offline edits
        #expect(faults.openConnections == 0, "\(rerun)")

        faults.heal()
        try await round(6)  // drops still happen
        faults.faults.dropProbability = 0

        // Nothing lost: only an item's author deletes it (or undoes its creation), so the items
        // each author holds of its own, after its last edit, are what the board must hold.
        var expected: Set<UUID> = []
        for editor in editors { expected.formUnion(editor.ownAlive) }

        func diagnosis() -> String {
            let lines = boards.map { board in
                let snapshot = board.snapshot
                return "  \(board.replicaID): \(board.currentStatus), \(snapshot.strokes.count) strokes, \(snapshot.stickers.count) stickers (\(snapshot.pendingStickerIDs.count) pending)"
            }
            return (lines + ["  \(faults.counters), \(faults.openConnections) open"]).joined(separator: "\n")
        }
        func converged() -> Bool {
            boards.allSatisfy { $0.currentStatus.unacknowledgedOperations == 0 && $0.snapshot.pendingStickerIDs.isEmpty }
                && boards.allSatisfy { $0.snapshot == boards[0].snapshot }
        }
        /// The board with every sticker's image bytes left out (a pending sticker's are empty).
        func withoutImages(_ board: LiveBoard) -> BoardSnapshot {
            var snapshot = board.snapshot
            for index in snapshot.stickers.indices { snapshot.stickers[index].imagePNG = Data() }
            return snapshot
        }
        // Every operation everywhere first (images may lag behind: see below).
        do {
            try await eventually("every operation to reach every board (\(rerun))", within: 300) {
                boards.allSatisfy { $0.currentStatus.unacknowledgedOperations == 0 && withoutImages($0) == withoutImages(boards[0]) }
            }
        } catch {
            Issue.record("operations not converged, \(rerun):\n\(diagnosis())")
            throw error
        }
        if try await !holds(within: 20, converged) {
            // A replica told NO_ASSET (the server did not have the image yet: its uploader's link
            // had dropped) asks again after 2 s, doubling per image to 60 s (docs/PROTOCOL.md,
            // "Assets"): after a long partition an image's next ask may be later than this wait.
            withKnownIssue("an image's next ask after NO_ASSET is more than 20 s away", isIntermittent: true) {
                Issue.record("images still pending 20 s after the faults stopped, \(rerun):\n\(diagnosis())")
            }
            faults.killConnections()  // every new link asks for what is missing
        }
        do {
            try await eventually("the three boards to converge (\(rerun))", within: 300, converged)
        } catch {
            Issue.record("not converged, \(rerun):\n\(diagnosis())")
            throw error
        }
        let converged = boards[0].snapshot
        #expect(Set(converged.strokes.map(\.id) + converged.stickers.map(\.id)) == expected, "\(rerun)")
        #expect(!expected.isEmpty)
        for board in boards { #expect(try board.snapshot.canonicalJSON() == converged.canonicalJSON(), "\(rerun)") }

        // The server's board: what a fresh replica gets from it, past the faults.
        let observer = try LiveBoard.open(storage: .memory, sync: sync, transport: MemoryTransport(server: server))
        let observing = Running(observer)
        try await eventually("a fresh replica to receive the server's board (\(rerun))", within: 300) {
            observer.currentStatus.state == .live && observer.snapshot == converged
        }

        for board in boards {
            let report = await board.close(within: 30)
            #expect(report.allAcknowledged, "\(rerun): \(report)")
        }
        _ = await observer.close()
        for run in runs + [observing] {
            if case .threw(let error) = try await run.ended(within: 120) { Issue.record("run() threw \(error) (\(rerun))") }
        }
        let counters = faults.counters
        print("FaultConvergenceTests seed \(seed): \(counters); \(expected.count) items")
        #expect(counters.connectionsKilled > 0 && counters.connectionsRefused > 0 && counters.connectionsMade > 3, "\(rerun)")
    }
}

/// One board's seeded edits: strokes, stickers, moves (of anyone's stickers), deletes (of its
/// own items only) and undo.
struct Editor {
    let board: LiveBoard
    var random: SplitMix64
    let color: UInt8
    var mine: [ItemID] = []

    /// Items this replica created that it holds now (an author's view of its own items is final:
    /// nobody else deletes or undoes them).
    var ownAlive: Set<UUID> {
        let snapshot = board.snapshot
        let alive = Set(snapshot.strokes.map(\.id) + snapshot.stickers.map(\.id))
        return Set(mine.map(\.uuid)).intersection(alive)
    }

    mutating func step() async throws {
        let point = CodablePoint(x: Double(random.next() % 1500), y: Double(random.next() % 1100))
        switch random.next() % 10 {
        case 0..<3:
            let points = (0..<6).map { CodablePoint(x: point.x + Double($0) * 4, y: point.y) }
            let stroke = try await board.edit { try $0.beginStroke(color: .black, width: 2, points: points) }.item!
            try await board.edit { $0.finishStroke(); return LocalEdit() }
            mine.append(stroke)
        case 3..<5:
            let png = Data(PNGEncoder.solid(width: 4, height: 4, red: color, green: UInt8(random.next() % 4 * 60), blue: 90))
            mine.append(try await board.edit { try $0.addSticker(imagePNG: png, at: point) }.item!)
        case 5..<7:
            let stickers = board.snapshot.stickers
            guard !stickers.isEmpty else { return }
            let sticker = ItemID(uuid: stickers[Int(random.next() % UInt64(stickers.count))].id)
            try await board.edit { try $0.move(sticker, to: point) }
        case 7:
            let alive = mine.filter { ownAlive.contains($0.uuid) }
            guard !alive.isEmpty else { return }
            let item = alive[Int(random.next() % UInt64(alive.count))]
            try await board.edit { try $0.delete(item) }
        default:
            _ = try await board.undo()
        }
    }
}
