import BoardCRDT
import BoardModel
import Foundation

// The content-addressed image store (`sync/assets`) and the checks `open` makes of the view.

extension BoardPackage {
    // MARK: Assets

    func assetPath(_ hash: AssetHash) -> String {
        Path.join(path, PackageLayout.assets, hash.hex)
    }

    func storeAsset(_ hash: AssetHash, _ data: Data, syncDirectory: Bool = true) throws {
        guard !storedAssets.contains(hash) else { return }
        if try fileSystem.fileSize(assetPath(hash)) != data.count {
            let path = assetPath(hash)
            let temp = Path.join(Path.parent(of: path), ".\(hash.hex).tmp")
            do {
                try fileSystem.writeFile(temp, Array(data))
                try fileSystem.syncFile(temp)
                try fileSystem.rename(temp, path)
            } catch {
                try? fileSystem.removeFile(temp)  // no partial image stays behind on a full disk
                throw error
            }
            if syncDirectory || assetDirectoryDirty {
                try fileSystem.syncDirectory(Path.parent(of: path))
                assetDirectoryDirty = false
            } else {
                assetDirectoryDirty = true
            }
        }
        storedAssets.insert(hash)
    }

    func syncAssetDirectoryIfNeeded() throws {
        guard assetDirectoryDirty else { return }
        try fileSystem.syncDirectory(Path.join(path, PackageLayout.assets))
        assetDirectoryDirty = false
    }

    func storeAssets(referencedBy operations: [Op], from replica: Replica) throws {
        for op in operations {
            if let hash = op.payload.asset, let data = replica.assets.data(for: hash) { try storeAsset(hash, data) }
        }
    }

    /// Loads `sync/assets`, dropping files whose bytes do not match their name, and recovers
    /// referenced assets that only the view still holds.
    func loadAssets() throws {
        let directory = Path.join(path, PackageLayout.assets)
        for name in try fileSystem.listDirectory(directory) {
            guard let hash = AssetHash(hex: name) else { continue }
            let bytes = try fileSystem.readFile(Path.join(directory, name))
            if AssetHash.of(bytes) == hash {
                replica.assets.insert(Data(bytes))
                storedAssets.insert(hash)
            } else {
                notices.append("asset \(name) was damaged and has been removed; a peer can send it again")
                try fileSystem.removeFile(Path.join(directory, name))
            }
        }
        let missing = Set(replica.missingAssets)
        guard !missing.isEmpty else { return }
        var candidates = [Path.join(path, PackageLayout.background)]
        if let names = try? fileSystem.listDirectory(Path.join(path, PackageLayout.stickers)) {
            candidates += names.map { Path.join(path, PackageLayout.stickers, $0) }
        }
        for file in candidates {
            guard let bytes = try? fileSystem.readFile(file) else { continue }
            let hash = AssetHash.of(bytes)
            if missing.contains(hash), !replica.assets.contains(hash) {
                // A full disk must not keep the board closed: the bytes serve from memory, and
                // the view file still holds them for the next open to store.
                do {
                    try storeAsset(hash, Data(bytes))
                    notices.append("recovered asset \(hash.hex.prefix(12)) from \(Path.name(of: file))")
                } catch {
                    notices.append("recovered asset \(hash.hex.prefix(12)) from \(Path.name(of: file)) in memory only; it could not be stored in \(PackageLayout.assets) (\(error)), the view still holds it")
                }
                replica.assets.insert(Data(bytes))
            }
        }
    }

    func viewNeedsRebuild() throws -> Bool {
        guard let view = lastView, view.versionVector == replica.versionVector else { return true }
        guard try fileSystem.fileSize(Path.join(path, PackageLayout.manifest)) != nil else { return true }
        if view.background != nil, try fileSystem.fileSize(Path.join(path, PackageLayout.background)) == nil { return true }
        for id in view.stickers.keys {
            if try fileSystem.fileSize(Path.join(path, PackageLayout.stickers, "\(id).png")) == nil { return true }
        }
        return false
    }
}
