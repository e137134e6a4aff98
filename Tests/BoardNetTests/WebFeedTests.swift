@testable import BoardNet
import BoardCRDT
import BoardModel
import Foundation
import Testing

/// The web view renders pages from typed changes: after random edits by authors drafting on
/// the server's replica (web pages), merges from a peer, images that arrive after their
/// stickers, undo and redo, restacking and board fields, the rendering kept up to date by
/// `ChangeTracker` and `Rendered.apply` is exactly a fresh rendering of the replica's snapshot,
/// and a page that applies each message it is sent (as the page's script does) shows that board.
@Suite struct WebFeedTests {
    static let seeds: [UInt64] = ProcessInfo.processInfo.environment["BOARDSYNC_SEED"].flatMap(UInt64.init).map { [$0] } ?? [1, 2, 3, 2026]

    /// A page as its script keeps the board: canvas fields, items by id, the paint order.
    struct Page {
        var fields: [String: NSObject] = [:]
        var items: [String: NSDictionary] = [:]
        var order: [String] = []

        mutating func take(_ message: String) throws {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(message.utf8)) as? [String: Any])
            switch object["type"] as? String {
            case "board":
                fields = ["width": object["width"] as! NSObject, "height": object["height"] as! NSObject,
                          "background": object["background"] as! NSObject]
                let list = object["items"] as! [NSDictionary]
                items = Dictionary(uniqueKeysWithValues: list.map { ($0["id"] as! String, $0) })
                order = list.map { $0["id"] as! String }
            case "changes":
                for item in object["upserts"] as! [NSDictionary] { items[item["id"] as! String] = item }
                for id in object["removals"] as! [String] { items[id] = nil }
                if let order = object["order"] as? [String] { self.order = order }
                order = order.filter { items[$0] != nil }
            default:
                Issue.record("unexpected message \(message.prefix(80))")
            }
        }

        /// What a page shows, comparable with a fresh rendering's `board` message.
        var shown: NSDictionary {
            var board = fields
            board["items"] = order.compactMap { items[$0] } as NSArray
            return board as NSDictionary
        }
    }

    static func shown(_ rendered: WebPage.Rendered) throws -> NSDictionary {
        var page = Page()
        try page.take(rendered.json)
        return page.shown
    }

    @Test(arguments: seeds)
    func pagesFromTypedChangesAreTheSnapshotsRendering(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        var server = Replica(id: ReplicaID(0x5E))
        var peer = Replica(id: ReplicaID(0x9E))
        var authors = [Author(id: ReplicaID(0xA1)), Author(id: ReplicaID(0xA2))]
        let images = (1...3).map { Data(PNGEncoder.solid(width: 3 + $0, height: 9 - $0, red: UInt8($0 * 50), green: 10, blue: 3)) }
        var withheld: [Data] = []  // images the server lacks for now

        var sizes: [String: (width: Int, height: Int)] = [:]
        var snapshot = server.snapshot()
        var rendered = WebPage.render(snapshot, sizes: &sizes)
        var tracker = ChangeTracker(server, snapshot: snapshot)
        var version = server.versionVector
        var page = Page()
        try page.take(rendered.json)

        for step in 0..<200 {
            let visible = server.itemIDs.filter { server.isVisible($0) }.sorted()
            let stickers = visible.filter { server.kind(of: $0) == .sticker }
            func point() -> CodablePoint { CodablePoint(x: Double(Int.random(in: 0...900, using: &random)), y: Double(Int.random(in: 0...700, using: &random))) }
            func pick(_ items: [ItemID]) -> ItemID? { items.isEmpty ? nil : items[Int.random(in: 0..<items.count, using: &random)] }
            let image = images[Int.random(in: 0..<images.count, using: &random)]
            let (a, b) = (point(), point())
            let who = Int.random(in: 0..<authors.count, using: &random)
            func draft(_ body: (inout Replica) throws -> LocalEdit) throws {
                guard let made = try? server.draft(as: authors[who], body) else { return }  // refused edits change nothing
                for (_, data) in made.images { server.assets.insert(data) }
                try server.apply(OperationBatch(operations: made.edit.operations))
                authors[who] = made.author
            }
            switch Int.random(in: 0..<14, using: &random) {
            case 0: try draft { try $0.beginStroke(color: .black, width: 2, points: [a, b]) }
            case 1: try draft { replica in replica.finishStroke(); return LocalEdit() }
            case 2: try draft { try $0.addSticker(imagePNG: image, at: a) }
            case 3: if let item = pick(stickers) { try draft { try $0.move(item, to: a) } }
            case 4: if let item = pick(visible) { try draft { try $0.delete(item) } }
            case 5: if let item = pick(visible) { try draft { try $0.bringToFront(item) } }
            case 6: if let item = pick(visible) { try draft { try $0.sendToBack(item) } }
            case 7: try draft { try $0.undo() }
            case 8: try draft { try $0.redo() }
            case 9: try draft { try $0.setCanvasSize(CodableSize(width: a.x + 10, height: b.y + 10)) }
            case 10: try draft { try $0.setBackground(imagePNG: image) }
            case 11:
                // A peer's sticker whose image reaches the server later.
                let png = Data(PNGEncoder.solid(width: 2, height: 2 + step, red: 9, green: 9, blue: 9))
                _ = try peer.addSticker(imagePNG: png, at: b)
                try server.apply(peer.operations(since: server.versionVector))
                withheld.append(png)
            case 12:
                if !withheld.isEmpty { server.assets.insert(withheld.removeFirst()) }
            default:
                if let item = pick(visible) { _ = try? peer.apply(server.operations(since: peer.versionVector)); _ = try? peer.transform(item, scale: 2, rotation: 0.25) }
                try server.apply(peer.operations(since: server.versionVector))
            }
            // Updates are coalesced: the page hears of several steps at once, now and then.
            guard Int.random(in: 0..<3, using: &random) == 0 || step == 199 else { continue }
            let changes = tracker.update(to: server, since: version)
            version = server.versionVector
            if let message = rendered.apply(changes, sizes: &sizes) { try page.take(message) }
            snapshot = server.snapshot()
            let fresh = WebPage.render(snapshot)
            #expect(rendered == fresh, "seed \(seed), step \(step): the rendering kept from typed changes is the snapshot's (BOARDSYNC_SEED=\(seed))")
            #expect(page.shown == (try Self.shown(fresh)), "seed \(seed), step \(step): the page shows the snapshot (BOARDSYNC_SEED=\(seed))")
            if rendered != fresh { return }
        }
    }
}

/// SplitMix64, for seeded test choices.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
