import BoardCRDT
import BoardModel
import BoardStore
import BoardSync
import Foundation

/// The board page's time slider (docs/DEPLOYMENT.md, "Web view": history): a page asks for the
/// board's versions, then for the board at a version as it scrubs, and an editing page may
/// restore one. What the page sends (`WebHistoryRequest`, docs/PROTOCOL.md):
///
/// - `{"type":"history"}`: the versions, answered `{"type":"versions","count":N,"versions":[{"n":…,"t":ms|null,"ops":…,"authors":…},…],"labels":[{"n":…|null,"text":…},…]}`
///   (at most `maxHistoryVersionsListed` of them, evenly spaced, always the first and the last);
/// - `{"type":"history-view","version":N}`: the board at version N, answered
///   `{"type":"past","version":N,"t":ms|null,"board":{…as the "board" message…}}`;
/// - `{"type":"history-restore","version":N}`: editors only (refused server-side for a page
///   that only reads): the board set back to version N as the page's own edit (one step its
///   Undo takes back), synced like any edit.
///
/// What it costs the server, and the bounds (every one an `Options` field):
/// - a board's history is read off the loop, on the view's one history queue, from a capture
///   taken on the loop (the live op log and the history index, which compaction keeps small),
///   and kept while the board has a page that asked for it, for at most `maxHistoryBoards`
///   boards (the least recently used goes); a history over `maxHistoryBytes` on disk is refused;
///   it is read again for a page's request only when the board changed or its history was
///   dropped, and at most every `historyRefreshInterval` seconds per board (a request sooner
///   waits for that read);
/// - views are rendered off the loop, on that same queue (one at a time for the whole view:
///   history work never takes more than one core), each page at most `historyViewsPerSecond`,
///   one in flight and one waiting per page (a newer request replaces the waiting one: a
///   slider dragged fast costs what it costs to render that many a second, not what it sent),
///   and at most `maxHistoryViewsPerSecond` for the whole view, all pages together;
/// - every history message also counts against `maxMessagesPerSecond`, and a page that only
///   reads may send these (small) messages and nothing else;
/// - a restore is one at a time per page: the past board is made off the loop (from the history
///   kept, or a fresh read for a version it does not list yet), its edits
///   (`Replica.edits(toReturnTo:)`, O(board)) on the loop as the page's author.
extension WebView {
    /// The view's history of one board (`histories`).
    struct HistoryCache {
        var history: BoardHistory?
        /// The board's vector when `history` was captured.
        var version: VersionVector = .empty
        var building = false
        var refreshScheduled = false
        var builtAt = -Double.infinity
        var lastUsed: Double
    }

    /// One page's slider: the view it waits for, the one being rendered, the last start.
    struct PageHistory {
        var wantsList = false
        var pendingView: Int?
        var viewInFlight = false
        var viewScheduled = false
        var lastViewStart = -Double.infinity
        var restoring = false
    }

    /// A history message from a page (nil: not one; the page's other messages are `WebMessage`).
    func historyRequest(_ text: String) -> WebHistoryRequest? {
        // Cheap before any parsing: history messages are short and say so.
        guard text.utf8.count <= 256, text.contains("history") else { return nil }
        return WebHistoryRequest.parse(text)
    }

    func pageAsked(_ request: WebHistoryRequest, _ client: Client, board: String) {
        switch request {
        case .invalid(let why):
            historyRefuse(client, why)
        case .list:
            client.history.wantsList = true
            ensureHistory(board)
        case .view(let number):
            client.history.pendingView = number
            pumpHistoryView(client, board: board)
        case .restore(let number):
            guard client.canEdit else {
                return historyRefuse(client, "this page's token may only read board '\(board)': it cannot restore a version")
            }
            restore(number, client, board: board)
        }
    }

    private func historyRefuse(_ client: Client, _ why: String) {
        guard var socket = client.socket else { return }
        socket.send(text: "{\"type\":\"error\",\"message\":\(WebPage.json(why))}")
        client.socket = socket
        flushSocket(client)
    }

    private func package(of board: String) -> BoardPackage? {
        host.endpoint.boards[board]?.store as? BoardPackage
    }

    /// Reads the board's history off the loop unless a fresh enough one is kept; pages waiting
    /// for it are answered when it is there.
    private func ensureHistory(_ board: String) {
        let now = EventLoop.now()
        guard let package = package(of: board) else {
            return historyFailed(board, "this server keeps no history for board '\(board)'")
        }
        var cache = histories[board] ?? HistoryCache(lastUsed: now)
        cache.lastUsed = now
        if cache.building { histories[board] = cache; return }
        let current = package.replica.versionVector
        if cache.history != nil, cache.version == current {
            histories[board] = cache
            return historyReady(board)
        }
        if now - cache.builtAt < options.historyRefreshInterval {
            // Changed since (or dropped to make room, or failed), but read too recently: read
            // again once the interval is over (the list waits; views go on from the history
            // kept, if any). Pages cannot make the view read a history faster than this,
            // whatever they ask and however many boards' histories they take turns with.
            if !cache.refreshScheduled {
                cache.refreshScheduled = true
                loop.schedule(after: cache.builtAt + options.historyRefreshInterval - now) { [weak self] in
                    guard let self, self.histories[board] != nil else { return }
                    self.histories[board]?.refreshScheduled = false
                    self.ensureHistory(board)
                }
            }
            histories[board] = cache
            return
        }
        let reading: HistoryReading
        do {
            reading = try package.historyReading()
        } catch {
            options.log("web: board '\(board)': history could not be read: \(error)")
            return historyFailed(board, "the server could not read this board's history (its log says why)")
        }
        let bytes = reading.approximateBytes()
        guard bytes <= options.maxHistoryBytes else {
            return historyFailed(board, "this board's history is \(bytes) bytes, over the \(options.maxHistoryBytes) the web view reads; use `board-sync history`")
        }
        cache.building = true
        histories[board] = cache
        evictHistories()
        let box = WeakView(self)
        let loop = self.loop
        historyQueue.async {
            let result = Result { try reading.read() }
            loop.execute { box.view?.historyBuilt(board, result, version: current) }
        }
    }

    /// At most `maxHistoryBoards` histories are kept: the least recently used goes (its entry
    /// stays, with when it was read, until the board's last page leaves).
    private func evictHistories() {
        while histories.values.filter({ $0.history != nil }).count > options.maxHistoryBoards {
            guard let (board, _) = histories.filter({ !$0.value.building && $0.value.history != nil })
                .min(by: { $0.value.lastUsed < $1.value.lastUsed }) else { return }
            histories[board]?.history = nil
        }
    }

    private func historyBuilt(_ board: String, _ result: Result<BoardHistory, any Error>, version: VersionVector) {
        // The board's last page may have left (or the board was deleted) meanwhile.
        guard var cache = histories[board] else { return }
        cache.building = false
        switch result {
        case .success(let history):
            cache.history = history
            cache.version = version
            cache.builtAt = EventLoop.now()
            histories[board] = cache
            historyReady(board)
            // Reads are one at a time on the queue: at most one history beyond the bound
            // exists, the one just read, until here.
            evictHistories()
        case .failure(let error):
            cache.builtAt = EventLoop.now()
            histories[board] = cache
            options.log("web: board '\(board)': history could not be read: \(error)")
            historyFailed(board, "the server could not read this board's history (its log says why)")
        }
    }

    private func pages(of board: String) -> [Client] {
        clients.values.filter { $0.board == board && $0.socket != nil && !$0.closing }
    }

    private func historyFailed(_ board: String, _ why: String) {
        for client in pages(of: board) where client.history.wantsList || client.history.pendingView != nil {
            client.history.wantsList = false
            client.history.pendingView = nil
            historyRefuse(client, why)
        }
    }

    private func historyReady(_ board: String) {
        guard let history = histories[board]?.history else { return }
        var listing: String?
        for client in pages(of: board) {
            if client.history.wantsList {
                client.history.wantsList = false
                if listing == nil { listing = Self.versionsJSON(history, limit: options.maxHistoryVersionsListed) }
                sendHistory(listing!, to: client)
            }
            if client.history.pendingView != nil { pumpHistoryView(client, board: board) }
        }
    }

    /// The versions a page is told: all of them up to `limit`, else `limit` evenly spaced ones
    /// with the first and the last.
    static func versionsJSON(_ history: BoardHistory, limit: Int) -> String {
        let versions = history.versions
        var numbers: [Int]
        if versions.count <= limit {
            numbers = Array(1...max(1, versions.count)).filter { $0 <= versions.count }
        } else {
            let step = Double(versions.count - 1) / Double(max(1, limit - 1))
            numbers = (0..<limit).map { 1 + Int((Double($0) * step).rounded()) }
            numbers[numbers.count - 1] = versions.count
        }
        let items = numbers.map { number -> String in
            let version = versions[number - 1]
            return "{\"n\":\(number),\"t\":\(version.time.map(String.init) ?? "null"),\"ops\":\(version.operationCount),\"authors\":\(version.authors.count)}"
        }
        // Named versions: each label with the number of the version it names (null: a vector
        // that is no version of this history), at most `limit` of them.
        let labels = history.labels.prefix(limit).map { label -> String in
            "{\"n\":\(history.versionNumber(of: label.version).map(String.init) ?? "null"),\"text\":\(WebPage.json(label.text))}"
        }
        return "{\"type\":\"versions\",\"count\":\(versions.count),\"versions\":[\(items.joined(separator: ","))],\"labels\":[\(labels.joined(separator: ","))]}"
    }

    /// Starts the page's waiting view when none is in flight and its rate allows; otherwise
    /// it waits (a newer request replaces it).
    private func pumpHistoryView(_ client: Client, board: String) {
        guard client.history.pendingView != nil, !client.history.viewInFlight, !client.history.viewScheduled else { return }
        guard let history = histories[board]?.history else { return ensureHistory(board) }
        histories[board]?.lastUsed = EventLoop.now()
        let now = EventLoop.now()
        var wait = client.history.lastViewStart + 1 / max(0.001, options.historyViewsPerSecond) - now
        if wait <= 0 {
            // The view's own bound, over every page: a page whose turn it is waits for a token.
            let rate = max(0.001, options.maxHistoryViewsPerSecond)
            var bucket = historyViews ?? TokenBucket(rate: rate, burst: 2 * rate, now: now)
            if !bucket.take(now: now) { wait = 1 / rate }
            historyViews = bucket
        }
        if wait > 0 {
            client.history.viewScheduled = true
            loop.schedule(after: wait) { [weak self, weak client] in
                guard let self, let client else { return }
                client.history.viewScheduled = false
                if let board = client.board { self.pumpHistoryView(client, board: board) }
            }
            return
        }
        let number = client.history.pendingView!
        client.history.pendingView = nil
        guard let version = history.version(number) else {
            return historyRefuse(client, "board '\(board)' has no version \(number) (its history has \(history.versions.count))")
        }
        client.history.viewInFlight = true
        client.history.lastViewStart = EventLoop.now()
        let box = WeakView(self)
        let loop = self.loop
        let page = WeakPage(client)
        historyQueue.async {
            let snapshot = history.snapshot(at: version.vector)
            var sizes: [String: (width: Int, height: Int)] = [:]
            let json = WebPage.render(snapshot, sizes: &sizes).json
            let message = "{\"type\":\"past\",\"version\":\(number),\"t\":\(version.time.map(String.init) ?? "null"),\"board\":\(json)}"
            loop.execute { box.view?.historyViewRendered(page, board, message) }
        }
    }

    private func historyViewRendered(_ page: WeakPage, _ board: String, _ message: String) {
        // The page itself (never another that took its place), still on that board.
        guard let client = page.client, clients[ObjectIdentifier(client)] === client, client.board == board else { return }
        client.history.viewInFlight = false
        guard client.socket != nil, !client.closing else { return }
        sendHistory(message, to: client)
        pumpHistoryView(client, board: board)
    }

    /// A history answer: dropped for a page that is not reading (past `maxQueuedPerPage`).
    private func sendHistory(_ message: String, to client: Client) {
        guard var socket = client.socket, client.connection.queuedBytes < options.maxQueuedPerPage else { return }
        client.connection.maxQueuedBytes = max(client.connection.maxQueuedBytes, message.utf8.count + options.maxQueuedPerPage)
        socket.send(text: message)
        client.socket = socket
        flushSocket(client)
    }

    /// Sets the board back to version `number` as the page's own edit: the past board made off
    /// the loop from a fresh reading, its edits on the loop.
    private func restore(_ number: Int, _ client: Client, board: String) {
        guard !client.history.restoring else { return historyRefuse(client, "a restore from this page is in progress") }
        let box = WeakView(self)
        let loop = self.loop
        let page = WeakPage(client)
        // The history kept for the slider has every version it listed (numbers and vectors
        // never change as the history grows): no read again for those.
        if let kept = histories[board]?.history, let version = kept.version(number) {
            client.history.restoring = true
            historyQueue.async {
                let past = kept.replica(at: version.vector)
                loop.execute { box.view?.restoreReady(page, board, number, .success(past)) }
            }
            return
        }
        guard let package = package(of: board) else {
            return historyRefuse(client, "this server keeps no history for board '\(board)'")
        }
        let reading: HistoryReading
        do {
            reading = try package.historyReading()
        } catch {
            options.log("web: board '\(board)': history could not be read: \(error)")
            return historyRefuse(client, "the server could not read this board's history (its log says why)")
        }
        let bytes = reading.approximateBytes()
        guard bytes <= options.maxHistoryBytes else {
            return historyRefuse(client, "this board's history is \(bytes) bytes, over the \(options.maxHistoryBytes) the web view reads")
        }
        client.history.restoring = true
        historyQueue.async {
            let result = Result { () throws -> Replica in
                let history = try reading.read()
                guard let version = history.version(number) else {
                    throw HistoryError("board '\(board)' has no version \(number) (its history has \(history.versions.count))")
                }
                return history.replica(at: version.vector)
            }
            loop.execute { box.view?.restoreReady(page, board, number, result) }
        }
    }

    private func restoreReady(_ page: WeakPage, _ board: String, _ number: Int, _ result: Result<Replica, any Error>) {
        guard let client = page.client, clients[ObjectIdentifier(client)] === client, client.board == board else { return }
        client.history.restoring = false
        guard client.socket != nil, !client.closing, client.canEdit else { return }
        do {
            let past = try result.get()
            var author = try author(for: client, board: board)
            client.lastEdit = EventLoop.now()
            _ = try host.edit(board, as: &author) { try $0.edits(toReturnTo: past) }
            client.author = author
            options.log("web: page \(client.connection.remote) restored board '\(board)' to version \(number)")
            sendHistory("{\"type\":\"restored\",\"version\":\(number)}", to: client)
        } catch let error as HistoryError {
            historyRefuse(client, error.description)
        } catch let error as EditError {
            historyRefuse(client, error.description)
        } catch let error as EditorLimit {
            historyRefuse(client, error.message)
        } catch {
            options.log("web: page \(client.connection.remote) on board '\(board)': restore failed: \(error)")
            historyRefuse(client, "the server could not restore this version (its log says why)")
        }
    }
}

/// A page, weakly, for work done off the loop to find it back (never another page that took
/// its place). `@unchecked Sendable`: created on the loop and dereferenced only there.
final class WeakPage: @unchecked Sendable {
    weak var client: WebView.Client?
    init(_ client: WebView.Client) { self.client = client }
}

/// A page's history message (`WebView+History.swift`), parsed and checked.
enum WebHistoryRequest: Equatable {
    case list
    case view(Int)
    case restore(Int)
    /// A history message that is not well formed: why.
    case invalid(String)

    /// Nil when `text` is not a history message.
    static func parse(_ text: String) -> WebHistoryRequest? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
              let type = object["type"] as? String else { return nil }
        func number() -> Int? {
            guard let value = object["version"] as? NSNumber, let double = Double(exactly: value.doubleValue),
                  double >= 1, double <= 1e15, double == double.rounded() else { return nil }
            return Int(double)
        }
        switch type {
        case "history": return .list
        case "history-view", "history-restore":
            guard let version = number() else { return .invalid("\(type) needs a version number (1 or more)") }
            return type == "history-view" ? .view(version) : .restore(version)
        default: return nil
        }
    }
}
