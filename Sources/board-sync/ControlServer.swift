import BoardClient
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The control channel of a `peer` (the live client, or a mesh peer): a Unix domain socket in the package
/// (`sync/control.sock`, mode 0600) on which the other commands (`stroke`, `undo`, `show`,
/// `export`, ...) run on the peer's live board while the peer holds the package.
///
/// Who may connect: the socket is mode 0600 and every connection's peer credentials
/// (`SO_PEERCRED`) must name this process's user; anyone else is refused. The package
/// directory's own permissions are a further fence, not the one relied on.
/// Each connection has its own thread and deadlines (`ControlLimits`): one that sends nothing,
/// trickles or never reads its answer holds only itself, never the peer's sync or the others.
final class ControlServer: Sendable {
    let path: String
    private let runner: any CommandBoardRunner
    private let log: @Sendable (String) -> Void
    private struct State {
        var listener: Int32 = -1
        var wake: (read: Int32, write: Int32) = (-1, -1)
        var connections = 0
        var stopping = false
        /// The socket this peer bound (device and inode): `stop` removes only that one, never
        /// the socket of a peer that took the package after this one released it.
        var bound: (device: UInt64, inode: UInt64)?
    }
    private let state = Mutex(State())

    /// The package this peer serves (requests for any other are refused).
    private let package: ControlPackageID?

    init(package: String, runner: any CommandBoardRunner, log: @escaping @Sendable (String) -> Void) {
        path = ControlSocket.path(package: package)
        self.package = ControlPackageID(path: package)
        self.runner = runner
        self.log = log
    }

    /// Binds the socket and starts accepting. The caller holds the package's lock, so a socket
    /// already there was left by a peer that was killed: it is replaced. On trouble the peer
    /// runs on without the channel (logged).
    func start() {
        do {
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { throw ControlSocket.Trouble("socket: \(String(cString: strerror(errno)))") }
            try ControlSocket.withAddress(path) { address, length in
                if unlink(path) == 0 { log("control: replaced \(path) (left by a peer that did not stop cleanly)") }
                guard bind(fd, address, length) == 0 else {
                    let reason = String(cString: strerror(errno))
                    close(fd)
                    throw ControlSocket.Trouble("bind \(path): \(reason)")
                }
            }
            // The mode bind gave (umask) is tightened at once; SO_PEERCRED guards the moment between.
            _ = chmod(path, 0o600)
            var info = stat()
            if lstat(path, &info) == 0 { state.withLock { $0.bound = (UInt64(info.st_dev), UInt64(info.st_ino)) } }
            guard listen(fd, 16) == 0 else {
                close(fd)
                throw ControlSocket.Trouble("listen: \(String(cString: strerror(errno)))")
            }
            var pipeFDs: [Int32] = [-1, -1]
            guard pipe(&pipeFDs) == 0 else {
                close(fd)
                throw ControlSocket.Trouble("pipe: \(String(cString: strerror(errno)))")
            }
            for end in pipeFDs { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
            let wakeReader = pipeFDs[0]
            let thread = Thread { [self] in
                Self.leaveSignalsToTheMainThread()
                acceptLoop(listener: fd, wake: wakeReader)
            }
            state.withLock {
                $0.listener = fd
                $0.wake = (pipeFDs[0], pipeFDs[1])
            }
            thread.start()
            log("control: other commands on this package run here (socket \(path))")
        } catch {
            log("control: not serving other commands (\(error)); they refuse the package while this peer runs")
        }
    }

    /// The peer is stopping: commands in progress finish (waiting up to `seconds` for them);
    /// those that arrive from now on are answered "stopping" and not run (their client waits
    /// for the package to be released and then runs them itself).
    func beginStopping(waitingUpTo seconds: Double = 3) {
        state.withLock { $0.stopping = true }
        let deadline = ControlSocket.now() + seconds
        while state.withLock({ $0.connections > 0 }), ControlSocket.now() < deadline { usleep(10_000) }
    }

    /// Stops accepting and removes the socket (the board is closed).
    func stop() {
        let wakeWriter = state.withLock { state -> Int32 in
            state.stopping = true
            defer { state.wake.write = -1 }
            return state.wake.write
        }
        guard wakeWriter >= 0 else { return }
        var info = stat()
        if lstat(path, &info) == 0, let bound = state.withLock({ $0.bound }),
           bound == (UInt64(info.st_dev), UInt64(info.st_ino)) {
            unlink(path)
        }
        var byte: UInt8 = 1
        _ = write(wakeWriter, &byte, 1)
        close(wakeWriter)
        let deadline = ControlSocket.now() + 1
        while state.withLock({ $0.listener >= 0 }), ControlSocket.now() < deadline { usleep(10_000) }
    }

    /// The peer stops on SIGINT/SIGTERM through dispatch sources, which see a signal only when
    /// no thread takes it: these threads block them (a signal delivered to one of them, with
    /// the disposition SIG_IGN, would be lost and the peer would not stop).
    private static func leaveSignalsToTheMainThread() {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGINT)
        sigaddset(&set, SIGTERM)
        pthread_sigmask(SIG_BLOCK, &set, nil)
    }

    private var stopping: Bool { state.withLock { $0.stopping } }

    private func acceptLoop(listener: Int32, wake: Int32) {
        defer {
            close(listener)
            close(wake)
            state.withLock { $0.listener = -1 }
        }
        while true {
            var ready = [pollfd(fd: listener, events: Int16(POLLIN), revents: 0), pollfd(fd: wake, events: Int16(POLLIN), revents: 0)]
            let result = poll(&ready, 2, -1)
            if result < 0 && errno != EINTR { log("control: poll: \(String(cString: strerror(errno))); not serving other commands any more"); return }
            if ready[1].revents != 0 { return }
            guard ready[0].revents != 0 else { continue }
            let fd = accept(listener, nil, nil)
            guard fd >= 0 else {
                usleep(100_000)  // out of descriptors: the connection waits in the backlog rather than the loop spinning
                continue
            }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            ControlSocket.setNonBlocking(fd)
            guard ControlSocket.peerUID(fd) == geteuid() else {
                log("control: refused a connection from another user (uid \(ControlSocket.peerUID(fd).map(String.init) ?? "unknown"))")
                refuse(fd, "this peer takes commands only from its own user")
                continue
            }
            let admitted = state.withLock { state -> Bool in
                guard state.connections < ControlLimits.connections else { return false }
                state.connections += 1
                return true
            }
            guard admitted else {
                log("control: refused a connection: \(ControlLimits.connections) commands are in progress")
                refuse(fd, "the peer is busy with \(ControlLimits.connections) other commands; try again")
                continue
            }
            Thread { [self] in
                Self.leaveSignalsToTheMainThread()
                serve(fd)
                ControlSocket.drainAndClose(fd)
                state.withLock { $0.connections -= 1 }
            }.start()
        }
    }

    private func refuse(_ fd: Int32, _ message: String) {
        answer(fd, ControlResponse(outcome: .refused, message: message), within: 0.2)
        ControlSocket.drainAndClose(fd)
    }

    private func answer(_ fd: Int32, _ response: ControlResponse, within seconds: Double) {
        do {
            var payload = try JSONEncoder().encode(response)
            if payload.count > ControlLimits.responseBytes {
                log("control: an answer of \(payload.count) bytes is over the \(ControlLimits.responseBytes >> 20) MiB limit; sent a failure instead")
                payload = try JSONEncoder().encode(ControlResponse(outcome: .failure, message: "the answer (\(payload.count) bytes) is over the \(ControlLimits.responseBytes >> 20) MiB a peer sends back; stop the peer to run this command (an export at a smaller --scale fits)"))
            }
            try ControlSocket.send(fd, payload, until: ControlSocket.now() + seconds)
        } catch {
            log("control: could not deliver an answer: \(error)")
        }
    }

    /// One connection: its request whole within `requestSeconds`, then the command, then the answer.
    private func serve(_ fd: Int32) {
        let request: ControlRequest
        do {
            let frame = try ControlSocket.receive(fd, limit: ControlLimits.requestBytes, until: ControlSocket.now() + ControlLimits.requestSeconds)
            request = try JSONDecoder().decode(ControlRequest.self, from: frame)
        } catch let trouble as ControlSocket.Trouble {
            log("control: dropped a connection: \(trouble)")
            return answer(fd, ControlResponse(outcome: .refused, message: "\(trouble)"), within: 1)
        } catch {
            log("control: dropped a malformed request: \(error)")
            return answer(fd, ControlResponse(outcome: .refused, message: "a malformed request (not the JSON of a board-sync command)"), within: 1)
        }
        answer(fd, run(request), within: ControlLimits.answerSeconds)
    }

    func run(_ request: ControlRequest) -> ControlResponse {
        guard !stopping else { return ControlResponse(outcome: .stopping, message: "the peer is stopping") }
        guard Commands.throughPeer.contains(request.command) else {
            return ControlResponse(outcome: .refused, message: "'\(request.command)' does not run through a peer")
        }
        guard let package, request.package == package else {
            log("control: refused a request for another package (a socket that leads here from elsewhere)")
            return ControlResponse(outcome: .refused, message: "this peer serves another package (the control socket the command found leads to it); the command was not run")
        }
        let output = CommandOutput(direct: false)
        var commands = Commands()
        commands.board = .hosted(runner)
        commands.output = output
        commands.images = CommandImages(supplied: request.images)
        commands.directory = request.directory
        var response = ControlResponse(outcome: .done)
        do {
            try commands.runHere(request.command, request.arguments)
        } catch let error as UsageError {
            response = ControlResponse(outcome: .usage, message: error.message)
        } catch let error as Failure {
            response = ControlResponse(outcome: .failure, message: error.message)
        } catch LiveBoardError.closed {
            return ControlResponse(outcome: .stopping, message: "the peer is stopping")
        } catch is BoardStopped {
            return ControlResponse(outcome: .stopping, message: "the peer is stopping")
        } catch {
            response = ControlResponse(outcome: .failure, message: "\(error)")
        }
        response.stdout = output.stdout
        response.stderr = output.stderr
        response.file = response.outcome == .done ? output.file : nil
        log("control: \(request.command): \(response.outcome == .done ? "done" : "\(response.outcome.rawValue): \(response.message)")")
        return response
    }
}
