import BoardModel
import BoardStore
import BoardSync
import Foundation

/// Where backups go: a directory or S3-compatible object storage, as keys ("assets/<sha256>",
/// "boards/NAME/manifest.json") holding bytes. Each `put` is whole or absent at the
/// destination (a directory's file is written to a temp name, fsynced and renamed; an S3 PUT
/// is atomic), so a board's backup, whose manifest is written last, is whole or absent.
/// Called from backup threads only (blocking).
public protocol BackupTarget: Sendable, CustomStringConvertible {
    func put(_ key: String, _ bytes: [UInt8]) throws
    /// The object's bytes, or nil when there is none. Refuses one over `maxBytes`.
    func get(_ key: String, maxBytes: Int) throws -> [UInt8]?
    /// Every key starting with `prefix` (an S3 target keeps only the backup's own names:
    /// `S3BackupTarget.isBackupKey`).
    func list(_ prefix: String) throws -> [String]
    func delete(_ key: String) throws
}

/// A backup target refused or failed a request: says which target and what it said.
public struct BackupError: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Backups in a local (or mounted) directory.
public struct DirectoryBackupTarget: BackupTarget {
    public let root: String
    private let fileSystem = PosixFileSystem()

    public init(root: String) { self.root = root }

    public var description: String { root }

    func path(_ key: String) -> String { Path.join(root, key) }

    public func put(_ key: String, _ bytes: [UInt8]) throws {
        let file = path(key)
        do {
            try fileSystem.createDirectories(Path.parent(of: file))
            try fileSystem.writeAtomically(file, bytes)
        } catch {
            throw BackupError("cannot write \(file): \(error)")
        }
    }

    public func get(_ key: String, maxBytes: Int) throws -> [UInt8]? {
        let file = path(key)
        guard let size = try fileSystem.fileSize(file) else { return nil }
        guard size <= maxBytes else { throw BackupError("\(file) is \(size) bytes, over the \(maxBytes) this backup expects") }
        return try fileSystem.readFile(file)
    }

    public func list(_ prefix: String) throws -> [String] {
        // Keys are at most three levels deep (boards/NAME/FILE): walk from the prefix's directory.
        var keys: [String] = []
        func walk(_ relative: String, depth: Int) throws {
            let directory = relative.isEmpty ? root : Path.join(root, relative)
            guard fileSystem.isDirectory(directory), depth < 4 else { return }
            for name in try fileSystem.listDirectory(directory).sorted() where !name.hasPrefix(".") {
                let key = relative.isEmpty ? name : "\(relative)/\(name)"
                if fileSystem.isDirectory(Path.join(root, key)) {
                    if prefix.hasPrefix(key + "/") || key.hasPrefix(prefix) || prefix.isEmpty { try walk(key, depth: depth + 1) }
                } else if key.hasPrefix(prefix) {
                    keys.append(key)
                }
            }
        }
        // A directory not made yet holds nothing (the first put makes it).
        guard fileSystem.exists(root) else { return [] }
        guard fileSystem.isDirectory(root) else { throw BackupError("the backup destination \(root) is not a directory") }
        try walk("", depth: 0)
        return keys
    }

    public func delete(_ key: String) throws {
        let file = path(key)
        if try fileSystem.fileSize(file) != nil { try fileSystem.removeFile(file) }
    }
}

/// S3 credentials: from a file (first line the access key id, second the secret) or the
/// environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY). Never printed.
public struct S3Credentials: Sendable, CustomStringConvertible {
    public var accessKey: String
    public var secretKey: String
    public init(accessKey: String, secretKey: String) {
        self.accessKey = accessKey
        self.secretKey = secretKey
    }
    public var description: String { "S3 credentials (access key \(accessKey.prefix(4))…)" }
}

/// Backups in an S3-compatible bucket (AWS S3, MinIO, Ceph, moto), path-style requests
/// (`ENDPOINT/BUCKET/KEY`) signed with SigV4.
public struct S3BackupTarget: BackupTarget {
    public let endpoint: HTTPClient.URLParts
    public let bucket: String
    /// Keys are stored under this prefix ("" or ending in '/').
    public let prefix: String
    public let signer: SigV4
    public var client: HTTPClient

    public init(endpoint: String, bucket: String, prefix: String, region: String, credentials: S3Credentials,
                client: HTTPClient = HTTPClient()) throws {
        self.endpoint = try HTTPClient.URLParts(endpoint)
        guard self.endpoint.path == "/" else { throw BackupError("the S3 endpoint \(endpoint) must not have a path") }
        guard S3BackupTarget.isValidBucket(bucket) else { throw BackupError("'\(bucket)' is not an S3 bucket name (3-63 lower-case letters, digits, '-' and '.')") }
        self.bucket = bucket
        self.prefix = prefix.isEmpty || prefix.hasSuffix("/") ? prefix : prefix + "/"
        signer = SigV4(accessKey: credentials.accessKey, secretKey: credentials.secretKey, region: region)
        self.client = client
    }

    public static func isValidBucket(_ name: String) -> Bool {
        (3...63).contains(name.utf8.count) && name.utf8.allSatisfy {
            ($0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z")) || ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9")) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".")
        }
    }

    public var description: String {
        "s3://\(bucket)/\(prefix) at \(endpoint.tls ? "https" : "http")://\(endpoint.hostHeader)"
    }

    /// Sends one signed request.
    func send(_ method: String, key: String?, query: [(String, String)] = [], body: [UInt8] = [], maxBytes: Int = 16 << 20) throws -> HTTPClient.Response {
        let path = "/" + SigV4.uriEncode(bucket, keepSlash: false) + (key.map { "/" + SigV4.uriEncode(prefix + $0, keepSlash: true) } ?? "")
        let payloadHash = SigV4.hex(SHA256.hash(body))
        let date = SigV4.amzDate(Date().timeIntervalSince1970)
        var headers = [("host", endpoint.hostHeader), ("x-amz-content-sha256", payloadHash), ("x-amz-date", date)]
        let authorization = signer.authorization(method: method, path: path, query: query, headers: headers, payloadHash: payloadHash, date: date)
        headers.removeFirst()  // Host is written by the client
        headers.append(("Authorization", authorization))
        var url = endpoint
        url.path = path + (query.isEmpty ? "" : "?" + SigV4.canonicalQuery(query))
        var client = self.client
        client.maxResponseBytes = maxBytes
        do {
            return try client.request(method, url, headers: headers, body: body)
        } catch {
            throw BackupError("S3 \(method) \(key ?? "(bucket)") at \(endpoint.hostHeader): \(error)")
        }
    }

    /// An S3 error response in words: its code and message, with what to check.
    func failure(_ method: String, _ key: String?, _ response: HTTPClient.Response) -> BackupError {
        let text = String(decoding: response.body.prefix(4096), as: UTF8.self)
        let code = S3BackupTarget.element("Code", in: text).first ?? "HTTP \(response.status)"
        let message = S3BackupTarget.element("Message", in: text).first.map { ": \($0)" } ?? ""
        var hint = ""
        if ["InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "InvalidToken"].contains(code) || response.status == 403 {
            hint = " (check the S3 credentials: --s3-credentials-file or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY)"
        } else if code == "NoSuchBucket" {
            hint = " (create the bucket first)"
        }
        return BackupError("S3 \(method) \(key.map { prefix + $0 } ?? "s3://\(bucket)") refused: \(code)\(message)\(hint)")
    }

    public func put(_ key: String, _ bytes: [UInt8]) throws {
        let response = try send("PUT", key: key, body: bytes)
        guard response.status == 200 else { throw failure("PUT", key, response) }
    }

    public func get(_ key: String, maxBytes: Int) throws -> [UInt8]? {
        let response = try send("GET", key: key, maxBytes: maxBytes)
        if response.status == 404 { return nil }
        guard response.status == 200 else { throw failure("GET", key, response) }
        return response.body
    }

    /// Keys a listing may bring in all (a bucket that pages forever, repeating itself, would
    /// otherwise grow the list until memory runs out).
    public static let maxListedKeys = 10_000_000
    /// Longest key (or continuation token) a listing may name: S3's own limit on a key. A
    /// longer one is an error, not a key.
    public static let maxKeyBytes = 1024
    /// Bytes of listing replies read in all, by default (each page is at most 16 MiB): a
    /// bucket paging forever with fresh tokens ends here with an error.
    public static let defaultMaxListedBytes = 1 << 30
    /// Bytes of listing replies one `list` reads at most (`defaultMaxListedBytes`).
    public var maxListedBytes = S3BackupTarget.defaultMaxListedBytes

    /// The keys a backup reads back (only these are kept from a listing):
    /// `assets/<64 hex>` and `boards/NAME/manifest.json`.
    public static func isBackupKey(_ key: String) -> Bool {
        if key.hasPrefix("assets/") { return BackupManifest.isHex64(String(key.dropFirst(7))) }
        let parts = key.split(separator: "/", omittingEmptySubsequences: false)
        return parts.count == 3 && parts[0] == "boards" && parts[2] == "manifest.json" && Hello.isValidBoardName(String(parts[1]))
    }

    /// The backup keys (`isBackupKey`) under `keyPrefix`; anything else the bucket holds there
    /// is passed over as it is read, so what is kept is bounded by the names a backup uses.
    public func list(_ keyPrefix: String) throws -> [String] {
        var keys: [String] = []
        var token: String?
        var tokensSeen: Set<String> = []
        var listedBytes = 0
        repeat {
            // Asked without a trailing '/' (keys are filtered here): moto checks signatures of
            // queries holding '/' against a canonical form AWS does not use (tested there).
            let full = prefix + keyPrefix
            var query = [("list-type", "2"), ("prefix", full.hasSuffix("/") ? String(full.dropLast()) : full)]
            if let token { query.append(("continuation-token", token)) }
            let response = try send("GET", key: nil, query: query)
            guard response.status == 200 else { throw failure("LIST", keyPrefix, response) }
            listedBytes += response.body.count
            guard listedBytes <= maxListedBytes else {
                throw BackupError("listing '\(keyPrefix)' at \(endpoint.hostHeader) passed \(maxListedBytes) bytes of replies (S3BackupTarget.maxListedBytes)")
            }
            let text = String(decoding: response.body, as: UTF8.self)
            for key in S3BackupTarget.element("Key", in: text) {
                guard key.utf8.count <= Self.maxKeyBytes else {
                    throw BackupError("listing '\(keyPrefix)' at \(endpoint.hostHeader) named a key of \(key.utf8.count) bytes, over S3's \(Self.maxKeyBytes)")
                }
                guard key.hasPrefix(full) else { continue }
                let name = String(key.dropFirst(prefix.count))
                if Self.isBackupKey(name) { keys.append(name) }
            }
            guard keys.count <= Self.maxListedKeys else { throw BackupError("listing '\(keyPrefix)' brought over \(Self.maxListedKeys) keys") }
            token = S3BackupTarget.element("IsTruncated", in: text).first == "true" ? S3BackupTarget.element("NextContinuationToken", in: text).first : nil
            if let token, token.utf8.count > Self.maxKeyBytes * 4 {
                throw BackupError("listing '\(keyPrefix)': the server sent a continuation token of \(token.utf8.count) bytes (at most \(Self.maxKeyBytes * 4))")
            }
            if let token, !tokensSeen.insert(token).inserted {
                throw BackupError("listing '\(keyPrefix)': the server sent continuation token \(token.prefix(40)) twice")
            }
        } while token != nil
        return keys
    }

    public func delete(_ key: String) throws {
        let response = try send("DELETE", key: key)
        guard response.status == 204 || response.status == 200 || response.status == 404 else { throw failure("DELETE", key, response) }
    }

    /// The texts of every `<name>...</name>` in an XML document (entities decoded): enough of
    /// XML for S3's list and error replies.
    static func element(_ name: String, in text: String) -> [String] {
        var values: [String] = []
        var rest = Substring(text)
        while let open = rest.range(of: "<\(name)>"), let close = rest[open.upperBound...].range(of: "</\(name)>") {
            let raw = rest[open.upperBound..<close.lowerBound]
            values.append(raw.replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
                .replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&apos;", with: "'")
                .replacingOccurrences(of: "&amp;", with: "&"))
            rest = rest[close.upperBound...]
        }
        return values
    }
}
