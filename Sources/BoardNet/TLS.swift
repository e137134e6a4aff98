#if canImport(Glibc)
import Glibc
#endif
import COpenSSL

/// A TLS failure: a certificate or key that cannot be loaded, or a handshake or record the peer
/// got wrong. The text says which file or which check.
public struct TLSError: Error, CustomStringConvertible, Equatable, Sendable {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// TLS settings shared by every connection of a host, through the system OpenSSL (TLS 1.2 or
/// newer). A server context holds a certificate chain and its key; a client context verifies
/// the server's certificate (on by default) against a CA file or the system's trust store, and
/// checks that it names the host dialed (or `serverName`).
///
/// Immutable after creation; OpenSSL contexts may be shared by connections on any thread.
public final class TLSContext: @unchecked Sendable {
    public enum Role: Sendable { case server, client }

    public let role: Role
    /// Client: the name the server's certificate must carry (a DNS name or an IP address); nil
    /// checks the address dialed.
    public let serverName: String?
    /// Client: whether the server's certificate is verified (only tests of the refusal turn
    /// this off; the command line has no switch for it).
    public let verifiesPeer: Bool
    fileprivate let context: OpaquePointer

    private init(role: Role, serverName: String?, verifiesPeer: Bool) throws {
        guard let context = SSL_CTX_new(role == .server ? TLS_server_method() : TLS_client_method()) else {
            throw TLSError("OpenSSL cannot create a TLS context: \(TLSContext.errorQueue() ?? "unknown error")")
        }
        self.context = context
        self.role = role
        self.serverName = serverName
        self.verifiesPeer = verifiesPeer
        _ = boardsync_ssl_ctx_set_modes(context)
        // TLS 1.2 or newer, and in TLS 1.2 only forward-secret AEAD suites (ECDHE with AES-GCM
        // or ChaCha20-Poly1305): no CBC-SHA1, no static RSA key exchange. TLS 1.3's suites are
        // all AEAD. Fails closed: a context that cannot be restricted is not made.
        guard boardsync_ssl_ctx_set_min_tls12(context) == 1,
              SSL_CTX_set_cipher_list(context, TLSContext.tls12Ciphers) == 1 else {
            let reason = TLSContext.errorQueue() ?? "unknown error"  // `deinit` frees the context
            throw TLSError("OpenSSL cannot restrict TLS to version 1.2+ with AEAD suites: \(reason)")
        }
    }

    /// The TLS 1.2 cipher suites offered and accepted (OpenSSL's cipher-list syntax).
    public static let tls12Ciphers = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"

    deinit { SSL_CTX_free(context) }

    /// A server context: `certificate` is a PEM file holding the server's certificate (then any
    /// intermediates), `key` the PEM private key that matches it.
    public static func server(certificate: String, key: String) throws -> TLSContext {
        try readable(certificate, "TLS certificate")
        try readable(key, "TLS key")
        let tls = try TLSContext(role: .server, serverName: nil, verifiesPeer: false)
        ERR_clear_error()
        guard SSL_CTX_use_certificate_chain_file(tls.context, certificate) == 1 else {
            throw TLSError("the TLS certificate \(certificate) is not a PEM certificate chain (\(errorQueue() ?? "unreadable"))")
        }
        guard SSL_CTX_use_PrivateKey_file(tls.context, key, SSL_FILETYPE_PEM) == 1 else {
            let reason = errorQueue() ?? "unreadable"
            if reason.contains("key values mismatch") {
                throw TLSError("the TLS key \(key) does not belong to the certificate \(certificate)")
            }
            throw TLSError("the TLS key \(key) is not a PEM private key (\(reason))")
        }
        guard SSL_CTX_check_private_key(tls.context) == 1 else {
            throw TLSError("the TLS key \(key) does not belong to the certificate \(certificate)")
        }
        return tls
    }

    /// A client context. `ca`: a PEM file of the certificate authorities to trust (nil: the
    /// system's trust store). `serverName`: the name to expect in the server's certificate (nil:
    /// the address dialed).
    public static func client(ca: String? = nil, serverName: String? = nil, verifyPeer: Bool = true) throws -> TLSContext {
        // An empty name would make OpenSSL check no name at all (SSL_set1_host clears the list).
        if let serverName { try checkedName(serverName) }
        let tls = try TLSContext(role: .client, serverName: serverName, verifiesPeer: verifyPeer)
        ERR_clear_error()
        if let ca {
            try readable(ca, "TLS CA file")
            guard SSL_CTX_load_verify_locations(tls.context, ca, nil) == 1 else {
                throw TLSError("the TLS CA file \(ca) holds no PEM certificate (\(errorQueue() ?? "unreadable"))")
            }
        } else {
            _ = SSL_CTX_set_default_verify_paths(tls.context)
        }
        SSL_CTX_set_verify(tls.context, verifyPeer ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nil)
        return tls
    }

    /// A stream for one connection. `host`: the address dialed (clients check the certificate
    /// against it unless `serverName` was given).
    public func stream(host: String) throws -> TLSStream {
        try TLSStream(context: self, host: host)
    }

    /// Refuses a name that cannot be checked: empty, or holding a NUL (C would cut it there).
    fileprivate static func checkedName(_ name: String) throws {
        guard !name.isEmpty, !name.utf8.contains(0) else {
            throw TLSError("the name to check in the server's certificate is empty or holds a NUL byte; give the DNS name or IP address it carries")
        }
    }

    private static func readable(_ path: String, _ what: String) throws {
        guard access(path, R_OK) == 0 else {
            throw TLSError("cannot read the \(what) \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// OpenSSL's queued errors for this thread, joined, and cleared.
    static func errorQueue() -> String? {
        var lines: [String] = []
        while case let code = ERR_get_error(), code != 0 {
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            // "error:0A000086:SSL routines::certificate verify failed" → the reason at the end.
            lines.append(text.split(separator: ":", omittingEmptySubsequences: false).last.map(String.init) ?? text)
        }
        return lines.isEmpty ? nil : lines.joined(separator: "; ")
    }
}

/// TLS over one connection, as a byte transformer: ciphertext from the socket goes in, plaintext
/// comes out, and plaintext to send becomes ciphertext to write. Memory BIOs only: the stream
/// never touches the socket, so `TCPConnection` keeps its event-driven reads and writes.
/// Plaintext sent before the handshake finishes waits and goes out when it does.
public final class TLSStream {
    private let ssl: OpaquePointer
    private let readBIO: OpaquePointer
    private let writeBIO: OpaquePointer
    private let context: TLSContext
    public private(set) var isHandshakeDone = false
    /// Plaintext waiting for the handshake.
    private var waiting: [UInt8] = []
    private var failed = false

    fileprivate init(context: TLSContext, host: String) throws {
        guard let ssl = SSL_new(context.context), let readBIO = BIO_new(BIO_s_mem()), let writeBIO = BIO_new(BIO_s_mem()) else {
            throw TLSError("OpenSSL cannot create a TLS session: \(TLSContext.errorQueue() ?? "out of memory")")
        }
        self.ssl = ssl
        self.readBIO = readBIO
        self.writeBIO = writeBIO
        self.context = context
        SSL_set_bio(ssl, readBIO, writeBIO)  // the session owns both BIOs from here
        if context.role == .server {
            SSL_set_accept_state(ssl)
        } else {
            SSL_set_connect_state(ssl)
            // Fails closed: a name OpenSSL did not take would leave the certificate's name
            // unchecked, so the stream is not made.
            // (Thrown once fully initialized, so `deinit` frees the session.)
            let name = context.serverName ?? host
            try TLSContext.checkedName(name)
            var probe4 = in_addr(), probe6 = in6_addr()
            let set: Bool
            if inet_pton(AF_INET, name, &probe4) == 1 || inet_pton(AF_INET6, name, &probe6) == 1 {
                set = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name) == 1
            } else {
                set = SSL_set1_host(ssl, name) == 1 && boardsync_ssl_set_server_name(ssl, name) == 1
            }
            guard set else {
                let reason = TLSContext.errorQueue() ?? "refused"
                throw TLSError("OpenSSL would not check the server's certificate for '\(name)': \(reason)")
            }
        }
    }

    deinit { SSL_free(ssl) }

    /// Plaintext waiting for the handshake, in bytes.
    public var waitingBytes: Int { waiting.count }

    /// Client: starts the handshake (the ClientHello is then in `takeOutput`).
    public func start() throws {
        try advanceHandshake()
    }

    /// Ciphertext from the socket. Returns the plaintext it completed and whether the peer
    /// closed the TLS session (close_notify). Throws on a failed handshake or a bad record.
    public func receive(_ bytes: [UInt8]) throws -> (plaintext: [UInt8], closed: Bool) {
        guard !failed else { throw TLSError("the TLS session already failed") }
        if !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { BIO_write(readBIO, $0.baseAddress, Int32($0.count)) }
            guard written == Int32(bytes.count) else { throw fail("OpenSSL could not buffer received bytes") }
        }
        if !isHandshakeDone {
            try advanceHandshake()
            if !isHandshakeDone { return ([], false) }
        }
        var plaintext: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        while true {
            ERR_clear_error()
            let count = buffer.withUnsafeMutableBytes { SSL_read(ssl, $0.baseAddress, Int32($0.count)) }
            if count > 0 {
                plaintext += buffer[0..<Int(count)]
                continue
            }
            let error = SSL_get_error(ssl, count)
            switch error {
            case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
                return (plaintext, false)
            case SSL_ERROR_ZERO_RETURN:
                return (plaintext, true)
            default:
                throw fail("TLS record error: \(TLSContext.errorQueue() ?? "code \(error)")")
            }
        }
    }

    /// Encrypts plaintext (or keeps it until the handshake is done).
    public func send(_ plaintext: [UInt8]) throws {
        guard !failed else { throw TLSError("the TLS session already failed") }
        guard isHandshakeDone else {
            waiting += plaintext
            return
        }
        try write(plaintext)
    }

    /// Ciphertext to write to the socket (and clears it).
    public func takeOutput() -> [UInt8] {
        let pending = boardsync_bio_pending(writeBIO)
        guard pending > 0 else { return [] }
        var bytes = [UInt8](repeating: 0, count: pending)
        let read = bytes.withUnsafeMutableBytes { BIO_read(writeBIO, $0.baseAddress, Int32($0.count)) }
        return read > 0 ? Array(bytes[0..<Int(read)]) : []
    }

    /// Queues a close_notify (an orderly end of the TLS session) in `takeOutput`.
    public func shutdown() {
        guard isHandshakeDone, !failed else { return }
        ERR_clear_error()
        _ = SSL_shutdown(ssl)
    }

    /// The negotiated protocol, such as "TLSv1.3" (after the handshake).
    public var protocolVersion: String {
        SSL_get_version(ssl).map { String(cString: $0) } ?? "unknown"
    }

    private func write(_ plaintext: [UInt8]) throws {
        var offset = 0
        while offset < plaintext.count {
            ERR_clear_error()
            let count = plaintext.withUnsafeBytes {
                SSL_write(ssl, $0.baseAddress! + offset, Int32(min($0.count - offset, 1 << 20)))
            }
            guard count > 0 else {
                throw fail("TLS write failed: \(TLSContext.errorQueue() ?? "code \(SSL_get_error(ssl, count))")")
            }
            offset += Int(count)
        }
    }

    private func advanceHandshake() throws {
        ERR_clear_error()
        let result = SSL_do_handshake(ssl)
        if result == 1 {
            isHandshakeDone = true
            let pending = waiting
            waiting = []
            if !pending.isEmpty { try write(pending) }
            return
        }
        let error = SSL_get_error(ssl, result)
        if error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE { return }
        var reason = TLSContext.errorQueue() ?? "code \(error)"
        let verify = SSL_get_verify_result(ssl)
        if context.role == .client, verify != X509_V_OK {
            reason += " (\(String(cString: X509_verify_cert_error_string(verify))))"
        }
        if reason.contains("wrong version number") || reason.contains("packet length too long") || reason.contains("http request") {
            reason += context.role == .client
                ? "; does the server speak TLS?"
                : "; the client does not speak TLS (give it --tls)"
        }
        throw fail("TLS handshake failed: \(reason)")
    }

    private func fail(_ message: String) -> TLSError {
        failed = true
        return TLSError(message)
    }
}
