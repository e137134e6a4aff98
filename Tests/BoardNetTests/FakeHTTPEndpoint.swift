import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A hostile HTTP endpoint on loopback for the server's HTTP client (an S3 endpoint, a webhook
/// receiver): each connection's request head goes to `respond`, which writes what it likes
/// through `send` (false once the client has gone). Blocking sockets, a thread per connection.
final class FakeHTTPEndpoint: @unchecked Sendable {
    typealias Send = (ArraySlice<UInt8>) -> Bool
    let port: UInt16
    private let listener: Int32

    init(_ respond: @escaping @Sendable (_ head: String, _ send: Send) -> Void) throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        self.listener = listener
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) } }
        guard bound == 0, listen(listener, 16) == 0 else { throw POSIXError(.EADDRINUSE) }
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) } }
        port = UInt16(bigEndian: address.sin_port)
        let fd = listener
        Thread.detachNewThread {
            while true {
                let connection = accept(fd, nil, nil)
                guard connection >= 0 else { return }  // stopped
                Thread.detachNewThread { Self.serve(connection, respond) }
            }
        }
    }

    var url: String { "http://127.0.0.1:\(port)" }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    deinit { stop() }

    private static func serve(_ connection: Int32, _ respond: @Sendable (String, Send) -> Void) {
        defer { close(connection) }
        var head: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while head.firstRange(of: [13, 10, 13, 10]) == nil {
            let count = buffer.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { return }
            head += buffer[0..<count]
        }
        respond(String(decoding: head, as: UTF8.self)) { bytes in
            var offset = bytes.startIndex
            while offset < bytes.endIndex {
                let sent = bytes.withUnsafeBytes { Glibc.send(connection, $0.baseAddress! + (offset - bytes.startIndex), bytes.endIndex - offset, Int32(MSG_NOSIGNAL)) }
                if sent < 0, errno == EINTR { continue }
                guard sent > 0 else { return false }
                offset += sent
            }
            return true
        }
    }

    /// The request line's query parameter `name`, percent-decoded.
    static func query(_ head: String, _ name: String) -> String? {
        guard let target = head.split(separator: " ").dropFirst().first, let components = URLComponents(string: String(target)) else { return nil }
        return components.queryItems?.first { $0.name == name }?.value
    }
}
