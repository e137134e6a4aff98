import BoardModel
import BoardStore
import Dispatch
import Foundation

/// What backups have done in this process, for the operator's metrics (`boardsync_backup_*`,
/// docs/DEPLOYMENT.md "Backups").
public struct BackupStatus: Sendable {
    /// Runs that ended (whatever they wrote or failed).
    public var runs = 0
    /// When the last run ended (seconds since 1970; 0 before the first).
    public var lastFinishedAt: Double = 0
    /// The last run's boards: written, unchanged (already at the destination), failed.
    public var lastWritten = 0
    public var lastUnchanged = 0
    public var lastFailed = 0
    /// Boards whose last attempt failed, and of those the ones over a `BackupLimits` bound.
    public var failing: Set<String> = []
    public var tooLarge: Set<String> = []

    mutating func record(_ report: BackupReport) {
        runs += 1
        lastFinishedAt = report.finishedAt
        lastWritten = report.written.count
        lastUnchanged = report.unchanged.count
        lastFailed = report.failed.count
        for board in report.written + report.unchanged {
            failing.remove(board)
            tooLarge.remove(board)
        }
        for failure in report.failed where failure.board != "(all)" { failing.insert(failure.board) }
        for board in report.tooLarge { tooLarge.insert(board) }
    }
}

extension BackupScheduler {
    /// What `finalBackup` did.
    public enum FinalOutcome: Sendable {
        /// No board changed since its last completed backup.
        case nothingChanged
        /// The run ended in time (its report says what it wrote and what failed).
        case completed(BackupReport)
        /// It did not end within the timeout: these boards may lack their last operations.
        case timedOut(boards: [String])
    }

    /// One last run when the server stops (`serve`, SIGTERM or SIGINT): called on the thread
    /// that ran the loop, after it stopped and the host shut down (every board saved, so every
    /// operation it acknowledged is in its log's durable prefix). It backs up the boards
    /// changed since their last completed backup, the ones a run still in flight had taken (its
    /// end is never heard now) and the ones whose last attempt failed, waiting at most
    /// `timeout` seconds for the backup thread (behind a run in flight, if any), and logs
    /// whether it completed. A scheduled deployment so loses nothing it acknowledged before the
    /// signal, as long as the run fits in the timeout.
    public func finalBackup(timeout: Double) -> FinalOutcome {
        stop()
        let fileSystem = PosixFileSystem()
        let due = dirty.union(inFlight).filter { host.boards[$0] != nil || fileSystem.isDirectory(Path.join(dataDirectory, "\($0).boardpkg")) }.sorted()
        guard !due.isEmpty else {
            log("final backup: no board changed since its last completed backup; every acknowledged operation is in \(target)")
            return .nothingChanged
        }
        runs += 1
        let started = Date().timeIntervalSince1970
        let deadline = DispatchTime.now() + timeout
        log("final backup \(runs): \(due.count) board\(due.count == 1 ? "" : "s") changed since the last completed backup, to \(target) (at most \(BackupScheduler.duration(timeout)), --backup-final-timeout)")
        var report = BackupReport(run: runs, takenAt: started)
        var index = 0
        while index < due.count {
            let batch = due[index..<min(index + Self.boardsPerTurn, due.count)]
            index = batch.endIndex
            var sources: [BackupSource] = []
            for name in batch {
                do {
                    if let (source, _) = try source(name, now: started) { sources.append(source) }
                } catch {
                    report.failed.append((name, "\(error)"))
                }
            }
            let box = FinalBox(report)
            let done = DispatchSemaphore(value: 0)
            let worker = self.worker
            let captured = sources
            worker.queue.async {
                var report = box.report
                worker.backUp(captured, report: &report)
                box.report = report
                done.signal()
            }
            if done.wait(timeout: deadline) == .timedOut {
                let left = Array(due[batch.startIndex...])
                log("ERROR final backup \(runs) did NOT complete within \(BackupScheduler.duration(timeout)) (--backup-final-timeout): \(left.count) board\(left.count == 1 ? "" : "s") may lack operations acknowledged since their last backup: \(left.prefix(20).joined(separator: ", "))\(left.count > 20 ? ", ..." : "")")
                return .timedOut(boards: left)
            }
            report = box.report
        }
        report.finishedAt = Date().timeIntervalSince1970
        status.record(report)
        for failure in report.failed {
            log("\(report.tooLarge.contains(failure.board) ? "ERROR " : "")final backup \(report.run): board '\(failure.board)' failed: \(failure.error) (its previous backup stays whole)")
        }
        let seconds = String(format: "%.2f", report.finishedAt - started)
        log("final backup \(report.run) completed\(report.failed.isEmpty ? "" : " WITH FAILURES"): \(report.written.count) written, \(report.unchanged.count) unchanged, \(report.failed.count) failed in \(seconds) s; every operation acknowledged before the signal is in \(target) for the boards written or unchanged")
        return .completed(report)
    }
}

/// The final run's report, handed between the backup thread and the waiting one (read after
/// the semaphore only).
private final class FinalBox: @unchecked Sendable {
    var report: BackupReport
    init(_ report: BackupReport) { self.report = report }
}
