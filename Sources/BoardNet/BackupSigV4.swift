import BoardModel
import Foundation

/// AWS Signature Version 4 for S3 requests (the `Authorization` header), over BoardModel's
/// SHA-256 and HMAC: the canonical request, the string to sign, the signing key derived from
/// the secret, date, region and service, and the signature. Pure: the caller passes the time.
/// Tested against the values AWS publishes for its examples (BackupSigV4Tests).
public struct SigV4: Sendable {
    public var accessKey: String
    public var secretKey: String
    public var region: String
    public var service: String

    public init(accessKey: String, secretKey: String, region: String, service: String = "s3") {
        self.accessKey = accessKey
        self.secretKey = secretKey
        self.region = region
        self.service = service
    }

    /// The hex SHA-256 of an empty payload.
    public static let emptyPayloadHash = hex(SHA256.hash([UInt8]()))

    public static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes { out.append(digits[Int(byte >> 4)]); out.append(digits[Int(byte & 15)]) }
        return String(decoding: out, as: UTF8.self)
    }

    /// RFC 3986 percent-encoding as SigV4 wants it: unreserved characters stay, everything else
    /// becomes %XX (upper case); '/' stays when `keepSlash` (object key paths).
    public static func uriEncode(_ text: String, keepSlash: Bool) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            case UInt8(ascii: "/") where keepSlash:
                out += "/"
            default:
                out += String(format: "%%%02X", byte)
            }
        }
        return out
    }

    /// The canonical query string: each name and value encoded, sorted by name then value.
    public static func canonicalQuery(_ query: [(String, String)]) -> String {
        var pairs: [(name: String, value: String)] = []
        for (name, value) in query { pairs.append((uriEncode(name, keepSlash: false), uriEncode(value, keepSlash: false))) }
        pairs.sort { left, right in left.name == right.name ? left.value < right.value : left.name < right.name }
        return pairs.map { "\($0.name)=\($0.value)" }.joined(separator: "&")
    }

    /// The canonical request and the signed header list. `path` is already URI-encoded;
    /// `headers` are every header to sign (names any case; values trimmed here).
    public static func canonicalRequest(method: String, path: String, query: [(String, String)],
                                        headers: [(String, String)], payloadHash: String) -> (request: String, signedHeaders: String) {
        let normalized = headers.map { (name: $0.0.lowercased(), value: $0.1.trimmingCharacters(in: .whitespaces)
            .split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")) }
            .sorted { $0.name < $1.name }
        let signedHeaders = normalized.map(\.name).joined(separator: ";")
        let canonicalHeaders = normalized.map { "\($0.name):\($0.value)\n" }.joined()
        let request = [method, path.isEmpty ? "/" : path, canonicalQuery(query), canonicalHeaders, signedHeaders, payloadHash]
            .joined(separator: "\n")
        return (request, signedHeaders)
    }

    /// `date` is the request's `x-amz-date`, `YYYYMMDDTHHMMSSZ`.
    public func stringToSign(canonicalRequest: String, date: String) -> String {
        ["AWS4-HMAC-SHA256", date, scope(date), SigV4.hex(SHA256.hash(Array(canonicalRequest.utf8)))].joined(separator: "\n")
    }

    func scope(_ date: String) -> String { "\(date.prefix(8))/\(region)/\(service)/aws4_request" }

    public func signature(stringToSign: String, date: String) -> String {
        var key = HMAC.sha256(key: Array("AWS4\(secretKey)".utf8), message: Array(date.prefix(8).utf8))
        key = HMAC.sha256(key: key, message: Array(region.utf8))
        key = HMAC.sha256(key: key, message: Array(service.utf8))
        key = HMAC.sha256(key: key, message: Array("aws4_request".utf8))
        return SigV4.hex(HMAC.sha256(key: key, message: Array(stringToSign.utf8)))
    }

    /// The `Authorization` header's value for a request whose signed headers (`host`,
    /// `x-amz-date` and `x-amz-content-sha256` among them) are `headers`.
    public func authorization(method: String, path: String, query: [(String, String)], headers: [(String, String)],
                              payloadHash: String, date: String) -> String {
        let (request, signedHeaders) = SigV4.canonicalRequest(method: method, path: path, query: query, headers: headers, payloadHash: payloadHash)
        let signature = signature(stringToSign: stringToSign(canonicalRequest: request, date: date), date: date)
        return "AWS4-HMAC-SHA256 Credential=\(accessKey)/\(scope(date)),SignedHeaders=\(signedHeaders),Signature=\(signature)"
    }

    /// `YYYYMMDDTHHMMSSZ` for a time in seconds since 1970 (UTC).
    public static func amzDate(_ seconds: Double) -> String {
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        return String(format: "%04d%02d%02dT%02d%02d%02dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
                      parts.tm_hour, parts.tm_min, parts.tm_sec)
    }
}
