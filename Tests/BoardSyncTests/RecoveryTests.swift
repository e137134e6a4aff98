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
        for code: SessionError.Code in [.readOnly, .notAuthor, .badBoardName, .unauthorized, .limitReached, .unsupportedVersion, .boardMismatch] {
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
}
