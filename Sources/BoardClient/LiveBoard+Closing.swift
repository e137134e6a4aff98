import BoardNet
import BoardSync
import Foundation

// Closing (bounded whatever the server, transport or credentials do) and the run loop's wake-up.
extension LiveBoard {
    // MARK: Closing

    /// Closes the board: with `run()` running, waits until the server has acknowledged every
    /// edit or `bound` seconds pass, says goodbye and lets `run()` return; then saves and
    /// releases the storage (a package's lock). Says which happened. Later calls return the
    /// first one's report.
    ///
    /// Returns within `bound` (plus at most `LiveBoard.abandonGrace`) whatever the server,
    /// the transport or the credentials provider do: at the bound the connection attempt in
    /// flight is cancelled, and one that does not end at once is left behind.
    @discardableResult
    public func close(within bound: Double = 10) async -> CloseReport {
        if let closeReport { return closeReport }
        if !running {
            // The save in flight first (suspended: the actor serves others meanwhile).
            await waitForViewSave()
            if let closeReport { return closeReport }
        }
        if running {
            let deadline = min(closeDeadline ?? .infinity, now() + max(0, bound))
            closeDeadline = deadline
            signal()
            // Nothing to wait for and no session to say goodbye on: stop a connect in progress.
            if closeIsDue, endpoint?.session(sessionID)?.isOpen != true { interruptAttempt() }
            closeTimer?.cancel()
            let clock = self.clock
            closeTimer = Task { [weak self] in
                try? await clock.sleep(until: deadline)
                if Task.isCancelled { return }
                await self?.closeBoundPassed()
            }
            await withCheckedContinuation { closeWaiters.append($0) }
            return closeReport!
        }
        release(final: .closed)
        return closeReport!
    }

    private func closeBoundPassed() {
        if running { interruptAttempt() }
    }

    /// How long a cancelled connection attempt may take to end before `run()` leaves it behind.
    public static let abandonGrace = 0.25

    /// Cancels the connection attempt in flight; one still running after `abandonGrace` is
    /// left behind.
    func interruptAttempt() {
        guard let task = attemptTask else { return }
        task.cancel()
        let generation = attemptGeneration
        let clock = self.clock
        Task { [weak self] in
            try? await clock.sleep(until: clock.now() + Self.abandonGrace)
            await self?.abandonAttempt(generation)
        }
    }

    /// The attempt ended: `run()` goes on with its outcome.
    func attemptEnded(_ outcome: LinkOutcome, generation: Int) {
        guard generation == attemptGeneration, let waiter = attemptWaiter else { return }
        attemptWaiter = nil
        attemptTask = nil
        waiter.resume(returning: outcome)
    }

    /// Leaves a cancelled attempt behind: its session is shut down (merges saved) and
    /// forgotten, so nothing it does later reaches the board or its storage.
    func abandonAttempt(_ generation: Int) {
        guard generation == attemptGeneration, let waiter = attemptWaiter else { return }
        attemptWaiter = nil
        attemptTask = nil
        attemptGeneration += 1
        if let endpoint {
            endpoint.shutdown(save: true, now: now())
            self.endpoint = nil
        }
        failHistoryWaiters("the connection attempt was abandoned")
        sessionID += 1
        waiter.resume(returning: nil)
    }

    /// Saves (after the save in flight) and releases the storage, ends the streams (after a
    /// last status).
    func release(final: ClientEngine.Phase) {
        guard let store else { return }
        let unacknowledged = unacknowledgedOperations
        let images = unacknowledgedImages
        closeReport = CloseReport(allAcknowledged: unacknowledged == 0 && images == 0, unacknowledgedOperations: unacknowledged,
                                  unacknowledgedImages: images)
        closedReplica = store.replica
        finishViewSavesForClose()
        store.closeStore()
        self.store = nil
        setState(final)
        updateChannel.finish()
        statusChannel.finish()
        peersChannel.publish([])
        peersChannel.finish()
        closeTimer?.cancel()
        closeTimer = nil
        let waiters = closeWaiters
        closeWaiters = []
        for waiter in waiters { waiter.resume() }
    }

    // MARK: Waking

    func signal() {
        if let waiter = wakeWaiter {
            wakeWaiter = nil
            waiter.resume()
        } else {
            wakePending = true
        }
    }

    /// Sleeps until signalled, cancelled, or `deadline` (monotonic seconds) passes.
    func sleep(until deadline: Double?) async {
        if wakePending || Task.isCancelled {
            wakePending = false
            return
        }
        wakeGeneration += 1
        let generation = wakeGeneration
        var timer: Task<Void, Never>?
        if let deadline {
            let clock = self.clock
            timer = Task { [weak self] in
                do { try await clock.sleep(until: deadline) } catch { return }
                await self?.timerFired(generation)
            }
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                if wakePending || Task.isCancelled {
                    wakePending = false
                    continuation.resume()
                } else {
                    wakeWaiter = continuation
                }
            }
        } onCancel: {
            Task { await self.signal() }
        }
        wakePending = false
        timer?.cancel()
    }

    private func timerFired(_ generation: Int) {
        if generation == wakeGeneration { signal() }
    }

    /// Monotonic seconds on the board's clock.
    nonisolated func now() -> Double { clock.now() }
}
