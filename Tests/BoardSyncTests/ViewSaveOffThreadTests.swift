import BoardCRDT
import BoardModel
import BoardSimulation
import BoardStore
import BoardSync
import Foundation
import Synchronization
import Testing

/// `SyncEndpoint.Options.viewSavesOffThread`: a due view save becomes a `.saveView` job the host
/// runs elsewhere (`SyncHost` on its save threads), one in flight per board, and the board
/// neither saves again nor closes until the host hands the outcome back. Driven here by hand on
/// virtual time, so every interleaving the threads could produce is chosen by the test.
@Suite struct ViewSaveOffThreadTests {
    /// A server whose saves leave its calls, with alice (0xA) on board "team".
    static func setUp(idleBoardTimeout: Double = 60, log: @escaping @Sendable (String) -> Void = { _ in })
        throws -> (MemoryFileSystem, VirtualNet, server: Int, a: Int, link: Int) {
        var options = SyncEndpoint.Options()
        options.viewSavesOffThread = true
        options.idleBoardTimeout = idleBoardTimeout
        options.log = log
        let (fs, net, server) = try EndpointTests.serverOnSimulatedDisk(options: options)
        let a = net.add(SyncEndpoint(board: "team", store: MemoryReplicaStore(replica: Replica(id: ReplicaID(0xA))), now: 0))
        let link = net.connect(a, to: server)
        #expect(net.deliver())
        return (fs, net, server, a, link)
    }

    /// The server's queued save jobs for "team" (other events dropped).
    static func saveJobs(_ endpoint: SyncEndpoint) -> [ViewSaveJob] {
        var jobs: [ViewSaveJob] = []
        while let event = endpoint.pollEvent() {
            if case .saveView("team", let job) = event { jobs.append(job) }
        }
        return jobs
    }

    static func stroke(_ net: VirtualNet, _ a: Int, at x: Double) throws {
        try net.endpoints[a].edit(now: net.now) { replica in
            let edit = try replica.beginStroke(color: RGBAColor(red: 1, green: 0, blue: 0), width: 2,
                                               points: [CodablePoint(x: x, y: 0), CodablePoint(x: x, y: 9)])
            replica.finishStroke()
            return edit
        }
    }

    static func strokesOnDisk(_ fs: MemoryFileSystem) throws -> Int {
        try PackageReader(fileSystem: fs).read("/data/team.boardpkg").strokes.count
    }

    @Test func aDueSaveIsAJobNothingIsWrittenBeforeItRunsAndChangesMeanwhileAreSavedAfter() throws {
        let (fs, net, server, a, _) = try Self.setUp()
        _ = Self.saveJobs(net.endpoints[server])
        try Self.stroke(net, a, at: 1)
        net.advance(until: 2)
        var jobs = Self.saveJobs(net.endpoints[server])
        #expect(jobs.count == 1, "one save came due")
        #expect(try Self.strokesOnDisk(fs) == 0, "the endpoint wrote no view file itself")

        // Edits while the job is held: no second save is due, however long it takes.
        try Self.stroke(net, a, at: 2)
        net.advance(until: 30)
        #expect(Self.saveJobs(net.endpoints[server]).isEmpty, "one save in flight per board")
        #expect(net.endpoints[server].boards["team"]?.store.replica.versionVector[ReplicaID(0xA)] == 2)

        // The host runs it: the view holds what the board held when the save was taken.
        let first = jobs.removeFirst()
        try first.run()
        #expect(try Self.strokesOnDisk(fs) == 1)
        net.endpoints[server].viewSaveFinished(board: "team", first, error: nil, now: net.now)

        // The change made meanwhile is due at once, as the next job.
        net.advance(until: net.now + 0.001)
        jobs = Self.saveJobs(net.endpoints[server])
        #expect(jobs.count == 1)
        try jobs[0].run()
        net.endpoints[server].viewSaveFinished(board: "team", jobs[0], error: nil, now: net.now)
        #expect(try Self.strokesOnDisk(fs) == 2)
        net.advance(until: net.now + 5)
        #expect(Self.saveJobs(net.endpoints[server]).isEmpty, "nothing left to save")
    }

    @Test func aFailedJobIsLoggedAndTheNextSaveWritesTheWholeChange() throws {
        let lines = Mutex<[String]>([])
        let (fs, net, server, a, _) = try Self.setUp(log: { line in lines.withLock { $0.append(line) } })
        _ = Self.saveJobs(net.endpoints[server])
        try Self.stroke(net, a, at: 1)
        net.advance(until: 2)
        let failed = try #require(Self.saveJobs(net.endpoints[server]).first)
        // The host's thread reports a failure without writing (a full disk, say).
        struct DiskFull: Error, CustomStringConvertible { var description: String { "no space left on device" } }
        net.endpoints[server].viewSaveFinished(board: "team", failed, error: DiskFull(), now: net.now)
        #expect(lines.withLock { $0 }.contains { $0.contains("board 'team': save failed: no space left on device") })
        #expect(try Self.strokesOnDisk(fs) == 0)

        // The next change makes the board due again; its save writes both strokes.
        try Self.stroke(net, a, at: 2)
        net.advance(until: net.now + 2)
        let next = try #require(Self.saveJobs(net.endpoints[server]).first)
        try next.run()
        net.endpoints[server].viewSaveFinished(board: "team", next, error: nil, now: net.now)
        #expect(try Self.strokesOnDisk(fs) == 2)
    }

    @Test func aBoardDoesNotCloseWhileItsSaveIsInFlightAndClosesAfter() throws {
        let (fs, net, server, a, link) = try Self.setUp(idleBoardTimeout: 5)
        _ = Self.saveJobs(net.endpoints[server])
        try Self.stroke(net, a, at: 1)
        net.advance(until: 1)
        let job = try #require(Self.saveJobs(net.endpoints[server]).first)
        net.cut(link)
        // Well past the idle timeout (VirtualNet records a failure if a timer spins).
        net.advance(until: 60)
        #expect(net.endpoints[server].boards["team"] != nil, "not closed under a running save")
        #expect(throws: StoreError.self) {
            // The package itself refuses a second save meanwhile.
            try (net.endpoints[server].boards["team"]?.store as? BoardPackage)?.save()
        }

        try job.run()
        net.endpoints[server].viewSaveFinished(board: "team", job, error: nil, now: net.now)
        net.advance(until: net.now + 6)
        #expect(net.endpoints[server].boards["team"] == nil, "closed once the save finished")
        let reopened = try BoardPackage.open(at: "/data/team.boardpkg", fileSystem: fs, newReplicaID: { ReplicaID(1) })
        defer { reopened.close() }
        #expect(reopened.replica.snapshot().strokes.count == 1)
        #expect(try Self.strokesOnDisk(fs) == 1)
    }

    @Test func aFinishedSaveForABoardThatIsGoneIsIgnored() throws {
        let (_, net, server, _, _) = try Self.setUp()
        let job = ViewSaveJob(work: 0) {}
        net.endpoints[server].viewSaveFinished(board: "no-such-board", job, error: nil, now: net.now)
        #expect(net.endpoints[server].boards["team"] != nil)
    }
}
