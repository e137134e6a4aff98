// Shared by BoardNetTests and BoardSyncCLITests (the second holds a symbolic link to this file):
// it uses nothing but Foundation, Glibc and BoardNet's TLS.
import BoardNet
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A test-only TLS-terminating proxy on a free loopback port: each connection's TLS is ended
/// here (`TLSContext.server` and a `TLSStream`, the server's own code) and its plaintext relayed
/// to a plain-HTTP upstream (moto's S3) on 127.0.0.1, and back. A thread per connection,
/// blocking sockets gated by `poll`. When the upstream closes, the proxy sends close_notify and
/// closes the client's side, as an HTTPS server answering `Connection: close` does.
final class TLSTerminatingProxy: @unchecked Sendable {  // counters and flags under `lock`
    let port: UInt16
    private let listener: Int32
    private let context: TLSContext
    private let upstreamPort: UInt16
    /// Whether the TLS session ends with close_notify when the upstream closes (false: the
    /// TCP connection just ends, as a cut one does).
    private let closeNotify: Bool
    private let lock = NSLock()
    private var stopping = false
    private var finishedHandshakes = 0
    private var failures: [String] = []
    private var open = 0

    var endpoint: String { "https://127.0.0.1:\(port)" }
    /// TLS sessions that completed their handshake.
    var handshakes: Int { lock.lock(); defer { lock.unlock() }; return finishedHandshakes }
    /// Why connections ended badly (a handshake a client refused, say).
    var errors: [String] { lock.lock(); defer { lock.unlock() }; return failures }

    init(certificate: String, key: String, upstreamPort: UInt16, closeNotify: Bool = true) throws {
        context = try TLSContext.server(certificate: certificate, key: key)
        self.upstreamPort = upstreamPort
        self.closeNotify = closeNotify
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TLSError("proxy: socket: \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = Self.loopback(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        guard bound == 0, listen(fd, 64) == 0 else {
            close(fd)
            throw TLSError("proxy: bind/listen: \(String(cString: strerror(errno)))")
        }
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        listener = fd
        port = UInt16(bigEndian: address.sin_port)
        let thread = Thread { [self] in acceptLoop() }
        thread.name = "tls-proxy-accept"
        thread.start()
    }

    /// Stops accepting and ends every connection; returns once they have ended.
    func stop() {
        lock.lock()
        let first = !stopping
        stopping = true
        lock.unlock()
        guard first else { return }
        shutdown(listener, Int32(SHUT_RDWR))  // wakes the blocked accept
        while true {
            lock.lock()
            let left = open
            lock.unlock()
            if left == 0 { break }
            usleep(10_000)
        }
    }

    deinit {
        stop()
        close(listener)
    }

    private var isStopping: Bool { lock.lock(); defer { lock.unlock() }; return stopping }

    private func acceptLoop() {
        while !isStopping {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                return
            }
            lock.lock()
            open += 1
            lock.unlock()
            let thread = Thread { [self] in
                relay(client)
                close(client)
                lock.lock()
                open -= 1
                lock.unlock()
            }
            thread.name = "tls-proxy-connection"
            thread.start()
        }
    }

    private func note(_ error: String) {
        lock.lock()
        failures.append(error)
        lock.unlock()
    }

    /// One connection: TLS from the client, plaintext to and from the upstream.
    private func relay(_ client: Int32) {
        let stream: TLSStream
        do { stream = try context.stream(host: "127.0.0.1") } catch { return note("\(error)") }
        var upstream: Int32 = -1
        defer { if upstream >= 0 { close(upstream) } }
        var toUpstream: [UInt8] = []  // plaintext that came before the upstream was dialed
        var clientDone = false
        var buffer = [UInt8](repeating: 0, count: 65536)
        while !isStopping {
            var fds = [pollfd(fd: client, events: Int16(POLLIN), revents: 0)]
            if upstream >= 0 { fds.append(pollfd(fd: upstream, events: Int16(POLLIN), revents: 0)) }
            if clientDone { fds[0].fd = -1 }
            let ready = poll(&fds, nfds_t(fds.count), 100)
            if ready < 0 { if errno == EINTR { continue }; return }
            if ready == 0 { continue }
            if fds[0].revents != 0 {
                let count = recv(client, &buffer, buffer.count, 0)
                if count <= 0 {
                    // The client is done sending: the upstream's answer may still be coming.
                    clientDone = true
                    if upstream < 0 { return }
                    shutdown(upstream, Int32(SHUT_WR))
                } else {
                    let wasDone = stream.isHandshakeDone
                    do {
                        let (plain, closed) = try stream.receive(Array(buffer[0..<count]))
                        guard Self.sendAll(client, stream.takeOutput()) else { return }
                        if !wasDone, stream.isHandshakeDone {
                            lock.lock()
                            finishedHandshakes += 1
                            lock.unlock()
                        }
                        toUpstream += plain
                        if closed { clientDone = true }
                    } catch {
                        _ = Self.sendAll(client, stream.takeOutput())  // the alert, if any
                        return note("\(error)")
                    }
                    if !toUpstream.isEmpty {
                        if upstream < 0 {
                            guard let fd = Self.dial(upstreamPort) else { return note("proxy: cannot reach the upstream on port \(upstreamPort)") }
                            upstream = fd
                        }
                        guard Self.sendAll(upstream, toUpstream) else { return note("proxy: the upstream stopped reading") }
                        toUpstream = []
                    }
                    if clientDone, upstream >= 0 { shutdown(upstream, Int32(SHUT_WR)) }
                }
            }
            if fds.count > 1, fds[1].revents != 0 {
                let count = recv(upstream, &buffer, buffer.count, 0)
                if count <= 0 {
                    // The upstream answered and closed: close_notify, then the connection ends.
                    if closeNotify {
                        stream.shutdown()
                        _ = Self.sendAll(client, stream.takeOutput())
                    }
                    return
                }
                do {
                    try stream.send(Array(buffer[0..<count]))
                } catch {
                    return note("\(error)")
                }
                guard Self.sendAll(client, stream.takeOutput()) else { return }
            }
        }
    }

    static func loopback(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(port.bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }

    static func dial(_ port: UInt16) -> Int32? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = loopback(port: port)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { close(fd); return nil }
        return fd
    }

    /// Writes every byte (blocking); false when the peer is gone.
    static func sendAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if sent > 0 { offset += sent; continue }
            if sent < 0, errno == EINTR { continue }
            return false
        }
        return true
    }
}

/// A certificate authority and a server certificate it signs for 127.0.0.1 and localhost, and a
/// second, untrusted authority's certificate for the same names, made with the `openssl`
/// command in `directory`. Nil (with a loud line) when the command is missing.
struct ProxyCertificates {
    var ca: String
    var server: (cert: String, key: String)
    var untrusted: (cert: String, key: String)

    static func make(in directory: String) throws -> ProxyCertificates? {
        guard let openssl = ["/usr/bin/openssl", "/usr/local/bin/openssl"].first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            print("SKIPPED: the HTTPS tests need the `openssl` command (apt-get install openssl); .ci/run installs it")
            return nil
        }
        func run(_ arguments: [String]) throws {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: openssl)
            process.arguments = arguments
            process.currentDirectoryURL = URL(fileURLWithPath: directory)
            process.standardOutput = FileHandle.nullDevice
            let errors = Pipe()
            process.standardError = errors
            try process.run()
            let output = errors.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            guard process.terminationStatus == 0 else {
                throw TLSError("openssl \(arguments.joined(separator: " ")) failed: \(String(decoding: output, as: UTF8.self))")
            }
        }
        for ca in ["proxy-ca", "proxy-untrusted-ca"] {
            try run(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                     "-keyout", "\(ca).key", "-out", "\(ca).pem", "-days", "2", "-subj", "/CN=BoardSync test \(ca)"])
        }
        for (name, ca) in [("proxy-server", "proxy-ca"), ("proxy-untrusted", "proxy-untrusted-ca")] {
            try run(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                     "-keyout", "\(name).key", "-out", "\(name).csr", "-subj", "/CN=localhost"])
            try "subjectAltName=IP:127.0.0.1,DNS:localhost\n".write(toFile: directory + "/\(name).ext", atomically: true, encoding: .utf8)
            try run(["x509", "-req", "-in", "\(name).csr", "-CA", "\(ca).pem", "-CAkey", "\(ca).key",
                     "-CAcreateserial", "-out", "\(name).pem", "-days", "2", "-extfile", "\(name).ext"])
        }
        return ProxyCertificates(ca: directory + "/proxy-ca.pem", server: (directory + "/proxy-server.pem", directory + "/proxy-server.key"),
                                 untrusted: (directory + "/proxy-untrusted.pem", directory + "/proxy-untrusted.key"))
    }
}
