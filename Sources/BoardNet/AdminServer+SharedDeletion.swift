import BoardSync
import Foundation

/// Deleting and undeleting with `--redis` (`Options.sharedTombstones`): the tombstone is
/// written where every server sees it before anything here changes, and the answer waits for
/// it. Redis unreachable: nothing is deleted (503). Then this server's sessions and web pages
/// end with `boardDeleted` and its copy is removed; the other servers do the same when the
/// deletion notice reaches them (docs/DEPLOYMENT.md, "Deleting in a cluster").
extension AdminServer {
    func deleteShared(_ name: String, force: Bool, shared: any SharedTombstones, client: Client, head: Bool) throws {
        if let at = BoardTombstones.deletedAt(dataDirectory, name) {
            throw AdminError("board '\(name)' was already deleted at \(at) (a tombstone file on this server)", status: 410)
        }
        // `force` is about this server's clients: others' are ended by the deletion notice.
        let holders = host.endpoint.holders(of: name)
        if !force, holders.sessions > 0 || holders.viewers > 0 {
            throw AdminError("board '\(name)' is held by \(holders.sessions) client(s) and \(holders.viewers) web view(s) of this server; delete with force (`--force`, ?force=1) to end their sessions", status: 409)
        }
        let hasCopy = host.boards[name] != nil || FileManager.default.fileExists(atPath: packagePath(name))
        let at = ISO8601DateFormatter().string(from: Date())
        client.rendering = true  // no request timeout while Redis answers (its own reply timeout bounds it)
        shared.deleteBoard(name, deletedAt: at, subject: nil, hasCopy: hasCopy) { [weak self, weak client] answer in
            // This server's part is done even when the admin's client has gone meanwhile (its
            // own deletion notice is not news to it).
            guard let self else { return }
            let response: HTTPResponse
            switch answer {
            case .done(let at):
                let ended = self.host.boardDeletedElsewhere(name, deletedAt: at)
                self.options.log("admin: deleted board '\(name)' for every server (\(ended) session(s) ended here; tombstone in \(shared.tombstoneStore))")
                self.options.onBoardDeleted?(name)
                response = Self.answer(200, ["board": name, "deleted": true, "deletedAt": at, "sessionsEnded": ended, "tombstone": shared.tombstoneStore])
            case .unchanged(let at):
                // Deleted by another server meanwhile: this server's copy goes too.
                self.host.boardDeletedElsewhere(name, deletedAt: at ?? "an unknown time")
                response = Self.answer(410, ["error": "board '\(name)' was already deleted at \(at ?? "an unknown time")"])
            case .noSuchBoard:
                response = Self.answer(404, ["error": "no board '\(name)' on this server or in \(shared.tombstoneStore)"])
            case .full(let count):
                response = Self.answer(507, ["error": "\(count) boards are deleted already, the limit of tombstones; undelete some first"])
            case .failed(let why):
                self.options.log("admin: board '\(name)' not deleted: \(why)")
                response = Self.answer(503, ["error": "board '\(name)' was not deleted: \(why)"])
            }
            guard let client else { return }
            client.rendering = false
            self.finish(client, response, head: head)
        }
    }

    func undeleteShared(_ name: String, shared: any SharedTombstones, client: Client, head: Bool) throws {
        // A tombstone file from before --redis goes too.
        let hadFile = BoardTombstones.deletedAt(dataDirectory, name) != nil
        if hadFile, !BoardTombstones.remove(dataDirectory, name) {
            throw AdminError("cannot remove the tombstone \(BoardTombstones.path(dataDirectory, name)): \(String(cString: strerror(errno)))")
        }
        client.rendering = true
        shared.undeleteBoard(name) { [weak self, weak client] answer in
            guard let self else { return }
            let response: HTTPResponse
            switch answer {
            case .unchanged where hadFile, .done:
                self.host.endpoint.forgetOpenFailure(name)
                self.options.log("admin: board '\(name)' may be created again (tombstone removed for every server)")
                response = Self.answer(200, ["board": name, "undeleted": true,
                                             "note": "the next client naming it, on any server, creates it (empty, or with the copy that client kept)"])
            case .unchanged:
                response = Self.answer(404, ["error": "board '\(name)' has no tombstone (it was not deleted)"])
            case .failed(let why):
                response = Self.answer(503, ["error": "board '\(name)' was not undeleted: \(why)"])
            case .noSuchBoard, .full:
                response = Self.answer(500, ["error": "unexpected answer \(answer)"])
            }
            guard let client else { return }
            client.rendering = false
            self.finish(client, response, head: head)
        }
    }

    static func answer(_ status: Int, _ object: [String: Any]) -> HTTPResponse {
        (try? json(status, object)) ?? text(status, "\(object)\n")
    }
}
