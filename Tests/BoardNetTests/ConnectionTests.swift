import BoardNet
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

final class Captured: @unchecked Sendable {  // written on the loop thread, read via onLoop
    var closeReason: String??
    var refused = false
    var queuedAtClose = 0
}

@Suite struct ConnectionTests {
    @Test func aPeerThatDoesNotReadIsDisconnectedNotBufferedWithoutLimit() throws {
        let loop = try LoopThread()
        defer { loop.stop() }
        let captured = Captured()
        let listener: TCPListener = try loop.onLoop {
            let listener = try TCPListener(address: SocketAddress(host: "127.0.0.1", port: 0), on: loop.loop)
            listener.onAccept = { connection in
                connection.maxQueuedBytes = 256 << 10
                connection.onClose = { reason in captured.closeReason = .some(reason) }
                // Push 32 MB at a client that never reads.
                let chunk = [UInt8](repeating: 0xAB, count: 64 << 10)
                for _ in 0..<512 {
                    if !connection.send(chunk) { captured.refused = true; break }
                }
                captured.queuedAtClose = connection.queuedBytes
            }
            return listener
        }
        // A client that connects and never reads.
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = listener.address.port.bigEndian
        _ = inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr)
        let connected = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        #expect(connected == 0)
        #expect(try loop.wait(timeout: 10) { captured.closeReason != nil })
        let reason = try loop.onLoop { captured.closeReason }
        #expect(try loop.onLoop { captured.refused })
        #expect((reason ?? nil)?.contains("not reading") == true, "\(String(describing: reason))")
        try loop.onLoop { listener.close() }
    }

    /// An orderly close loses nothing the peer has not read yet (found under load: a client's
    /// `sync` uploaded a sticker and its 7.7 MB image, said goodbye and closed while a message
    /// of the server's lay unread; the close reset the connection, the kernel dropped the
    /// image's end, and the server held the sticker without its image). The closing side now
    /// shuts its write side and reads until the peer closes (`TCPConnection.lingerSeconds`).
    @Test func anOrderlyCloseWithUnreadBytesDeliversEverythingSent() throws {
        let loop = try LoopThread()
        defer { loop.stop() }
        final class Tally: @unchecked Sendable {  // loop thread only
            var received = 0
            var serverClosed: String??
            var clientClosed: String??
            var server: TCPConnection?
        }
        let tally = Tally()
        let total = 8 << 20
        let listener: TCPListener = try loop.onLoop {
            let listener = try TCPListener(address: SocketAddress(host: "127.0.0.1", port: 0), on: loop.loop)
            listener.onAccept = { connection in
                tally.server = connection
                connection.onData = { bytes in tally.received += bytes.count }
                connection.onClose = { reason in tally.serverClosed = .some(reason) }
                // Something the client will never read, then a slow reader: most of the upload
                // is still in the kernels' buffers when the client closes.
                connection.send(Array(repeating: 0x42, count: 100))
                connection.isReadingPaused = true
                loop.loop.schedule(after: 0.5) { connection.isReadingPaused = false }
            }
            return listener
        }
        try loop.onLoop {
            let client = try TCPConnection.connect(to: listener.address, on: loop.loop)
            client.reportsCloseAfterLingering = true  // told once the server closed too
            client.onClose = { reason in tally.clientClosed = .some(reason) }
            client.maxQueuedBytes = total
            client.onConnect = {
                // The server's bytes stay unread (as when they arrive just before the close).
                client.isReadingPaused = true
                client.send(Array(repeating: 0x17, count: total))
                client.close()
            }
        }
        #expect(try loop.wait(timeout: 20) { tally.serverClosed != nil && tally.clientClosed != nil })
        try loop.onLoop {
            #expect(tally.received == total, "the server received \(tally.received) of \(total) bytes")
            #expect(tally.serverClosed == .some(nil) && tally.clientClosed == .some(nil), "\(String(describing: tally.serverClosed)) \(String(describing: tally.clientClosed))")
            listener.close()
        }
    }
}
