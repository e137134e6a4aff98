import BoardCRDT
import BoardSimulation
import BoardStore
import BoardSync
import Testing

/// What a client does after a refusal: retry, refresh its credentials once, or stop.
@Suite struct RecoveryTests {
    /// The classes the live client relies on (issue 25): I/O trouble, load, restarts and
    /// storage are retried; an expired token is refreshed; read-only, not the author and a board
    /// the server will not open stop the client.
    @Test func refusalsAreClassedForAClient() {
        func remote(_ code: SessionError.Code) -> SessionError.Recovery { SessionError(code, "", remote: true).recovery }
        for code: SessionError.Code in [.busy, .shuttingDown, .tooFast, .storageUnavailable, .idleTimeout, .slowReader, .badChecksum, .internalError] {
            #expect(remote(code) == .retry, "\(code.name)")
        }
        #expect(remote(.tokenExpired) == .refreshCredentials)
        for code: SessionError.Code in [.readOnly, .notAuthor, .badBoardName, .unauthorized, .limitReached, .unsupportedVersion, .boardMismatch, .boardDeleted] {
            #expect(remote(code) == .stop, "\(code.name)")
        }
        // What this side found wrong in the other's bytes is the link's or the other side's
        // trouble: worth a new connection, except a version nobody can change.
        #expect(SessionError(.invalidOperations, "").recovery == .retry)
        #expect(SessionError(.unsupportedVersion, "").recovery == .stop)
    }

    /// A server whose every open board has peers connected, at its limit of open boards,
    /// turns a new board away with `busy` (retry), not `bad board name` (stop).
    @Test func aServerAtItsOpenBoardLimitSaysBusy() throws {
        var options = SyncEndpoint.Options()
        options.maxOpenBoards = 1
        let (_, net, server) = try EndpointTests.serverOnSimulatedDisk(options: options)
        let first = net.add(SyncEndpoint(board: "one", store: MemoryReplicaStore(replica: Replica(id: ReplicaID(0xA))), now: 0))
        net.connect(first, to: server)
        net.deliver()
        #expect(net.endpoints[server].boards.count == 1)
        let second = net.add(SyncEndpoint(board: "two", store: MemoryReplicaStore(replica: Replica(id: ReplicaID(0xB))), now: 0))
        net.connect(second, to: server)
        net.deliver()
        let reason = try #require(net.endpoints[second].lastCloseReason)
        #expect(reason.code == .busy && reason.remote, "\(reason)")
        #expect(reason.recovery == .retry)
        #expect(reason.message.contains("limit 1"), "\(reason.message)")
    }

    /// A board its operator deleted: an opener that throws `BoardDeletedError` (the server's
    /// tombstone) turns the HELLO away with `boardDeleted` (24), naming the board: terminal.
    @Test func aDeletedBoardIsRefusedWithATerminalCodeNamingIt() throws {
        let net = VirtualNet()
        let server = net.add(SyncEndpoint(opener: { name in
            throw BoardDeletedError(board: name, deletedAt: "2026-12-05T21:00:00Z")
        }, now: 0))
        let client = net.add(SyncEndpoint(board: "gone", store: MemoryReplicaStore(replica: Replica(id: ReplicaID(0xA))), now: 0))
        net.connect(client, to: server)
        net.deliver()
        let reason = try #require(net.endpoints[client].lastCloseReason)
        #expect(reason.code == .boardDeleted && reason.code.rawValue == 24 && reason.remote, "\(reason)")
        #expect(reason.recovery == .stop)
        #expect(reason.message.contains("'gone'") && reason.message.contains("deleted"), "\(reason.message)")
        #expect(net.endpoints[server].boards.isEmpty)
    }

    /// Deleting an open board: refused while a session holds it unless forced; forced, the
    /// session ends with `boardDeleted` and the board is dropped.
    @Test func deletingAHeldBoardNeedsForceAndEndsItsSessions() throws {
        let (_, net, server, _, _, a, _) = try EndpointTests.aliceAndBobOnAServer()
        net.deliver()
        let endpoint = net.endpoints[server]
        #expect(endpoint.endSessionsForDeletion("team", force: false, now: 1) == .held(sessions: 2, viewers: 0))
        #expect(endpoint.boards["team"] != nil)
        #expect(endpoint.endSessionsForDeletion("other", force: true, now: 1) == .notOpen)
        #expect(endpoint.endSessionsForDeletion("../team", force: true, now: 1) == .notOpen)
        #expect(endpoint.endSessionsForDeletion("team", force: true, now: 1) == .ended(sessions: 2))
        net.deliver()
        endpoint.discardBoard("team", now: 1)
        net.deliver()
        #expect(endpoint.boards["team"] == nil)
        let reason = try #require(net.endpoints[a].lastCloseReason)
        #expect(reason.code == .boardDeleted && reason.recovery == .stop, "\(reason)")
    }
}
