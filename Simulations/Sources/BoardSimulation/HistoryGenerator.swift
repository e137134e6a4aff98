import BoardCRDT
import BoardModel
import Foundation

/// A randomized editing history: several replicas edit one board concurrently, exchanging random
/// subsets of each other's operations as they go (so edits are concurrent, causally related and
/// out of order in every mix), with edits of every kind, undo and redo included.
///
/// Everything follows from `seed`: the same seed always gives the same history.
public struct History: Sendable {
    public let seed: UInt64
    /// The replicas as they ended the history (each holds only what was delivered to it).
    public var replicas: [Replica]
    /// Every operation made, in the order it was made.
    public var operations: [Op]
    /// Copies of replicas taken mid-history, to test catching up from an old version vector.
    public var checkpoints: [Replica]
    /// The asset bytes used, by hash.
    public var assets: [AssetHash: Data]
}

public struct HistoryGenerator: Sendable {
    public var replicaCount: ClosedRange<Int> = 2...6
    public var steps: ClosedRange<Int> = 20...150

    public init(replicaCount: ClosedRange<Int> = 2...6, steps: ClosedRange<Int> = 20...150) {
        self.replicaCount = replicaCount
        self.steps = steps
    }

    /// A small set of distinct fake images; the CRDT treats asset bytes as opaque.
    public static let assetPool: [Data] = (0..<5).map { index in
        Data([0x89, 0x50, 0x4E, 0x47, UInt8(index)] + Array(repeating: UInt8(index * 31 % 256), count: 16 + index))
    }

    public func generate(seed: UInt64) -> History {
        var rng = SeededRandom(seed: seed)
        let count = Int.random(in: replicaCount, using: &rng)
        var ids = Set<UInt64>()
        while ids.count < count { ids.insert(rng.next()) }
        var replicas = ids.sorted().map { Replica(id: ReplicaID($0)) }
        var operations: [Op] = []
        var checkpoints: [Replica] = []
        var assets: [AssetHash: Data] = [:]
        for data in HistoryGenerator.assetPool { assets[AssetHash.of(data)] = data }

        let stepCount = Int.random(in: steps, using: &rng)
        for _ in 0..<stepCount {
            let index = Int.random(in: 0..<replicas.count, using: &rng)
            if rng.chance(0.25) {
                // Deliver a random subset of everything made so far, in random order.
                let subset = operations.filter { _ in rng.chance(0.5) }.shuffled(using: &rng)
                try! replicas[index].apply(subset)
            } else {
                var editor = RandomEditor(rng: rng)
                let made = editor.edit(&replicas[index])
                rng = editor.rng
                operations.append(contentsOf: made)
            }
            if rng.chance(0.05) {
                checkpoints.append(replicas[Int.random(in: 0..<replicas.count, using: &rng)])
            }
        }
        for index in replicas.indices { replicas[index].finishStroke() }
        return History(seed: seed, replicas: replicas, operations: operations, checkpoints: checkpoints, assets: assets)
    }
}

/// Picks one random local edit that the replica's current state allows and makes it.
public struct RandomEditor: Sendable {
    public var rng: SeededRandom
    /// The images stickers and backgrounds are drawn from (the replica's store must hold them).
    public var images: [AssetHash]

    public init(rng: SeededRandom, images: [AssetHash] = HistoryGenerator.assetPool.map { AssetHash.of($0) }) {
        self.rng = rng
        self.images = images
    }

    /// The chance that an edit writes a label (named versions) instead; 0 draws nothing for it,
    /// so editors without labels make the edits they always made.
    public var labelChance = 0.0

    /// Makes one random edit (or a short group of them) and returns the operations made.
    public mutating func edit(_ replica: inout Replica) -> [Op] {
        let items = replica.itemIDs
        let strokes = items.filter { replica.kind(of: $0) == .stroke }
        let stickers = items.filter { replica.kind(of: $0) == .sticker }
        do {
            if labelChance > 0, rng.chance(labelChance) {
                let labels = replica.labels.map(\.id)
                let time = Int64(Int.random(in: 0...1_000_000, using: &rng))
                switch Int.random(in: 0..<4, using: &rng) {
                case 0 where !labels.isEmpty: return try replica.removeLabel(rng.pick(labels)).operations
                case 1 where !labels.isEmpty: return try replica.renameLabel(rng.pick(labels), to: "renamed \(time)", time: time).operations
                default:
                    guard replica.labelRegisterCount < Label.maxLabelsPerBoard else { return [] }
                    return try replica.setLabel(text: "version \(time)", version: replica.versionVector, time: time).operations
                }
            }
            if replica.openStroke != nil, rng.chance(0.6) {
                return rng.chance(0.75) ? try replica.appendPoints(points(Int.random(in: 1...4, using: &rng))).operations
                                        : finish(&replica)
            }
            switch Int.random(in: 0..<20, using: &rng) {
            case 0, 1:
                let color = RGBAColor(red: unit(), green: unit(), blue: unit(), alpha: unit())
                return try replica.beginStroke(color: color, width: Double(Int.random(in: 1...40, using: &rng)) / 4,
                                               points: points(Int.random(in: 0...3, using: &rng))).operations
            case 2, 3:
                let asset = rng.pick(images)
                return try replica.addSticker(asset: asset, at: point(), scale: Double(Int.random(in: 1...8, using: &rng)) / 4,
                                              rotation: Double(Int.random(in: -6...6, using: &rng)) / 2).operations
            case 4 where !strokes.isEmpty:
                return try replica.setColor(rng.pick(strokes), to: RGBAColor(red: unit(), green: unit(), blue: unit())).operations
            case 5 where !strokes.isEmpty:
                return try replica.setWidth(rng.pick(strokes), to: Double(Int.random(in: 0...80, using: &rng)) / 8).operations
            case 6 where !stickers.isEmpty:
                // A drag: several moves as one undo step.
                let sticker = rng.pick(stickers)
                replica.beginUndoGroup()
                defer { replica.endUndoGroup() }
                var made: [Op] = []
                for _ in 0..<Int.random(in: 1...4, using: &rng) {
                    made += try replica.move(sticker, to: point()).operations
                }
                return made
            case 7 where !stickers.isEmpty:
                return try replica.setScale(rng.pick(stickers), to: Double(Int.random(in: 1...16, using: &rng)) / 8).operations
            case 8 where !stickers.isEmpty:
                return try replica.setRotation(rng.pick(stickers), to: Double(Int.random(in: -8...8, using: &rng)) / 3).operations
            case 9 where !stickers.isEmpty:
                let asset = rng.pick(images)
                return try replica.replaceImage(rng.pick(stickers), with: asset).operations
            case 10 where !items.isEmpty:
                return try replica.delete(rng.pick(items)).operations
            case 11 where !items.isEmpty:
                return try replica.restore(rng.pick(items)).operations
            case 12 where !items.isEmpty:
                return try replica.bringToFront(rng.pick(items)).operations
            case 13 where !items.isEmpty:
                return try replica.sendToBack(rng.pick(items)).operations
            case 14 where items.count >= 3:
                let three = Array(items.shuffled(using: &rng).prefix(3))
                return try replica.put(three[0], between: three[1], and: three[2]).operations
            case 15:
                if rng.chance(0.2) { return try replica.setBackground(asset: nil).operations }
                return try replica.setBackground(asset: rng.pick(images)).operations
            case 16:
                let size = CodableSize(width: Double(Int.random(in: 100...4000, using: &rng)),
                                       height: Double(Int.random(in: 100...4000, using: &rng)) / 2)
                return try replica.setCanvasSize(size).operations
            case 17, 18:
                return try replica.undo().operations
            default:
                return try replica.redo().operations
            }
        } catch {
            fatalError("random edit failed on a state that allowed it: \(error)")
        }
    }

    private mutating func finish(_ replica: inout Replica) -> [Op] {
        replica.finishStroke()
        return []
    }

    private mutating func unit() -> Double {
        Double(Int.random(in: 0...255, using: &rng)) / 255
    }

    /// Points on a quarter-point grid, like a real pointer path.
    private mutating func point() -> CodablePoint {
        CodablePoint(x: Double(Int.random(in: -400...8000, using: &rng)) / 4,
                     y: Double(Int.random(in: -400...6000, using: &rng)) / 4)
    }

    private mutating func points(_ count: Int) -> [CodablePoint] {
        (0..<count).map { _ in point() }
    }
}
