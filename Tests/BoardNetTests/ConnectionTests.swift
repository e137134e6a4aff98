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
}
