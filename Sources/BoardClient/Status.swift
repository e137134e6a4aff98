import BoardSync
import Foundation

/// Where a `LiveBoard`'s connection stands, and what the server has not acknowledged yet.
public struct LiveStatus: Sendable, Equatable {
    public enum State: Sendable, Equatable {
        /// Open, editable, `run()` not running (not called yet, or returned).
        case idle
        /// Dialing the server and saying HELLO (attempt counts from 1 since the last live link).
        case connecting(attempt: Int)
        /// Handshake done; the server is sending what this replica lacks.
        case catchingUp
        /// In sync: edits go to the server as they are made, and others' arrive.
        case live
        /// No connection; the next attempt is at `retryAt` (wall clock).
        case offline(retryAt: Date, attempt: Int, lastError: String)
        /// The server refused in a way retrying cannot fix: `run()` has stopped (thrown).
        case failed(Refusal)
        /// `close()` was called (or `run()` ended): the storage is released.
        case closed
    }

    public var state: State
    /// Operations this replica made that the server has not acknowledged (as far as this
    /// process knows: edits made before `open` count once a handshake says the server lacks them).
    public var unacknowledgedOperations: Int
    /// Images this replica's edits show that may not have reached the server yet: those its
    /// unacknowledged operations reference, and those the server asked for whose bytes are not
    /// all written ("saved on this device · 12 changes and 2 images waiting").
    public var unacknowledgedImages: Int
    /// Why the last connection ended (nil until one has): what `.connecting` retries after, and
    /// what `.offline` shows as `lastError`.
    public var lastError: String?
    /// Operations of other replicas this board holds (learned from others) that the server
    /// said it dropped and still lacks: a write token sends only operations of replica ids its
    /// subject owns. The link stays up and this replica's own edits go through; these wait for
    /// their owner, or a `peer` token (docs/DEPLOYMENT.md, "Authorship").
    public var refusedOperations: Int
    /// Why the server dropped them (its words, code `notAuthor`); nil when it dropped none.
    public var refusal: Refusal?
    /// Why the board's view (a package's `manifest.json` and images) could not be saved the
    /// last time it was tried (a full disk, a folder made read-only): nil once a save succeeds.
    /// The edits are safe all the same (the op log took them, fsynced); only the files other
    /// apps read lag behind. The board tries again after a backoff (1 s, doubling to 60 s),
    /// and once more when it closes.
    public var viewSaveError: String?

    public init(state: State, unacknowledgedOperations: Int, unacknowledgedImages: Int = 0, lastError: String? = nil,
                refusedOperations: Int = 0, refusal: Refusal? = nil, viewSaveError: String? = nil) {
        self.viewSaveError = viewSaveError
        self.state = state
        self.unacknowledgedOperations = unacknowledgedOperations
        self.unacknowledgedImages = unacknowledgedImages
        self.lastError = lastError
        self.refusedOperations = refusedOperations
        self.refusal = refusal
    }

    public var isLive: Bool { state == .live }

    /// Nothing this replica made is waiting for the server (operations or images).
    public var isAllAcknowledged: Bool { unacknowledgedOperations == 0 && unacknowledgedImages == 0 }
}

/// Why the server turned a connection away, classified.
public struct Refusal: Error, Sendable, Equatable, CustomStringConvertible {
    public var code: SessionError.Code
    public var message: String

    /// What to do about it (`SessionError.recovery`, one classification for every client):
    /// retry after a backoff, ask the credentials again once (an expired token), or stop.
    public var recovery: SessionError.Recovery

    public init(_ error: SessionError) {
        code = error.code
        message = error.message
        recovery = error.recovery
    }

    /// Retrying can fix it: I/O trouble, a busy or stopping server, too fast, its storage away,
    /// an expired token (the next connect asks the credentials again). Everything else (read-only
    /// access, not the author, unauthorized, a board that cannot be opened, a fixed limit, a
    /// protocol version or message neither side can change) is terminal. docs/PROTOCOL.md lists
    /// the codes by class.
    public var isRetryable: Bool { recovery != .stop }

    public var description: String { "\(code.name) (code \(code.rawValue)): \(message)" }
}

public enum LiveBoardError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The board was closed (`close()`, or `run()` ended): open it again.
    case closed
    /// `run()` is already running for this board.
    case alreadyRunning
    /// `run()` needs a `Sync` (the board was opened without one).
    case noServer
    /// The board name is not a plain name.
    case invalidBoardName(String)

    public var description: String {
        switch self {
        case .closed: return "the board is closed"
        case .alreadyRunning: return "run() is already running for this board"
        case .noServer: return "the board was opened without a server to sync with"
        case .invalidBoardName(let name): return "'\(name)' is not a plain board name (letters, digits, '-', '_', '.')"
        }
    }
}

/// What `close()` achieved.
public struct CloseReport: Sendable, Equatable {
    /// The server acknowledged every operation this replica made and took every image it
    /// asked for (nothing is waiting).
    public var allAcknowledged: Bool
    /// Operations still unacknowledged when the bound passed (kept on disk for a package: they
    /// go at the next `run()`).
    public var unacknowledgedOperations: Int
    /// Images (`LiveStatus.unacknowledgedImages`) still waiting when the bound passed.
    public var unacknowledgedImages: Int

    public init(allAcknowledged: Bool, unacknowledgedOperations: Int, unacknowledgedImages: Int = 0) {
        self.allAcknowledged = allAcknowledged
        self.unacknowledgedOperations = unacknowledgedOperations
        self.unacknowledgedImages = unacknowledgedImages
    }
}
