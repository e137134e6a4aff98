/// A byte stream a `SyncHost` drives one session over: a TCP connection, or an in-process
/// `LocalLink`. Loop thread only.
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

/// One end of an in-process byte stream between two hosts on the same event loop (a web page's
/// replica and the server it edits through): no socket, no port, no TLS, nothing that can fail
/// silently. Bytes sent are delivered to the other end on the loop's next turn (never inside
/// `send`, so hosts cannot re-enter each other); a close reaches the other end after every byte
/// sent before it. Loop thread only.
final class LocalLink: HostLink {
    let loop: EventLoop
    let remote: String
    private var peer: LocalLink?
    private(set) var isClosed = false
    var maxQueuedBytes = 64 << 20
    var onData: (([UInt8]) -> Void)?
    var onWritable: (() -> Void)?
    var onClose: ((String?) -> Void)?
    /// An in-process link is never reset.
    var wasResetByPeer: Bool { false }
    /// Sent and not yet delivered to the peer.
    private var inFlight: [UInt8] = []
    private var deliveryScheduled = false
    private var closeAfterDelivery = false

    private init(loop: EventLoop, remote: String) {
        self.loop = loop
        self.remote = remote
    }

    /// Two connected ends, each named by what it reaches.
    static func pair(on loop: EventLoop, names: (String, String)) -> (LocalLink, LocalLink) {
        let a = LocalLink(loop: loop, remote: names.0)
        let b = LocalLink(loop: loop, remote: names.1)
        a.peer = b
        b.peer = a
        return (a, b)
    }

    var queuedBytes: Int { inFlight.count }

    @discardableResult
    func send(_ bytes: [UInt8]) -> Bool {
        guard !isClosed, !closeAfterDelivery else { return false }
        guard !bytes.isEmpty else { return true }
        if inFlight.count + bytes.count > maxQueuedBytes {
            finish("the peer is not reading: more than \(maxQueuedBytes) bytes queued")
            return false
        }
        inFlight += bytes
        scheduleDelivery()
        return true
    }

    func close(immediately: Bool) {
        guard !isClosed else { return }
        if immediately || inFlight.isEmpty {
            finish(nil)
        } else {
            closeAfterDelivery = true
        }
    }

    private func scheduleDelivery() {
        guard !deliveryScheduled else { return }
        deliveryScheduled = true
        loop.schedule(after: 0) { [weak self] in self?.deliver() }
    }

    private func deliver() {
        deliveryScheduled = false
        guard !isClosed else { return }
        let bytes = inFlight
        inFlight = []
        if !bytes.isEmpty, let peer, !peer.isClosed { peer.onData?(bytes) }
        if isClosed { return }
        if closeAfterDelivery { return finish(nil) }
        if inFlight.isEmpty { onWritable?() }
    }

    private func finish(_ error: String?) {
        guard !isClosed else { return }
        isClosed = true
        inFlight = []
        let callback = onClose
        onClose = nil
        onData = nil
        onWritable = nil
        let other = peer
        peer = nil
        callback?(error)
        // The other end hears the close on the next turn, as a FIN would reach it.
        if let other { loop.schedule(after: 0) { other.finish(nil) } }
    }
}

extension HostLink {
    /// Closes once what was queued is delivered.
    func close() { close(immediately: false) }
}
