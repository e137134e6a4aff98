import Foundation

/// Names inside a `.boardpkg` directory (seed layout plus `sync/`).
public enum PackageLayout {
    public static let manifest = "manifest.json"
    public static let background = "background.png"
    public static let stickers = "stickers"
    public static let sync = "sync"
    public static let opLog = "sync/oplog"
    public static let identity = "sync/replica.json"
    public static let view = "sync/view.json"
    public static let undo = "sync/undo.bin"
    public static let assets = "sync/assets"
    public static let lock = "sync/lock"
    /// Which token subject first used each replica id (servers with access control).
    public static let authors = "sync/authors"
    /// The history archive: op-log records that compaction replaced, and checkpoints.
    public static let history = "sync/history"
    /// What the history knows of the live log: record times, the archive's committed size.
    public static let historyIndex = "sync/history-index"

    /// Every entry BoardSync writes or deletes under, which must never be a symbolic link.
    public static let guarded = [sync, assets, stickers, manifest, background, opLog, identity, view, undo, lock, authors, history, historyIndex]

    public static func stickerFile(_ id: UUID) -> String {
        "\(stickers)/\(id.uuidString).png"
    }
}
