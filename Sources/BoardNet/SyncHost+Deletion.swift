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
}
