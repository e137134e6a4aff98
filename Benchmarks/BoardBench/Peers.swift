import BoardCRDT
import BoardModel
import BoardSimulation
import Foundation

/// `bin/bench --peers`: the workload as a neutral trace for Yrs and Loro (driven from Python,
/// Benchmarks/Peers/peers.py), and BoardSync's own figures for the same rows.
enum PeersBench {
    /// One JSON object per line, one per operation, in the order the workload made them:
    /// `{"op": "stroke"|"append"|"sticker"|"set"|"board", "item": ID, ...fields}` with points as
    /// `[x, y]` pairs in board points.
    static func writeTrace(_ operations: [Op], to path: String) throws {
        var lines: [String] = []
        lines.reserveCapacity(operations.count)
        func points(_ grid: [GridPoint]) -> [[Double]] { grid.map { [FixedPoint.points($0.x), FixedPoint.points($0.y)] } }
        func color(_ c: Color8) -> [Int] { [Int(c.red), Int(c.green), Int(c.blue), Int(c.alpha)] }
        for op in operations {
            var object: [String: Any] = ["user": op.id.replica.description]
            if let item = op.payload.item { object["item"] = item.description }
            switch op.payload {
            case .beginStroke(_, let start):
                object["op"] = "stroke"
                object["color"] = color(start.color)
                object["width"] = FixedPoint.points(start.width)
                object["z"] = start.z.description
                object["points"] = points(start.points)
            case .appendPoints(_, let added):
                object["op"] = "append"
                object["points"] = points(added)
            case .addSticker(_, let start):
                object["op"] = "sticker"
                object["asset"] = start.asset.hex
                object["x"] = FixedPoint.points(start.position.x)
                object["y"] = FixedPoint.points(start.position.y)
                object["scale"] = start.scale
                object["rotation"] = start.rotation
                object["z"] = start.z.description
            case .setItem(_, let field):
                object["op"] = "set"
                switch field {
                case .exists(let flag): object["key"] = "exists"; object["value"] = flag
                case .color(let c): object["key"] = "color"; object["value"] = color(c)
                case .width(let w): object["key"] = "width"; object["value"] = FixedPoint.points(w)
                case .asset(let hash): object["key"] = "asset"; object["value"] = hash.hex
                case .position(let p): object["key"] = "position"; object["value"] = [FixedPoint.points(p.x), FixedPoint.points(p.y)]
                case .scale(let s): object["key"] = "scale"; object["value"] = s
                case .rotation(let r): object["key"] = "rotation"; object["value"] = r
                case .z(let key): object["key"] = "z"; object["value"] = key.description
                }
            case .setBoard(let field):
                object["op"] = "board"
                switch field {
                case .background(let hash): object["key"] = "background"; object["value"] = hash?.hex ?? NSNull()
                case .canvas(let w, let h): object["key"] = "canvas"; object["value"] = [FixedPoint.points(w), FixedPoint.points(h)]
                }
            case .setLabel(let id, let label):
                object["op"] = "label"
                object["key"] = id.description
                object["value"] = label?.text ?? NSNull()
            }
            let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
            lines.append(String(decoding: data, as: UTF8.self))
        }
        try (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
    }

    /// BoardSync's figures for the comparison rows, as JSON on stdout.
    @MainActor static func figures(_ workload: Workload.Result) throws -> [String: Double] {
        let ops = workload.operations
        var out: [String: Double] = [:]
        out["operations"] = Double(ops.count)
        out["apply_s"] = try measure {
            var fresh = Replica(id: ReplicaID(0xBE7C))
            try fresh.apply(ops)
        }
        // Live updates: each operation as the one-op batch a live peer sends: linked (format 3,
        // what a peer announcing `linkedBatches` gets) and self-contained (format 2).
        var link = BatchLink()
        out["live_update_bytes"] = Double(ops.reduce(0) { $0 + OperationBatch(operations: [$1]).encoded(linkedTo: &link).count })
        out["live_update_bytes_self_contained"] = Double(ops.reduce(0) { $0 + OperationBatch(operations: [$1]).encoded().count })
        let full = workload.replica.fullState()
        let fullBytes = full.encoded()
        out["full_state_bytes"] = Double(fullBytes.count)
        out["encode_s"] = measure { _ = workload.replica.fullState().encoded() }
        out["import_s"] = try measure {
            var fresh = Replica(id: ReplicaID(0xBE7C))
            try fresh.apply(try OperationBatch(decoding: fullBytes))
            _ = fresh.snapshot()
        }
        var mover = workload.replica
        let sticker = mover.itemIDs.first { mover.kind(of: $0) == .sticker }!
        // The live frame's batch for one move of a sticker (what crosses the wire for it): on a
        // link that has carried the board's live edits, and self-contained.
        let move = OperationBatch(operations: try mover.move(sticker, to: CodablePoint(x: 1234.25, y: 987.5)).operations)
        out["one_move_bytes"] = Double(move.encoded(linkedTo: &link).count)
        out["one_move_bytes_self_contained"] = Double(move.encoded().count)
        return out
    }
}
