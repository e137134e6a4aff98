import BoardClient
import BoardCRDT
import BoardModel
import BoardNet
import BoardStore
import BoardSync
import Foundation
import Testing

/// History on demand over real TCP (docs/CLIENT.md, "History from the server"): a replica that
/// joins late lists the versions the server holds, from before it joined, and views an old one;
/// a token that does not open the board gets nothing; a reader may read; a client that does not
/// ask receives no history in its catch-up.
@Suite(.serialized) struct HistoryFetchTests {
    /// A server with access control and a writer that made `count` strokes, each merged by the
    /// server before the next (one version each); returns the boards the writer saw after each.
    static func serverWithHistory(_ fixture: AdminFixture, count: Int) throws -> [BoardSnapshot] {
        var options = SyncHost.Options()
        options.credentials = Array(try fixture.token(.write).utf8)
        options.reconnect = false
        options.viewSaveThreads = 0
        let loop = fixture.server.thread.loop
        let address = fixture.server.address
        nonisolated(unsafe) let chosen = options
        let writer = try fixture.server.thread.onLoop {
            let writer = try SyncHost(board: "team", store: MemoryReplicaStore(replica: Replica(id: ReplicaID(0xBEE))), listen: nil, loop: loop, options: chosen)
            writer.connect(to: address)
            return writer
        }
        let server = fixture.server.host
        #expect(try fixture.server.thread.wait { server.boards["team"]?.hub.sessionCount == 1 })
        var seen: [BoardSnapshot] = []
        for index in 0..<count {
            let vector = try fixture.server.thread.onLoop { () -> VersionVector in
                try writer.edit { replica in
                    let edit = try replica.beginStroke(color: RGBAColor(red: 0, green: 0, blue: 1), width: 1,
                                                       points: [pt(Double(index * 10), 1), pt(Double(index * 10 + 5), 8)])
                    replica.finishStroke()
                    return edit
                }
                return writer.boards["team"]!.store.replica.versionVector
            }
            #expect(try fixture.server.thread.wait { server.boards["team"]?.store.replica.versionVector.dominates(vector) == true })
            seen.append(try fixture.server.thread.onLoop { writer.boards["team"]!.store.replica.snapshot() })
        }
        try fixture.server.thread.onLoop { writer.shutdown(save: false) }
        return seen
    }

    static func options(token: String?) -> SyncHost.Options {
        var options = SyncHost.Options()
        options.credentials = token.map { Array($0.utf8) } ?? []
        options.log = { _ in }
        return options
    }

    @Test func aLateJoinerListsTheServersVersionsAndViewsAnOldOne() throws {
        let fixture = try AdminFixture()
        defer { fixture.stop() }
        let seen = try Self.serverWithHistory(fixture, count: 5)
        let address = fixture.server.address
        let reader = Self.options(token: try fixture.token(.read))
        let listed = try HistoryFetch.versions(server: address, board: "team", options: reader, timeout: 20)
        #expect(listed.total >= 5 && listed.versions.count == Int(listed.total), "\(listed.total)")
        #expect(listed.versions.map(\.number) == Array(1...listed.total))
        // Every version the server lists shows a board; the boards the writer saw after each
        // stroke are among them, in order, and version 0 is the empty board.
        var boards: [BoardSnapshot] = []
        for version in listed.versions {
            boards.append(try HistoryFetch.board(at: version.number, server: address, board: "team", options: reader, timeout: 20).replica.snapshot())
        }
        var next = 0
        for board in boards where next < seen.count && board == seen[next] { next += 1 }
        #expect(next == seen.count, "the writer's boards appear in the server's history in order (\(next) of \(seen.count))")
        #expect(boards.last == seen.last)
        let latest = try HistoryFetch.board(at: nil, server: address, board: "team", options: reader, timeout: 20)
        #expect(latest.number == listed.total && latest.replica.snapshot() == seen.last!)
        let empty = try HistoryFetch.board(at: 0, server: address, board: "team", options: reader, timeout: 20)
        #expect(empty.replica.snapshot().strokes.isEmpty)
    }

    @Test func aWrongTokenGetsNothingAndAVersionBeyondTheHistoryIsRefused() throws {
        let fixture = try AdminFixture()
        defer { fixture.stop() }
        _ = try Self.serverWithHistory(fixture, count: 2)
        let address = fixture.server.address
        let other = Self.options(token: try fixture.token(.read, board: "other"))
        #expect {
            try HistoryFetch.versions(server: address, board: "team", options: other, timeout: 20)
        } throws: { "\($0)".contains("access denied") }
        #expect {
            try HistoryFetch.versions(server: address, board: "team", options: Self.options(token: nil), timeout: 20)
        } throws: { "\($0)".contains("access denied") }
        let writer = Self.options(token: try fixture.token(.write, subject: "w2"))
        #expect {
            try HistoryFetch.board(at: 1_000, server: address, board: "team", options: writer, timeout: 20)
        } throws: { "\($0)".contains("outOfRange") }
    }

    @Test func aServerThatServesNoHistorySaysSo() throws {
        var options = SyncHost.Options()
        options.servesHistory = false
        let fixture = try AdminFixture(serverOptions: options)
        defer { fixture.stop() }
        _ = try Self.serverWithHistory(fixture, count: 1)
        #expect {
            try HistoryFetch.versions(server: fixture.server.address, board: "team",
                                      options: Self.options(token: try fixture.token(.read)), timeout: 20)
        } throws: { "\($0)".contains("unavailable") }
    }

    @Test func aNormalSyncCarriesNoHistory() throws {
        let fixture = try AdminFixture()
        defer { fixture.stop() }
        _ = try Self.serverWithHistory(fixture, count: 3)
        // A late joiner that syncs without asking holds the board, and no history message
        // was answered by the server (its history cache is untouched).
        let temp = TempDirectory()
        var package = try makePackage(temp.path + "/late.boardpkg", id: 0x1A7E)
        defer { package.close() }
        try syncOnce(&package, board: "team", server: fixture.server.address, timeout: 20, token: try fixture.token(.read))
        #expect(package.replica.snapshot().strokes.count == 3)
        let server = fixture.server.host
        #expect(try fixture.server.thread.onLoop { server.historyReads } == 0)
    }
}
