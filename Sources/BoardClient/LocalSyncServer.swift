import BoardNet
import BoardSync
import Dispatch
import Foundation

/// A sync server in this process, on loopback TCP: `SyncHost(serverDataDirectory:listen:loop:options:)`
/// on an event loop thread of its own. For examples, tests and apps that embed a server; a
/// deployment runs `board-sync serve`.
public final class LocalSyncServer: @unchecked Sendable {  // `host` is touched only on the loop thread
    /// `"127.0.0.1:PORT"`, for `LiveBoard.Sync(server:board:)`.
    public let address: String
    private let loop: EventLoop
    private let host: SyncHost
    private let done = DispatchSemaphore(value: 0)
    private let stopping = TokenCounter()

    /// Starts serving the boards in `dataDirectory` (created if missing) on 127.0.0.1:`port`
    /// (0: a free port).
    public init(dataDirectory: String, port: UInt16 = 0, options: SyncHost.Options = SyncHost.Options()) throws {
        loop = try EventLoop()
        host = try SyncHost(serverDataDirectory: dataDirectory, listen: SocketAddress(host: "127.0.0.1", port: port),
                            loop: loop, options: options)
        address = host.listenAddress!.description
        let loop = self.loop
        let done = self.done
        let thread = Thread {
            loop.run()
            done.signal()
        }
        thread.name = "LocalSyncServer"
        thread.start()
    }

    /// Says goodbye to every client, saves every board and stops (returns once stopped).
    public func stop() async {
        guard stopping.next() == 1 else { return }
        loop.execute { [self] in
            host.shutdown()
            loop.schedule(after: 0.2) { [self] in loop.stop() }
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async { [done] in
                done.wait()
                continuation.resume()
            }
        }
    }

    /// Closes every connection abruptly (clients see their link drop and reconnect).
    public func dropConnections() {
        loop.execute { [self] in host.dropConnections() }
    }

    deinit {
        if stopping.next() == 1 {
            loop.stop()
            done.wait()
        }
    }
}
