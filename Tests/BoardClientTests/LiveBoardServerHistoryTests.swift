import BoardClient
import BoardCRDT
import BoardModel
import BoardStore
import BoardSync
import Foundation
import Testing

/// The server's history on the live client (docs/CLIENT.md, "History from the server"): a board
/// that joins late, in memory (it keeps no history of its own), lists the versions the server
/// holds from before it joined and views an old one, over loopback TCP.
@Suite struct LiveBoardServerHistoryTests {
    @Test func aLateJoinerSeesTheServersVersionsFromBeforeItJoined() async throws {
        let dir = TempDirectory()
        let server = try LocalSyncServer(dataDirectory: dir.path + "/server")
        let sync = LiveBoard.Sync(server: server.address, board: "past")
        let alice = try LiveBoard.open(storage: .package(path: dir.path + "/alice.boardpkg"), sync: sync)
        let aliceRun = Running(alice)
        try await live(alice, "alice")
        var strokes: [ItemID] = []
        for index in 0..<3 {
            strokes.append(try await alice.edit { try $0.beginStroke(color: .black, width: 2, points: line(Double(10 + 30 * index))) }.item!)
            try await eventually("the server to hold stroke \(index)") { alice.currentStatus.unacknowledgedOperations == 0 }
        }
        try await alice.edit { try $0.delete(strokes[0]) }
        try await eventually("the server to hold the delete") { alice.currentStatus.unacknowledgedOperations == 0 }

        let late = try LiveBoard.open(storage: .memory, sync: sync)
        let lateRun = Running(late)
        try await live(late, "late")
        let (total, versions) = try await late.serverVersions()
        #expect(total >= 4 && versions.count == Int(total))
        #expect(versions.map(\.number) == Array(1...total))
        // Some version shows all three strokes: the first one, deleted since, among them.
        var sawAllThree = false
        for version in versions {
            let past = try await late.serverBoard(at: version.number)
            #expect(past.number == version.number)
            if Set(past.snapshot.strokes.map { ItemID(uuid: $0.id) }) == Set(strokes) { sawAllThree = true }
        }
        #expect(sawAllThree)
        let latest = try await late.serverBoard(at: nil)
        #expect(latest.snapshot == late.snapshot)
        // A version beyond the history is refused, and the connection stays up for more.
        await #expect(throws: LiveBoard.ServerHistoryError.self) { try await late.serverBoard(at: total + 10) }
        #expect(try await late.serverVersions(from: total, through: total).versions.count == 1)
        _ = await late.close()
        _ = await alice.close()
        for run in [aliceRun, lateRun] { _ = try await run.ended() }
        await server.stop()
    }

    @Test func offlineTheServersHistoryIsNotAskedFor() async throws {
        let board = try LiveBoard.open(storage: .memory)
        await #expect(throws: LiveBoard.ServerHistoryError.self) { try await board.serverVersions() }
        _ = await board.close()
    }
}
