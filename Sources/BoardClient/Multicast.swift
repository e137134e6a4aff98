import Synchronization

/// One value source, any number of subscribers: each starts with the current value, then gets
/// every later one. A subscriber that does not keep up holds one pending value, into which later
/// ones are folded (`combine`): memory per subscriber stays bounded however slow it is.
final class Multicast<Value: Sendable>: Sendable {
    private struct Subscriber {
        var pending: Value?
        var waiter: CheckedContinuation<Value?, Never>?
    }

    private struct State {
        var current: Value
        var subscribers: [Int: Subscriber] = [:]
        var nextID = 0
        var finished = false
    }

    private let state: Mutex<State>
    private let combine: @Sendable (Value, Value) -> Value

    init(_ initial: Value, combine: @escaping @Sendable (_ earlier: Value, _ later: Value) -> Value) {
        state = Mutex(State(current: initial))
        self.combine = combine
    }

    var current: Value { state.withLock { $0.current } }

    /// Publishes `value` (the new current value) to every subscriber.
    func publish(_ value: Value) {
        let wake: [(CheckedContinuation<Value?, Never>, Value)] = state.withLock { state in
            guard !state.finished else { return [] }
            state.current = value
            var wake: [(CheckedContinuation<Value?, Never>, Value)] = []
            for (id, var subscriber) in state.subscribers {
                let next = subscriber.pending.map { combine($0, value) } ?? value
                if let waiter = subscriber.waiter {
                    subscriber.waiter = nil
                    subscriber.pending = nil
                    wake.append((waiter, next))
                } else {
                    subscriber.pending = next
                }
                state.subscribers[id] = subscriber
            }
            return wake
        }
        for (waiter, value) in wake { waiter.resume(returning: value) }
    }

    /// Ends every subscription (after each has taken what it holds).
    func finish() {
        let waiters: [CheckedContinuation<Value?, Never>] = state.withLock { state in
            state.finished = true
            var waiters: [CheckedContinuation<Value?, Never>] = []
            for (id, var subscriber) in state.subscribers {
                if let waiter = subscriber.waiter { waiters.append(waiter) }
                subscriber.waiter = nil
                state.subscribers[id] = subscriber
            }
            return waiters
        }
        for waiter in waiters { waiter.resume(returning: nil) }
    }

    /// A new subscriber, starting with `first(current)` pending (nil: finished).
    func subscribe(first: (Value) -> Value) -> Int {
        state.withLock { state in
            let id = state.nextID
            state.nextID += 1
            state.subscribers[id] = Subscriber(pending: first(state.current))
            return id
        }
    }

    func unsubscribe(_ id: Int) {
        let waiter = state.withLock { state in state.subscribers.removeValue(forKey: id)?.waiter }
        waiter?.resume(returning: nil)
    }

    func next(_ id: Int) async -> Value? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Value?, Never>) in
                let ready: Value?? = state.withLock { state in
                    guard var subscriber = state.subscribers[id] else { return .some(nil) }
                    if let pending = subscriber.pending {
                        subscriber.pending = nil
                        state.subscribers[id] = subscriber
                        return .some(pending)
                    }
                    if state.finished || Task.isCancelled { return .some(nil) }
                    subscriber.waiter = continuation
                    state.subscribers[id] = subscriber
                    return .none
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            let waiter: CheckedContinuation<Value?, Never>? = state.withLock { state in
                guard var subscriber = state.subscribers[id], let waiter = subscriber.waiter else { return nil }
                subscriber.waiter = nil
                state.subscribers[id] = subscriber
                return waiter
            }
            waiter?.resume(returning: nil)
        }
    }

    /// Subscribers now (for tests).
    var subscriberCount: Int { state.withLock { $0.subscribers.count } }
}

/// Unsubscribes when the last iterator copy holding it goes away.
final class Subscription<Value: Sendable>: Sendable {
    let channel: Multicast<Value>
    let id: Int

    init(_ channel: Multicast<Value>, first: (Value) -> Value) {
        self.channel = channel
        id = channel.subscribe(first: first)
    }

    deinit { channel.unsubscribe(id) }
}

/// A multicast stream: iterate it as often as you like, each iteration its own subscriber.
public struct LiveStream<Element: Sendable>: AsyncSequence, Sendable {
    let channel: Multicast<Element>
    let first: @Sendable (Element) -> Element

    init(_ channel: Multicast<Element>, first: @escaping @Sendable (Element) -> Element = { $0 }) {
        self.channel = channel
        self.first = first
    }

    public struct AsyncIterator: AsyncIteratorProtocol, Sendable {
        let subscription: Subscription<Element>

        public mutating func next() async -> Element? {
            await subscription.channel.next(subscription.id)
        }
    }

    /// Subscribes now: the first element is the value current at this call.
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(subscription: Subscription(channel, first: first))
    }
}
