/// A byte stream a `SyncHost` drives one session over (a TCP connection, plain or TLS). Loop
/// thread only.
protocol HostLink: AnyObject {
    var remote: String { get }
    var isClosed: Bool { get }
    /// Bytes sent and not yet taken by the other side.
    var queuedBytes: Int { get }
    var maxQueuedBytes: Int { get set }
    var onData: (([UInt8]) -> Void)? { get set }
    /// After the queue drained.
    var onWritable: (() -> Void)? { get set }
    /// Exactly once: nil for an orderly close, else what went wrong.
    var onClose: ((String?) -> Void)? { get set }
    /// The other side reset the connection (an ordinary end after a goodbye).
    var wasResetByPeer: Bool { get }
    @discardableResult func send(_ bytes: [UInt8]) -> Bool
    func close(immediately: Bool)
}

extension TCPConnection: HostLink {}

extension HostLink {
    /// Closes once what was queued is delivered.
    func close() { close(immediately: false) }
}
