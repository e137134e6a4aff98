/// Why a session closed. Sent to the peer in an ERROR frame before closing, and reported to
/// the host. Codes are stable wire values (docs/PROTOCOL.md).
public struct SessionError: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Code: UInt16, Sendable {
        case malformedFrame = 1
        case badChecksum = 2
        case frameTooLarge = 3
        case unsupportedVersion = 4
        case unknownMessage = 5
        case badBoardName = 6
        case unauthorized = 7
        case unexpectedMessage = 8
        case invalidOperations = 9
        case assetMismatch = 10
        case idleTimeout = 11
        case slowReader = 12
        case shuttingDown = 13
        case internalError = 14
        case assetTooLarge = 15
        case boardMismatch = 16
        /// The host is over a memory limit (queued output, open boards): retry later.
        case busy = 17
        /// The connection's token allows reading only, and it sent operations or image bytes.
        case readOnly = 18
        /// Operations (or a HELLO) under a replica id that belongs to another token subject.
        case notAuthor = 19
        /// More operations per second than the host allows one connection.
        case tooFast = 20
        /// A fixed limit of the host (boards per server, images per board): not worth retrying.
        case limitReached = 21
        /// The connection's token expired (at the HELLO, or while the session was open): mint or
        /// fetch a fresh token and dial again.
        case tokenExpired = 22
        /// The server's storage cannot serve the board now (its Redis is unreachable or refuses
        /// it, its package is held or cannot be written): retry later. Builds from before this
        /// code read it as `internalError`, with the same message.
        case storageUnavailable = 23
        /// The server's operator deleted the board (`board-sync admin delete`): it is gone from
        /// this server and a HELLO naming it is refused until the operator re-creates the name.
        /// Terminal: a client keeps its copy and stops. Builds from before this code read it as
        /// `internalError` (and retry), with the same message.
        case boardDeleted = 24

        public var name: String {
            switch self {
            case .malformedFrame: return "malformed frame"
            case .badChecksum: return "bad checksum"
            case .frameTooLarge: return "frame too large"
            case .unsupportedVersion: return "unsupported protocol version"
            case .unknownMessage: return "unknown message type"
            case .badBoardName: return "bad board name"
            case .unauthorized: return "unauthorized"
            case .unexpectedMessage: return "unexpected message"
            case .invalidOperations: return "invalid operations"
            case .assetMismatch: return "asset does not match its hash"
            case .idleTimeout: return "idle timeout"
            case .slowReader: return "peer is not reading (send queue full)"
            case .shuttingDown: return "shutting down"
            case .internalError: return "internal error"
            case .assetTooLarge: return "asset too large"
            case .boardMismatch: return "board name mismatch"
            case .busy: return "busy, retry later"
            case .readOnly: return "read-only access"
            case .notAuthor: return "not the author"
            case .tooFast: return "too many operations per second"
            case .limitReached: return "limit reached"
            case .tokenExpired: return "token expired"
            case .storageUnavailable: return "storage unavailable"
            case .boardDeleted: return "board deleted"
            }
        }
    }

    public let code: Code
    public let message: String
    /// True when the other side reported this error (it arrived in an ERROR frame).
    public let remote: Bool

    public init(_ code: Code, _ message: String, remote: Bool = false) {
        self.code = code
        self.message = message
        self.remote = remote
    }

    /// The code and message, without saying who found the error.
    public var summary: String { "\(code.name) (code \(code.rawValue)): \(message)" }

    /// A remote error is "the other side's": a session does not know whether it dialed a server
    /// or a peer (`peer --connect` reaches either), so it names neither; a one-shot sync, which
    /// always meets a server, says "the server refused" (`SyncOnceError`, BoardClient).
    public var description: String {
        "\(remote ? "the other side reported " : "")\(summary)"
    }

    /// What a server that waits for its storage tells a session it turns away: the reason
    /// (`detail`, no secrets) only to sessions that presented a valid token; anyone else hears
    /// the class of trouble and when to come back, nothing about the server's insides.
    public static func storageUnavailable(detail: String?) -> SessionError {
        SessionError(.storageUnavailable, detail.map { "the server is waiting for its storage: \($0); retry later" }
                     ?? "the server is waiting for its storage; retry later (the server's log says why)")
    }
}
