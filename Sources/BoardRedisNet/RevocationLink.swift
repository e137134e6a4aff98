import BoardNet
import BoardRedis
import BoardSync
import Foundation

extension RedisCluster {
    /// Shares `list`'s revocations with every server on this Redis (`RedisRevocations`), over a
    /// connection of its own, polled every `interval` seconds.
    public func shareRevocations(_ list: RevocationList, interval: Double = 0.5) {
        let options = boardLog.options
        let sync = RedisRevocations(list: list, keyPrefix: options.keyPrefix, password: options.password, user: options.user, log: options.log)
        let driver = RevocationLink(address: address, sync: sync, loop: loop, interval: interval)
        revocationLink = driver
        driver.connect()
        driver.tick()
    }
}

/// Drives a `RedisRevocations` over one TCP connection (reconnecting with backoff).
final class RevocationLink {
    let address: SocketAddress
    let sync: RedisRevocations
    private let loop: EventLoop
    private let interval: Double
    private var connection: TCPConnection?
    private var connected = false
    private var delay = 0.1
    var stopped = false

    init(address: SocketAddress, sync: RedisRevocations, loop: EventLoop, interval: Double) {
        self.address = address
        self.sync = sync
        self.loop = loop
        self.interval = interval
    }

    func connect() {
        guard !stopped else { return }
        let connection: TCPConnection
        do {
            connection = try TCPConnection.connect(to: address, on: loop)
        } catch {
            lost()
            return
        }
        self.connection = connection
        connection.onConnect = { [weak self] in
            guard let self else { return }
            self.connected = true
            self.delay = 0.1
            self.sync.linkUp(now: EventLoop.now())
            self.write()
        }
        connection.onData = { [weak self, weak connection] bytes in
            guard let self else { return }
            do {
                try self.sync.receive(bytes)
            } catch {
                connection?.close(immediately: true)
                self.lost()
                return
            }
            self.write()
        }
        connection.onClose = { [weak self, weak connection] _ in
            guard let self, let connection, self.connection === connection else { return }
            self.lost()
        }
    }

    private func lost() {
        connection = nil
        connected = false
        sync.linkDown()
        guard !stopped else { return }
        let wait = delay
        delay = min(delay * 2, 2)
        _ = loop.schedule(after: wait) { [weak self] in self?.connect() }
    }

    private func write() {
        guard connected, let connection else { return }
        let bytes = sync.takeOutput()
        if !bytes.isEmpty { connection.send(bytes) }
    }

    func tick() {
        guard !stopped else { return }
        if connected, !sync.poll(now: EventLoop.now()) {
            connection?.close(immediately: true)
            lost()
        }
        write()
        _ = loop.schedule(after: interval) { [weak self] in self?.tick() }
    }

    func stop() {
        stopped = true
        connection?.close(immediately: true)
        connection = nil
    }
}
