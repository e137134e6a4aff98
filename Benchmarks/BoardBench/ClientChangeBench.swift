import BoardClient
import BoardCRDT
import BoardModel
import BoardSimulation
import Foundation

/// Typed changes per remote operation on the workload board (`BENCH_ONLY=client`): what
/// `ChangeTracker.update` costs per applied remote operation, by kind, and what a LiveBoard's
/// whole path from a remote merge to its published update costs, with the snapshots made.
enum ClientChangeBench {
    static func microseconds(_ duration: Duration) -> Double {
        let parts = duration.components
        return Double(parts.seconds) * 1e6 + Double(parts.attoseconds) / 1e12
    }

    /// Median of `samples` (µs).
    static func median(_ samples: [Double]) -> Double { ClientBench.percentile(samples, 0.5) }

    static func measure(_ workload: Workload.Result) throws -> [(String, String, Double)] {
        var figures: [(String, String, Double)] = []
        let board = workload.replica
        // A remote author holding the same board under another id.
        var author = Replica(id: ReplicaID(0xA070))
        try author.apply(board.fullState())
        for (_, data) in workload.assets { author.assets.insert(data) }
        var holder = board
        var tracker = ChangeTracker(holder, snapshot: holder.snapshot())
        let stickers = board.itemIDs.filter { board.kind(of: $0) == .sticker && board.isVisible($0) }
        let strokes = board.itemIDs.filter { board.kind(of: $0) == .stroke && board.isVisible($0) }
        let clock = ContinuousClock()

        /// One remote edit made by `author`, applied to `holder`, then the tracker's update timed.
        func timed(_ count: Int, _ edit: (Int, inout Replica) throws -> LocalEdit) throws -> (perOp: [Double], ops: Int) {
            var samples: [Double] = []
            var ops = 0
            for index in 0..<count {
                let made = try edit(index, &author)
                let before = holder.versionVector
                try holder.apply(OperationBatch(operations: made.operations))
                ops += made.operations.count
                var changes = BoardChanges()
                let took = clock.measure { changes = tracker.update(to: holder, since: before) }
                precondition(!changes.isEmpty)
                samples.append(microseconds(took) / Double(made.operations.count))
            }
            return (samples, ops)
        }
        let moves = try timed(2_000) { index, replica in
            try replica.move(stickers[index % stickers.count], to: CodablePoint(x: Double(index % 500) + 0.5, y: 7))
        }
        figures.append(("typed_change_remote_move_p50", "µs/op", median(moves.perOp)))
        figures.append(("typed_change_remote_move_p99", "µs/op", ClientBench.percentile(moves.perOp, 0.99)))
        let added = try timed(1_000) { index, replica in
            try replica.beginStroke(color: .black, width: 2, points: [CodablePoint(x: Double(index % 900), y: 3), CodablePoint(x: 5, y: 9)])
        }
        figures.append(("typed_change_remote_new_stroke_p50", "µs/op", median(added.perOp)))
        figures.append(("typed_change_remote_new_stroke_p99", "µs/op", ClientBench.percentile(added.perOp, 0.99)))
        let removed = try timed(1_000) { index, replica in try replica.delete(strokes[index]) }
        figures.append(("typed_change_remote_delete_p50", "µs/op", median(removed.perOp)))
        figures.append(("typed_change_remote_delete_p99", "µs/op", ClientBench.percentile(removed.perOp, 0.99)))
        // A frame of 100 operations (moves of 100 stickers, or of one item 100 times) in one update.
        var batches: [Double] = []
        for round in 0..<50 {
            var operations: [Op] = []
            for index in 0..<100 {
                operations += try author.move(stickers[index % stickers.count], to: CodablePoint(x: Double(round) + 0.25, y: Double(index))).operations
            }
            let before = holder.versionVector
            try holder.apply(OperationBatch(operations: operations))
            let took = clock.measure { _ = tracker.update(to: holder, since: before) }
            batches.append(microseconds(took) / Double(operations.count))
        }
        figures.append(("typed_change_remote_batch_of_100_moves_p50", "µs/op", median(batches)))
        // What the tracker replaced: a snapshot of the board per update.
        var snapshots: [Double] = []
        for _ in 0..<5 { snapshots.append(microseconds(clock.measure { _ = holder.snapshot() })) }
        figures.append(("workload_snapshot_for_comparison", "µs", median(snapshots)))
        return figures
    }

    /// The whole path in a LiveBoard: a remote operation merged into its store (memory: no
    /// fsync), its typed changes, the update published to a subscriber that reads only the
    /// changes; and how many snapshots were made meanwhile.
    static func liveBoardPath(_ workload: Workload.Result) async throws -> [(String, String, Double)] {
        let holder = try LiveBoard.open(storage: .memory, identity: LiveBoard.Identity(replicaID: ReplicaID(0x401D)))
        try await holder.mergeForBenchmark(workload.replica.fullState(), images: Array(workload.assets.values))
        var author = Replica(id: ReplicaID(0xA071))
        try author.apply(workload.replica.fullState())
        for (_, data) in workload.assets { author.assets.insert(data) }
        let stickers = author.itemIDs.filter { author.kind(of: $0) == .sticker && author.isVisible($0) }
        let madeBefore = LiveBoard.snapshotsMadeForBenchmark
        let clock = ContinuousClock()
        var samples: [Double] = []
        let rounds = 2_000
        for index in 0..<rounds {
            let edit = try author.move(stickers[index % stickers.count], to: CodablePoint(x: Double(index % 700) + 0.5, y: 11))
            let batch = OperationBatch(operations: edit.operations)
            let start = clock.now
            try await holder.mergeForBenchmark(batch)
            samples.append(microseconds(clock.now - start))
        }
        // The chain-bounding snapshots (one per `snapshotEvery` updates nobody read) are made
        // on a utility thread: let them finish before counting.
        try await Task.sleep(nanoseconds: 2_000_000_000)
        let made = LiveBoard.snapshotsMadeForBenchmark - madeBefore
        _ = await holder.close()
        return [
            ("client_remote_op_to_update_workload_p50", "µs/op", median(samples)),
            ("client_remote_op_to_update_workload_p99", "µs/op", ClientBench.percentile(samples, 0.99)),
            ("client_snapshots_made_per_remote_update", "snapshots/update", Double(made) / Double(rounds)),
        ]
    }
}
