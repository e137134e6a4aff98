import BoardModel
import Foundation

/// Writes a snapshot into a package directory, touching only what changed (seed layout,
/// docs/ARCHITECTURE.md § Package):
///
/// - `manifest.json` is always rewritten, atomically.
/// - `background.png` and `stickers/<UUID>.png` are written only when their content hash differs
///   from `previous`, or the file is missing or has the wrong size. `previous` is an optimization,
///   never proof.
/// - A pending image (hash known, bytes not here) is never written as an empty file; a file
///   holding an older image for it is removed.
/// - Files of removed stickers and any other stale file in `stickers/` are deleted.
///
/// Every file is written to a temp name, fsynced and renamed; each directory is fsynced once
/// after its renames, so a crash leaves each final name holding a complete old or new file.
public struct PackageWriter: Sendable {
    public let fileSystem: any FileSystem

    public init(fileSystem: any FileSystem) {
        self.fileSystem = fileSystem
    }

    public enum Phase: String, Sendable {
        case manifest, background, stickers
    }

    /// Progress: the phase, and units done of the phase's total (files for stickers).
    public struct Progress: Sendable, Equatable {
        public var phase: Phase
        public var completed: Int
        public var total: Int
    }

    /// What a write did, for logs, tests and benchmarks.
    public struct Report: Sendable, Equatable {
        public var manifestBytes = 0
        public var written: [String] = []
        public var removed: [String] = []
        public var pending: [String] = []
        /// Exports: what had to be drawn as a placeholder (pending or damaged images).
        public var warnings: [String] = []

        public init() {}
    }

    @discardableResult
    public func write(_ board: BoardSnapshot, to package: String, previous: BoardSnapshot?,
                      progress: (Progress) -> Void = { _ in }) throws -> Report {
        var report = Report()
        try requireNoLinks(in: package, fileSystem)
        let stickerDirectory = Path.join(package, PackageLayout.stickers)
        if !fileSystem.isDirectory(package) {
            try fileSystem.createDirectories(package)
            try fileSystem.syncDirectory(Path.parent(of: package))
        }
        if !fileSystem.isDirectory(stickerDirectory) {
            try fileSystem.createDirectory(stickerDirectory)
            try fileSystem.syncDirectory(package)
        }

        progress(Progress(phase: .manifest, completed: 0, total: 1))
        let manifest = ManifestEncoder.encode(board)
        try fileSystem.writeAtomically(Path.join(package, PackageLayout.manifest), manifest)
        report.manifestBytes = manifest.count
        report.written.append(PackageLayout.manifest)
        progress(Progress(phase: .manifest, completed: 1, total: 1))

        progress(Progress(phase: .background, completed: 0, total: 1))
        let backgroundPath = Path.join(package, PackageLayout.background)
        var stagedBackground: [(temp: String, final: String)] = []
        // A directory is fsynced when this write renamed or removed something in it: a save
        // that changed no image (a drag, most saves of a busy board) costs the manifest's and
        // view's fsyncs only, not two more of folders whose entries stayed as they were.
        var removedBefore = report.removed.count
        try syncFile(backgroundPath, relative: PackageLayout.background,
                     bytes: board.backgroundPNG, hash: board.backgroundSHA256,
                     previousHash: previous?.backgroundSHA256 ?? previous?.backgroundPNG.map { AssetHash.of($0).hex },
                     report: &report, staged: &stagedBackground)
        try fileSystem.syncFiles(stagedBackground.map(\.temp))
        for file in stagedBackground { try fileSystem.rename(file.temp, file.final) }
        if !stagedBackground.isEmpty || report.removed.count != removedBefore { try fileSystem.syncDirectory(package) }
        progress(Progress(phase: .background, completed: 1, total: 1))

        let previousHashes = Dictionary(
            (previous?.stickers ?? []).map { ($0.id, $0.imageSHA256 ?? ($0.imagePNG.isEmpty ? nil : AssetHash.of($0.imagePNG).hex)) },
            uniquingKeysWith: { first, _ in first })
        var expected = Set<String>()
        let total = board.stickers.count
        progress(Progress(phase: .stickers, completed: 0, total: total))
        // Changed images go to temp files first, become durable together (one syncFiles call),
        // and only then are renamed over their final names.
        var staged: [(temp: String, final: String)] = []
        removedBefore = report.removed.count
        for (index, sticker) in board.stickers.enumerated() {
            let relative = PackageLayout.stickerFile(sticker.id)
            let name = Path.name(of: relative)
            let kept = try syncFile(Path.join(package, relative), relative: relative,
                                    bytes: sticker.isPending ? nil : sticker.imagePNG,
                                    hash: sticker.imageSHA256, previousHash: previousHashes[sticker.id] ?? nil,
                                    report: &report, staged: &staged)
            if kept { expected.insert(name) }
            if (index + 1) % 64 == 0 || index + 1 == total {
                progress(Progress(phase: .stickers, completed: index + 1, total: total))
            }
        }
        try fileSystem.syncFiles(staged.map(\.temp))
        for file in staged { try fileSystem.rename(file.temp, file.final) }
        for name in try fileSystem.listDirectory(stickerDirectory) where !expected.contains(name) {
            try fileSystem.removeFile(Path.join(stickerDirectory, name))
            report.removed.append("\(PackageLayout.stickers)/\(name)")
        }
        if !staged.isEmpty || report.removed.count != removedBefore { try fileSystem.syncDirectory(stickerDirectory) }
        return report
    }

    /// Brings one asset file in line. Returns whether a file for it should stay on disk.
    @discardableResult
    private func syncFile(_ path: String, relative: String, bytes: Data?, hash: String?, previousHash: String?,
                          report: inout Report, staged: inout [(temp: String, final: String)]) throws -> Bool {
        let size = try fileSystem.fileSize(path)
        guard let bytes, !bytes.isEmpty else {
            if hash != nil {
                // Pending: keep a file that already holds this image, drop one holding another.
                report.pending.append(relative)
                if size != nil, previousHash == hash { return true }
            }
            if size != nil {
                try fileSystem.removeFile(path)
                report.removed.append(relative)
            }
            return false
        }
        let currentHash = hash ?? AssetHash.of(bytes).hex
        if previousHash == currentHash, size == bytes.count {
            return true
        }
        let temp = Path.join(Path.parent(of: path), ".\(Path.name(of: path)).tmp")
        try fileSystem.writeFile(temp, Array(bytes))
        staged.append((temp, path))
        report.written.append(relative)
        return true
    }
}
