import BoardCRDT
import BoardModel
import Foundation

/// `sync/replica.json`: which replica edits this package, and the identity (device and inode)
/// of the directory it was created in, so a copy can be told from the original.
struct Identity: Codable {
    var format = 1
    var replicaID: String
    var directory: String?

    init(replicaID: ReplicaID, directory: String?) {
        self.replicaID = replicaID.description
        self.directory = directory
    }

    var replica: ReplicaID { ReplicaID(hex: replicaID)! }

    static func read(from package: String, _ fileSystem: any FileSystem) -> Result<Identity, IdentityProblem> {
        guard let bytes = try? fileSystem.readFile(Path.join(package, PackageLayout.identity)) else {
            return .failure(.missing)
        }
        guard let identity = try? JSONDecoder().decode(Identity.self, from: Data(bytes)),
              ReplicaID(hex: identity.replicaID) != nil else {
            return .failure(.damaged)
        }
        return .success(identity)
    }

    func write(to package: String, _ fileSystem: any FileSystem) throws {
        try fileSystem.writeAtomically(Path.join(package, PackageLayout.identity), try encoded())
    }

    func encoded() throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        return Array(try encoder.encode(self))
    }
}

enum IdentityProblem: Error, CustomStringConvertible {
    case missing, damaged
    var description: String { self == .missing ? "missing" : "damaged" }
}

/// `sync/view.json`: what the materialized view reflects (the version vector at the last save)
/// and which image each file holds, so the next save knows what it may skip.
struct ViewIndex: Codable, Equatable {
    var version: [String: UInt64]
    var background: String?
    var stickers: [String: String]

    init(board: BoardSnapshot, version: VersionVector) {
        self.version = Dictionary(uniqueKeysWithValues: version.entries.map { ($0.key.description, $0.value) })
        self.background = board.backgroundPNG == nil ? nil : board.backgroundSHA256
        var stickers: [String: String] = [:]
        for sticker in board.stickers where !sticker.isPending {
            stickers[sticker.id.uuidString] = sticker.imageSHA256
        }
        self.stickers = stickers
    }

    /// The view's version as a vector; nil entries (unparsable ids) make it unequal to any replica's.
    var versionVector: VersionVector? {
        var entries: [ReplicaID: UInt64] = [:]
        for (key, value) in version {
            guard let id = ReplicaID(hex: key) else { return nil }
            entries[id] = value
        }
        return VersionVector(entries)
    }

    /// A stand-in previous snapshot: ids and hashes, no bytes (the writer compares hashes).
    var snapshot: BoardSnapshot {
        BoardSnapshot(stickers: stickers.compactMap { id, hash in
            UUID(uuidString: id).map { PlacedSticker(id: $0, imagePNG: Data(), position: CodablePoint(x: 0, y: 0), imageSHA256: hash) }
        }, backgroundSHA256: background)
    }

    static func read(from package: String, _ fileSystem: any FileSystem) -> ViewIndex? {
        guard let bytes = try? fileSystem.readFile(Path.join(package, PackageLayout.view)) else { return nil }
        return try? JSONDecoder().decode(ViewIndex.self, from: Data(bytes))
    }

    func write(to package: String, _ fileSystem: any FileSystem) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        try fileSystem.writeAtomically(Path.join(package, PackageLayout.view), Array(try encoder.encode(self)))
    }
}

/// Refuses a package where a name BoardSync writes or deletes under is a symbolic link (a
/// `stickers/` link would make the writer delete "stale" files wherever it points).
func requireNoLinks(in package: String, _ fileSystem: any FileSystem) throws {
    for name in PackageLayout.guarded where fileSystem.isSymbolicLink(Path.join(package, name)) {
        throw StoreError.unsafeEntry(path: Path.join(package, name), "is a symbolic link")
    }
}
