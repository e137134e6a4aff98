import BoardCRDT
import BoardStore
import BoardSync
import Foundation

/// The admin API's calls (docs/DEPLOYMENT.md, "The admin API"): boards listed and described
/// from what is cheap to read on disk, deleted behind a tombstone, re-created, compacted;
/// tokens revoked; a backup started. Every answer is JSON; every failure `{"error": ...}`
/// with a status. Loop thread only.
extension AdminServer {
    /// Boards per page of `GET /boards`, by default and at most.
    static let defaultPage = 100
    static let maxPage = 1000

    func route(_ request: HTTPRequest, client: Client, head: Bool) {
        let method = head ? "GET" : request.method
        let parts = request.path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        do {
            let response: HTTPResponse
            switch (method, parts.count, parts.count > 1 ? parts[1] : "") {
            case ("GET", 2, "metrics"):
                response = HTTPResponse(status: 200, headers: Self.headers + [("Content-Type", "text/plain; version=0.0.4; charset=utf-8")],
                                        body: Array(metricsText().utf8))
            case ("GET", 2, "boards"):
                return try listBoards(request.query, client: client, head: head)
            case (_, 3, "boards"):
                let name = try Self.boardName(parts[2])
                switch method {
                case "GET": response = try Self.json(200, boardInfo(name))
                case "DELETE":
                    let force = try Self.flag(request.query, "force")
                    if let shared = options.sharedTombstones { return try deleteShared(name, force: force, shared: shared, client: client, head: head) }
                    response = try Self.json(200, deleteBoard(name, force: force))
                default: throw AdminError("\(method) \(Self.clipped(request.path)): use GET (info) or DELETE (delete)", status: 405)
                }
            case (_, 4, "boards") where parts[3] == "export":
                guard method == "GET" else { throw AdminError("\(method) \(Self.clipped(request.path)): use GET", status: 405) }
                return try export(try Self.boardName(parts[2]), request.query, client: client, head: head)
            case (_, 4, "boards"):
                let name = try Self.boardName(parts[2])
                guard method == "POST" else {
                    throw AdminError("\(method) \(Self.clipped(request.path)): this call changes state; use POST", status: 405)
                }
                switch parts[3] {
                case "compact": response = try Self.json(200, compact(name))
                case "undelete":
                    if let shared = options.sharedTombstones { return try undeleteShared(name, shared: shared, client: client, head: head) }
                    response = try Self.json(200, undelete(name))
                default: throw AdminError("nothing at \(Self.clipped(request.path))", status: 404)
                }
            case ("POST", 2, "revoke"):
                response = try Self.json(200, revoke(request.query))
            case ("POST", 2, "backup"):
                guard let backup = options.backupNow else {
                    throw AdminError("this server makes no backups (start it with --backup-to)", status: 409)
                }
                backup()
                options.log("admin: backup started on demand")
                response = try Self.json(202, ["started": true, "note": "the backup runs in the background; the server's log and /metrics say when it completed"])
            case (_, 2, "metrics"), (_, 2, "boards"), (_, 2, "revoke"), (_, 2, "backup"):
                throw AdminError("\(method) \(Self.clipped(request.path)) is not served (see docs/DEPLOYMENT.md, \"The admin API\")", status: 405)
            default:
                if parts.count > 1, parts[1] == "boards", request.path.count > 1 {
                    throw AdminError("nothing at \(Self.clipped(request.path)) (board names are plain: letters, digits, '-', '_', '.')", status: 404)
                }
                throw AdminError("nothing at \(Self.clipped(request.path))", status: 404)
            }
            finish(client, response, head: head)
        } catch let error as AdminError {
            if error.status >= 500 { options.log("admin: \(request.method) \(Self.clipped(request.path)) failed: \(error)") }
            finish(client, (try? Self.json(error.status, ["error": error.description])) ?? Self.text(error.status, error.description + "\n"), head: head)
        } catch {
            options.log("admin: \(request.method) \(Self.clipped(request.path)) failed: \(error)")
            finish(client, Self.text(500, "\(error)\n"), head: head)
        }
    }

    // MARK: Info (the listing: AdminServer+Listing.swift)

    func packagePath(_ name: String) -> String { "\(dataDirectory)/\(name).boardpkg" }

    private func boardInfo(_ name: String) throws -> [String: Any] {
        if let at = BoardTombstones.deletedAt(dataDirectory, name) {
            throw AdminError("board '\(name)' was deleted at \(at) (re-create the name with `board-sync admin undelete \(name)`)", status: 410)
        }
        guard host.boards[name] != nil || FileManager.default.fileExists(atPath: packagePath(name)) else {
            throw AdminError("no board '\(name)' on this server", status: 404)
        }
        return summary(PackageFigures.read(dataDirectory, name))
    }

    // MARK: Deleting

    private func deleteBoard(_ name: String, force: Bool) throws -> [String: Any] {
        if let at = BoardTombstones.deletedAt(dataDirectory, name) {
            throw AdminError("board '\(name)' was already deleted at \(at)", status: 410)
        }
        let path = packagePath(name)
        guard host.boards[name] != nil || FileManager.default.fileExists(atPath: path) else {
            throw AdminError("no board '\(name)' on this server", status: 404)
        }
        var ended = 0
        switch host.deleteOpenBoard(name, force: force) {
        case .held(let sessions, let viewers):
            throw AdminError("board '\(name)' is held by \(sessions) client(s) and \(viewers) web view(s); delete with force (`--force`, ?force=1) to end their sessions", status: 409)
        case .saving:
            throw AdminError("board '\(name)' is saving its view right now; retry in a moment", status: 503)
        case .ended(let sessions): ended = sessions
        case .notOpen: break
        }
        let at: String
        do { at = try BoardTombstones.write(dataDirectory, name, subject: nil) } catch {
            throw AdminError("board '\(name)': its sessions ended but its tombstone could not be written, so it was not deleted: \(error)")
        }
        // Renamed out of the way first (atomic: the name is free at once), then removed on a
        // worker thread (a board of 100,000 images takes seconds to remove: not on the loop).
        let trash = "\(dataDirectory)/\(BoardTombstones.directoryName)/.\(name).\(getpid()).\(UInt32.random(in: .min ... .max)).removing"
        if FileManager.default.fileExists(atPath: path) {
            if rename(path, trash) != 0 {
                throw AdminError("board '\(name)' is tombstoned (clients are refused) but its package could not be moved away: \(String(cString: strerror(errno)))")
            }
            let log = SendableLog(options.log)
            DispatchQueue.global(qos: .utility).async {
                if (try? FileManager.default.removeItem(atPath: trash)) == nil {
                    log.call("admin: board '\(name)' is deleted, but some files of \(trash) could not be removed")
                }
            }
        }
        host.endpoint.forgetOpenFailure(name)
        options.log("admin: deleted board '\(name)' (\(ended) session(s) ended; tombstone \(BoardTombstones.path(dataDirectory, name)))")
        options.onBoardDeleted?(name)
        return ["board": name, "deleted": true, "deletedAt": at, "sessionsEnded": ended,
                "tombstone": "\(BoardTombstones.directoryName)/\(name)"]
    }

    private func undelete(_ name: String) throws -> [String: Any] {
        guard BoardTombstones.deletedAt(dataDirectory, name) != nil else {
            throw AdminError("board '\(name)' has no tombstone (it was not deleted)", status: 404)
        }
        guard BoardTombstones.remove(dataDirectory, name) else {
            throw AdminError("cannot remove the tombstone \(BoardTombstones.path(dataDirectory, name)): \(String(cString: strerror(errno)))")
        }
        host.endpoint.forgetOpenFailure(name)
        options.log("admin: board '\(name)' may be created again (tombstone removed)")
        return ["board": name, "undeleted": true,
                "note": "the next client naming it creates it (empty, or with the copy that client kept)"]
    }

    // MARK: Compacting, revoking

    private func compact(_ name: String) throws -> [String: Any] {
        if let at = BoardTombstones.deletedAt(dataDirectory, name) { throw AdminError("board '\(name)' was deleted at \(at)", status: 410) }
        guard host.boards[name] != nil || FileManager.default.fileExists(atPath: packagePath(name)) else {
            throw AdminError("no board '\(name)' on this server", status: 404)
        }
        guard host.endpoint.preload(board: name), let board = host.boards[name] else {
            throw AdminError("board '\(name)' cannot be opened now (see the server's log)", status: 503)
        }
        guard let package = board.store as? BoardPackage else {
            throw AdminError("board '\(name)' is not kept in a package here (with --redis, Redis checkpoints compact its log)", status: 409)
        }
        let opLog = packagePath(name) + "/" + PackageLayout.opLog
        var before = stat()
        _ = lstat(opLog, &before)
        board.hub.commitMerges()
        do { try package.compactLog() } catch { throw AdminError("board '\(name)': compaction failed: \(error)") }
        host.refresh()
        var after = stat()
        _ = lstat(opLog, &after)
        options.log("admin: compacted board '\(name)': op log \(before.st_size) -> \(after.st_size) bytes")
        return ["board": name, "opLogBytesBefore": Int(before.st_size), "opLogBytesAfter": Int(after.st_size)]
    }

    private func revoke(_ query: [String: String]) throws -> [String: Any] {
        guard let revoke = options.revoke else {
            throw AdminError("this server has no access control (--secret-file): there are no tokens to revoke", status: 409)
        }
        for key in query.keys where !["subject", "token-id"].contains(key) {
            throw AdminError("unknown parameter '\(Self.clipped(key))' (POST /revoke takes subject or token-id)", status: 400)
        }
        switch (query["subject"], query["token-id"]) {
        case (let subject?, nil):
            guard TokenAuthority.isValidSubject(subject) else { throw AdminError("subject is 1-64 letters, digits, '-', '_' or '.'", status: 400) }
            let line = try revoke(subject, nil)
            return ["revoked": line, "subject": subject]
        case (nil, let id?):
            guard TokenAuthority.isValidSubject(id) else { throw AdminError("token-id is 1-64 letters, digits, '-', '_' or '.'", status: 400) }
            let line = try revoke(nil, id)
            return ["revoked": line, "tokenID": id]
        default:
            throw AdminError("give one of subject=S or token-id=ID", status: 400)
        }
    }

    // MARK: Helpers

    /// A path segment as a board name: checked exactly as a HELLO's name is (no decoding: '%'
    /// is not a name character, so `%2e%2e` is refused, not turned into `..`).
    static func boardName(_ segment: String) throws -> String {
        guard Hello.isValidBoardName(segment) else {
            throw AdminError("'\(clipped(segment))' is not a board name (letters, digits, '-', '_', '.'; at most \(Hello.maxBoardName) bytes)", status: 400)
        }
        return segment
    }

    static func flag(_ query: [String: String], _ name: String) throws -> Bool {
        for key in query.keys where key != name {
            throw AdminError("unknown parameter '\(clipped(key))'", status: 400)
        }
        switch query[name] {
        case nil, "0", "false": return false
        case "", "1", "true": return true
        case let other?: throw AdminError("\(name) '\(clipped(other))' must be 1 or 0", status: 400)
        }
    }

    static func clipped(_ text: String) -> String {
        LogText.escaped(String(text.prefix(80)))
    }

    static func json(_ status: Int, _ object: Any) throws -> HTTPResponse {
        let body = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .prettyPrinted]) + Data("\n".utf8)
        return HTTPResponse(status: status, headers: headers + [("Content-Type", "application/json")], body: Array(body))
    }

    static func iso(_ seconds: Double) -> String {
        ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: seconds))
    }

    /// Bytes and files under `path` (symbolic links counted, never followed; at most 8 levels).
    static func treeSize(_ path: String, depth: Int = 0) -> (bytes: Int, files: Int) {
        var info = stat()
        guard lstat(path, &info) == 0 else { return (0, 0) }
        guard (info.st_mode & S_IFMT) == S_IFDIR, depth < 8 else { return (Int(info.st_size), 1) }
        var total = (bytes: 0, files: 0)
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] {
            let sub = treeSize(path + "/" + entry, depth: depth + 1)
            total.bytes += sub.bytes
            total.files += sub.files
        }
        return total
    }

    /// The version vector of a package's last saved view (`sync/view.json`: replica id to
    /// count), or nil when it has none or it cannot be read (at most 4 MiB is read).
    static func savedVersion(_ package: String) -> [String: Int]? {
        let file = package + "/" + PackageLayout.view
        var info = stat()
        guard lstat(file, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_size <= 4 << 20,
              let bytes = FileManager.default.contents(atPath: file),
              let object = try? JSONSerialization.jsonObject(with: bytes) as? [String: Any],
              let version = object["version"] as? [String: Any] else { return nil }
        var result: [String: Int] = [:]
        for (key, value) in version {
            guard let count = value as? Int else { return nil }
            result[key] = count
        }
        return result
    }
}

/// The admin port's log, for a worker thread (the server's log function is thread-safe: it
/// writes one line with one call).
struct SendableLog: @unchecked Sendable {
    let call: (String) -> Void
    init(_ call: @escaping (String) -> Void) { self.call = call }
}
