import BoardCRDT
import BoardModel
import Foundation
import Testing

let red = RGBAColor(red: 1, green: 0, blue: 0)
let blue = RGBAColor(red: 0, green: 0, blue: 1)
let imageA = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 1])
let imageB = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 2])

func pt(_ x: Double, _ y: Double) -> CodablePoint { CodablePoint(x: x, y: y) }

/// Replicas with fixed ids; `a` sorts below `b` below `c`, so ties break toward `c`.
func makeReplicas() -> (a: Replica, b: Replica, c: Replica) {
    (Replica(id: ReplicaID(0xA)), Replica(id: ReplicaID(0xB)), Replica(id: ReplicaID(0xC)))
}

/// Delivers everything each side lacks, both ways, through the binary codec.
func sync(_ x: inout Replica, _ y: inout Replica) throws {
    let toY = try OperationBatch(decoding: x.operations(since: y.versionVector).encoded())
    let toX = try OperationBatch(decoding: y.operations(since: x.versionVector).encoded())
    try y.apply(toY)
    try x.apply(toX)
    for hash in x.assets.hashes where !y.assets.contains(hash) { y.assets.insert(x.assets.data(for: hash)!) }
    for hash in y.assets.hashes where !x.assets.contains(hash) { x.assets.insert(y.assets.data(for: hash)!) }
}

func canonical(_ replica: Replica) throws -> String {
    String(decoding: try replica.snapshot().canonicalJSON(), as: UTF8.self)
}

func sticker(_ replica: Replica, _ id: ItemID) -> PlacedSticker? {
    replica.snapshot().stickers.first { $0.id == id.uuid }
}

func stroke(_ replica: Replica, _ id: ItemID) -> InkStroke? {
    replica.snapshot().strokes.first { $0.id == id.uuid }
}

/// Paint order as item ids, bottom to top.
func order(_ replica: Replica) -> [UUID] {
    replica.snapshot().paintOrder ?? []
}
