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
        /// once a connection has stayed live for `backoffResetAfter` seconds: a server that lets
        /// sessions go live and drops them at once is redialled ever more slowly, not every
        /// `firstDelay`.
        public var firstDelay: Double = 0.2
        public var maximumDelay: Double = 10
        public var backoffResetAfter: Double = 15
        /// Seconds without a byte from the server before the connection is dropped (the
        /// protocol's keep-alives keep a quiet live connection busy).
        public var idleTimeout: Double = SessionTiming().idleTimeout
        /// Seconds from the connection being made (TCP connected; a TLS handshake counts
        /// inside) to the server's HELLO: a server that never answers is given up and
        /// redialled after the backoff. Keep-alives or a trickle of bytes do not extend it.
        public var handshakeTimeout: Double = SessionTiming().handshakeTimeout

        /// What a server may push to this board (a hostile or broken server must not fill the
        /// device). Frames larger than `maxFrame` bytes and images larger than `maxImageBytes`
        /// end the run (`frame too large`, `asset too large`: retrying would bring them again);
        /// an image beyond `maxImages` on the board ends it with `limit reached` (nil:
        /// unlimited). Each ends the run when a second link in a row ends the same way (the
        /// first is redialled after the backoff: it may be a corrupted length field); live operations beyond `maxOperationsPerSecond` from the server (nil:
        /// unlimited; handshake deltas are not counted) close the connection with `too many
        /// operations per second` and it is redialled after the backoff.
        public var maxFrame: Int = SessionLimits().maxFrame
        public var maxImageBytes: Int = SessionLimits().maxAsset
        public var maxImages: Int? = 10_000
        public var maxOperationsPerSecond: Double?
        /// Presence updates (`updatePresence`) go out at most this often, the latest winning:
        /// a pointer moving at 120 Hz costs 20 frames a second, not 120.
        public var presenceInterval: Double = 0.05

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
        /// The display name others see in this replica's presence (`updatePresence`).
        public var name: String
        /// The colour others see it in.
        public var color: Color8

        public init(replicaID: ReplicaID? = nil, name: String = "", color: Color8 = Color8(red: 0x2E, green: 0x6B, blue: 0xD1, alpha: 255)) {
            self.replicaID = replicaID
            self.name = name
            self.color = color
        }
    }
}
