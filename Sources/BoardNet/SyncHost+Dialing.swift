import BoardSync
import Foundation

/// Dialing (a host for one board): targets over TCP, dialed when the endpoint
/// says they are due (its backoff, after a drop or a failed dial).
extension SyncHost {
    /// Dials `address` for this host's board; the endpoint schedules reconnects with backoff
    /// when the link drops.
    public func connect(to address: SocketAddress) {
        addDialTarget(address)
    }

    private func addDialTarget(_ address: SocketAddress) {
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
        let address = dialAddresses[index]
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
}
