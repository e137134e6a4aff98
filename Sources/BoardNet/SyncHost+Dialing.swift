import BoardSync
import Foundation

/// Dialing (a host for one board): targets over TCP or in-process, dialed when the endpoint
/// says they are due (its backoff, after a drop or a failed dial).
extension SyncHost {
    /// Dials `address` for this host's board; the endpoint schedules reconnects with backoff
    /// when the link drops.
    public func connect(to address: SocketAddress) {
        addDialTarget(.tcp(address))
    }

    /// Connects to `server`, a host on this host's loop, through an in-process link rather than
    /// a socket (a web page's replica and the server it edits through): the same sessions,
    /// handshake, tokens and limits as over TCP, with nothing between them that can fail
    /// silently (no port, no TLS to mismatch, no per-address quota). Redialed like any link.
    public func connectLocally(to server: SyncHost) {
        precondition(server.loop === loop, "an in-process link joins hosts on one loop")
        addDialTarget(.local(server))
    }

    private func addDialTarget(_ address: DialAddress) {
        guard !endpoint.isServer else { return }
        let index = endpoint.addDialTarget(now: EventLoop.now())
        precondition(index == dialAddresses.count)
        dialAddresses.append(address)
        dialDue()
        armTimer()
    }

    /// Starts connecting every dial target the endpoint says is due.
    func dialDue() {
        guard !stopped else { return }
        for index in endpoint.dueDials(now: EventLoop.now()) { dial(index) }
    }

    private func dial(_ index: Int) {
        let address: SocketAddress
        switch dialAddresses[index] {
        case .tcp(let tcp): address = tcp
        case .local(let server): return dialLocally(index, server)
        }
        let connection: TCPConnection
        do {
            connection = try TCPConnection.connect(to: address, on: loop)
        } catch {
            options.log("cannot connect to \(address): \(error)")
            endpoint.dialFailed(index, now: EventLoop.now())
            return
        }
        if let tls = options.clientTLS {
            do {
                connection.useTLS(try tls.stream(host: address.host))
            } catch {
                connection.close(immediately: true)
                options.log("cannot connect to \(address): \(error)")
                lastTransportError = "\(error)"
                endpoint.dialFailed(index, now: EventLoop.now())
                return
            }
        }
        let id = newLink(connection)
        endpoint.dialing(index, as: id)
        connection.onConnect = { [weak self] in
            guard let self else { return }
            self.options.log("connected to \(address)")
            self.endpoint.dialed(id, now: EventLoop.now())
            self.flush(id)
            self.flushNoted()
            self.armTimer()
        }
    }

    private func dialLocally(_ index: Int, _ server: SyncHost) {
        guard !server.stopped else {
            endpoint.dialFailed(index, now: EventLoop.now())
            return
        }
        let (mine, theirs) = LocalLink.pair(on: loop, names: ("in-process server", "in-process client"))
        let id = newLink(mine)
        endpoint.dialing(index, as: id)
        server.acceptLocally(theirs)
        // Connected at once; the handshake starts on the next turn, as after a TCP connect.
        loop.schedule(after: 0) { [weak self] in
            guard let self, !mine.isClosed, self.connections[id] != nil else { return }
            self.endpoint.dialed(id, now: EventLoop.now())
            self.flush(id)
            self.flushNoted()
            self.armTimer()
        }
    }
}
