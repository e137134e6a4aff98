import BoardModel
import Foundation

/// Reads a package's materialized view (manifest and image files) into a snapshot, tolerantly:
/// seed packages (schema 1, no hashes, no `sync/`) and ours alike. The op log is not consulted;
/// `BoardPackage.open` is the reader of record for packages that have one.
public struct PackageReader: Sendable {
    public let fileSystem: any FileSystem

    public init(fileSystem: any FileSystem) {
        self.fileSystem = fileSystem
    }

    /// The manifest as written, with BoardSync's optional keys.
    struct Manifest: Decodable {
        var schemaVersion: Int
        var canvasSize: CodableSize
        var strokes: [InkStroke]
        var stickers: [PlacedSticker]
        var backgroundSHA256: String?
        var paintOrder: [UUID]?
        var pendingStickers: [PlacedSticker]?
    }

    /// The snapshot, with image bytes loaded. A sticker whose file is missing or does not match
    /// its recorded hash comes back pending (when its hash is known); a seed sticker without a
    /// hash and without a file is an error naming the file.
    public func read(_ package: String) throws -> BoardSnapshot {
        guard fileSystem.isDirectory(package) else {
            throw StoreError.notAPackage(path: package, "no such directory")
        }
        let manifestPath = Path.join(package, PackageLayout.manifest)
        let bytes: [UInt8]
        do {
            bytes = try fileSystem.readFile(manifestPath)
        } catch let error as FileSystemError where error.code == .notFound {
            throw StoreError.notAPackage(path: package, "it has no manifest.json", cause: error)
        }
        let manifest: Manifest
        do {
            manifest = try JSONDecoder().decode(Manifest.self, from: Data(bytes))
        } catch {
            throw StoreError.damagedFile(path: manifestPath, "not a readable board manifest (\(Self.describe(error)))", cause: error)
        }
        var board = BoardSnapshot(schemaVersion: manifest.schemaVersion, canvasSize: manifest.canvasSize,
                                  strokes: manifest.strokes, backgroundSHA256: manifest.backgroundSHA256,
                                  paintOrder: manifest.paintOrder)
        let backgroundPath = Path.join(package, PackageLayout.background)
        if let data = try? fileSystem.readFile(backgroundPath) {
            if let hash = manifest.backgroundSHA256, AssetHash.of(data).hex != hash {
                board.backgroundPNG = nil  // damaged or stale: pending until the right bytes arrive
            } else {
                board.backgroundPNG = Data(data)
            }
        }
        var stickers: [PlacedSticker] = []
        for var sticker in manifest.stickers + (manifest.pendingStickers ?? []) {
            let path = Path.join(package, PackageLayout.stickerFile(sticker.id))
            let data = try? fileSystem.readFile(path)
            if let data, sticker.imageSHA256 == nil || AssetHash.of(data).hex == sticker.imageSHA256 {
                sticker.imagePNG = Data(data)
            } else if sticker.imageSHA256 != nil {
                sticker.imagePNG = Data()
            } else {
                throw StoreError.damagedFile(path: path, "the sticker's image file is missing")
            }
            stickers.append(sticker)
        }
        // Restore one paint order across both lists when the manifest records it.
        if let order = manifest.paintOrder {
            let rank = Dictionary(order.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
            stickers.sort { (rank[$0.id] ?? Int.max) < (rank[$1.id] ?? Int.max) }
        }
        board.stickers = stickers
        return board
    }

    static func describe(_ error: Error) -> String {
        switch error {
        case DecodingError.dataCorrupted(let context): return context.debugDescription
        case DecodingError.keyNotFound(let key, _): return "missing key \(key.stringValue)"
        case DecodingError.typeMismatch(_, let context): return "wrong type at \(context.codingPath.map(\.stringValue).joined(separator: "."))"
        case DecodingError.valueNotFound(_, let context): return "missing value at \(context.codingPath.map(\.stringValue).joined(separator: "."))"
        default: return "\(error)"
        }
    }
}
