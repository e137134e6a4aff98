import Foundation

/// Revoked token subjects and token ids (docs/DEPLOYMENT.md, Revoking tokens). A subject's
/// revocation refuses its tokens minted up to the revocation (a token minted for the subject
/// afterwards works again, so a person keeps their authorship under a new token); a token id's
/// refuses that one token. Kept as text, one revocation a line, in a file beside the server's
/// secret (`board-sync token revoke` appends to it) and, on a cluster, in Redis:
///
///     subject ann 1764608400123     (revoked at, milliseconds since 1970)
///     token 3f9c2a71d04b8e65
///
/// Blank lines and lines starting with `#` are ignored, and so are lines that say nothing
/// this build understands (counted in `ignoredLines`).
public struct Revocations: Equatable, Sendable {
    /// Subject → when it was revoked (seconds since 1970, millisecond precision).
    public var subjects: [String: Double] = [:]
    public var tokenIDs: Set<String> = []
    /// Lines `init(parsing:)` could not read.
    public var ignoredLines = 0

    public init() {}

    public init(parsing text: String) {
        for raw in text.split(whereSeparator: \.isNewline) {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            if let revocation = Revocations(line: line) { merge(revocation) } else { ignoredLines += 1 }
        }
    }

    /// One line's revocation, or nil when the line says nothing readable.
    public init?(line: String) {
        let words = line.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        switch words.first {
        case "subject" where words.count == 3 && TokenAuthority.isValidSubject(words[1]):
            guard let milliseconds = Int64(words[2]), milliseconds >= 0 else { return nil }
            subjects[words[1]] = Double(milliseconds) / 1000
        case "token" where words.count == 2 && TokenAuthority.isValidSubject(words[1]):
            tokenIDs.insert(words[1])
        default:
            return nil
        }
    }

    /// The line that revokes `subject`'s tokens minted up to `at` (seconds since 1970).
    public static func line(subject: String, at: Double) -> String {
        "subject \(subject) \(Int64((at * 1000).rounded(.down)))"
    }

    /// The line that revokes the token with id `tokenID`.
    public static func line(tokenID: String) -> String {
        "token \(tokenID)"
    }

    /// Every revocation as its line, sorted.
    public var lines: [String] {
        (subjects.map { Revocations.line(subject: $0.key, at: $0.value) } + tokenIDs.map { Revocations.line(tokenID: $0) }).sorted()
    }

    public var isEmpty: Bool { subjects.isEmpty && tokenIDs.isEmpty }

    /// Adds `other`'s revocations (a subject revoked twice keeps the later time, which covers more).
    public mutating func merge(_ other: Revocations) {
        subjects.merge(other.subjects) { max($0, $1) }
        tokenIDs.formUnion(other.tokenIDs)
    }

    /// Whether a verified token is revoked: its id is, or its subject was revoked at or after
    /// the token was minted (a token without an issue time, from before tokens carried one, by
    /// any revocation of its subject).
    public func revokes(_ grant: AccessGrant) -> Bool {
        if let id = grant.tokenID, tokenIDs.contains(id) { return true }
        guard let revoked = subjects[grant.subject] else { return false }
        guard let issued = grant.issued else { return true }
        return issued <= revoked
    }
}

/// The revocations in force on a host, shared by everything that checks its tokens (the sync
/// endpoint, the web view) through `SyncEndpoint.AccessControl`. Each source (the file beside
/// the secret, a cluster's Redis) sets its own part; what is in force is their union. Observers
/// are called after every change (the endpoint closes the sessions whose tokens it revokes).
/// Loop thread only.
public final class RevocationList {
    private var sources: [String: Revocations] = [:]
    private var observers: [() -> Void] = []
    /// The union of every source's revocations.
    public private(set) var current = Revocations()

    public init(_ initial: Revocations = Revocations()) {
        if !initial.isEmpty { set(initial, from: "initial") }
    }

    /// Replaces what `source` revokes; observers hear of it when that changed what is in force.
    public func set(_ revocations: Revocations, from source: String) {
        sources[source] = revocations
        var union = Revocations()
        for part in sources.values { union.merge(part) }
        union.ignoredLines = 0
        guard union != current else { return }
        current = union
        for observer in observers { observer() }
    }

    /// What `source` last set.
    public func revocations(from source: String) -> Revocations {
        sources[source] ?? Revocations()
    }

    /// Calls `body` after every change of what is in force (for as long as the list lives).
    public func observe(_ body: @escaping () -> Void) {
        observers.append(body)
    }
}

extension SyncEndpoint.AccessControl {
    /// Verifies a token presented for `board` now: its signature, its board (byte for byte),
    /// its expiry, and whether it was revoked. What a web page's socket needs at its opening.
    public func check(_ token: [UInt8], board: String) -> Result<AccessGrant, AccessRefusal> {
        switch authority.verify(token, board: board, now: wallClock()) {
        case .failure(let refusal): return .failure(refusal)
        case .success(let grant): return revocations.current.revokes(grant) ? .failure(.revoked) : .success(grant)
        }
    }

    /// Verifies a token presented to the admin port now: an admin token, not expired, not revoked.
    public func checkAdmin(_ token: [UInt8]) -> Result<AccessGrant, AccessRefusal> {
        switch authority.verifyAdmin(token, now: wallClock()) {
        case .failure(let refusal): return .failure(refusal)
        case .success(let grant): return revocations.current.revokes(grant) ? .failure(.revoked) : .success(grant)
        }
    }

    /// Why a grant verified earlier no longer holds now (`.expired`, `.revoked`), or nil while
    /// it does. Open connections ask it again when `revocations` changes (`RevocationList.observe`)
    /// and when `secondsLeft` runs out.
    public func recheck(_ grant: AccessGrant) -> AccessRefusal? {
        if let expires = grant.expires, wallClock() >= expires { return .expired(expires) }
        return revocations.current.revokes(grant) ? .revoked : nil
    }

    /// Seconds from now until the grant expires (never below 0); nil: it never expires. A host
    /// adds it to its monotonic clock for the deadline at which an open connection must close.
    public func secondsLeft(_ grant: AccessGrant) -> Double? {
        grant.expires.map { max(0, $0 - wallClock()) }
    }
}
