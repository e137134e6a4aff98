/// What a hub has for the world outside it (`HubEvent`), queued and drained, and the mark it
/// leaves in its endpoint's `HubActivity` so the endpoint finds it without visiting every board.
extension BoardHub {
    /// The oldest event not drained yet (nil: none). Whoever drives the hub drains these after
    /// each call (a `SyncEndpoint` does it for its hubs).
    package func pollEvent() -> HubEvent? {
        guard let event = events.pop() else { return nil }
        if case .changed = event { changeQueued = false }
        return event
    }

    /// Queues an event (a `.changed` only when none is waiting).
    func emit(_ event: HubEvent) {
        if case .changed = event {
            guard !changeQueued else { return }
            changeQueued = true
        }
        events.append(event)
        noteActivity()
    }

    func timersMoved() {
        timersMayHaveMoved = true
        noteActivity()
    }

    func noteActivity() {
        guard !activityNoted, let activity else { return }
        activityNoted = true
        activity.hubs.append(self)
    }
}
