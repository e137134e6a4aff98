import BoardClient
import Foundation
import Glibc
import Testing

/// What the TCP transport keeps after a connection: nothing. Each connection has its own event
/// loop (an epoll descriptor and a wake-up pipe); a timer that held the connection kept the loop
/// alive, so every refused connect leaked three descriptors.
@Suite struct TCPTransportTests {
    static func openDescriptors() -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0
    }

    /// A loopback port nobody listens on (bound, then closed).
    static func closedPort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        #expect(bound)
        return Int(UInt16(bigEndian: address.sin_port))
    }

    @Test func refusedConnectsLeaveNoDescriptorsBehind() async throws {
        let address = "127.0.0.1:\(try Self.closedPort())"
        let transport = TCPTransport()
        let before = Self.openDescriptors()
        let attempts = 200
        var refused = 0
        for _ in 0..<attempts {
            do {
                _ = try await transport.withConnection(to: address) { _ in 0 }
            } catch is TransportError {
                refused += 1
            }
        }
        #expect(refused == attempts, "nobody listens there")
        // Other suites open and close descriptors meanwhile; a leak is 3 per attempt (600).
        let after = Self.openDescriptors()
        #expect(after - before < attempts / 2, "descriptors before \(before), after \(attempts) refused connects \(after)")
    }
}
