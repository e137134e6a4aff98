import BoardCRDT
import BoardModel
import Foundation

// Importing a package written without sync data (a seed app's package).
extension BoardPackage {
    /// The import never harms the seed: the manifest is checked and the whole import is built in
    /// memory first (anything invalid is refused with the field named, nothing written), and the
    /// sync data is written under `.sync-import` and renamed to `sync/` only once complete, so a
    /// failure at any point leaves the package as the seed app left it.
    static func importSeedPackage(at path: String, fileSystem: any FileSystem,
                                  newReplicaID: () -> ReplicaID) throws -> BoardPackage {
        let board = try PackageReader(fileSystem: fileSystem).read(path)
        try checkImportable(board, manifest: Path.join(path, PackageLayout.manifest))
        let replicaID = newReplicaID()
        var replica = Replica(id: replicaID)
        let edit: LocalEdit
        do {
            edit = try replica.edits(toMatch: board)
        } catch {
            throw StoreError.damagedFile(path: Path.join(path, PackageLayout.manifest), "cannot be imported: \(error)", cause: error)
        }
        let staging = Path.join(path, ".sync-import")
        let stagedAssets = Path.join(staging, "assets")
        try fileSystem.createDirectory(staging)
        try fileSystem.createDirectory(stagedAssets)
        var files: [String] = []
        for hash in Set(replica.referencedAssets) {
            guard let data = replica.assets.data(for: hash) else { continue }
            let file = Path.join(stagedAssets, hash.hex)
            try fileSystem.writeFile(file, Array(data))
            files.append(file)
        }
        let identity = Path.join(staging, Path.name(of: PackageLayout.identity))
        try fileSystem.writeFile(identity, try Identity(replicaID: replicaID, directory: fileSystem.identity(of: path)).encoded())
        let log = Path.join(staging, Path.name(of: PackageLayout.opLog))
        try fileSystem.writeFile(log, OpLog.magic + OpLog.frame(OperationBatch(operations: edit.operations).encoded()))
        try fileSystem.syncFiles(files + [identity, log])
        try fileSystem.syncDirectory(stagedAssets)
        try fileSystem.syncDirectory(staging)
        try fileSystem.rename(staging, Path.join(path, PackageLayout.sync))
        try fileSystem.syncDirectory(path)
        let package = try open(at: path, fileSystem: fileSystem, newReplicaID: newReplicaID)
        package.notices.append("imported a package without sync data: \(board.strokes.count) strokes, \(board.stickers.count) stickers")
        return package
    }

    /// Refuses values no board can hold instead of silently clamping them: the seed app's data
    /// would change without anyone noticing.
    static func checkImportable(_ board: BoardSnapshot, manifest: String) throws {
        let limit = FixedPoint.points(FixedPoint.limit)
        func refuse(_ why: String) -> StoreError {
            StoreError.damagedFile(path: manifest, "cannot be imported: \(why) (nothing was changed)")
        }
        func coordinate(_ value: Double, _ what: String) throws {
            guard value.isFinite, abs(value) <= limit else { throw refuse("\(what) is \(value), outside ±\(limit) points") }
        }
        for (value, name) in [(board.canvasSize.width, "canvas width"), (board.canvasSize.height, "canvas height")] {
            guard value.isFinite, value > 0, value <= limit else { throw refuse("\(name) is \(value); it must be positive and at most \(limit) points") }
        }
        for stroke in board.strokes {
            guard stroke.width.isFinite, stroke.width >= 0, stroke.width <= limit else {
                throw refuse("stroke \(stroke.id.uuidString) has width \(stroke.width)")
            }
            guard stroke.points.count <= Op.maxPoints else { throw refuse("stroke \(stroke.id.uuidString) has \(stroke.points.count) points") }
            for (index, point) in stroke.points.enumerated() {
                try coordinate(point.x, "stroke \(stroke.id.uuidString) point \(index) x")
                try coordinate(point.y, "stroke \(stroke.id.uuidString) point \(index) y")
            }
            for channel in [stroke.color.red, stroke.color.green, stroke.color.blue, stroke.color.alpha] where !channel.isFinite {
                throw refuse("stroke \(stroke.id.uuidString) has a colour that is not a number")
            }
        }
        for sticker in board.stickers {
            try coordinate(sticker.position.x, "sticker \(sticker.id.uuidString) x")
            try coordinate(sticker.position.y, "sticker \(sticker.id.uuidString) y")
            guard sticker.scale.isFinite, sticker.rotationRadians.isFinite else {
                throw refuse("sticker \(sticker.id.uuidString) has a scale or rotation that is not a finite number")
            }
        }
        let ids = board.strokes.map(\.id) + board.stickers.map(\.id)
        if Set(ids).count != ids.count { throw refuse("two items share one id") }
    }
}
