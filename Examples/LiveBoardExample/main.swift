// Two live boards on one server: a stroke and a sticker one way, a move back, a clean close.
// Usage: LiveBoardExample [HOST:PORT]   (without an address: an embedded server on 127.0.0.1)
import BoardClient
import BoardModel
import Foundation

let directory = NSTemporaryDirectory() + "liveboard-example-\(UUID().uuidString)"
let server = CommandLine.arguments.count > 1 ? nil : try LocalSyncServer(dataDirectory: directory + "/server")
let sync = LiveBoard.Sync(server: CommandLine.arguments.dropFirst().first ?? server!.address, board: "example")

let alice = try LiveBoard.open(storage: .package(path: directory + "/alice.boardpkg"), sync: sync)
let bob = try LiveBoard.open(storage: .memory, sync: sync)
for board in [alice, bob] { Task { try await board.run() } }

// Alice draws a stroke and places a sticker, then prints what others change on her board.
let points = (0..<20).map { CodablePoint(x: 100 + Double($0) * 10, y: 200) }
try await alice.edit { try $0.beginStroke(color: .black, width: 3, points: points) }
let sticker = try await alice.edit {
    try $0.addSticker(imagePNG: Data(PNGEncoder.solid(width: 8, height: 8, red: 250, green: 10, blue: 10)), at: CodablePoint(x: 300, y: 300))
}.item!
let watcher = Task {
    for await update in alice.updates where update.isRemote {
        print("alice sees \(update.origins.map(\.description).joined(separator: ", ")): \(update.changes.changed.count) changed; sticker at \(update.snapshot.stickers.first!.position)")
        if update.snapshot.stickers.first?.position.x == 500 { return }
    }
}

// Bob waits for both items, then moves the sticker back to alice.
for await update in bob.updates where update.snapshot.strokes.count == 1 && update.snapshot.stickers.count == 1 { break }
try await bob.edit { try $0.move(sticker, to: CodablePoint(x: 500, y: 300)) }
await watcher.value

for board in [bob, alice] {
    let report = await board.close()
    print("closed \(board.replicaID): \(report.allAcknowledged ? "every edit acknowledged" : "\(report.unacknowledgedOperations) not acknowledged")")
}
await server?.stop()
