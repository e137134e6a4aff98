import BoardModel
import BoardStore
import BoardSync
import Dispatch
import Foundation

/// Consistent online backups of every board a server holds (docs/DEPLOYMENT.md, "Backups"),
/// on a schedule and on demand (`backupNow`), without ever blocking the loop on a file or a
/// network request:
///
/// 1. the backup thread lists the data directory;
/// 2. on the loop, for each board that is new to this process or changed since its last backup,
///    a `BackupSource` is captured: an open board's op log's durable prefix (acknowledged
///    operations only), or a closed board's whole log, held open by descriptor (O(1) per board);
/// 3. the backup thread copies each source and the images beside it to the target, the
///    manifest last (`BackupWorker`), and reports back to the loop.
///
/// One run at a time; a `backupNow` during a run starts another once it ends. A board whose
/// backup failed (an unreachable or full target, refused credentials) keeps its previous backup
/// whole and is tried again at the next run. Loop thread only.
public final class BackupScheduler {
    public let target: any BackupTarget
    /// Seconds between scheduled runs (nil: on demand only).
    public let every: Double?
    let host: SyncHost
    let dataDirectory: String
    let worker: BackupWorker
    let log: (String) -> Void
    /// Boards changed since their last capture.
    var dirty: Set<String> = []
    /// Boards backed up (or found up to date at the destination) by this process.
    private var current: Set<String> = []
    /// Boards captured by the run in flight (its end may never be heard: `finalBackup`).
    var inFlight: Set<String> = []
    /// What the operator's metrics show (`boardsync_backup_*`).
    public internal(set) var status = BackupStatus()
    private var running = false
    private var pending = false
    var runs = 0
    private var timer: Int?
    /// The run in flight was scheduled: it logs only when it wrote or failed something.
    private var quiet = false
    /// The last run's report (nil before the first ends).
    public private(set) var lastReport: BackupReport?
    /// Called on the loop after each run.
    public var onFinished: ((BackupReport) -> Void)?

    public init(host: SyncHost, dataDirectory: String, target: any BackupTarget, every: Double?, log: @escaping (String) -> Void) {
        self.host = host
        self.dataDirectory = dataDirectory
        self.target = target
        self.every = every
        self.log = log
        worker = BackupWorker(target: target)
        // Changes mark their board; the next run backs it up (chained: others listen too).
        let previous = host.onBoardChange
        host.onBoardChange = { [weak self] board in
            previous?(board)
            self?.dirty.insert(board)
        }
        scheduleNext()
    }

    public var isRunning: Bool { running }

    /// Starts a run now (or right after the one in flight). Loop thread; the admin API and
    /// SIGUSR1 call this.
    public func backupNow(reason: String = "on demand") {
        start(reason: reason, scheduled: false)
    }

    private func start(reason: String, scheduled: Bool) {
        guard !running else {
            if !scheduled { pending = true }
            return
        }
        running = true
        runs += 1
        let run = runs
        let worker = self.worker
        let data = dataDirectory
        let loop = host.loop
        let box = WeakScheduler(self)
        quiet = scheduled
        if !scheduled { log("backup \(run) (\(reason)): to \(target)") }
        worker.queue.async {
            let names: [String]
            let listing: String?
            do {
                names = try PosixFileSystem().listDirectory(data).filter { $0.hasSuffix(".boardpkg") }
                    .map { String($0.dropLast(".boardpkg".count)) }.filter(Hello.isValidBoardName).sorted()
                listing = nil
            } catch {
                names = []
                listing = "cannot list \(data): \(error)"
            }
            loop.execute { box.scheduler?.capture(run: run, names: names, listingError: listing) }
        }
    }

    /// Boards captured per turn of the loop: bounds both the loop's hold (an open and an
    /// fstat per board) and the log descriptors held open while the backup thread copies.
    static let boardsPerTurn = 64

    /// On the loop: the run's first turn (the point in time the run reports).
    private func capture(run: Int, names: [String], listingError: String?) {
        var report = BackupReport(run: run, takenAt: Date().timeIntervalSince1970)
        if let listingError { report.failed.append(("(all)", listingError)) }
        captureNext(names[...], total: names.count, report: report, first: true)
    }

    /// On the loop: sources for the next boards that need one (at most `boardsPerTurn`), handed
    /// to the backup thread, which comes back here for the rest.
    private func captureNext(_ names: ArraySlice<String>, total: Int, report: BackupReport, first: Bool) {
        var report = report
        var sources: [BackupSource] = []
        var rest = names
        let now = Date().timeIntervalSince1970
        let captureStart = EventLoop.now()
        while let name = rest.first, sources.count < Self.boardsPerTurn {
            rest = rest.dropFirst()
            guard !current.contains(name) || dirty.contains(name) else { continue }
            do {
                guard let (source, due) = try source(name, now: now) else { continue }
                sources.append(source)
                inFlight.insert(name)
                // Operations merged but not yet synced are not in this point: the board stays due.
                if due { continue }
                dirty.remove(name)
            } catch {
                report.failed.append((name, "\(error)"))
            }
        }
        let held = EventLoop.now() - captureStart
        report.longestLoopHold = max(report.longestLoopHold, held)
        report.captured += sources.count
        if !sources.isEmpty, first || report.captured == sources.count {
            let milliseconds = String(format: "%.2f", held * 1000)
            log("backup \(report.run): took the points of \(sources.count) board\(sources.count == 1 ? "" : "s") of \(total) (every operation acknowledged until now) in \(milliseconds) ms on the loop\(rest.isEmpty ? "" : "; more follow, \(Self.boardsPerTurn) a turn")")
        }
        let box = WeakScheduler(self)
        let loop = host.loop
        let worker = self.worker
        let captured = sources
        let started = report
        let remaining = rest
        worker.queue.async {
            var report = started
            let sources = captured
            worker.backUp(sources, report: &report)
            let done = report
            loop.execute {
                guard let scheduler = box.scheduler else { return }
                if remaining.isEmpty {
                    var finished = done
                    finished.finishedAt = Date().timeIntervalSince1970
                    scheduler.finish(finished)
                } else {
                    scheduler.captureNext(remaining, total: total, report: done, first: false)
                }
            }
        }
    }

    /// The point of one board, held open (nil: nothing to back up here: a board kept in Redis
    /// only, or one deleted since the listing, whose last backup stays at the destination);
    /// `due`: operations merged but not yet synced are not in it (the board stays due).
    func source(_ name: String, now: Double) throws -> (BackupSource, due: Bool)? {
        let path = Path.join(dataDirectory, "\(name).boardpkg")
        if let board = host.boards[name] {
            guard let package = board.package else { return nil }
            let point = package.backupPoint
            return (try BackupSource(board: name, point: point, takenAt: now), package.logSize > point.logBytes)
        } else if PosixFileSystem().isDirectory(path) {
            return (try BackupSource(board: name, closedPackage: path, takenAt: now), false)
        }
        dirty.remove(name)
        return nil
    }

    private func finish(_ report: BackupReport) {
        running = false
        inFlight.removeAll()
        status.record(report)
        for board in report.written + report.unchanged { current.insert(board) }
        for failure in report.failed where failure.board != "(all)" {
            dirty.insert(failure.board)
            let level = report.tooLarge.contains(failure.board) ? "ERROR " : ""
            log("\(level)backup \(report.run): board '\(failure.board)' failed: \(failure.error) (its previous backup stays whole; tried again at the next run)")
        }
        if let all = report.failed.first(where: { $0.board == "(all)" }) {
            log("backup \(report.run): failed: \(all.error)")
        }
        lastReport = report
        let seconds = String(format: "%.2f", report.finishedAt - report.takenAt)
        if !quiet || !report.written.isEmpty || !report.failed.isEmpty { log("backup \(report.run) finished: \(report.written.count) written, \(report.unchanged.count) unchanged, \(report.failed.count) failed in \(seconds) s (the loop held at most \(String(format: "%.2f", report.longestLoopHold * 1000)) ms a turn); every operation acknowledged before \(BackupManifest.timestamp(report.takenAt)) is in \(target) for the boards written or unchanged") }
        onFinished?(report)
        if pending {
            pending = false
            backupNow(reason: "requested during the last run")
        }
    }

    private func scheduleNext() {
        guard let every else { return }
        timer = host.loop.schedule(after: every) { [weak self] in
            guard let self else { return }
            self.start(reason: "every \(BackupScheduler.duration(every))", scheduled: true)
            self.scheduleNext()
        }
    }

    /// Stops the schedule (a run in flight finishes).
    public func stop() {
        if let timer { host.loop.cancelTimer(timer) }
        timer = nil
    }

    static func duration(_ seconds: Double) -> String {
        seconds >= 3600 && seconds.truncatingRemainder(dividingBy: 3600) == 0 ? "\(Int(seconds / 3600))h"
            : seconds >= 60 && seconds.truncatingRemainder(dividingBy: 60) == 0 ? "\(Int(seconds / 60))m" : "\(seconds == seconds.rounded() ? String(Int(seconds)) : String(seconds))s"
    }
}

private final class WeakScheduler: @unchecked Sendable {
    weak var scheduler: BackupScheduler?
    init(_ scheduler: BackupScheduler) { self.scheduler = scheduler }
}
