import BoardCRDT
import BoardModel
import BoardSync

/// Presence between servers: each board's channel (`bs:{board}:presence`) carries the
/// presences a server's hub took to the other servers, over the presence link (a
/// subscription). Ephemeral: nothing is kept or sent again.
extension RedisBoardLog {
    /// Subscribes the presence link to every attached board's channel not subscribed yet
    /// (`pump`).
    func sendSubscriptions() {
        for board in boards.keys.sorted() where !subscribed.contains(board) {
            presenceOutput += RESPValue.command("SUBSCRIBE", presenceChannel(board))
            subscribed.insert(board)
        }
    }

    /// A presence this server's hub took: published for the other servers (ephemeral: dropped
    /// when the commands link is down). Payload: node id (length-prefixed), then the PRESENCE
    /// message's frame as on the wire.
    func publish(_ presence: Presence, on board: String) {
        guard up.contains(.commands) else { return }
        var writer = ByteWriter()
        writer.write(lengthPrefixed: Array(options.node.utf8))
        writer.write(bytes: Message.presence(presence).frame().encoded())
        send(.publish, [Array("PUBLISH".utf8), Array(presenceChannel(board).utf8), writer.bytes])
    }

    /// A message on the presence link: `message CHANNEL PAYLOAD` (subscribe confirmations and
    /// anything else are ignored; a payload that does not decode is dropped).
    func presenceMessage(_ value: RESPValue) {
        let items: [RESPValue]
        switch value {
        case .error(let message):
            options.log("Redis presence link: \(message)")
            return
        case .array(let list?): items = list
        case .push(let list): items = list
        default: return
        }
        if items.count == 3, items[0].text == "subscribe", let channel = items[1].text,
           let board = boards.keys.first(where: { presenceChannel($0) == channel }) {
            recheckTombstone(board)
            return
        }
        guard items.count == 3, items[0].text == "message", let channel = items[1].text,
              case .bulkString(let payload?) = items[2],
              let board = boards.keys.first(where: { presenceChannel($0) == channel }) else { return }
        var reader = ByteReader(payload)
        guard let node = try? reader.readLengthPrefixed(max: 256, "node id"), node != Array(options.node.utf8) else { return }
        if deletionNotice(board, payload[reader.offset...]) { return }
        var frames = FrameDecoder(maxFrame: 1 << 16)
        frames.append(Array(payload[reader.offset...]))
        guard let frame = try? frames.next(), case .presence(let presence)? = try? Message(frame: frame, limits: SessionLimits()) else {
            options.log("board '\(board)': a presence message from Redis does not decode; dropped")
            return
        }
        boards[board]?.hub.receiveReplicatedPresence(presence, now: now)
    }
}
