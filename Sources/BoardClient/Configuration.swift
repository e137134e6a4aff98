import BoardCRDT
import BoardSync
import Foundation

extension LiveBoard {
    /// Where the board is kept on this device.
    public enum Storage: Sendable, Equatable {
        /// A board package directory: opened (and locked) if it exists, created if it does not.
        /// Edits are on disk before `edit` returns; they survive the process.
        case package(path: String)
        /// In memory only: gone when the `LiveBoard` is (tests, previews, throwaway boards).
        case memory
    }

    /// The server and board to keep this board in sync with.
    public struct Sync: Sendable, Equatable {
        /// What the transport dials: `"host:port"` for `TCPTransport`, the server's name for a
        /// `MemoryTransport`.
        public var server: String
        /// The board's name on the server (letters, digits, '-', '_', '.').
        public var board: String
        /// Reconnect backoff: the first delay after a connection fails or drops, doubling up to
        /// `maximumDelay`; each delay is spread by a random factor of 0.5 to 1.5 (jitter). Reset
        /// once a connection has gone live.
        public var firstDelay: Double = 0.2
        public var maximumDelay: Double = 10
        /// Seconds without a byte from the server before the connection is dropped (the
        /// protocol's keep-alives keep a quiet live connection busy), and for the handshake.
        public var idleTimeout: Double = SessionTiming().idleTimeout
        public var handshakeTimeout: Double = SessionTiming().handshakeTimeout

        public init(server: String, board: String) {
            self.server = server
            self.board = board
        }
    }

    /// The token presented in each connection's HELLO, asked for before every connect (so a
    /// short-lived token can be refreshed: a server saying `token expired` makes the next
    /// connect ask again at once).
    public struct Credentials: Sendable {
        let fetch: @Sendable () async throws -> [UInt8]

        /// No token (servers without access control).
        public static let none = Credentials { [] }

        /// A fixed token (`board-sync token` prints one).
        public static func token(_ token: String) -> Credentials {
            let bytes = Array(token.utf8)
            return Credentials { bytes }
        }

        /// A token fetched before every connect (an error thrown here counts as a failed
        /// connect: retried with backoff).
        public static func provider(_ fetch: @escaping @Sendable () async throws -> String) -> Credentials {
            Credentials { Array(try await fetch().utf8) }
        }

        init(_ fetch: @escaping @Sendable () async throws -> [UInt8]) { self.fetch = fetch }
    }

    /// Who edits. A package keeps the replica id it was created with (`replicaID` is used only
    /// when a package or a memory board is created; nil: a random one).
    public struct Identity: Sendable, Equatable {
        public var replicaID: ReplicaID?
        /// A display name (for presence; kept for later slices).
        public var name: String

        public init(replicaID: ReplicaID? = nil, name: String = "") {
            self.replicaID = replicaID
            self.name = name
        }
    }
}
