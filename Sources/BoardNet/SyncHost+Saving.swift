import BoardSync
import Dispatch
import Synchronization

/// View saves off the loop thread. A board's view save (the manifest, changed images, the view
/// index: four to six fsyncs, 2–3 ms each on a disk) used to run inside the loop's turn, so
/// every other board's reads, merges and relays waited behind it, and with hundreds of boards
/// falling due together the loop spent half its time in fsync. Now the endpoint hands the host
/// each save's file writes as a job (`.saveView`, `SyncEndpoint.Options.viewSavesOffThread`):
/// the snapshot is taken on the loop (a value), the writes run on one of
/// `Options.viewSaveThreads` save threads (a board always on the same one), and the outcome
/// comes back to the loop through `execute`. One save per board is in flight at a time; the op
/// log, which acknowledgements depend on, is never written off the loop.
final class ViewSaves: Sendable {
    private let queues: [DispatchQueue]
    private let running = DispatchGroup()
    /// Finished jobs waiting for the loop: board, job, and what the job threw.
    private let finished = Mutex<[(board: String, job: ViewSaveJob, error: (any Error)?)]>([])

    init(threads: Int) {
        queues = (0..<max(0, threads)).map { DispatchQueue(label: "board-sync.view-save.\($0)") }
    }

    /// Runs `job` on `board`'s save thread, then `done` (on that thread).
    func run(_ board: String, _ job: ViewSaveJob, done: @escaping @Sendable () -> Void) {
        // FNV-1a of the name: a board's saves always go to the same thread, in order.
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in board.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        let queue = queues[Int(hash % UInt64(queues.count))]
        running.enter()
        queue.async { [self] in
            var failure: (any Error)?
            do { try job.run() } catch { failure = error }
            self.finished.withLock { $0.append((board, job, failure)) }
            self.running.leave()
            done()
        }
    }

    /// The finished jobs not handed back yet (the list starts over empty).
    func takeFinished() -> [(board: String, job: ViewSaveJob, error: (any Error)?)] {
        finished.withLock { list in
            defer { list.removeAll() }
            return list
        }
    }

    /// Blocks until every job started so far has run.
    func waitForAll() {
        running.wait()
    }
}

/// The host stopped (`abort`) before a save's outcome reached its endpoint.
struct ViewSaveAbandoned: Error, CustomStringConvertible {
    var description: String { "the host stopped before the save was finished" }
}

/// A host that may be gone by the time a save thread reports.
final class WeakHost: @unchecked Sendable {
    weak var host: SyncHost?
    init(_ host: SyncHost) { self.host = host }
}

extension SyncHost {
    static func withSaveThreads(_ options: Options) -> Options {
        var options = options
        options.endpoint.viewSavesOffThread = options.viewSaveThreads > 0
        return options
    }

    func startViewSave(_ board: String, _ job: ViewSaveJob) {
        let box = WeakHost(self)
        let loop = self.loop
        viewSaves.run(board, job) {
            loop.execute { box.host?.finishViewSaves(waiting: false) }
        }
    }

    /// After `abort`: the saves that ran are handed back as abandoned (each store forgets its
    /// write in flight; nothing more happens, no log compaction), as a killed process would.
    func abandonViewSaves() {
        for save in viewSaves.takeFinished() { try? endpoint.boards[save.board]?.store.endViewSave(save.job, error: ViewSaveAbandoned()) }
    }

    /// Hands finished saves back to the endpoint (first waiting for those still running, when
    /// `waiting`: a shutdown), then re-arms the timer: a board that changed while its save ran
    /// is due again.
    func finishViewSaves(waiting: Bool) {
        if waiting { viewSaves.waitForAll() }
        let done = viewSaves.takeFinished()
        guard !done.isEmpty else { return }
        let now = EventLoop.now()
        for save in done { endpoint.viewSaveFinished(board: save.board, save.job, error: save.error, now: now) }
        guard !stopped else { return }
        flushNoted()
        armTimer()
    }
}
