import BoardModel
import Foundation

/// What a token lets its holder do on one board.
public enum AccessRole: String, Sendable, CaseIterable {
    /// Receives everything; may send nothing (operations or images are refused).
    case read
    /// Reads and writes its own replicas' operations.
    case write
    /// Reads, writes, and relays operations of any author: for servers and trusted peers that
    /// carry other people's edits.
    case peer
    /// The operator's: the admin port (`serve --admin`: metrics), never a board. An admin
    /// token names no board (its board field is `*`, `TokenAuthority.adminScope`), and board
    /// checks refuse it (`AccessRefusal.adminToken`).
    case admin
}

/// A verified token: who (the subject), which board, what role, until when.
public struct AccessGrant: Equatable, Sendable {
    public var board: String
    public var role: AccessRole
    /// Seconds since 1970 (UTC) after which the token is refused; nil: never expires.
    public var expires: Double?
    /// Who the token was issued to (an opaque id chosen at minting).
    public var subject: String
    /// The token's own id (`jti`), for revoking this one token; nil for tokens minted before
    /// tokens had ids (those can be revoked only by their subject).
    public var tokenID: String?
    /// When the token was minted (seconds since 1970, millisecond precision); nil for tokens
    /// minted before tokens said so (a subject's revocation refuses those whenever it was made).
    public var issued: Double?

    public init(board: String, role: AccessRole, expires: Double?, subject: String, tokenID: String? = nil, issued: Double? = nil) {
        self.board = board
        self.role = role
        self.expires = expires
        self.subject = subject
        self.tokenID = tokenID
        self.issued = issued
    }
}

/// Why a token was refused (for the server's log only: clients are told nothing more than
/// "access denied", so a refusal never says whether the board exists).
public enum AccessRefusal: Error, Equatable, Sendable, CustomStringConvertible {
    case missing
    case malformed
    case badSignature
    case otherBoard(String)
    case expired(Double)
    /// The token (by its id) or its subject was revoked (`Revocations`).
    case revoked
    /// The board asked for is not a plain name (checked before the token is looked at).
    case invalidBoardName
    /// An admin token presented for a board (admin tokens open the admin port only).
    case adminToken
    /// A board token presented to the admin port (it needs an admin token).
    case notAdmin

    public var description: String {
        switch self {
        case .missing: "no token"
        case .malformed: "a malformed token"
        case .badSignature: "a token not signed with this server's secret (or altered)"
        case .otherBoard(let board): "a token for another board ('\(board)')"
        case .expired(let when): "a token that expired at \(Date(timeIntervalSince1970: when))"
        case .revoked: "a revoked token"
        case .invalidBoardName: "a request for an invalid board name"
        case .adminToken: "an admin token (it opens the admin port, not boards)"
        case .notAdmin: "a token that is not an admin token"
        }
    }
}

/// Mints and verifies access tokens: `bst1.<payload>.<signature>`, both parts base64url, the
/// payload `board=NAME;role=read|write|peer;exp=SECONDS|never;sub=SUBJECT;jti=ID;iat=MILLISECONDS`
/// and the signature its HMAC-SHA256 under the server's secret (docs/DEPLOYMENT.md). Tokens
/// minted before `jti` and `iat` existed still verify (without an id or an issue time). Pure:
/// the current time is passed in, so the sans-IO endpoint can check expiry without reading a
/// clock.
public struct TokenAuthority: Sendable {
    public static let prefix = "bst1"
    /// Shortest secret accepted, in bytes.
    public static let minimumSecret = 16
    /// What an admin token says in its board field: it names no board.
    public static let adminScope = "*"
    private let secret: [UInt8]

    public init(secret: [UInt8]) throws {
        guard secret.count >= TokenAuthority.minimumSecret else {
            throw AccessSetupError("the secret must be at least \(TokenAuthority.minimumSecret) bytes (it is \(secret.count))")
        }
        self.secret = secret
    }

    /// 16 hex digits (a token id's form).
    public static func hex16(_ value: UInt64) -> String {
        let hex = String(value, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// A token for `board` with `role`, for `subject`, valid until `expires` (nil: forever),
    /// under the id `tokenID`, minted at `issued` (seconds since 1970; nil leaves it out, and
    /// then only the token id revokes it one by one). Without a `tokenID` the id is derived from
    /// the fields under the secret (pure, and unforgeable): tokens differing in any field, the
    /// issue time included, get different ids.
    public func mint(board: String, role: AccessRole, expires: Double?, subject: String,
                     tokenID: String? = nil, issued: Double? = nil) throws -> String {
        if role == .admin {
            guard board == TokenAuthority.adminScope else { throw AccessSetupError("an admin token names no board (its board is '\(TokenAuthority.adminScope)')") }
        } else {
            guard Hello.isValidBoardName(board) else { throw AccessSetupError("'\(board)' is not a valid board name") }
        }
        guard TokenAuthority.isValidSubject(subject) else {
            throw AccessSetupError("a subject is 1-64 letters, digits, '-', '_' or '.'")
        }
        let expiry = expires.map { String(Int64($0.rounded(.down))) } ?? "never"
        let issuedText = issued.map { ";iat=\(Int64(($0 * 1000).rounded(.down)))" } ?? ""
        let id = tokenID ?? TokenAuthority.hex16(HMAC.sha256(key: secret, message: Array(
            "jti;board=\(board);role=\(role.rawValue);exp=\(expiry);sub=\(subject)\(issuedText)".utf8)).prefix(8).reduce(0) { $0 << 8 | UInt64($1) })
        guard TokenAuthority.isValidSubject(id) else {
            throw AccessSetupError("a token id is 1-64 letters, digits, '-', '_' or '.'")
        }
        let text = "board=\(board);role=\(role.rawValue);exp=\(expiry);sub=\(subject);jti=\(id)" + issuedText
        let payload = Array(text.utf8)
        return [TokenAuthority.prefix, Base64URL.encode(payload), Base64URL.encode(HMAC.sha256(key: secret, message: payload))]
            .joined(separator: ".")
    }

    /// Checks a token presented for `board` at `now` (seconds since 1970). The board name is
    /// checked first (a plain name, `Hello.isValidBoardName`), and compared with the token's
    /// byte for byte: `String`'s `==` takes canonically equivalent names as equal (KELVIN SIGN
    /// and `K`).
    public func verify(_ token: [UInt8], board: String, now: Double) -> Result<AccessGrant, AccessRefusal> {
        guard Hello.isValidBoardName(board) else { return .failure(.invalidBoardName) }
        let grant: AccessGrant
        switch decode(token) {
        case .failure(let refusal): return .failure(refusal)
        case .success(let decoded): grant = decoded
        }
        // An admin token opens no board, whatever its board field says.
        guard grant.role != .admin else { return .failure(.adminToken) }
        guard Array(grant.board.utf8) == Array(board.utf8) else { return .failure(.otherBoard(grant.board)) }
        if let expires = grant.expires, now >= expires { return .failure(.expired(expires)) }
        return .success(grant)
    }

    /// Checks a token presented to the admin port at `now`: signed with this secret, role
    /// `admin` for scope `*`, not expired (revocations: `AccessControl.checkAdmin`).
    public func verifyAdmin(_ token: [UInt8], now: Double) -> Result<AccessGrant, AccessRefusal> {
        let grant: AccessGrant
        switch decode(token) {
        case .failure(let refusal): return .failure(refusal)
        case .success(let decoded): grant = decoded
        }
        guard grant.role == .admin, grant.board == TokenAuthority.adminScope else { return .failure(.notAdmin) }
        if let expires = grant.expires, now >= expires { return .failure(.expired(expires)) }
        return .success(grant)
    }

    /// What a token signed with this secret says, whatever its board and expiry (for `token
    /// revoke --token`): nothing in a payload is read before its signature is checked.
    public func decode(_ token: [UInt8]) -> Result<AccessGrant, AccessRefusal> {
        guard !token.isEmpty else { return .failure(.missing) }
        let parts = token.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3, Array(parts[0]) == Array(TokenAuthority.prefix.utf8),
              let payload = Base64URL.decode(Array(parts[1])), let signature = Base64URL.decode(Array(parts[2])) else {
            return .failure(.malformed)
        }
        // The signature first: nothing in an unsigned payload is looked at.
        guard HMAC.constantTimeEquals(HMAC.sha256(key: secret, message: payload), signature) else {
            return .failure(.badSignature)
        }
        var fields: [String: String] = [:]
        for field in String(decoding: payload, as: UTF8.self).split(separator: ";") {
            let pair = field.split(separator: "=", maxSplits: 1).map(String.init)
            guard pair.count == 2 else { return .failure(.malformed) }
            fields[pair[0]] = pair[1]
        }
        guard let tokenBoard = fields["board"], let role = fields["role"].flatMap(AccessRole.init(rawValue:)),
              let expiry = fields["exp"], let subject = fields["sub"] else { return .failure(.malformed) }
        let expires: Double?
        if expiry == "never" { expires = nil } else if let seconds = Int64(expiry) { expires = Double(seconds) } else { return .failure(.malformed) }
        var issued: Double?
        if let text = fields["iat"] {
            guard let milliseconds = Int64(text) else { return .failure(.malformed) }
            issued = Double(milliseconds) / 1000
        }
        if let id = fields["jti"], !TokenAuthority.isValidSubject(id) { return .failure(.malformed) }
        return .success(AccessGrant(board: tokenBoard, role: role, expires: expires, subject: subject,
                                    tokenID: fields["jti"], issued: issued))
    }

    public static func isValidSubject(_ subject: String) -> Bool {
        let bytes = Array(subject.utf8)
        return !bytes.isEmpty && bytes.count <= 64 && bytes.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ".")
        }
    }

    /// `90s`, `15m`, `12h`, `30d` in seconds.
    public static func parseDuration(_ text: String) -> Double? {
        guard let unit = text.last, let value = Double(text.dropLast()), value > 0, value.isFinite else { return nil }
        switch unit {
        case "s": return value
        case "m": return value * 60
        case "h": return value * 3600
        case "d": return value * 86_400
        default: return nil
        }
    }
}

public struct AccessSetupError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Base64 with the URL alphabet and no padding (RFC 4648 §5), so a token is one shell word.
public enum Base64URL {
    public static func encode(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    public static func decode(_ text: [UInt8]) -> [UInt8]? {
        guard text.count <= 8192 else { return nil }
        var standard = String(decoding: text, as: UTF8.self)
            .replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        guard !standard.contains("=") else { return nil }
        while standard.count % 4 != 0 { standard += "=" }
        return Data(base64Encoded: standard).map(Array.init)
    }
}
