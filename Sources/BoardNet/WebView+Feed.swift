import BoardCRDT
import BoardModel
import BoardSync
import Foundation

/// Board updates for pages, from typed changes: per board with pages, a `ChangeTracker` kept on
/// the loop gives what the operations since the last update changed (O(what changed)), and the
/// renderer re-renders only those items off the loop. The board is snapshotted once, off the
/// loop, when its first page joins.
extension WebView {
    /// The shortest time between two renders of a board: 20 ms (50 a second). Renders cost what
    /// changed, not the board (they were every 0.1 s while each one snapshotted the board, and
    /// a page then waited up to a tenth of a second for an edit made just after another).
    static let renderInterval = 0.02

    /// A board's tracker and the version it was brought to.
    struct Feed {
        var tracker: ChangeTracker
        var version: VersionVector
    }

    /// The board was deleted (the admin API): its pages are closed, saying so, and what was
    /// kept for it goes.
    func deleted(_ board: String) {
        for client in clients.values where client.board == board && client.socket != nil {
            closeSocket(client, .goingAway, "board '\(board)' was deleted")
        }
        feeds[board] = nil
        renders[board] = nil
        pagePresences[board] = nil
        histories[board] = nil
        renderer.forget(board)
    }

    func changed(_ board: String) {
        guard clients.values.contains(where: { $0.board == board }) else { return }
        renders[board, default: RenderState()].dirty = true
        requestRender(board)
    }

    /// Renders a board off the loop, at most every `renderInterval` and one render at a time: the first
    /// change goes out at once, changes meanwhile are coalesced into the next render.
    func requestRender(_ board: String) {
        var state = renders[board, default: RenderState()]
        state.dirty = true
        guard !state.inFlight, !state.scheduled else { renders[board] = state; return }
        let wait = max(0, state.lastStart + Self.renderInterval - EventLoop.now())
        state.scheduled = true
        renders[board] = state
        loop.schedule(after: wait) { [weak self] in self?.startRender(board) }
    }

    private func startRender(_ board: String) {
        guard var state = renders[board] else { return }
        state.scheduled = false
        let pages = clients.values.filter { $0.board == board && $0.socket != nil }
        guard !pages.isEmpty, let replica = host.endpoint.boards[board]?.store.replica else {
            renders[board] = nil
            return
        }
        state.inFlight = true
        state.dirty = false
        state.lastStart = EventLoop.now()
        renders[board] = state
        let needWhole = pages.contains { $0.seq != state.seq }
        let box = WeakView(self)
        let loop = self.loop
        // A board that went back (its store replaced under the pages) starts over.
        if let feed = feeds[board], !replica.versionVector.dominates(feed.version) { feeds[board] = nil }
        if var feed = feeds[board] {
            let changes = feed.tracker.update(to: replica, since: feed.version)
            feed.version = replica.versionVector
            feeds[board] = feed
            renderer.render(board, changes, whole: needWhole) { result in
                loop.execute { box.view?.rendered(board, result) }
            }
        } else {
            // The replica is a value: this copy is the board as it is now, whatever the loop
            // merges while the first rendering is made.
            renderer.start(board, replica) { result, feed in
                loop.execute { box.view?.started(board, Feed(tracker: feed.tracker, version: feed.version), result) }
            }
        }
    }

    private func started(_ board: String, _ feed: Feed, _ result: WebRenderer.Result) {
        // The last page may have left meanwhile (and the renderer forgot the board).
        if clients.values.contains(where: { $0.board == board }) { feeds[board] = feed }
        rendered(board, result)
    }

    private func rendered(_ board: String, _ result: WebRenderer.Result) {
        if result.lost { feeds[board] = nil }
        guard var state = renders[board] else { return }
        let previous = state.seq
        state.seq += 1
        state.inFlight = false
        var missing = false
        for client in clients.values where client.board == board && client.socket != nil {
            if client.seq == previous, result.compared {
                client.seq = state.seq
                if let message = result.changes { sendUpdate(message, to: client) }
            } else if let whole = result.whole {
                client.seq = state.seq
                sendUpdate(whole, to: client)
            } else {
                missing = true  // joined while this render ran: the next one sends it the board
            }
        }
        if missing { state.dirty = true }
        renders[board] = state
        if state.dirty { requestRender(board) }
    }

    private func sendUpdate(_ message: String, to client: Client) {
        guard var socket = client.socket else { return }
        // A page that does not read gets nothing more queued past its limit; it gets the whole
        // board once it reads again (its next update is measured against nothing).
        guard client.connection.queuedBytes < options.maxQueuedPerPage else {
            client.seq = nil
            return
        }
        // A whole board larger than the queue limit still goes (once), rather than closing
        // every page that joins it.
        client.connection.maxQueuedBytes = max(client.connection.maxQueuedBytes, message.utf8.count + options.maxQueuedPerPage)
        socket.send(text: message)
        client.socket = socket
        flushSocket(client)
    }
}

/// The view, weakly, for a render's result to find it back on the loop thread.
/// `@unchecked Sendable`: created on the loop and dereferenced only in tasks the loop runs.
final class WeakView: @unchecked Sendable {
    weak var view: WebView?
    init(_ view: WebView) { self.view = view }
}

/// Renders boards for the web view on a queue of its own, so a large board's rendering never
/// holds the event loop that serves every other board: per board, the page's JSON of every
/// item (image sizes read once per image), brought up to date with typed changes.
/// `@unchecked Sendable`: its state is touched only on `queue`.
final class WebRenderer: @unchecked Sendable {
    struct Result: Sendable {
        /// Whether there was a previous rendering to compare with, and what changed since it
        /// (nil: nothing).
        var compared = false
        var changes: String?
        var whole: String?
        /// The renderer had forgotten the board (its last page left while it was being
        /// started): the loop starts it over.
        var lost = false
    }

    /// What `start` hands back to the loop: the tracker of the replica it rendered, and that
    /// replica's version.
    struct Started: Sendable {
        var tracker: ChangeTracker
        var version: VersionVector
    }

    private let queue = DispatchQueue(label: "boardsync.web.render")
    private var boards: [String: WebPage.Rendered] = [:]
    private var sizes: [String: (width: Int, height: Int)] = [:]

    /// A board's first rendering (after its first page joined, or when it started over): one
    /// snapshot, and the tracker that follows it from there.
    func start(_ board: String, _ replica: Replica, _ done: @escaping @Sendable (Result, Started) -> Void) {
        queue.async {
            let snapshot = replica.snapshot()
            let rendered = WebPage.render(snapshot, sizes: &self.sizes)
            var result = Result()
            if let old = self.boards[board] {
                result.compared = true
                result.changes = rendered.changes(since: old)
            }
            result.whole = rendered.json
            self.boards[board] = rendered
            self.trimSizes()
            done(result, Started(tracker: ChangeTracker(replica, snapshot: snapshot), version: replica.versionVector))
        }
    }

    /// The board's rendering moved on by `changes`: the message for pages that had the last
    /// one, and the whole board when `whole` (pages that joined since).
    func render(_ board: String, _ changes: BoardChanges, whole: Bool, _ done: @escaping @Sendable (Result) -> Void) {
        queue.async {
            var result = Result()
            if var rendered = self.boards[board] {
                result.compared = true
                result.changes = rendered.apply(changes, sizes: &self.sizes)
                if whole { result.whole = rendered.json }
                self.boards[board] = rendered
                self.trimSizes()
            } else {
                result.lost = true
            }
            done(result)
        }
    }

    /// Drops what is kept for a board nobody watches any more.
    func forget(_ board: String) {
        queue.async { self.boards[board] = nil }
    }

    private func trimSizes() {
        if sizes.count > 100_000 { sizes = [:] }
    }
}
