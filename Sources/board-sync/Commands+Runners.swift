import BoardClient
import BoardCRDT
import BoardNet
import BoardStore
import Dispatch
import Synchronization

/// Runs a command's work on a board that another part of this process owns (a peer's), on the
/// thread or actor that owns it, while the calling thread (a control connection's) waits.
protocol CommandBoardRunner: Sendable {
    func run<T>(_ body: (any CommandBoard) throws -> T) throws -> T
}

/// The board's owner has stopped: the command was not run.
struct BoardStopped: Error {}

/// `peer --connect`: the `LiveBoard`, on its actor.
struct LiveBoardRunner: CommandBoardRunner {
    let live: LiveBoard

    func run<T>(_ body: (any CommandBoard) throws -> T) throws -> T {
        try withoutActuallyEscaping(body) { body in
            let handed = HandedOnce(body)
            let result = ClientCommands.blocking {
                await live.runCommand { isolated in
                    let body = handed.take()!
                    return Handed(value: Result { try body(LiveCommandBoard(live: isolated)) })
                }
            }
            return try result.value.get()
        }
    }
}

/// A mesh `peer` (`--listen`, several `--connect`): its `SyncHost` and package, on the event
/// loop's thread. Once `stop()` is called (the loop has returned), commands are not run.
final class MeshBoardRunner: CommandBoardRunner, @unchecked Sendable {
    // Used on the loop's thread only (inside `loop.execute`).
    private let host: SyncHost
    private let package: BoardPackage
    private let loop: EventLoop
    private let stopped = Mutex(false)

    init(host: SyncHost, package: BoardPackage, loop: EventLoop) {
        self.host = host
        self.package = package
        self.loop = loop
    }

    func stop() { stopped.withLock { $0 = true } }

    func run<T>(_ body: (any CommandBoard) throws -> T) throws -> T {
        try withoutActuallyEscaping(body) { body in
            let handed = HandedOnce(body)
            let result = Mutex<Handed<Result<T, any Error>>?>(nil)
            let done = DispatchSemaphore(value: 0)
            guard !stopped.withLock({ $0 }) else { throw BoardStopped() }
            loop.execute { [self] in
                if let body = handed.take() {
                    let outcome = Result { try body(MeshCommandBoard(host: host, package: package)) }
                    result.withLock { $0 = Handed(value: outcome) }
                }
                done.signal()
            }
            while done.wait(timeout: .now() + 0.1) == .timedOut {
                // The loop stopped with the task still queued: let go of the body, so the queued
                // task holds nothing of this call, and say the command was not run.
                if stopped.withLock({ $0 }), handed.drop() { throw BoardStopped() }
            }
            guard let outcome = result.withLock({ $0 }) else { throw BoardStopped() }
            return try outcome.value.get()
        }
    }
}

/// A mesh peer's board as a `CommandBoard` (on the loop's thread).
struct MeshCommandBoard: CommandBoard {
    let host: SyncHost
    let package: BoardPackage
    var replica: Replica { package.replica }
    func commit(_ body: (inout Replica) throws -> LocalEdit) throws -> LocalEdit { try host.edit(nil, body) }
}
