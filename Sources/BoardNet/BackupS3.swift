import BoardModel
import BoardStore
import BoardSync
import Foundation

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
    public let limits: BackupLimits

    public init(endpoint: String, bucket: String, prefix: String, region: String, credentials: S3Credentials,
                client: HTTPClient = HTTPClient(), limits: BackupLimits = .standard) throws {
        self.limits = limits
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

    /// One signed request: its method, path (with the query) and headers.
    func signed(_ method: String, key: String?, query: [(String, String)], payloadHash: String) -> (url: HTTPClient.URLParts, headers: [(String, String)]) {
        let path = "/" + SigV4.uriEncode(bucket, keepSlash: false) + (key.map { "/" + SigV4.uriEncode(prefix + $0, keepSlash: true) } ?? "")
        let date = SigV4.amzDate(Date().timeIntervalSince1970)
        var headers = [("host", endpoint.hostHeader), ("x-amz-content-sha256", payloadHash), ("x-amz-date", date)]
        let authorization = signer.authorization(method: method, path: path, query: query, headers: headers, payloadHash: payloadHash, date: date)
        headers.removeFirst()  // Host is written by the client
        headers.append(("Authorization", authorization))
        var url = endpoint
        url.path = path + (query.isEmpty ? "" : "?" + SigV4.canonicalQuery(query))
        return (url, headers)
    }

    /// Sends one signed request and reads its answer (at most `maxBytes`, by default
    /// `limits.maxReplyBytes`).
    func send(_ method: String, key: String?, query: [(String, String)] = [], body: [UInt8] = [], maxBytes: Int? = nil) throws -> HTTPClient.Response {
        let request = signed(method, key: key, query: query, payloadHash: SigV4.hex(SHA256.hash(body)))
        var client = self.client
        client.maxResponseBytes = maxBytes ?? limits.maxReplyBytes
        do {
            return try client.request(method, request.url, headers: request.headers, body: body)
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
        var bytes: [UInt8] = []
        return try get(key, maxBytes: maxBytes) { bytes += $0 } ? bytes : nil
    }

    /// The body streamed into `sink` as it arrives (never held whole).
    public func get(_ key: String, maxBytes: Int, into sink: ([UInt8]) throws -> Void) throws -> Bool {
        let request = signed("GET", key: key, query: [], payloadHash: SigV4.emptyPayloadHash)
        var client = self.client
        client.maxResponseBytes = limits.maxReplyBytes
        let response: HTTPClient.Response
        do {
            response = try client.request("GET", request.url, headers: request.headers, maxBody: maxBytes, streamingTo: sink)
        } catch let error as BackupError {
            throw error
        } catch {
            throw BackupError("S3 GET \(key) at \(endpoint.hostHeader): \(error)")
        }
        if response.status == 404 { return false }
        guard response.status == 200 else { throw failure("GET", key, response) }
        return true
    }

    /// Longest key (or a quarter of the longest continuation token) a listing may name: S3's
    /// own limit on a key. A longer one is an error, not a key.
    public static let maxKeyBytes = 1024

    /// The keys a backup reads back (only these are kept from a listing):
    /// `assets/<64 hex>` and `boards/NAME/manifest.json`.
    public static func isBackupKey(_ key: String) -> Bool {
        if key.hasPrefix("assets/") { return BackupManifest.isHex64(String(key.dropFirst(7))) }
        let parts = key.split(separator: "/", omittingEmptySubsequences: false)
        return parts.count == 3 && parts[0] == "boards" && parts[2] == "manifest.json" && Hello.isValidBoardName(String(parts[1]))
    }

    /// The backup keys (`isBackupKey`) under `keyPrefix`; anything else the bucket holds there
    /// is passed over as it is read, so what is kept is bounded by the names a backup uses.
    /// Bounded by `limits.maxListedKeys` and `limits.maxListedBytes`.
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
            let response = try send("GET", key: nil, query: query, maxBytes: limits.maxListPageBytes)
            guard response.status == 200 else { throw failure("LIST", keyPrefix, response) }
            listedBytes += response.body.count
            guard listedBytes <= limits.maxListedBytes else {
                throw BackupError("listing '\(keyPrefix)' at \(endpoint.hostHeader) passed \(limits.maxListedBytes) bytes of replies (BackupLimits.maxListedBytes)")
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
            guard keys.count <= limits.maxListedKeys else { throw BackupError("listing '\(keyPrefix)' brought over \(limits.maxListedKeys) keys (BackupLimits.maxListedKeys)") }
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
