import BoardCRDT
import BoardModel
import Foundation

/// Dialing (single-board endpoints): targets the transport dials, with backoff and jitter.
extension SyncEndpoint {
    /// Adds a peer to dial and keep dialing: returns its index (the transport keeps the
    /// address). It is due at once; see `dueDials`.
    package func addDialTarget(now: Double) -> Int {
        self.now = now
        dialTargets.append(DialTarget(link: nil, backoff: Backoff(first: options.reconnectDelay.first, max: options.reconnectDelay.max), due: now))
        return dialTargets.count - 1
    }

    /// Dial targets whose time has come (no link, backoff over). The transport starts
    /// connecting each one and reports it with `dialing(_:as:)`, or `dialFailed` when it could
    /// not even start; `dialed` once connected, `closed` when the connection ends or fails.
    package func dueDials(now: Double) -> [Int] {
        self.now = now
        var due: [Int] = []
        for index in dialTargets.indices where dialTargets[index].link == nil {
            if let at = dialTargets[index].due, at <= now {
                dialTargets[index].due = nil
                due.append(index)
            }
        }
        return due
    }

    /// The transport is connecting dial target `target` as connection `id`.
    package func dialing(_ target: Int, as id: SessionID) {
        dialTargets[target].link = id
        links[id] = EndpointLink(phase: .connecting, dialTarget: target)
    }

    /// A dial could not start (no route, no descriptor): try again after the backoff.
    package func dialFailed(_ target: Int, now: Double) {
        self.now = now
        scheduleRedial(target)
    }

    /// Stops redialing (a host going offline) or resumes it, dialing every target without a
    /// link at once with the backoff reset.
    package func setReconnecting(_ on: Bool, now: Double) {
        self.now = now
        reconnects = on
        for index in dialTargets.indices {
            dialTargets[index].backoff.reset()
            dialTargets[index].due = on && dialTargets[index].link == nil ? now : nil
        }
    }

    func scheduleRedial(_ target: Int) {
        guard reconnects else { return }
        let delay = dialTargets[target].backoff.next()
        dialTargets[target].due = now + options.jitter(delay)
    }
}
