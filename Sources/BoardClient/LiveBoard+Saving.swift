import BoardCRDT
import BoardModel
import BoardStore
import BoardSync
import Dispatch
import Foundation
import Synchronization

// View saves off the board's actor. A package's op log takes every edit and merge at once
// (fsynced: that is what "saved" means); its view (`manifest.json`, images, the undo history,
// the view index: four to six fsyncs, and an O(board) snapshot) is rewritten after edits pause
// (`saveQuietPeriod`), at least every `saveMaxDelay` during a burst, and when the board closes.
// Those writes used to run on the actor, inside the endpoint's timers, so an update or an edit
// waited behind them. Now the actor only makes deferred merges durable and takes what the write
// needs (the published board's snapshot source, a value in the making; the undo history), and
// the files are written on the board's own save queue, the snapshot made there too. One save
// is in flight per board; changes made meanwhile are saved by the next one. A failed save is
// shown in the status (`LiveStatus.viewSaveError`) and tried again after a backoff, whole
// (`BoardPackage.finishViewWrite`). `close()` and `run()` ending wait for the save in flight
// before the last save and releasing the package's lock. The same pattern as the sync server's
// (`BoardNet/SyncHost+Saving.swift`).

/// The store a `LiveBoard` and its connections' endpoints use: the board's package or memory
/// replica, with view saves left to the board (LiveBoard+Saving.swift). It notes every change
/// that reaches the store, and an endpoint's own save (its timers, its shutdown) does nothing.
final class SavingStore: HostedStore {
    let base: any HostedStore
    /// The package, when the board is kept in one (a memory board has no view to save).
    let package: BoardPackage?
    let saves: ViewSaves

    init(_ base: any HostedStore, saves: ViewSaves) {
        self.base = base
        package = base as? BoardPackage
        self.saves = saves
    }

    var replica: Replica { base.replica }

    func merge(_ batch: OperationBatch) throws -> Int {
        try merge(batch, deferringSync: false)
    }

    func merge(_ batch: OperationBatch, deferringSync: Bool) throws -> Int {
        try merging(batch, deferringSync: deferringSync).count
    }

    func merging(_ batch: OperationBatch, deferringSync: Bool) throws -> [Op] {
        let fresh = try base.merging(batch, deferringSync: deferringSync)
        saves.changed = true
        return fresh
    }

    func syncMerges() throws { try base.syncMerges() }

    func addReceivedAsset(_ data: Data, claimedHash: AssetHash?) throws -> AssetHash {
        let hash = try base.addReceivedAsset(data, claimedHash: claimedHash)
        saves.changed = true
        return hash
    }

    func loadAuthors() throws -> [ReplicaID: String] { try base.loadAuthors() }

    func bindAuthor(_ replica: ReplicaID, to subject: String) throws { try base.bindAuthor(replica, to: subject) }

    func commitEdit(_ body: (inout Replica) throws -> LocalEdit) throws -> LocalEdit {
        let edit = try base.commitEdit(body)
        saves.changed = true
        return edit
    }

    /// The board saves its view itself (`LiveBoard.startViewSave`).
    func saveView() throws {}

    func closeStore() { base.closeStore() }
}

/// A board's view saves: when the next is due, the one in flight, and how the last one went.
/// Used on the board's actor only (the save queue sees only `InFlightSave`).
final class ViewSaves {
    /// The store changed since the board last looked (`SavingStore` sets it).
    var changed = false
    var scheduler = SaveScheduler(quietPeriod: LiveBoard.saveQuietPeriod, maxDelay: LiveBoard.saveMaxDelay)
    var inFlight: InFlightSave?
    var serial = 0
    var timer: Task<Void, Never>?
    /// The deadline `timer` sleeps until.
    var timerDeadline: Double?
    /// Why the last save failed (nil once one succeeds), and how many failed in a row.
    var lastError: String?
    var failures = 0
    /// After a failure, no save before this (monotonic seconds).
    var retryNotBefore: Double?
    /// Tasks waiting for the save in flight to finish.
    var waiters: [CheckedContinuation<Void, Never>] = []
    /// Where this board's file writes run, one at a time (a dispatch thread, not one of the
    /// concurrency pool's: a write blocks in fsync).
    let queue = DispatchQueue(label: "board-client.view-save")
}

/// A save whose files are being written on the save queue.
final class InFlightSave: Sendable {
    let serial: Int
    let write: ViewWrite
    /// Left once `write.run()` returned or threw.
    let done = DispatchGroup()
    /// What `run()` threw (set before `done` is left).
    let outcome = Mutex<(any Error)?>(nil)

    init(serial: Int, write: ViewWrite) {
        self.serial = serial
        self.write = write
    }
}

extension LiveBoard {
    /// How long edits must pause before the view is saved, and the longest a change waits
    /// for a save during a continuous burst (the sync server's defaults).
    static let saveQuietPeriod = 0.25
    static let saveMaxDelay = 1.0
    /// A failed save is tried again after this long, doubling per failure in a row up to
    /// `saveRetryMaximum`.
    static let saveRetryFirst = 1.0
    static let saveRetryMaximum = 60.0

    var savingStore: SavingStore? { store as? SavingStore }

    /// Called as the board publishes: a change that reached the store makes a save due after
    /// the quiet period.
    func noteViewChange() {
        guard viewSaves.changed else { return }
        viewSaves.changed = false
        guard savingStore?.package != nil else { return }
        viewSaves.scheduler.noteChange(now: now())
        armViewSaveTimer()
    }

    /// When the next save may start: the scheduler's deadline, not before a failure's backoff.
    private var viewSaveDeadline: Double? {
        guard viewSaves.inFlight == nil, let deadline = viewSaves.scheduler.deadline else { return nil }
        return max(deadline, viewSaves.retryNotBefore ?? deadline)
    }

    private func armViewSaveTimer() {
        guard let deadline = viewSaveDeadline else { return }
        // A timer due no later stays: it finds the save not due yet and sleeps again.
        if viewSaves.timer != nil, let armed = viewSaves.timerDeadline, armed <= deadline { return }
        viewSaves.timer?.cancel()
        viewSaves.timerDeadline = deadline
        let clock = self.clock
        viewSaves.timer = Task { [weak self] in
            do { try await clock.sleep(until: deadline) } catch { return }  // cancelled
            await self?.viewSaveTimerFired()
        }
    }

    private func viewSaveTimerFired() {
        viewSaves.timer = nil
        viewSaves.timerDeadline = nil
        guard store != nil else { return }
        if let deadline = viewSaveDeadline, now() >= deadline {
            startViewSave()
        } else {
            armViewSaveTimer()
        }
    }

    /// Starts a save of the view (none when one is in flight, the board is closed or has no
    /// package). On the actor: deferred merges made durable, the snapshot source and undo
    /// history taken; on the save queue: the snapshot made (shared with readers of the
    /// update) and the files written.
    func startViewSave() {
        guard viewSaves.inFlight == nil, let package = savingStore?.package else { return }
        viewSaves.scheduler.didStartSave()
        let write: ViewWrite
        do {
            // The published board is the replica's when no change is waiting to be published
            // (every call that changes the store publishes in the same turn of the actor).
            if !changes.changed {
                let source = updateChannel.current.source
                write = try package.prepareViewWrite(version: engine.vector) { source.snapshot }
            } else {
                write = try package.prepareViewWrite()
            }
        } catch {
            viewSaves.scheduler.didFinishSave()
            viewSaveFailed(error)
            return
        }
        viewSaves.serial += 1
        let save = InFlightSave(serial: viewSaves.serial, write: write)
        viewSaves.inFlight = save
        save.done.enter()
        viewSaves.queue.async {
            do { try save.write.run() } catch { save.outcome.withLock { $0 = error } }
            save.done.leave()
            Task { await self.viewSaveEnded(save.serial) }
        }
    }

    /// The save queue ran a save: its outcome goes to the package, and the next save is armed.
    private func viewSaveEnded(_ serial: Int) {
        guard let save = viewSaves.inFlight, save.serial == serial else { return }  // finished by close
        finishViewSave(save)
        armViewSaveTimer()
    }

    /// Hands a save that ran back to the package (on the actor): its view becomes the one the
    /// next save compares against, or, when it failed, the next save is whole and comes after
    /// a backoff. Wakes whoever waits for it.
    private func finishViewSave(_ save: InFlightSave) {
        viewSaves.inFlight = nil
        viewSaves.scheduler.didFinishSave()
        let error = save.outcome.withLock { $0 }
        do {
            try savingStore?.package?.finishViewWrite(save.write, error: error)
            if let error { throw error }
            viewSaves.lastError = nil
            viewSaves.failures = 0
            viewSaves.retryNotBefore = nil
            refreshStatus()
        } catch {
            viewSaveFailed(error)
        }
        let waiters = viewSaves.waiters
        viewSaves.waiters = []
        for waiter in waiters { waiter.resume() }
    }

    /// A save failed: the status says why, and the view is saved again after the backoff.
    private func viewSaveFailed(_ error: any Error) {
        viewSaves.lastError = "\(error)"
        viewSaves.failures += 1
        let delay = min(Self.saveRetryMaximum, Self.saveRetryFirst * Double(1 << min(viewSaves.failures - 1, 16)))
        let now = now()
        viewSaves.retryNotBefore = now + delay
        viewSaves.scheduler.noteChange(now: now)
        refreshStatus()
        armViewSaveTimer()
    }

    /// Waits (suspended, not blocking the actor) until no save is in flight.
    func waitForViewSave() async {
        while viewSaves.inFlight != nil {
            await withCheckedContinuation { viewSaves.waiters.append($0) }
        }
    }

    /// Saves the view now (after the save in flight) and returns when it is on disk; throws
    /// what the save threw. A memory board has nothing to save.
    func saveViewNow() async throws {
        guard store != nil else { throw LiveBoardError.closed }
        guard savingStore?.package != nil else { return }
        await waitForViewSave()
        guard store != nil else { throw LiveBoardError.closed }
        noteViewChange()
        startViewSave()
        let serial = viewSaves.serial
        await waitForViewSave()
        if viewSaves.serial == serial, let error = viewSaves.lastError { throw ViewSaveError(description: error) }
    }

    /// Before the store is released: waits for the save in flight (blocking the actor for the
    /// rest of that one save: `release` is synchronous, and the lock must not go while files
    /// are being written), then saves on the actor what changed since, or everything again
    /// after a failure.
    func finishViewSavesForClose() {
        viewSaves.timer?.cancel()
        viewSaves.timer = nil
        viewSaves.timerDeadline = nil
        if let save = viewSaves.inFlight {
            save.done.wait()
            finishViewSave(save)
        }
        guard let saving = savingStore, saving.package != nil else { return }
        if viewSaves.changed || viewSaves.scheduler.isPending || viewSaves.lastError != nil || viewSaves.serial == 0 {
            do {
                try saving.base.saveView()
                viewSaves.lastError = nil
            } catch {
                viewSaves.lastError = "\(error)"
            }
        }
    }
}

/// What a failed view save threw, as the status showed it.
struct ViewSaveError: Error, CustomStringConvertible {
    var description: String
}
