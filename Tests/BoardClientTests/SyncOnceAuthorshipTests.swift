import BoardClient
import BoardCRDT
import BoardModel
import BoardNet
import BoardSync
import Foundation
import Testing

/// A package that holds other replicas' operations (learned from a server without access
/// control) meets a server that requires tokens, under a write token: the server drops the
/// operations of replicas the token's subject does not own, and says so; the client ends
/// promptly with an error naming them (never waits for its bound), and a live client's status
/// says why they stay unacknowledged.
@Suite struct SyncOnceAuthorshipTests {
    /// Paul's edit, learned by Quinn's package through an open server; returns Quinn's package.
    func carriedPackage(_ dir: TempDirectory) async throws -> (path: String, paul: ReplicaID, quinn: ReplicaID) {
        let open = try LocalSyncServer(dataDirectory: dir.path + "/open")
        let sync = LiveBoard.Sync(server: open.address, board: "b")
        let paul = try LiveBoard.open(storage: .memory, sync: sync)
        try await paul.edit { try $0.beginStroke(color: .black, width: 2, points: line(10)) }
        try await paul.syncOnce(within: 20)
        let path = dir.path + "/Q.boardpkg"
        let quinn = try LiveBoard.open(storage: .package(path: path), sync: sync)
        #expect(try await quinn.syncOnce(within: 20).operationsReceived == 1)
        try await quinn.edit { try $0.beginStroke(color: .black, width: 2, points: line(20)) }
        let ids = (paul.replicaID, quinn.replicaID)
        _ = await paul.close()
        _ = await quinn.close()
        await open.stop()
        return (path, ids.0, ids.1)
    }

    func guardedServer(_ dir: TempDirectory, capabilities: UInt64 = Capabilities.supported) throws -> (LocalSyncServer, TokenAuthority) {
        let authority = try TokenAuthority(secret: Array(repeating: 7, count: 32))
        var options = SyncHost.Options()
        options.capabilities = capabilities
        options.access = SyncEndpoint.AccessControl(authority: authority, wallClock: { Date().timeIntervalSince1970 })
        return (try LocalSyncServer(dataDirectory: dir.path + "/guarded", options: options), authority)
    }

    @Test func aWriteTokenCarryingOthersOperationsFailsPromptlyNamingThem() async throws {
        let dir = TempDirectory()
        let (path, paul, quinn) = try await carriedPackage(dir)
        let (server, authority) = try guardedServer(dir)
        let token = try authority.mint(board: "watch", role: .write, expires: nil, subject: "quinn")
        let board = try LiveBoard.open(storage: .package(path: path), sync: LiveBoard.Sync(server: server.address, board: "watch"),
                                       credentials: .token(token))
        let started = Date()
        do {
            try await board.syncOnce(within: 30)
            Issue.record("the server took another replica's operations from a write token")
        } catch let error as SyncOnceError {
            guard case .operationsRefused(let refused, let refusal) = error else { Issue.record("\(error)"); return }
            #expect(refused == [paul: 1], "\(refused)")
            #expect(refusal.code == .notAuthor && !error.isRetryable)
            let text = "\(error)"
            #expect(text.contains("1 operation of replica \(paul)") && text.contains("peer token"), "\(text)")
        }
        #expect(Date().timeIntervalSince(started) < 10, "took \(Date().timeIntervalSince(started)) s")
        // Its own operation landed; the carried one did not (a reader sees one stroke).
        #expect(board.currentStatus.state == .idle && board.currentStatus.isAllAcknowledged)
        let reader = try LiveBoard.open(storage: .memory, sync: LiveBoard.Sync(server: server.address, board: "watch"),
                                        credentials: .token(try authority.mint(board: "watch", role: .read, expires: nil, subject: "rita")))
        #expect(try await reader.syncOnce(within: 20).operationsReceived == 1)
        #expect(await reader.replica.versionVector == VersionVector([quinn: 1]))
        _ = await reader.close()

        // Live, the same link stays up (the client's own edits flow) and the status says why
        // the carried operation stays behind.
        let run = Running(board)
        try await live(board, "quinn")
        try await eventually("the refusal in the status") { board.currentStatus.refusedOperations == 1 }
        let status = board.currentStatus
        #expect(status.state == .live && status.refusal?.code == .notAuthor, "\(status)")
        #expect(status.refusal?.message.contains("\(paul)") == true, "\(String(describing: status.refusal))")
        _ = await board.close()
        _ = try await run.ended()
        await server.stop()
    }

    @Test func anOlderServerDropsThemSilentlyAndTheTimeoutSaysWhy() async throws {
        // A server of a build before REFUSED (it does not announce capability bit 8) drops them
        // without a word: the sync runs to its bound, and its error names the likely reason.
        let dir = TempDirectory()
        let (path, paul, _) = try await carriedPackage(dir)
        let (server, authority) = try guardedServer(dir, capabilities: Capabilities.supported & ~Capabilities.refusalNotices)
        let token = try authority.mint(board: "watch", role: .write, expires: nil, subject: "quinn")
        let board = try LiveBoard.open(storage: .package(path: path), sync: LiveBoard.Sync(server: server.address, board: "watch"),
                                       credentials: .token(token))
        do {
            try await board.syncOnce(within: 3)
            Issue.record("the server took another replica's operations from a write token")
        } catch let error as SyncOnceError {
            guard case .timedOut(_, let awaited) = error else { Issue.record("\(error)"); return }
            #expect(awaited.contains("operations of replica \(paul) that this board holds from other replicas"), "\(awaited)")
            #expect(awaited.contains("this replica's own are acknowledged") && awaited.contains("peer token"), "\(awaited)")
        }
        _ = await board.close()
        await server.stop()
    }
}
