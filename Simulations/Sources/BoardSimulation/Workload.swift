import BoardCRDT
import BoardModel
import Foundation

/// The realistic board workload the performance figures are quoted on (docs/PERFORMANCE.md):
/// four users drawing and arranging one board live, each hearing the others' operations as they
/// are made.
///
/// Defaults: 5,000 strokes drawn as a begin with 8 points and appends of 8 points (~280k points on
/// a quarter-point grid), 500 stickers over 100 assets, ~42k drag moves, ~4k scale and rotate
/// edits, and some erases, deletes, restores and reorders: about 86k operations.
public struct Workload: Sendable {
    public var users = 4
    public var strokes = 5_000
    public var pointsPerStroke = 56
    public var stickers = 500
    public var assets = 100
    public var dragMoves = 42_000
    public var transforms = 4_000
    public var erases = 300
    public var deletes = 100
    public var reorders = 500

    public init() {}

    public struct Result: Sendable {
        /// Every operation, in the order made.
        public var operations: [Op]
        /// One of the users' replicas, holding everything.
        public var replica: Replica
        public var assets: [AssetHash: Data]
        public var pointCount: Int
    }

    /// Fake PNG bytes (signature + seeded noise), 2-12 KB each. The CRDT treats assets as opaque.
    public static func fakeAssets(count: Int, seed: UInt64) -> [Data] {
        var rng = SeededRandom(seed: seed)
        return (0..<count).map { _ in
            let size = Int.random(in: 2_000...12_000, using: &rng)
            var bytes: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
            bytes.reserveCapacity(size)
            while bytes.count < size { bytes.append(UInt8(truncatingIfNeeded: rng.next())) }
            return Data(bytes)
        }
    }

    public func generate(seed: UInt64 = 1) -> Result {
        var rng = SeededRandom(seed: seed)
        var replicas = (0..<users).map { _ in Replica(id: ReplicaID(rng.next())) }
        let images = Workload.fakeAssets(count: assets, seed: seed ^ 0xA55E7)
        var assetTable: [AssetHash: Data] = [:]
        for image in images { assetTable[AssetHash.of(image)] = image }
        var all: [Op] = []
        var points = 0
        var strokeIDs: [ItemID] = []
        var stickerIDs: [ItemID] = []

        // Interleave the kinds of work as four people would over a session.
        enum Task { case stroke, sticker, drag, transform, erase, delete, reorder }
        var tasks: [Task] = Array(repeating: .stroke, count: strokes) + Array(repeating: .sticker, count: stickers)
            + Array(repeating: .drag, count: dragMoves / 12) + Array(repeating: .transform, count: transforms)
            + Array(repeating: .erase, count: erases) + Array(repeating: .delete, count: deletes)
            + Array(repeating: .reorder, count: reorders)
        tasks.shuffle(using: &rng)
        // Stickers first so that drags have something to move from the start.
        tasks.removeAll { if case .sticker = $0 { return true }; return false }
        tasks.insert(contentsOf: Array(repeating: Task.sticker, count: stickers), at: 0)

        func broadcast(_ ops: [Op], from author: Int) {
            all.append(contentsOf: ops)
            for index in replicas.indices where index != author {
                try! replicas[index].apply(ops)
            }
        }
        func walk(_ from: inout CodablePoint) -> CodablePoint {
            from.x += Double(Int.random(in: -12...12, using: &rng)) / 4
            from.y += Double(Int.random(in: -12...12, using: &rng)) / 4
            return from
        }

        for task in tasks {
            let user = Int.random(in: 0..<users, using: &rng)
            var ops: [Op] = []
            switch task {
            case .stroke:
                var pen = CodablePoint(x: Double(Int.random(in: 0...6400, using: &rng)) / 4,
                                       y: Double(Int.random(in: 0...4800, using: &rng)) / 4)
                let first = (0..<8).map { _ in walk(&pen) }
                let edit = try! replicas[user].beginStroke(color: RGBAColor(red: 0.1, green: 0.2, blue: 0.8),
                                                           width: Double(Int.random(in: 4...24, using: &rng)) / 4, points: first)
                broadcast(edit.operations, from: user)
                strokeIDs.append(edit.item!)
                for _ in 0..<(pointsPerStroke / 8 - 1) {
                    broadcast(try! replicas[user].appendPoints((0..<8).map { _ in walk(&pen) }).operations, from: user)
                }
                replicas[user].finishStroke()
                points += pointsPerStroke
                continue
            case .sticker:
                let image = rng.pick(images)
                let edit = try! replicas[user].addSticker(imagePNG: image,
                    at: CodablePoint(x: Double(Int.random(in: 0...1600, using: &rng)), y: Double(Int.random(in: 0...1200, using: &rng))))
                stickerIDs.append(edit.item!)
                ops = edit.operations
            case .drag:
                let sticker = rng.pick(stickerIDs)
                var at = CodablePoint(x: Double(Int.random(in: 0...1600, using: &rng)), y: Double(Int.random(in: 0...1200, using: &rng)))
                replicas[user].beginUndoGroup()
                for _ in 0..<12 {
                    at.x += Double(Int.random(in: -16...16, using: &rng)) / 4
                    at.y += Double(Int.random(in: -16...16, using: &rng)) / 4
                    ops += try! replicas[user].move(sticker, to: at).operations
                }
                replicas[user].endUndoGroup()
            case .transform:
                let sticker = rng.pick(stickerIDs)
                ops = rng.chance(0.5)
                    ? try! replicas[user].setScale(sticker, to: Double(Int.random(in: 2...16, using: &rng)) / 8).operations
                    : try! replicas[user].setRotation(sticker, to: Double(Int.random(in: -314...314, using: &rng)) / 100).operations
            case .erase where !strokeIDs.isEmpty:
                ops = try! replicas[user].delete(rng.pick(strokeIDs)).operations
            case .delete:
                ops = try! replicas[user].delete(rng.pick(stickerIDs)).operations
            case .reorder:
                let item = rng.chance(0.5) ? rng.pick(stickerIDs) : (strokeIDs.isEmpty ? rng.pick(stickerIDs) : rng.pick(strokeIDs))
                ops = rng.chance(0.7) ? try! replicas[user].bringToFront(item).operations
                                      : try! replicas[user].sendToBack(item).operations
            default:
                continue
            }
            broadcast(ops, from: user)
        }
        return Result(operations: all, replica: replicas[0], assets: assetTable, pointCount: points)
    }
}
