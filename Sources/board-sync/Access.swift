import BoardNet
import BoardSync
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Secrets and tokens for `serve --secret-file`, `token`, and `sync`/`peer --token`.
enum Access {
    /// Reads the server's secret; with `create`, makes a new random one (mode 0600) when the
    /// file is missing. Refuses a secret other users can read, and links.
    /// `bearer` names what a created file is for when it is a token sent as is (the web view's
    /// or the admin port's run token), not a secret that signs tokens.
    static func secret(at path: String, create: Bool, bearer: String? = nil) throws -> [UInt8] {
        if create, !FileManager.default.fileExists(atPath: path) {
            var generator = SystemRandomNumberGenerator()
            let hex = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
            let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw Failure("cannot create the secret file \(path): \(String(cString: strerror(errno)))") }
            let bytes = Array((hex + "\n").utf8)
            let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            let synced = fsync(fd)
            close(fd)
            guard written == bytes.count, synced == 0 else { throw Failure("cannot write the secret file \(path)") }
            if let bearer {
                NetCommands.log("created a new \(bearer) in \(path) (mode 0600): clients send it as it is")
            } else {
                NetCommands.log("created a new secret in \(path) (mode 0600); mint tokens with `board-sync token --secret-file \(path) ...`")
            }
        }
        var info = stat()
        guard lstat(path, &info) == 0 else {
            throw Failure("no secret file at \(path) (`board-sync serve --secret-file \(path)` creates one)")
        }
        guard info.st_mode & S_IFMT == S_IFREG else { throw Failure("the secret file \(path) is not a regular file") }
        guard info.st_mode & 0o077 == 0 else {
            throw Failure("the secret file \(path) can be read by other users (mode \(String(info.st_mode & 0o777, radix: 8))); run `chmod 600 \(path)`")
        }
        guard info.st_size <= 4096, let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw Failure("cannot read the secret file \(path) (at most 4 KB of text)")
        }
        let secret = Array(text.trimmingCharacters(in: .whitespacesAndNewlines).utf8)
        guard secret.count >= TokenAuthority.minimumSecret else {
            throw Failure("the secret in \(path) is too short (\(secret.count) bytes; at least \(TokenAuthority.minimumSecret))")
        }
        return secret
    }

    /// `--token T` or `--token-file F` (not both); empty when neither is given.
    static func token(_ args: Arguments) throws -> [UInt8] {
        switch (args.value("token"), args.value("token-file")) {
        case (nil, nil): return []
        case (let token?, nil): return Array(token.utf8)
        case (nil, let file?):
            return Array(try readTokenFile(file).utf8)
        default: throw UsageError("give --token or --token-file, not both")
        }
    }

    /// The largest token file read (a HELLO carries at most 4 KiB of credentials).
    static let maxTokenFile = 4096

    /// A token file's text, trimmed: a regular file of at most `maxTokenFile` bytes (a FIFO, a
    /// device such as /dev/zero or a huge file is refused, never waited on or read whole).
    static func readTokenFile(_ path: String) throws -> String {
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { throw Failure("cannot read the token file \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            throw Failure("the token file \(path) is not a regular file")
        }
        var bytes = [UInt8](repeating: 0, count: maxTokenFile + 1)
        var count = 0
        while count < bytes.count {
            let got = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + count, $0.count - count) }
            if got < 0 && errno == EINTR { continue }
            guard got >= 0 else { throw Failure("cannot read the token file \(path): \(String(cString: strerror(errno)))") }
            if got == 0 { break }
            count += got
        }
        guard count <= maxTokenFile else { throw Failure("the token file \(path) is larger than \(maxTokenFile) bytes: not a token") }
        guard let text = String(bytes: bytes[0..<count], encoding: .utf8) else { throw Failure("the token file \(path) is not UTF-8 text") }
        return text.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Where `token revoke` writes, and servers read, the revocations of tokens signed with the
    /// secret in `secretFile`: beside it.
    static func revocationFile(for secretFile: String) -> String { secretFile + ".revoked" }

    /// Appends one revocation line (the file is made mode 0600 when missing; a link is refused).
    static func appendRevocation(_ line: String, to path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw Failure("cannot write the revocation list \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let bytes = Array((line + "\n").utf8)
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == bytes.count, fsync(fd) == 0 else { throw Failure("cannot write the revocation list \(path)") }
    }

    /// `--secret-file F`: the access control of a server or listening peer, with the
    /// revocations of F.revoked, read now and again within a second of every change.
    static func control(secretFile: String, loop: EventLoop) throws -> (SyncEndpoint.AccessControl, RevocationWatcher) {
        let authority = try TokenAuthority(secret: Access.secret(at: secretFile, create: true))
        let list = RevocationList()
        let watcher = RevocationWatcher(path: revocationFile(for: secretFile), list: list, loop: loop)
        watcher.poll()
        return (SyncEndpoint.AccessControl(authority: authority, wallClock: { Date().timeIntervalSince1970 }, revocations: list), watcher)
    }

    static let serverTLSOptions = ["tls-cert", "tls-key"]
    static let clientTLSOptions = ["tls-ca", "tls-name"]

    /// `--tls-cert CERT --tls-key KEY` (both or neither): a server context, or nil.
    static func serverTLS(_ args: Arguments) throws -> TLSContext? {
        switch (args.value("tls-cert"), args.value("tls-key")) {
        case (nil, nil): return nil
        case (let cert?, let key?):
            var info = stat()
            if stat(key, &info) == 0, info.st_mode & 0o004 != 0 {
                NetCommands.log("WARNING: the TLS key \(key) can be read by every user (mode \(String(info.st_mode & 0o777, radix: 8))); run `chmod 600 \(key)`")
            }
            do { return try TLSContext.server(certificate: cert, key: key) } catch { throw Failure("\(error)") }
        default: throw UsageError("give --tls-cert and --tls-key together")
        }
    }

    /// `--tls [--tls-ca CA] [--tls-name NAME]`: a client context that verifies the server, or nil.
    static func clientTLS(_ args: Arguments) throws -> TLSContext? {
        let ca = args.value("tls-ca"), name = args.value("tls-name")
        guard args.has("tls") || ca != nil || name != nil else { return nil }
        // An empty name would check no name at all: refused, never taken as "any".
        if let name, name.isEmpty { throw UsageError("--tls-name needs a name (the DNS name or IP address the server's certificate carries)") }
        do { return try TLSContext.client(ca: ca, serverName: name) } catch { throw Failure("\(error)") }
    }
}

/// Re-reads a revocation list file when it changes (polled once a second: its size, change
/// time and inode), setting the list's "file" part; the endpoint then closes the sessions it
/// revokes. A missing file revokes nothing. Loop thread only.
final class RevocationWatcher {
    let path: String
    let list: RevocationList
    private let loop: EventLoop
    private var seen: (size: Int, changed: Int, nanoseconds: Int, inode: UInt)?
    private var stopped = false

    init(path: String, list: RevocationList, loop: EventLoop) {
        self.path = path
        self.list = list
        self.loop = loop
    }

    /// Reads the file if it changed since the last look, then looks again in a second.
    func poll() {
        guard !stopped else { return }
        defer { _ = loop.schedule(after: 1) { [weak self] in self?.poll() } }
        var info = stat()
        guard lstat(path, &info) == 0 else {
            if seen != nil || !list.revocations(from: "file").isEmpty {
                NetCommands.log("revocations: \(path) is gone; revoking nothing from it")
            }
            seen = nil
            list.set(Revocations(), from: "file")
            return
        }
        let now = (Int(info.st_size), Int(info.st_ctim.tv_sec), Int(info.st_ctim.tv_nsec), UInt(info.st_ino))
        if let seen, seen == now { return }
        seen = now
        guard info.st_mode & S_IFMT == S_IFREG, let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            NetCommands.log("WARNING: cannot read the revocation list \(path) (not a readable regular file); keeping the revocations read before")
            return
        }
        if info.st_mode & 0o022 != 0 {
            NetCommands.log("WARNING: other users can write the revocation list \(path) (mode \(String(info.st_mode & 0o777, radix: 8))); run `chmod 600 \(path)`")
        }
        let revocations = Revocations(parsing: text)
        if revocations.ignoredLines > 0 {
            NetCommands.log("WARNING: \(revocations.ignoredLines) unreadable line(s) in the revocation list \(path) ignored")
        }
        let before = list.revocations(from: "file")
        list.set(revocations, from: "file")
        if revocations != before {
            NetCommands.log("revocations: \(revocations.subjects.count) subject(s) and \(revocations.tokenIDs.count) token id(s) in \(path)")
        }
    }

    func stop() { stopped = true }
}
