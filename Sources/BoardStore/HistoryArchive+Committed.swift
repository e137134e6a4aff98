import BoardCRDT
import BoardModel

// An archive cut short inside what finished compactions wrote. A torn tail past the committed
// size (`HistoryIndex.archiveSize`) is an unfinished compaction's and is ignored; but a record cut
// short *before* that size means committed bytes were lost (a truncated copy, a disk that
// dropped a tail), which reading must report and repair must salvage, not take for a torn append.
//
// An archive that parses cleanly and is merely shorter than the committed size is left alone: a
// prune or a repair that crashed between rewriting the archive and its index leaves exactly that.

extension HistoryArchive {
    /// Where committed bytes of `bytes` end short (a record cut at that offset), given the
    /// index's committed size; nil when the archive holds every committed record whole.
    static func cutShort(_ bytes: [UInt8], committed: Int?) -> (offset: Int, why: String)? {
        guard let committed, committed > magic.count, bytes.count < committed else { return nil }
        if case .torn(let offset, let why) = parse(bytes).end {
            return (offset, "\(why); the archive is \(bytes.count) bytes but finished compactions wrote \(committed)")
        }
        return nil
    }
}

extension BoardHistory {
    /// Throws `StoreError.damagedFile` when the package's archive was cut short inside its
    /// committed records (`HistoryArchive.cutShort`). `BoardPackage.history()` checks this; a
    /// caller of `read(package:fileSystem:)` calls it first.
    public static func checkArchiveLength(package path: String, fileSystem: any FileSystem) throws {
        let archivePath = Path.join(path, PackageLayout.history)
        guard let size = try fileSystem.fileSize(archivePath), size <= maxBytes else { return }
        let committed = HistoryIndex.read(Path.join(path, PackageLayout.historyIndex), fileSystem)?.archiveSize
        guard let committed, size < committed else { return }
        if let cut = HistoryArchive.cutShort(try fileSystem.readFile(archivePath), committed: committed) {
            throw StoreError(.damagedFile, path: archivePath,
                             "the history archive is cut short at byte \(cut.offset): \(cut.why); run `board-sync repair` on the package to keep every record that still checks out",
                             offset: cut.offset)
        }
    }

    /// `read(package:fileSystem:)` after `checkArchiveLength`.
    public static func readChecked(package path: String, fileSystem: any FileSystem) throws -> BoardHistory {
        try checkArchiveLength(package: path, fileSystem: fileSystem)
        return try read(package: path, fileSystem: fileSystem)
    }
}
