import BoardClient
import BoardCRDT
import BoardModel
import BoardNet
import BoardSync
import Dispatch
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `sync` and the client form of `peer` (one `--connect`, no `--listen`): both are a `LiveBoard`
/// over the package, the library's own client, so the CLI is never a second, untested path.
enum ClientCommands {
    /// The token for each connection: `--token` as given, `--token-file` read again before
    /// every connect (an operator rotates short-lived tokens under a running peer).
    static func credentials(_ args: Arguments) throws -> LiveBoard.Credentials {
        switch (args.value("token"), args.value("token-file")) {
        case (nil, nil): return .none
        case (let token?, nil): return .token(token)
        case (nil, let file?):
            _ = try Access.token(args)  // readable now, or a clear error before anything starts
            return .provider {
                do { return try Access.readTokenFile(file) } catch let failure as Failure { throw TransportError(failure.message) }
            }
        default: throw UsageError("give --token or --token-file, not both")
        }
    }

    /// `sync`: one meeting with the server, both directions, then exit.
    static func sync(path: String, board: String, server: SocketAddress, timeout: Double, args: Arguments) throws {
        let credentials = try credentials(args)
        let transport = TCPTransport(tls: try Access.clientTLS(args))
        guard FileManager.default.fileExists(atPath: path) else {
            throw Failure("no board package at \(path) (create one with `board-sync new \(path)`)")
        }
        let live = try LiveBoard.open(storage: .package(path: path), sync: LiveBoard.Sync(server: server.description, board: board),
                                      credentials: credentials, transport: transport)
        let outcome: Result<SyncReport, any Error> = blocking {
            let result: Result<SyncReport, any Error>
            do { result = .success(try await live.syncOnce(within: timeout)) } catch { result = .failure(error) }
            await live.close(within: 0)  // saves the view and releases the package
            return result
        }
        let report: SyncReport
        switch outcome {
        case .success(let value): report = value
        case .failure(let error): throw Failure("\(server): \(error)")
        }
        if args.has("json") {
            try printJSON(["server": server.description, "board": board, "operationsReceived": report.operationsReceived,
                           "operationsSent": report.operationsSent, "operationsAcknowledged": report.operationsAcknowledged,
                           "imagesSent": report.imagesSent, "missingAssets": report.imagesMissing,
                           "bytesSent": report.bytesSent, "bytesReceived": report.bytesReceived, "seconds": report.seconds])
        } else {
            print("synced \(path) with board '\(board)' on \(server): received \(report.operationsReceived) operations, sent \(report.operationsSent) (\(report.operationsAcknowledged) acknowledged) and \(report.imagesSent) image(s); \(report.bytesSent) bytes up, \(report.bytesReceived) bytes down in \(String(format: "%.2f", report.seconds)) s")
            if report.imagesMissing > 0 {
                print("note: \(report.imagesMissing) image(s) are still pending: no peer has sent their bytes yet")
            }
        }
    }

    /// `peer PACKAGE --connect ADDRESS`: a live replica of one server's board until SIGINT or
    /// SIGTERM (exit 0, having waited up to 5 s for the server to acknowledge every edit) or a
    /// refusal retrying cannot fix (exit 1). Logs its status changes and who comes and goes.
    static func peer(path: String, board: String, server: SocketAddress, name: String, color: Color8, args: Arguments) throws {
        let credentials = try credentials(args)
        let transport = TCPTransport(tls: try Access.clientTLS(args))
        let live = try LiveBoard.open(storage: .package(path: path), sync: LiveBoard.Sync(server: server.description, board: board),
                                      credentials: credentials, identity: LiveBoard.Identity(name: name, color: color), transport: transport)
        let control = ControlServer(package: path, runner: LiveBoardRunner(live: live), log: NetCommands.log)
        let stopAsked = Mutex(false)
        let signals = [SIGINT, SIGTERM].map { number in
            // The default action off first, then the source: libdispatch installs its handler
            // when it registers the source, on a thread of its own, so SIG_IGN set after
            // `resume()` could land after that handler and replace it, and the peer would
            // ignore every later signal (seen once the control channel's threads changed the
            // timing). A signal in the moment before the handler is in place is ignored.
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                NetCommands.log("signal \(number == SIGINT ? "SIGINT" : "SIGTERM"): stopping (waiting up to 5 s for the server to acknowledge every edit)")
                stopAsked.withLock { $0 = true }
                control.beginStopping()  // commands in progress finish first; later ones wait for the package
                Task { await live.close(within: 5) }
            }
            source.resume()
            return source
        }
        for number in [SIGINT, SIGTERM] { waitForSignalHandler(number) }
        control.start()
        NetCommands.log("peer \(live.replicaID) for \(path) (board '\(board)') as '\(name)', connecting to \(server)")
        let outcome: Result<CloseReport, any Error> = blocking {
            let watchers = [Task { await logStatus(of: live, server: server, args: args) }, Task { await logPresence(of: live) }]
            await live.updatePresence(pointer: nil)
            let result: Result<CloseReport, any Error>
            do {
                try await live.run()
                result = .success(await live.close())
            } catch {
                result = .failure(error)
            }
            control.beginStopping()
            for watcher in watchers { await watcher.value }  // the streams end with the board
            return result
        }
        withExtendedLifetime(signals) {}
        control.stop()
        switch outcome {
        case .success(let report):
            NetCommands.log(report.allAcknowledged ? "stopped: the server holds every edit"
                : "stopped: \(report.unacknowledgedOperations) operation(s) and \(report.unacknowledgedImages) image(s) not acknowledged yet (kept in \(path); they go at the next sync or peer)")
        case .failure(LiveBoardError.closed) where stopAsked.withLock({ $0 }):
            NetCommands.log("stopped before going online")  // a signal during startup
        case .failure(let refusal as Refusal):
            throw Failure("\(server) refused the board for good: \(refusal)")
        case .failure(let error):
            throw Failure("\(error)")
        }
    }

    /// Waits (up to 1 s) until `number` has a handler: the dispatch source's registration.
    static func waitForSignalHandler(_ number: Int32) {
        for _ in 0..<100 {
            var action = sigaction()
            sigaction(number, nil, &action)
            if unsafeBitCast(action.__sigaction_handler.sa_handler, to: Int.self) != unsafeBitCast(SIG_IGN, to: Int.self) { return }
            usleep(10_000)
        }
    }

    /// One line per status change: connecting, connected (catching up), live, offline and
    /// retrying, failed.
    static func logStatus(of live: LiveBoard, server: SocketAddress, args: Arguments) async {
        var previous: LiveStatus.State?
        var previousRefusal: Refusal?
        for await status in live.status {
            defer { previous = status.state; previousRefusal = status.refusal }
            if let refusal = status.refusal, refusal != previousRefusal {
                NetCommands.log("the server dropped \(status.refusedOperations) operation(s) of other replicas this board holds (they stay here, unsent): \(refusal.message)")
            }
            guard status.state != previous else { continue }
            let waiting = status.isAllAcknowledged ? "" : " (\(status.unacknowledgedOperations) change(s) and \(status.unacknowledgedImages) image(s) waiting)"
            switch status.state {
            case .idle, .closed: continue
            case .connecting(let attempt):
                let after = status.lastError.map { ", after: \($0)" } ?? ""
                NetCommands.log("connecting to \(server)\(attempt > 1 || !after.isEmpty ? " (attempt \(attempt)\(after))" : "")")
            case .catchingUp:
                NetCommands.log("connected to \(server): catching up\(waiting)")
            case .live:
                if case .catchingUp = previous {} else { NetCommands.log("connected to \(server)") }
                NetCommands.log("live: in sync with board '\(live.sync!.board)' on \(server)\(waiting)")
            case .offline(let retryAt, let attempt, let lastError):
                let seconds = max(0, retryAt.timeIntervalSinceNow)
                NetCommands.log("offline: \(lastError); retrying in \(String(format: "%.1f", seconds)) s (attempt \(attempt + 1))\(waiting)")
            case .failed(let refusal):
                NetCommands.log("failed: \(refusal)")
                if refusal.code == .tokenExpired {
                    NetCommands.log("the token presented to \(server) expired: connect again with a fresh token (`board-sync token`\(args.value("token-file").map { "; write it to \($0), which is read before every connect" } ?? ", or run with --token-file"))")
                }
            }
        }
    }

    /// Who is on the board: logged as replicas arrive and leave (not every pointer move).
    static func logPresence(of live: LiveBoard) async {
        var present: [ReplicaID: String] = [:]
        for await roster in live.peers {
            let now = Dictionary(roster.map { ($0.replica, $0.name) }, uniquingKeysWith: { $1 })
            for (replica, name) in present where now[replica] == nil {
                present[replica] = nil
                NetCommands.log("presence: \(name) (\(replica)) left; on the board: \(NetCommands.names(present))")
            }
            for (replica, name) in now.sorted(by: { $0.key < $1.key }) where present[replica] == nil {
                present[replica] = name
                NetCommands.log("presence: \(name) (\(replica)) is here; on the board: \(NetCommands.names(present))")
            }
        }
    }

    /// Runs `body` on the cooperative pool and waits for it on this (the main) thread.
    static func blocking<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
        let result = Mutex<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task {
            let value = await body()
            result.withLock { $0 = value }
            done.signal()
        }
        done.wait()
        return result.withLock { $0! }
    }
}
