import BoardCRDT
import BoardModel
import BoardNet
import BoardStore
import BoardSync
import Foundation
import Testing

/// The board page's time slider over real TCP and WebSocket (WebView+History.swift): the
/// versions, past boards, a restore by an editor, readers refused, and the bounds.
@Suite(.serialized) struct WebViewHistoryTests {
    private func ids(_ message: [String: Any]?) -> [String] {
        let board = message?["board"] as? [String: Any]
        return ((board?["items"] as? [[String: Any]]) ?? []).compactMap { $0["id"] as? String }
    }

    private func waitFor(_ fixture: WebFixture, _ condition: @escaping (Replica) -> Bool) throws -> Bool {
        let host = fixture.host
        return try fixture.server.thread.wait { host.endpoint.boards["team"].map { condition($0.store.replica) } ?? false }
    }

    @Test func aPageScrubsTheHistoryAndItsRestoreReachesPeersAsOneUndoStep() throws {
        let fixture = try WebFixture()
        defer { fixture.stop() }
        let (temp, server) = (fixture.temp, fixture.server)
        let (a, sticker) = try WebViewTests.sticker(temp, server)
        defer { a.close() }
        let page = try fixture.page()
        #expect(page.upgrade("/ws/team")?.status == 101)
        page.say("{\"type\":\"stroke\",\"points\":[1,2,30,40],\"color\":\"#ff0000ff\",\"width\":5}")
        #expect(try waitFor(fixture) { $0.snapshot().strokes.count == 1 })
        let stroke = try #require(try fixture.server.thread.onLoop { fixture.host.endpoint.boards["team"]!.store.replica.snapshot().strokes.first?.id })

        page.say("{\"type\":\"history\"}")
        let listing = try #require(page.message(type: "versions"))
        #expect(listing["count"] as? Int == 2)
        let versions = try #require(listing["versions"] as? [[String: Any]])
        #expect(versions.map { $0["n"] as? Int } == [1, 2])
        #expect(versions.allSatisfy { $0["t"] as? Int64 != nil && ($0["ops"] as? Int ?? 0) > 0 })

        page.say("{\"type\":\"history-view\",\"version\":1}")
        let first = page.message(type: "past") { $0["version"] as? Int == 1 }
        #expect(ids(first) == [sticker.uuid.uuidString])
        page.say("{\"type\":\"history-view\",\"version\":2}")
        #expect(ids(page.message(type: "past") { $0["version"] as? Int == 2 }) == [sticker.uuid.uuidString, stroke.uuidString])

        // Restoring version 1 removes the stroke, as the page's own edit: a peer syncing gets
        // it like any edit, and the page's Undo takes the whole restore back.
        page.say("{\"type\":\"history-restore\",\"version\":1}")
        #expect(page.message(type: "restored")?["version"] as? Int == 1)
        #expect(try waitFor(fixture) { $0.snapshot().strokes.isEmpty })
        var b = try makePackage(temp.path + "/B.boardpkg", id: 0xB)
        defer { b.close() }
        try syncOnce(&b, board: "team", server: server.address, timeout: 20)
        #expect(b.replica.snapshot().strokes.isEmpty && b.replica.snapshot().stickers.count == 1)
        page.say("{\"type\":\"undo\"}")
        #expect(try waitFor(fixture) { $0.snapshot().strokes.count == 1 })
        // The history stays linear: the restore and its undo are versions after the others.
        page.say("{\"type\":\"history\"}")
        #expect(page.message(type: "versions") { ($0["count"] as? Int ?? 0) >= 4 } != nil)
    }

    @Test func aReaderScrubsButItsRestoreIsRefusedByTheServer() throws {
        let authority = try TokenAuthority(secret: Array("0123456789abcdef0123456789abcdef".utf8))
        var options = SyncHost.Options()
        options.access = SyncEndpoint.AccessControl(authority: authority, wallClock: { Date().timeIntervalSince1970 })
        var webOptions = WebView.Options()
        webOptions.access = options.access
        let fixture = try WebFixture(serverOptions: options, webOptions: webOptions)
        defer { fixture.stop() }
        let (temp, server, web) = (fixture.temp, fixture.server, fixture.web)
        var a = try makePackage(temp.path + "/A.boardpkg", id: 0xA)
        defer { a.close() }
        try a.commit { try $0.beginStroke(color: .black, width: 2, points: [pt(1, 1), pt(5, 5)]) }
        let writer = try authority.mint(board: "team", role: .write, expires: nil, subject: "ann")
        try syncOnce(&a, board: "team", server: server.address, timeout: 20, token: writer)
        try a.commit { try $0.beginStroke(color: .black, width: 2, points: [pt(9, 9), pt(15, 15)]) }
        try syncOnce(&a, board: "team", server: server.address, timeout: 20, token: writer)

        let reader = try authority.mint(board: "team", role: .read, expires: nil, subject: "rob")
        let watcher = try WebClient(web.listenAddress)
        #expect(watcher.upgrade("/ws/team?token=\(reader)")?.status == 101)
        #expect(watcher.message(type: "welcome")?["canEdit"] as? Bool == false)
        watcher.say("{\"type\":\"history\"}")
        #expect(watcher.message(type: "versions")?["count"] as? Int == 2)
        watcher.say("{\"type\":\"history-view\",\"version\":1}")
        #expect(ids(watcher.message(type: "past")).count == 1)
        watcher.say("{\"type\":\"history-restore\",\"version\":1}")
        #expect((watcher.message(type: "error")?["message"] as? String)?.contains("may only read") == true)
        // Malformed and out-of-range versions are refused by name.
        watcher.say("{\"type\":\"history-view\",\"version\":0}")
        #expect((watcher.message(type: "error")?["message"] as? String)?.contains("needs a version number") == true)
        watcher.say("{\"type\":\"history-view\",\"version\":99}")
        #expect((watcher.message(type: "error")?["message"] as? String)?.contains("no version 99") == true)
        // Other messages from a reader are still refused unread.
        watcher.say("{\"type\":\"undo\"}")
        #expect((watcher.message(type: "error")?["message"] as? String)?.contains("may only read") == true)
        #expect(try waitFor(fixture) { $0.snapshot().strokes.count == 2 })
        #expect(try fixture.server.thread.onLoop { fixture.host.endpoint.boards["team"]!.store.replica.versionVector.totalCount } == a.replica.versionVector.totalCount,
                "the reader's restore wrote nothing")
    }

    @Test func sliderRequestsAreBoundedAndTheLatestWins() throws {
        var webOptions = WebView.Options()
        webOptions.historyViewsPerSecond = 1
        webOptions.maxHistoryVersionsListed = 3
        let fixture = try WebFixture(webOptions: webOptions)
        defer { fixture.stop() }
        let (temp, server) = (fixture.temp, fixture.server)
        var a = try makePackage(temp.path + "/A.boardpkg", id: 0xA)
        defer { a.close() }
        for step in 0..<5 {
            try a.commit { try $0.beginStroke(color: .black, width: 2, points: [pt(Double(step), 1), pt(5, 5)]) }
            try syncOnce(&a, board: "team", server: server.address, timeout: 20)
        }
        let page = try fixture.page()
        #expect(page.upgrade("/ws/team")?.status == 101)
        page.say("{\"type\":\"history\"}")
        let listing = try #require(page.message(type: "versions"))
        #expect(listing["count"] as? Int == 5)
        #expect((listing["versions"] as? [[String: Any]])?.map { $0["n"] as? Int } == [1, 3, 5], "evenly spaced, first and last")
        // Sixty requests in a burst: the server renders one at a time, at most once a second for
        // this page, keeping only the latest waiting; the page gets the last one it asked for.
        for round in 0..<60 { page.say("{\"type\":\"history-view\",\"version\":\(1 + round % 4)}") }
        page.say("{\"type\":\"history-view\",\"version\":5}")
        var received: [Int] = []
        while let past = page.message(type: "past", seconds: 10) {
            received.append(past["version"] as? Int ?? 0)
            if received.last == 5 { break }
        }
        #expect(received.last == 5)
        #expect(received.count <= 5, "renders: \(received)")
    }

    @Test func aHistoryOverTheByteBoundIsRefused() throws {
        var webOptions = WebView.Options()
        webOptions.maxHistoryBytes = 16
        let fixture = try WebFixture(webOptions: webOptions)
        defer { fixture.stop() }
        let (a, _) = try WebViewTests.sticker(fixture.temp, fixture.server)
        defer { a.close() }
        let page = try fixture.page()
        #expect(page.upgrade("/ws/team")?.status == 101)
        page.say("{\"type\":\"history\"}")
        #expect((page.message(type: "error")?["message"] as? String)?.contains("over the 16 the web view reads") == true)
        page.say("{\"type\":\"history-restore\",\"version\":1}")
        #expect((page.message(type: "error")?["message"] as? String)?.contains("over the 16") == true)
    }

    @Test func boardsTakingTurnsBeyondTheKeptHistoriesAreStillServed() throws {
        var webOptions = WebView.Options()
        webOptions.maxHistoryBoards = 1
        webOptions.historyRefreshInterval = 0.2
        let fixture = try WebFixture(webOptions: webOptions)
        defer { fixture.stop() }
        let (temp, server) = (fixture.temp, fixture.server)
        for (index, board) in ["team", "other"].enumerated() {
            var package = try makePackage(temp.path + "/\(board).boardpkg", id: UInt64(0xA + index))
            try package.commit { try $0.beginStroke(color: .black, width: 2, points: [pt(1, 1), pt(5, 5)]) }
            try syncOnce(&package, board: board, server: server.address, timeout: 20)
            package.close()
        }
        let team = try fixture.page(), other = try fixture.page()
        #expect(team.upgrade("/ws/team")?.status == 101 && other.upgrade("/ws/other")?.status == 101)
        for _ in 0..<3 {
            // Each board's history drops the other's (one is kept), and is read again, no
            // sooner than the refresh interval, for the page that asks.
            team.say("{\"type\":\"history-view\",\"version\":1}")
            #expect(ids(team.message(type: "past")).count == 1)
            other.say("{\"type\":\"history\"}")
            #expect(other.message(type: "versions")?["count"] as? Int == 1)
        }
    }
}
