import BoardClient
import BoardClientTesting
import Foundation
import Glibc
import Synchronization
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

/// A hostile server that streams bytes faster than the client takes them: the transport stops
/// reading once `maxBufferedInbound` bytes wait (the server's writes stall), and every byte still
/// arrives, in order, when the client reads again.
@Suite struct TCPTransportBackpressureTests {
    /// Writes a seeded byte stream to the one connection it accepts until its writes stall for
    /// a second (the client stopped reading) or `cap` bytes are out, then closes.
    final class Flood: Sendable {
        let address: String
        let seed: UInt64
        final class Outcome: Sendable {
            let state = Mutex<(written: Int, stalled: Bool)?>(nil)
        }
        private let outcome = Outcome()
        var result: (written: Int, stalled: Bool)? { outcome.state.withLock { $0 } }

        init(seed: UInt64, cap: Int) throws {
            self.seed = seed
            let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) == 0 && getsockname(listener, $0, &length) == 0 }
            }
            guard bound, listen(listener, 1) == 0 else { throw GaveUp(description: "cannot listen") }
            self.address = "127.0.0.1:\(UInt16(bigEndian: address.sin_port))"
            let thread = Thread { [outcome] in
                let fd = accept(listener, nil, nil)
                close(listener)
                var timeout = timeval(tv_sec: 1, tv_usec: 0)
                _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                var stream = SplitMix64(seed: seed)
                var written = 0
                var stalled = false
                var chunk: [UInt8] = []
                var offset = 0
                while written < cap {
                    if offset == chunk.count {
                        chunk = Flood.bytes(&stream, count: 64 << 10)
                        offset = 0
                    }
                    let count = chunk.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, chunk.count - offset, Int32(MSG_NOSIGNAL)) }
                    if count > 0 {
                        written += count
                        offset += count
                    } else if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                        stalled = true  // a whole second without the client taking a byte
                        break
                    } else if count < 0 && errno == EINTR {
                        continue
                    } else {
                        break
                    }
                }
                // Only what was written counts: the unsent rest of the chunk is not part of it.
                outcome.state.withLock { $0 = (written, stalled) }
                shutdown(fd, Int32(SHUT_WR))
                Thread.sleep(forTimeInterval: 30)  // let the client read to the end
                close(fd)
            }
            thread.start()
        }

        static func bytes(_ stream: inout SplitMix64, count: Int) -> [UInt8] {
            var bytes: [UInt8] = []
            bytes.reserveCapacity(count)
            while bytes.count < count { withUnsafeBytes(of: stream.next()) { bytes += $0 } }
            return bytes
        }
    }

    @Test func aFloodingServerIsPausedNotBufferedAndNothingIsLost() async throws {
        let seed = UInt64(ProcessInfo.processInfo.environment["BOARDSYNC_SEED"] ?? "") ?? 25_002
        let cap = 192 << 20
        let flood = try Flood(seed: seed, cap: cap)
        var transport = TCPTransport()
        transport.maxBufferedInbound = 256 << 10
        let received = try await transport.withConnection(to: flood.address) { connection -> Int in
            // The client takes nothing until the server has stopped (stalled, or sent its cap).
            try await eventually("the flood to stall or reach its cap", within: 120) { flood.result != nil }
            var expected = SplitMix64(seed: seed)
            var pending: [UInt8] = []
            var total = 0
            var mismatch = false
            while let bytes = try await connection.receive() {
                while pending.count < bytes.count { pending += Flood.bytes(&expected, count: 64 << 10) }
                if !mismatch && Array(pending[0..<bytes.count]) != bytes { mismatch = true }
                pending.removeFirst(bytes.count)
                total += bytes.count
            }
            #expect(!mismatch, "the bytes arrived as sent, in order (seed \(seed))")
            return total
        }
        let result = try #require(flood.result)
        #expect(result.stalled, "the client stopped reading: the server's writes stalled (it wrote \(result.written) bytes, cap \(cap))")
        #expect(received == result.written, "every byte written arrived: nothing dropped")
    }
}
