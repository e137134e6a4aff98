#if canImport(Glibc)
import Glibc
#endif
import BoardSync
import CBoardNet
import Synchronization

/// Something registered with the loop for readiness events.
protocol EventSource: AnyObject {
    func handle(events: UInt32)
}

/// A single-threaded epoll event loop: sockets, timers, and tasks posted from other threads.
///
/// Timers sit in a binary min-heap (`DeadlineQueue`, the sync layer's, keyed by timer id), so
/// scheduling, cancelling and finding the earliest cost O(log n) however many are armed (a
/// load generator runs a thousand hosts on one loop). Due timers run earliest first; among
/// equal deadlines the one scheduled first runs first. A timer cancelled before it runs never
/// runs, even when it fell due in the same turn as the timer that cancels it.
///
/// `@unchecked Sendable`: every mutable property except `posted`/`stopping` is touched only on
/// the thread running `run()`; other threads may only call `execute` and `stop`, which go through
/// a `Mutex` and a wake-up pipe.
public final class EventLoop: @unchecked Sendable {
    private let epfd: Int32
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private var sources: [Int32: EventSource] = [:]
    private var timers = DeadlineQueue<Int>()
    /// Each armed timer's task, by id (a cancelled or run timer's is dropped at once).
    private var timerTasks: [Int: () -> Void] = [:]
    private var nextTimerID = 0
    private let posted = Mutex<[@Sendable () -> Void]>([])
    private let stopping = Atomic<Bool>(false)

    public init() throws {
        epfd = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epfd >= 0 else { throw NetError.system("epoll_create1", errno) }
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw NetError.system("pipe", errno) }
        wakeRead = fds[0]
        wakeWrite = fds[1]
        _ = fcntl(wakeRead, F_SETFL, fcntl(wakeRead, F_GETFL) | O_NONBLOCK)
        _ = fcntl(wakeWrite, F_SETFL, fcntl(wakeWrite, F_GETFL) | O_NONBLOCK)
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.fd = wakeRead
        _ = epoll_ctl(epfd, EPOLL_CTL_ADD, wakeRead, &event)
    }

    deinit {
        for fd in sources.keys { _ = Glibc.close(fd) }
        _ = Glibc.close(epfd)
        _ = Glibc.close(wakeRead)
        _ = Glibc.close(wakeWrite)
    }

    /// Seconds on the monotonic clock.
    public static func now() -> Double {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
    }

    /// Runs until `stop()` (a stop requested before `run` ends the next run at once). Call on the
    /// thread that owns the loop.
    public func run() {
        var events = [epoll_event](repeating: epoll_event(), count: 64)
        while !stopping.load(ordering: .acquiring) {
            let now = EventLoop.now()
            var timeout: Int32 = 1000
            if let first = timers.earliest()?.deadline {
                timeout = Int32(max(0, min(1000, (first - now) * 1000 + 1)))
            }
            let count = epoll_wait(epfd, &events, Int32(events.count), timeout)
            if count < 0 && errno != EINTR { break }
            // Each source reads at most a bounded slice per event (`TCPConnection.maxReadPerEvent`),
            // so one turn is bounded and the timers below run at least once per turn however
            // fast any peer sends.
            for index in 0..<max(0, Int(count)) {
                let fd = events[index].data.fd
                if fd == wakeRead {
                    drainWake()
                    continue
                }
                sources[fd]?.handle(events: events[index].events)
            }
            runPosted()
            runTimers()
        }
        runPosted()
        // A stop ends one run; the loop can be run again afterwards.
        stopping.store(false, ordering: .releasing)
    }

    /// Drops every timer not yet run, with what its task holds. For a loop that is done (call on
    /// its thread after its last `run()`): a timer's task that holds a connection which holds
    /// the loop would otherwise keep the loop, its epoll descriptor and wake-up pipe alive.
    public func discardTimers() {
        timers = DeadlineQueue()
        timerTasks = [:]
    }

    /// Runs `task` on the loop thread (thread-safe).
    public func execute(_ task: @escaping @Sendable () -> Void) {
        posted.withLock { $0.append(task) }
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }

    /// Makes `run()` return after the current iteration (thread-safe).
    public func stop() {
        stopping.store(true, ordering: .releasing)
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }

    /// Runs `task` on the loop thread after `seconds`. Loop thread only.
    @discardableResult
    public func schedule(after seconds: Double, _ task: @escaping () -> Void) -> Int {
        nextTimerID += 1
        timers.schedule(nextTimerID, at: EventLoop.now() + seconds)
        timerTasks[nextTimerID] = task
        return nextTimerID
    }

    /// Disarms a timer that has not run (an id that ran or is unknown changes nothing). Loop
    /// thread only.
    public func cancelTimer(_ id: Int) {
        timers.cancel(id)
        timerTasks[id] = nil
    }

    /// Timers armed and not yet run or cancelled.
    public var pendingTimerCount: Int { timers.count }

    // MARK: Registration (loop thread)

    func register(_ fd: Int32, _ source: EventSource, events: UInt32) throws {
        var event = epoll_event()
        event.events = events
        event.data.fd = fd
        guard epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &event) == 0 else { throw NetError.system("epoll_ctl", errno) }
        sources[fd] = source
    }

    func modify(_ fd: Int32, events: UInt32) {
        var event = epoll_event()
        event.events = events
        event.data.fd = fd
        _ = epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &event)
    }

    func unregister(_ fd: Int32) {
        _ = epoll_ctl(epfd, EPOLL_CTL_DEL, fd, nil)
        sources[fd] = nil
    }

    private func drainWake() {
        var buffer = [UInt8](repeating: 0, count: 64)
        while read(wakeRead, &buffer, buffer.count) > 0 {}
    }

    private func runPosted() {
        let tasks = posted.withLock { tasks -> [@Sendable () -> Void] in
            defer { tasks = [] }
            return tasks
        }
        for task in tasks { task() }
    }

    /// Runs the timers due now, earliest first (ties in the order they were scheduled: ids
    /// grow). Timers a task schedules run on a later turn, even with no delay; one a task
    /// cancels does not run.
    private func runTimers() {
        let now = EventLoop.now()
        guard let first = timers.earliest(), first.deadline <= now else { return }
        for id in timers.popDue(now: now) {
            timerTasks.removeValue(forKey: id)?()
        }
    }
}

public enum NetError: Error, Equatable, CustomStringConvertible {
    case system(String, Int32)
    case badAddress(String)
    case connectFailed(String, String)

    public var description: String {
        switch self {
        case .system(let call, let code): return "\(call) failed: \(String(cString: strerror(code)))"
        case .badAddress(let text): return "'\(text)' is not an address HOST:PORT (an IPv4 address or localhost, port 0-65535)"
        case .connectFailed(let address, let why): return "cannot connect to \(address): \(why)"
        }
    }
}
