import BoardClient
import BoardCRDT
import BoardModel
import BoardNet
import BoardStore
import BoardSync
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

final class TempDirectory {
    let path: String
    init() {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("boardsync-net-\(UUID().uuidString)").path
        try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// Runs an event loop on its own thread. Hosts created through `onLoop` are touched only there.
final class LoopThread: @unchecked Sendable {  // the loop is Sendable; hosts are only used via onLoop
    let loop: EventLoop
    private let done = DispatchSemaphore(value: 0)

    init() throws {
        loop = try EventLoop()
        let loop = self.loop
        let done = self.done
        let thread = Thread {
            loop.run()
            done.signal()
        }
        thread.start()
    }

    /// Runs `body` on the loop thread and waits for its result.
    func onLoop<T>(_ body: @escaping () throws -> T) throws -> T {
        let box = ResultBox<T>()
        let semaphore = DispatchSemaphore(value: 0)
        nonisolated(unsafe) let work = body
        loop.execute {
            box.result = Result { try work() }
            semaphore.signal()
        }
        semaphore.wait()
        return try box.result!.get()
    }

    /// Polls `condition` on the loop thread until true or `timeout` seconds pass.
    func wait(timeout: Double = 20, _ condition: @escaping () -> Bool) throws -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if try onLoop(condition) { return true }
            usleep(20_000)
        }
        return false
    }

    func stop() {
        loop.stop()
        done.wait()
    }
}

final class ResultBox<T>: @unchecked Sendable {  // written once on another thread (a loop, a task), read after a semaphore
    var result: Result<T, Error>?
}

/// A sync server on a free loopback port, on its own loop thread.
final class ServerFixture: @unchecked Sendable {  // host only touched on the loop thread
    let thread: LoopThread
    let host: SyncHost
    let address: SocketAddress

    init(data: String, options: SyncHost.Options = SyncHost.Options()) throws {
        let thread = try LoopThread()
        self.thread = thread
        host = try thread.onLoop {
            try SyncHost(serverDataDirectory: data, listen: SocketAddress(host: "127.0.0.1", port: 0), loop: thread.loop, options: options)
        }
        address = host.listenAddress!
    }

    func stop() {
        let host = self.host
        _ = try? thread.onLoop { host.shutdown() }
        usleep(50_000)
        thread.stop()
    }
}

let pngA = Data(PNGEncoder.solid(width: 6, height: 6, red: 250, green: 10, blue: 10))
let pngB = Data(PNGEncoder.solid(width: 7, height: 3, red: 10, green: 10, blue: 250))

func pt(_ x: Double, _ y: Double) -> CodablePoint { CodablePoint(x: x, y: y) }

func makePackage(_ path: String, id: UInt64) throws -> BoardPackage {
    try BoardPackage.create(at: path, fileSystem: PosixFileSystem(), replicaID: ReplicaID(id))
}

func openPackage(_ path: String) throws -> BoardPackage {
    try BoardPackage.open(at: path, fileSystem: PosixFileSystem(), newReplicaID: { ReplicaID(0xC0FFEE) })
}

/// `board-sync sync` for a package a test holds open: the package is closed, a `LiveBoard` on
/// its path meets the server once (`syncOnce`) and closes, and the package is opened again,
/// whether the sync returned or threw (what was merged before a failure is kept).
///
/// Synchronous, as the tests here are: the board runs in a task of a higher priority than the
/// tests' own while this thread waits. Swift's pool on Linux keeps threads per priority (two
/// per core), so a board there is not queued behind the tests that hold the default-priority
/// threads (sleeps, waits on a server's loop, and in `bin/test` the long randomized histories),
/// and this wait cannot take the thread the board needs. As an async test, the test itself lost
/// its thread at each sync and got it back only minutes later beside those histories (a board
/// on the server closed as idle meanwhile), and at the default priority a sync took up to 23 s.
@discardableResult
func syncOnce(_ package: inout BoardPackage, board: String, server: SocketAddress, timeout: Double = 60,
              token: String? = nil, tls: TLSContext? = nil) throws -> SyncReport {
    let path = package.path
    package.close()
    let live = try whileLocked {
        try LiveBoard.open(storage: .package(path: path), sync: LiveBoard.Sync(server: "\(server)", board: board),
                           credentials: token.map(LiveBoard.Credentials.token) ?? .none, transport: TCPTransport(tls: tls))
    }
    let outcome = ResultBox<SyncReport>()
    let done = DispatchSemaphore(value: 0)
    Task(priority: .high) {
        do {
            outcome.result = .success(try await live.syncOnce(within: timeout))
        } catch {
            outcome.result = .failure(error)
        }
        _ = await live.close()
        done.signal()
    }
    done.wait()
    package = try whileLocked { try openPackage(path) }
    return try outcome.result!.get()
}

/// Opens again while a package's lock is still taken, for up to 2 s: a test here that starts a
/// program (openssl) shares every open file with the child until the program starts, so a
/// lock released just then stays taken for that while (seen once: "open in another process").
func whileLocked<T>(_ open: () throws -> T) throws -> T {
    let deadline = Date().addingTimeInterval(2)
    while true {
        do {
            return try open()
        } catch let error as StoreError where error.code == .locked && Date() < deadline {
            usleep(20_000)
        }
    }
}

/// The `SyncOnceError` that `body` threw; records an issue naming `what` (and returns nil) when
/// it returned or threw anything else.
func syncOnceError(_ what: String, _ body: () throws -> Void) -> SyncOnceError? {
    do {
        try body()
        Issue.record("\(what): the sync should fail")
    } catch let error as SyncOnceError {
        return error
    } catch {
        Issue.record("\(what): expected a SyncOnceError, got \(error)")
    }
    return nil
}

/// Why the server could not be reached, when `error` says so; any other outcome is recorded as
/// an issue (nil).
func unreachable(_ error: SyncOnceError?) -> String? {
    guard case .unreachable(let why)? = error else {
        Issue.record("expected 'cannot reach the server', got \(String(describing: error))")
        return nil
    }
    return why
}

func canonical(_ package: BoardPackage) throws -> Data {
    try package.replica.snapshot().canonicalJSON()
}

/// A plain blocking IPv4 socket connected to `address` (nil when the connection fails), with a
/// receive timeout.
func connectedSocket(_ address: SocketAddress, receiveTimeout: timeval) -> Int32? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = address.port.bigEndian
    _ = inet_pton(AF_INET, address.host, &addr.sin_addr)
    let connected = withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else {
        close(fd)
        return nil
    }
    var timeout = receiveTimeout
    _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    return fd
}

/// Opens a plain blocking socket, sends `bytes`, and reads until the server closes (or 5 s).
func rawExchange(_ address: SocketAddress, _ bytes: [UInt8], closeWrite: Bool = false) -> [UInt8] {
    guard let fd = connectedSocket(address, receiveTimeout: timeval(tv_sec: 5, tv_usec: 0)) else { return [] }
    defer { close(fd) }
    var timeout = timeval(tv_sec: 5, tv_usec: 0)
    _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    if closeWrite { shutdown(fd, Int32(SHUT_WR)) }
    var received: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let count = recv(fd, &buffer, buffer.count, 0)
        if count <= 0 { break }
        received += buffer[0..<count]
    }
    return received
}

func errorCode(in output: [UInt8]) -> UInt16? {
    var decoder = FrameDecoder(maxFrame: 1 << 24)
    decoder.append(output)
    while let frame = try? decoder.next() {
        if case .error(let code, _)? = try? Message(frame: frame, limits: SessionLimits()) { return code }
    }
    return nil
}
