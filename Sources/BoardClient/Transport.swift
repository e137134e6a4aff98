/// How a `LiveBoard` reaches its server: a byte stream per connection, opened for the length of
/// one call. The connection is only valid inside `body`: when `body` returns or throws, the
/// transport closes it (after the bytes sent so far are written), so no connection outlives
/// the session that used it.
///
/// `TCPTransport` (plain TCP or TLS over BoardNet's event loop) and `MemoryTransport` (to a
/// `MemoryServer` in the same process) are the two here. An app can bring its own (see
/// docs/CLIENT.md for Network.framework).
public protocol BoardTransport: Sendable {
    /// Connects to `address`, runs `body` with the connection, closes it. Throws when the
    /// connection cannot be made; what `body` throws is rethrown.
    func withConnection<T: Sendable>(to address: String, _ body: @Sendable (any BoardConnection) async throws -> T) async throws -> T
}

/// One open byte stream. `receive` is called from one task at a time and `send` from one task
/// at a time (they may run concurrently with each other).
public protocol BoardConnection: Sendable {
    /// Writes bytes (returns once the transport has taken them; it may still be sending).
    func send(_ bytes: [UInt8]) async throws
    /// The next bytes that arrived, or nil once the other side closed the stream. Throws on a
    /// transport error, and `CancellationError` when the calling task is cancelled.
    func receive() async throws -> [UInt8]?
}

/// A transport-level failure, in words.
public struct TransportError: Error, Sendable, Equatable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
