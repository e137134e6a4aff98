import BoardCRDT
import BoardModel

/// The messages of protocol version 1 (docs/PROTOCOL.md has the byte layouts).
package enum Message: Equatable, Sendable {
    case hello(Hello)
    /// An encoded `OperationBatch`: a delta or live operations.
    case operations([UInt8])
    /// "Everything you sent up to here is on my disk": the receiver's version vector after a durable merge.
    case ack(VersionVector)
    /// "You now have everything I held when we met": sent after the initial delta.
    case synced(VersionVector)
    /// Asset bytes wanted, each from an offset (non-zero to resume an interrupted transfer).
    case want([AssetRequest])
    /// One chunk of an asset.
    case assetChunk(AssetChunk)
    /// The sender does not have this asset (yet).
    case noAsset(AssetHash)
    case ping(UInt64)
    case pong(UInt64)
    case error(code: UInt16, message: String)
    /// A clean goodbye.
    case bye
    /// Who is on the board and what they are doing (ephemeral; never logged).
    case presence(Presence)
    /// "I dropped these operations of yours and keep the session open": for each replica, the
    /// highest sequence number dropped from a batch; why, as an ERROR's code and text. Only to
    /// a peer whose HELLO announced `Capabilities.refusalNotices`.
    case refused(code: UInt16, message: String, operations: VersionVector)
    /// Asks for history (only to a peer whose HELLO announced `Capabilities.history`).
    case historyRequest(HistoryRequest)
    /// Answers one history request.
    case history(HistoryAnswer)

    public enum Kind: UInt8, Sendable {
        case hello = 1, operations, ack, synced, want, assetChunk, noAsset, ping, pong, error, bye, presence, refused
        case historyRequest, history
    }

    package var kind: Kind {
        switch self {
        case .hello: return .hello
        case .operations: return .operations
        case .ack: return .ack
        case .synced: return .synced
        case .want: return .want
        case .assetChunk: return .assetChunk
        case .noAsset: return .noAsset
        case .ping: return .ping
        case .pong: return .pong
        case .error: return .error
        case .bye: return .bye
        case .presence: return .presence
        case .refused: return .refused
        case .historyRequest: return .historyRequest
        case .history: return .history
        }
    }
}

/// The handshake: who is speaking, for which board, and what it already holds.
public struct Hello: Equatable, Sendable {
    package static let magic: [UInt8] = Array("BSYN".utf8)
    package static let protocolVersion: UInt64 = 1
    /// Longest board name, in UTF-8 bytes.
    package static let maxBoardName = 128
    /// Replicas in one version vector on the wire (a board that saw more would need a newer
    /// protocol; each entry costs the receiver memory and time).
    package static let maxVersionEntries = 1 << 16

    package var protocolVersion: UInt64
    package var board: String
    package var replica: ReplicaID
    /// Reserved for authentication (a token); empty today.
    package var credentials: [UInt8]
    /// Bit set of optional features (`Capabilities`): presence.
    package var capabilities: UInt64
    package var version: VersionVector

    package init(protocolVersion: UInt64 = Hello.protocolVersion, board: String, replica: ReplicaID,
                credentials: [UInt8] = [], capabilities: UInt64 = 0, version: VersionVector) {
        self.protocolVersion = protocolVersion
        self.board = board
        self.replica = replica
        self.credentials = credentials
        self.capabilities = capabilities
        self.version = version
    }

    /// Plain names only: 1-128 bytes of letters, digits, '-', '_' and '.', not starting with '.'.
    package static func isValidBoardName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard !bytes.isEmpty, bytes.count <= maxBoardName, bytes[0] != UInt8(ascii: ".") else { return false }
        return bytes.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ".")
        }
    }
}

public struct AssetRequest: Equatable, Hashable, Sendable {
    package var hash: AssetHash
    package var offset: UInt64

    package init(hash: AssetHash, offset: UInt64 = 0) {
        self.hash = hash
        self.offset = offset
    }
}

public struct AssetChunk: Equatable, Sendable {
    package var hash: AssetHash
    package var totalSize: UInt64
    package var offset: UInt64
    package var bytes: [UInt8]

    package init(hash: AssetHash, totalSize: UInt64, offset: UInt64, bytes: [UInt8]) {
        self.hash = hash
        self.totalSize = totalSize
        self.offset = offset
        self.bytes = bytes
    }
}

extension Message {
    package func frame() -> Frame {
        var w = ByteWriter()
        switch self {
        case .hello(let hello):
            w.write(bytes: Hello.magic)
            w.write(varint: hello.protocolVersion)
            w.write(lengthPrefixed: Array(hello.board.utf8))
            w.write(fixed64: hello.replica.rawValue)
            w.write(lengthPrefixed: hello.credentials)
            w.write(varint: hello.capabilities)
            writeVector(hello.version, &w)
        case .operations(let bytes):
            w.write(bytes: bytes)
        case .ack(let vector), .synced(let vector):
            writeVector(vector, &w)
        case .want(let requests):
            w.write(varint: UInt64(requests.count))
            for request in requests {
                w.write(bytes: request.hash.digest)
                w.write(varint: request.offset)
            }
        case .assetChunk(let chunk):
            w.write(bytes: chunk.hash.digest)
            w.write(varint: chunk.totalSize)
            w.write(varint: chunk.offset)
            w.write(bytes: chunk.bytes)
        case .noAsset(let hash):
            w.write(bytes: hash.digest)
        case .ping(let nonce), .pong(let nonce):
            w.write(varint: nonce)
        case .error(let code, let message):
            w.write(varint: UInt64(code))
            w.write(lengthPrefixed: Array(message.utf8.prefix(1024)))
        case .bye:
            break
        case .presence(let presence):
            presence.write(&w)
        case .refused(let code, let message, let operations):
            w.write(varint: UInt64(code))
            w.write(lengthPrefixed: Array(message.utf8.prefix(1024)))
            writeVector(operations, &w)
        case .historyRequest(let request):
            request.write(&w)
        case .history(let answer):
            answer.write(&w)
        }
        return Frame(type: kind.rawValue, payload: w.bytes)
    }

    /// Decodes a frame; throws a `SessionError` naming what was wrong.
    package init(frame: Frame, limits: SessionLimits) throws(SessionError) {
        guard let kind = Kind(rawValue: frame.type) else {
            throw SessionError(.unknownMessage, "unknown message type \(frame.type)")
        }
        var r = ByteReader(frame.payload)
        do {
            switch kind {
            case .hello:
                guard Array(try r.readBytes(4)) == Hello.magic else { throw SessionError(.malformedFrame, "bad handshake magic") }
                let version = try r.readVarint()
                guard version == Hello.protocolVersion else {
                    throw SessionError(.unsupportedVersion, "protocol version \(version) is not supported (this side speaks \(Hello.protocolVersion))")
                }
                let nameBytes = try r.readLengthPrefixed(max: Hello.maxBoardName, "board name")
                guard let board = String(validating: nameBytes, as: UTF8.self) else {
                    throw SessionError(.badBoardName, "board name is not UTF-8")
                }
                let replica = ReplicaID(try r.readFixed64())
                let credentials = try r.readLengthPrefixed(max: 4096, "credentials")
                let capabilities = try r.readVarint()
                let vector = try readVector(&r)
                self = .hello(Hello(protocolVersion: version, board: board, replica: replica, credentials: credentials,
                                    capabilities: capabilities, version: vector))
            case .operations:
                self = .operations(frame.payload)
                return
            case .ack: self = .ack(try readVector(&r))
            case .synced: self = .synced(try readVector(&r))
            case .want:
                let count = try r.readCount(max: 4096, minimumSize: 33, "asset requests")
                var requests: [AssetRequest] = []
                for _ in 0..<count {
                    let hash = AssetHash(digest: try r.readBytes(32))!
                    requests.append(AssetRequest(hash: hash, offset: try r.readVarint()))
                }
                self = .want(requests)
            case .assetChunk:
                let hash = AssetHash(digest: try r.readBytes(32))!
                let total = try r.readVarint()
                let offset = try r.readVarint()
                guard total <= UInt64(limits.maxAsset) else {
                    throw SessionError(.assetTooLarge, "asset of \(total) bytes exceeds the limit of \(limits.maxAsset)")
                }
                let bytes = Array(try r.readBytes(r.remaining))
                guard offset <= total, UInt64(bytes.count) <= total - offset else {
                    throw SessionError(.malformedFrame, "asset chunk beyond the asset's size")
                }
                self = .assetChunk(AssetChunk(hash: hash, totalSize: total, offset: offset, bytes: bytes))
                return
            case .noAsset: self = .noAsset(AssetHash(digest: try r.readBytes(32))!)
            case .ping: self = .ping(try r.readVarint())
            case .pong: self = .pong(try r.readVarint())
            case .error:
                let code = try r.readVarint(max: UInt64(UInt16.max), "error code")
                let text = try r.readLengthPrefixed(max: 4096, "error message")
                self = .error(code: UInt16(code), message: String(decoding: text, as: UTF8.self))
            case .bye: self = .bye
            case .presence: self = .presence(try Presence.read(&r))
            case .refused:
                let code = try r.readVarint(max: UInt64(UInt16.max), "refusal code")
                let text = try r.readLengthPrefixed(max: 4096, "refusal message")
                self = .refused(code: UInt16(code), message: String(decoding: text, as: UTF8.self), operations: try readVector(&r))
            case .historyRequest: self = .historyRequest(try HistoryRequest.read(&r))
            case .history: self = .history(try HistoryAnswer.read(&r, maxFrame: limits.maxFrame))
            }
        } catch let error as SessionError {
            throw error
        } catch {
            throw SessionError(.malformedFrame, "\(kind) message: \(error)")
        }
        guard r.isAtEnd else { throw SessionError(.malformedFrame, "\(r.remaining) trailing bytes in a \(kind) message") }
    }
}

private func writeVector(_ vector: VersionVector, _ w: inout ByteWriter) {
    let entries = vector.sortedEntries
    w.write(varint: UInt64(entries.count))
    for entry in entries {
        w.write(fixed64: entry.replica.rawValue)
        w.write(varint: entry.seq)
    }
}

private func readVector(_ r: inout ByteReader) throws -> VersionVector {
    let count = try r.readCount(max: Hello.maxVersionEntries, minimumSize: 9, "version vector size")
    var entries: [ReplicaID: UInt64] = [:]
    for _ in 0..<count {
        let replica = ReplicaID(try r.readFixed64())
        entries[replica] = try r.readVarint(max: Op.maxCounter, "version vector entry")
    }
    return VersionVector(entries)
}
