import BoardSync
import Foundation

/// Deleting an open board (the admin API): sessions end with `boardDeleted`, their ERROR is
/// written, then the board is dropped unsaved and their connections close once it has drained.
extension SyncHost {
    public func deleteOpenBoard(_ name: String, force: Bool) -> SyncEndpoint.Removal {
        let removal = endpoint.endSessionsForDeletion(name, force: force, now: EventLoop.now())
        guard case .ended = removal else { return removal }
        let ids = endpoint.sessions(of: name)
        for id in ids { flush(id) }
        endpoint.discardBoard(name, now: EventLoop.now())
        for id in ids { connections[id]?.close() }
        onBoardDeleted?(name)
        refresh()
        return removal
    }

    /// `name` was deleted for every server of a cluster (its tombstone is in Redis: another
    /// server's operator deleted it, or this server found the tombstone opening it): its
    /// sessions and web pages end with `boardDeleted` as a local delete ends them, and this
    /// server's copy of its package (a cache) is removed, so it cannot be appended back.
    /// Returns the sessions it ended.
    @discardableResult
    public func boardDeletedElsewhere(_ name: String, deletedAt: String) -> Int {
        var ended = 0
        switch deleteOpenBoard(name, force: true) {
        case .saving:
            // Its view is being saved off the loop: again in a moment.
            _ = loop.schedule(after: 0.05) { [weak self] in self?.boardDeletedElsewhere(name, deletedAt: deletedAt) }
            return 0
        case .ended(let sessions): ended = sessions
        case .held, .notOpen: break
        }
        endpoint.forgetOpenFailure(name)
        guard let data = dataDirectory else { return ended }
        switch BoardTombstones.removePackage(data, name) {
        case .none: break
        case .removed: options.log("board '\(name)': deleted at \(deletedAt) (tombstone in Redis): this server's copy removed")
        case .failed(let why): options.log("board '\(name)': deleted at \(deletedAt), but this server's copy could not be removed: \(why)")
        }
        return ended
    }
}
