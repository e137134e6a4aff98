import BoardCRDT

/// Why a package could not be opened, read or written. Every case names the file and what to do.
public enum StoreError: Error, Equatable, CustomStringConvertible {
    case notAPackage(path: String, String)
    case alreadyExists(path: String)
    case damagedLog(path: String, offset: Int, String)
    case damagedFile(path: String, String)
    case unsupportedContentType(String)
    case invalidImage(path: String, String)
    case locked(path: String)
    case closed(path: String)
    /// A write failed (full disk, read-only folder): nothing of the failed change was saved.
    case writeFailed(path: String, String)
    /// The view shows operations the op log does not hold: rebuilding it would lose them.
    case viewAheadOfLog(path: String, String)
    /// A symbolic link (or other non-regular entry) where the package needs a file or folder.
    case unsafeEntry(path: String, String)

    /// The same words without any path on this machine, for a remote peer (a server's client
    /// must not learn where its boards live).
    public var descriptionWithoutPaths: String {
        switch self {
        case .notAPackage(_, let why): return "the board's folder is not a board package: \(why)"
        case .alreadyExists: return "the board's package already exists"
        case .damagedLog(_, let offset, let why): return "the board's op log is damaged at byte \(offset): \(why). Nothing was changed"
        case .damagedFile(_, let why): return "a file of the board's package is damaged: \(why)"
        case .unsupportedContentType: return description
        case .invalidImage(_, let why): return "an image of the board: \(why)"
        case .closed: return "the board's package was closed"
        case .writeFailed(_, let why): return "could not write the board's package: \(why)"
        case .viewAheadOfLog(_, let why): return "the board's view: \(why). Nothing was changed"
        case .unsafeEntry(_, let why): return "an entry of the board's package: \(why); the package was not touched"
        case .locked: return "the board's package is open in another process (a peer, the server or another command); try again when it has finished"
        }
    }

    public var description: String {
        switch self {
        case .notAPackage(let path, let why): return "\(path) is not a board package: \(why)"
        case .alreadyExists(let path): return "\(path) already exists; choose another name or remove it first"
        case .damagedLog(let path, let offset, let why):
            return "the op log \(path) is damaged at byte \(offset): \(why). Nothing was changed"
        case .damagedFile(let path, let why): return "\(path) is damaged: \(why)"
        case .unsupportedContentType(let type): return "writing \(type) is not supported (board packages, PNG, PDF and SVG are)"
        case .invalidImage(let path, let why): return "\(path): \(why)"
        case .closed(let path): return "\(path) was closed; open it again to make changes"
        case .writeFailed(let path, let why): return "could not write \(path): \(why)"
        case .viewAheadOfLog(let path, let why):
            return "\(path): \(why). Nothing was changed; run `board-sync repair` on the package (it keeps a copy of the current view), or restore the op log from a backup"
        case .unsafeEntry(let path, let why): return "\(path): \(why); the package was not touched (BoardSync never follows links out of a package)"
        case .locked(let path): return "\(path) is open in another process (a peer, the server or another command); try again when it has finished"
        }
    }
}
