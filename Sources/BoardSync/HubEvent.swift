import BoardCRDT
import BoardModel
import Foundation

/// What a hub has for the world outside it, queued in order and drained by whoever drives it
/// (`BoardHub.pollEvent`; under a `SyncEndpoint`, the endpoint drains its hubs and hands these
/// on as `SyncEndpoint.Event`s). Nothing outside the hub runs while the hub works: a host or a
/// replication layer reads these afterwards, so no call re-enters the hub (or the Redis log)
/// in the middle of a merge or a reply.
package enum HubEvent {
    /// Operations or images changed the store (a host schedules a save; views redraw).
    case changed
    /// Another replica's presence arrived, changed or went (left, expired, or its session
    /// closed), for hosts that show who is here.
    case presence(Presence)
    /// Work for the replication layer of a board whose hub shares a log (`BoardHub.sharedLog`).
    case sharedLog(SharedLogRequest)
    /// A session asks for history (`BoardHub+History.swift`): answer with `answerHistory`.
    case historyRequested(session: SessionID, HistoryRequest)
    /// The answer to a history request a session of this hub sent.
    case historyAnswered(session: SessionID, HistoryAnswer)
}

/// What a hub asks of the shared log it replicates through (BoardRedis's `RedisBoardLog`,
/// docs/SCALE-OUT.md). Each request is answered, if at all, by a call back into the hub.
public enum SharedLogRequest {
    /// Append these batches (merged from this hub's sessions since the last group commit);
    /// once the log holds them call `BoardHub.replicated(ticket)`, which acknowledges their
    /// sessions. Tickets of one hub rise; the log completes them in order.
    case append([OperationBatch], ticket: UInt64)
    /// An image one of this hub's sessions uploaded, for the other servers.
    case storeAsset(AssetHash, Data)
    /// An image no session can offer: answer with `BoardHub.assetFetched`.
    case fetchAsset(AssetHash)
    /// Who may author a replica id: answer with `BoardHub.authorshipAnswered`.
    case decideAuthorship(AuthorshipRequest)
    /// A presence this hub took from a session or its host (or the "gone" of a closed
    /// session), for the other servers.
    case publishPresence(Presence)
}

/// A first-in, first-out queue of events, drained from the front without moving what follows
/// (a hub's and an endpoint's).
struct EventQueue<Element> {
    private var items: [Element] = []
    private var head = 0

    mutating func append(_ item: Element) { items.append(item) }

    /// The oldest item, removed (nil: none). Storage is released once all are drained.
    mutating func pop() -> Element? {
        guard head < items.count else { return nil }
        let item = items[head]
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: items.count < 64)
            head = 0
        }
        return item
    }
}

/// Hubs that have something for their endpoint (events, output, a moved deadline), each listed
/// once until the endpoint takes the list: what lets the endpoint find them without visiting
/// every board, and without the hub calling into the endpoint.
final class HubActivity {
    var hubs: [BoardHub] = []
}
