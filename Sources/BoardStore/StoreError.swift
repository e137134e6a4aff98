import BoardCRDT

/// Why a package could not be opened, read or written. Every error names the file and what to do.
///
/// A value: `code` says which kind of trouble it is (what callers branch on), `path` which file
/// or folder, `message` what was wrong there in words, and `cause` the error underneath when
/// there was one (the `FileSystemError` of a lock or an fsync, the decoder's error for a
/// manifest, the replica's for an operation a log record holds), kept whole so a caller or a
/// log can look past the words. `description` is built from `code`, `path`, `message` (and a
/// damaged log's `offset`) only; the cause adds nothing to what a user reads.
///
/// Two errors are equal when their code, path, message and offset are: the cause is not
/// compared (errors in general are not `Equatable`, and the words already say what it was).
public struct StoreError: Error, Equatable, CustomStringConvertible {
    public enum Code: String, Sendable, CaseIterable {
        case notAPackage, alreadyExists, damagedLog, damagedFile, unsupportedContentType, invalidImage, locked, closed
        /// A write failed (full disk, read-only folder): nothing of the failed change was saved.
        case writeFailed
        /// The view shows operations the op log does not hold: rebuilding it would lose them.
        case viewAheadOfLog
        /// A symbolic link (or other non-regular entry) where the package needs a file or folder.
        case unsafeEntry
        /// A view write prepared off the owner's thread has not finished (`ViewWrite`).
        case viewWriteInFlight
    }

    public let code: Code
    /// The file or folder concerned ("" when there is none: an unsupported content type).
    public let path: String
    /// What was wrong, without the path: the words the description puts after it.
    public let message: String
    /// Where in the file the damage starts (`damagedLog`), nil otherwise.
    public let offset: Int?
    /// The error this one reports, when it stands for another.
    public let cause: (any Error)?

    public init(_ code: Code, path: String, _ message: String, offset: Int? = nil, cause: (any Error)? = nil) {
        self.code = code
        self.path = path
        self.message = message
        self.offset = offset
        self.cause = cause
    }

    public static func == (a: StoreError, b: StoreError) -> Bool {
        a.code == b.code && a.path == b.path && a.message == b.message && a.offset == b.offset
    }

    // MARK: One constructor per kind (the words of kinds that take none are fixed here)

    public static func notAPackage(path: String, _ why: String, cause: (any Error)? = nil) -> StoreError {
        StoreError(.notAPackage, path: path, why, cause: cause)
    }

    public static func alreadyExists(path: String) -> StoreError {
        StoreError(.alreadyExists, path: path, "already exists; choose another name or remove it first")
    }

    public static func damagedLog(path: String, offset: Int, _ why: String, cause: (any Error)? = nil) -> StoreError {
        StoreError(.damagedLog, path: path, why, offset: offset, cause: cause)
    }

    public static func damagedFile(path: String, _ why: String, cause: (any Error)? = nil) -> StoreError {
        StoreError(.damagedFile, path: path, why, cause: cause)
    }

    /// `type` is the content type's name.
    public static func unsupportedContentType(_ type: String) -> StoreError {
        StoreError(.unsupportedContentType, path: "", "writing \(type) is not supported (board packages, PNG, PDF and SVG are)")
    }

    public static func invalidImage(path: String, _ why: String, cause: (any Error)? = nil) -> StoreError {
        StoreError(.invalidImage, path: path, why, cause: cause)
    }

    public static func locked(path: String, cause: (any Error)? = nil) -> StoreError {
        StoreError(.locked, path: path, "is open in another process (a peer, the server or another command); try again when it has finished", cause: cause)
    }

    public static func closed(path: String) -> StoreError {
        StoreError(.closed, path: path, "was closed; open it again to make changes")
    }

    public static func viewWriteInFlight(path: String) -> StoreError {
        StoreError(.viewWriteInFlight, path: path, "has a view write in progress; finish it before saving or closing")
    }

    public static func writeFailed(path: String, _ why: String, cause: (any Error)? = nil) -> StoreError {
        StoreError(.writeFailed, path: path, why, cause: cause)
    }

    public static func viewAheadOfLog(path: String, _ why: String) -> StoreError {
        StoreError(.viewAheadOfLog, path: path, why)
    }

    public static func unsafeEntry(path: String, _ why: String) -> StoreError {
        StoreError(.unsafeEntry, path: path, why)
    }

    // MARK: Words

    /// The same words without any path on this machine, for a remote peer (a server's client
    /// must not learn where its boards live). Neither `path` nor `cause` goes into them (a
    /// cause's own words may hold paths).
    public var descriptionWithoutPaths: String {
        switch code {
        case .notAPackage: return "the board's folder is not a board package: \(message)"
        case .alreadyExists: return "the board's package already exists"
        case .damagedLog: return "the board's op log is damaged at byte \(offset ?? 0): \(message). Nothing was changed"
        case .damagedFile: return "a file of the board's package is damaged: \(message)"
        case .unsupportedContentType: return message
        case .invalidImage: return "an image of the board: \(message)"
        case .closed: return "the board's package was closed"
        case .writeFailed: return "could not write the board's package: \(message)"
        case .viewAheadOfLog: return "the board's view: \(message). Nothing was changed"
        case .unsafeEntry: return "an entry of the board's package: \(message); the package was not touched"
        case .locked: return "the board's package \(message)"
        case .viewWriteInFlight: return "the board's package \(message)"
        }
    }

    public var description: String {
        switch code {
        case .notAPackage: return "\(path) is not a board package: \(message)"
        case .alreadyExists, .closed, .locked, .viewWriteInFlight: return "\(path) \(message)"
        case .damagedLog: return "the op log \(path) is damaged at byte \(offset ?? 0): \(message). Nothing was changed"
        case .damagedFile: return "\(path) is damaged: \(message)"
        case .unsupportedContentType: return message
        case .invalidImage: return "\(path): \(message)"
        case .writeFailed: return "could not write \(path): \(message)"
        case .viewAheadOfLog:
            return "\(path): \(message). Nothing was changed; run `board-sync repair` on the package (it keeps a copy of the current view), or restore the op log from a backup"
        case .unsafeEntry: return "\(path): \(message); the package was not touched (BoardSync never follows links out of a package)"
        }
    }
}
