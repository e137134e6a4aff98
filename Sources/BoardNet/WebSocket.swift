import COpenSSL
import Foundation

/// The server side of RFC 6455 WebSockets, sans-IO: the opening handshake checked against an
/// `HTTPRequest`, and a connection state machine (bytes in → messages out; messages in → bytes
/// out) with fragmentation, masking, ping/pong, the close handshake and size limits. No
/// extensions are negotiated, so every RSV bit must be zero.
public enum WebSocket {
    static let guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    /// `Sec-WebSocket-Accept` for a client's `Sec-WebSocket-Key`: base64(SHA-1(key + GUID)).
    public static func acceptValue(for key: String) -> String {
        let input = Array((key + guid).utf8)
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var size: UInt32 = 0
        let ok = input.withUnsafeBufferPointer { data in
            EVP_Digest(data.baseAddress, data.count, &digest, &size, EVP_sha1(), nil)
        }
        precondition(ok == 1 && size == 20, "SHA-1 from OpenSSL failed")
        return Data(digest.prefix(20)).base64EncodedString()
    }

    /// Checks an upgrade request; returns the 101 response to send, or the error to answer with
    /// (426 with the supported version when only the version is wrong).
    public static func handshake(_ request: HTTPRequest) -> Result<HTTPResponse, HTTPError> {
        guard request.method == "GET" else { return .failure(HTTPError(405, "a WebSocket upgrade must be a GET")) }
        guard request.version == "HTTP/1.1" else { return .failure(HTTPError(400, "a WebSocket upgrade needs HTTP/1.1")) }
        guard request.tokens("Upgrade").contains("websocket") else { return .failure(HTTPError(400, "missing 'Upgrade: websocket'")) }
        guard request.tokens("Connection").contains("upgrade") else { return .failure(HTTPError(400, "missing 'Connection: Upgrade'")) }
        guard request.header("Sec-WebSocket-Version") == "13" else {
            return .failure(HTTPError(426, "WebSocket version 13 is the one supported"))
        }
        guard let key = request.header("Sec-WebSocket-Key"), let nonce = Data(base64Encoded: key), nonce.count == 16 else {
            return .failure(HTTPError(400, "Sec-WebSocket-Key must be 16 bytes in base64"))
        }
        return .success(HTTPResponse(status: 101, headers: [
            ("Upgrade", "websocket"), ("Connection", "Upgrade"), ("Sec-WebSocket-Accept", acceptValue(for: key)),
        ]))
    }

    public enum Opcode: UInt8, Sendable {
        case continuation = 0, text = 1, binary = 2, close = 8, ping = 9, pong = 10
        var isControl: Bool { rawValue >= 8 }
    }

    /// Close status codes used here (RFC 6455 §7.4.1).
    public enum CloseCode: UInt16, Sendable {
        case normal = 1000, goingAway = 1001, protocolError = 1002, unsupportedData = 1003
        case invalidPayload = 1007, policyViolation = 1008, tooBig = 1009, internalError = 1011
    }

    /// One frame in bytes. Servers send unmasked frames; clients (and tests acting as one) mask
    /// with `mask`.
    public static func frame(_ opcode: Opcode, _ payload: [UInt8], fin: Bool = true, mask: [UInt8]? = nil) -> [UInt8] {
        var out: [UInt8] = [(fin ? 0x80 : 0) | opcode.rawValue]
        let maskBit: UInt8 = mask == nil ? 0 : 0x80
        if payload.count < 126 {
            out.append(maskBit | UInt8(payload.count))
        } else if payload.count <= 0xFFFF {
            out.append(maskBit | 126)
            out += [UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        } else {
            out.append(maskBit | 127)
            for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: UInt64(payload.count) >> UInt64(shift))) }
        }
        if let mask {
            precondition(mask.count == 4)
            out += mask
            out += payload.enumerated().map { $0.element ^ mask[$0.offset & 3] }
        } else {
            out += payload
        }
        return out
    }
}

/// What a WebSocket connection yields.
public enum WebSocketEvent: Equatable, Sendable {
    case text(String)
    case binary([UInt8])
    /// The peer closed (its code and reason); the answering close frame is queued.
    case closed(code: UInt16?, reason: String)
    /// This side refused what the peer sent (a protocol error, a message too large): a close
    /// frame with `code` is queued and nothing more will be read.
    case failed(code: WebSocket.CloseCode, reason: String)
}

/// A server-side WebSocket connection after the handshake: feed it bytes, take its output.
public struct WebSocketConnection: Sendable {
    /// Largest message (after reassembly of fragments) taken from the peer.
    public var maxMessage: Int
    private var buffer: [UInt8] = []
    private var fragments: (opcode: WebSocket.Opcode, bytes: [UInt8])?
    private var outbox: [UInt8] = []
    public private(set) var isClosed = false
    /// Whether this side sent its close frame (no more messages may be sent).
    public private(set) var closeSent = false

    public init(maxMessage: Int = 1 << 20) {
        self.maxMessage = maxMessage
    }

    /// The answer to the latest ping not yet taken: a peer pinging faster than it reads gets
    /// one pong, not one per ping (RFC 6455 §5.5.3 allows answering only the most recent).
    private var pendingPong: [UInt8]?

    /// Bytes waiting for the socket.
    public mutating func takeOutput() -> [UInt8] {
        if let pong = pendingPong, !closeSent { outbox += WebSocket.frame(.pong, pong) }
        pendingPong = nil
        defer { outbox = [] }
        return outbox
    }

    public var pendingOutputCount: Int { outbox.count + (pendingPong.map { $0.count + 2 } ?? 0) }

    public mutating func send(text: String) {
        guard !closeSent else { return }
        outbox += WebSocket.frame(.text, Array(text.utf8))
    }

    public mutating func send(binary: [UInt8]) {
        guard !closeSent else { return }
        outbox += WebSocket.frame(.binary, binary)
    }

    public mutating func ping(_ payload: [UInt8] = []) {
        guard !closeSent else { return }
        outbox += WebSocket.frame(.ping, Array(payload.prefix(125)))
    }

    /// Starts the close handshake (or answers one).
    public mutating func close(_ code: WebSocket.CloseCode = .normal, reason: String = "") {
        guard !closeSent else { return }
        closeSent = true
        var payload = [UInt8(code.rawValue >> 8), UInt8(code.rawValue & 0xFF)]
        payload += Array(reason.utf8.prefix(123))
        outbox += WebSocket.frame(.close, payload)
    }

    /// Feeds received bytes (any split); returns complete messages and what ended the connection.
    public mutating func receive(_ bytes: [UInt8]) -> [WebSocketEvent] {
        guard !isClosed else { return [] }
        buffer += bytes
        var events: [WebSocketEvent] = []
        var consumed = 0
        while !isClosed {
            do {
                guard let (frame, length) = try parseFrame(from: consumed) else { break }
                consumed += length
                if let event = try handle(frame) { events.append(event) }
            } catch let failure as Failure {
                close(failure.code, reason: failure.reason)
                isClosed = true
                events.append(.failed(code: failure.code, reason: failure.reason))
            } catch {
                preconditionFailure("unexpected error \(error)")
            }
        }
        buffer.removeFirst(min(consumed, buffer.count))
        if isClosed { buffer = [] }
        return events
    }

    private struct Failure: Error {
        let code: WebSocket.CloseCode
        let reason: String
        init(_ code: WebSocket.CloseCode, _ reason: String) {
            self.code = code
            self.reason = reason
        }
    }

    private struct Frame {
        var fin: Bool
        var opcode: WebSocket.Opcode
        var payload: [UInt8]
    }

    /// The frame starting at `offset`, with its length in bytes; nil until it has all arrived.
    private func parseFrame(from offset: Int) throws -> (Frame, Int)? {
        let available = buffer.count - offset
        guard available >= 2 else { return nil }
        let first = buffer[offset], second = buffer[offset + 1]
        guard first & 0x70 == 0 else { throw Failure(.protocolError, "reserved bits set (no extension was negotiated)") }
        guard let opcode = WebSocket.Opcode(rawValue: first & 0x0F) else {
            throw Failure(.protocolError, "opcode \(first & 0x0F) is reserved")
        }
        let fin = first & 0x80 != 0
        guard second & 0x80 != 0 else { throw Failure(.protocolError, "a client's frame must be masked") }
        var length = UInt64(second & 0x7F)
        var headerSize = 2
        if length == 126 {
            guard available >= 4 else { return nil }
            length = UInt64(buffer[offset + 2]) << 8 | UInt64(buffer[offset + 3])
            guard length >= 126 else { throw Failure(.protocolError, "a length that fits in 7 bits sent in 16") }
            headerSize = 4
        } else if length == 127 {
            guard available >= 10 else { return nil }
            length = 0
            for index in 0..<8 { length = length << 8 | UInt64(buffer[offset + 2 + index]) }
            guard length >> 63 == 0 else { throw Failure(.protocolError, "the 64-bit length has its top bit set") }
            guard length > 0xFFFF else { throw Failure(.protocolError, "a length that fits in 16 bits sent in 64") }
            headerSize = 10
        }
        if opcode.isControl {
            guard fin else { throw Failure(.protocolError, "a fragmented control frame") }
            guard length <= 125 else { throw Failure(.protocolError, "a control frame over 125 bytes") }
        }
        // Checked before the payload arrives: a peer announcing a huge frame is refused at once.
        let held = UInt64(fragments?.bytes.count ?? 0)
        guard opcode.isControl || length <= UInt64(maxMessage) && held + length <= UInt64(maxMessage) else {
            throw Failure(.tooBig, "a message over \(maxMessage) bytes")
        }
        let total = headerSize + 4 + Int(length)
        guard available >= total else { return nil }
        let maskAt = offset + headerSize
        let mask = Array(buffer[maskAt..<(maskAt + 4)])
        var payload = Array(buffer[(maskAt + 4)..<(offset + total)])
        for index in payload.indices { payload[index] ^= mask[index & 3] }
        return (Frame(fin: fin, opcode: opcode, payload: payload), total)
    }

    private mutating func handle(_ frame: Frame) throws -> WebSocketEvent? {
        switch frame.opcode {
        case .ping:
            if !closeSent { pendingPong = frame.payload }
            return nil
        case .pong:
            return nil
        case .close:
            var code: UInt16?
            var reason = ""
            if frame.payload.count == 1 { throw Failure(.protocolError, "a close frame with a one-byte body") }
            if frame.payload.count >= 2 {
                let value = UInt16(frame.payload[0]) << 8 | UInt16(frame.payload[1])
                guard (1000...4999).contains(value), ![1004, 1005, 1006, 1015].contains(value), value < 1012 || value >= 3000 else {
                    throw Failure(.protocolError, "close code \(value) may not be sent")
                }
                guard let text = String(validating: frame.payload[2...], as: UTF8.self) else {
                    throw Failure(.invalidPayload, "a close reason that is not UTF-8")
                }
                code = value
                reason = text
            }
            if !closeSent {
                closeSent = true
                outbox += WebSocket.frame(.close, code.map { [UInt8($0 >> 8), UInt8($0 & 0xFF)] } ?? [])
            }
            isClosed = true
            return .closed(code: code, reason: reason)
        case .text, .binary:
            guard fragments == nil else { throw Failure(.protocolError, "a new message began before the last one ended") }
            if frame.fin { return try message(frame.opcode, frame.payload) }
            fragments = (frame.opcode, frame.payload)
            return nil
        case .continuation:
            guard var started = fragments else { throw Failure(.protocolError, "a continuation frame with no message begun") }
            started.bytes += frame.payload
            if frame.fin {
                fragments = nil
                return try message(started.opcode, started.bytes)
            }
            fragments = started
            return nil
        }
    }

    private func message(_ opcode: WebSocket.Opcode, _ bytes: [UInt8]) throws -> WebSocketEvent {
        if opcode == .binary { return .binary(bytes) }
        guard let text = String(validating: bytes, as: UTF8.self) else { throw Failure(.invalidPayload, "a text message that is not UTF-8") }
        return .text(text)
    }
}
