import BoardCRDT
import BoardModel
import BoardStore
import Foundation

/// How a new board starts (the seed's creation sources).
public enum CreationSource: Sendable, Equatable {
    /// An empty board of the default canvas size.
    case blankBoard
    /// A board whose background is this PNG photo, with the canvas sized to it.
    case photoBoard(Data)

    /// The edit that starts a board from this source (one undo step; none for a blank board).
    /// Throws `StoreError.invalidImage` for a photo that is not a PNG, changing nothing.
    public func edit(_ replica: inout Replica) throws -> LocalEdit {
        guard case .photoBoard(let photo) = self else { return LocalEdit() }
        let header: PNGHeader
        do {
            header = try PNGHeader(validating: Array(photo))
        } catch let error as PNGError {
            throw StoreError.invalidImage(path: "photo", error.description, cause: error)
        }
        replica.beginUndoGroup()
        defer { replica.endUndoGroup() }
        var made = try replica.setCanvasSize(CodableSize(width: Double(header.width), height: Double(header.height))).operations
        made += try replica.setBackground(imagePNG: photo).operations
        return LocalEdit(operations: made)
    }
}

/// The document side of the model, as the seed's document model has it: it freezes the board
/// into a `Sendable` `BoardSnapshot` for a writer, which writes it off the main actor (for a
/// board package, only what differs from the previous write); `isDirty` and `autosave` follow
/// every change; a reader's snapshot can be applied back as edits.
extension LiveBoardModel {
    public static let writableContentTypes = ContentType.writable
    public static let readableContentTypes = ContentType.readable

    // MARK: Writing (snapshot → writer)

    /// Freezes the board for `contentType` (every writable type renders from the same
    /// snapshot): what the board has applied now, so edits still queued are not in it (`await
    /// flush()` first, or use `write(to:configuration:)`, which does).
    public func snapshot(contentType: ContentType) throws -> BoardSnapshot {
        guard Self.writableContentTypes.contains(contentType) else {
            throw StoreError.unsupportedContentType(contentType.description)
        }
        return board.snapshot
    }

    /// The writer for `configuration` (`BoardWriter.write(content:to:previous:progress:)`).
    public func writer(configuration: WriteConfiguration) -> BoardWriter {
        BoardWriter(configuration: configuration)
    }

    /// Saves the board to `destination` as `configuration.contentType`: waits for the queued
    /// edits, freezes the board, and writes it on a thread of its own (never on the main actor
    /// or Swift's cooperative pool). A board package is written against what this model last
    /// wrote to the same destination (`previous`: only what differs is rewritten). Writing the
    /// native type clears `isDirty` unless the board changed during the write; exports (PNG,
    /// PDF, SVG) leave it as it was. `progress` is called on the writer's thread.
    @discardableResult
    public func write(to destination: String, configuration: WriteConfiguration,
                      progress: @escaping @Sendable (PackageWriter.Progress) -> Void = { _ in }) async throws -> PackageWriter.Report {
        await flush()
        let frozen = board.currentUpdate
        let content = try snapshot(contentType: configuration.contentType)
        let previous = lastWritten?.destination == destination ? lastWritten?.content : nil
        let writer = self.writer(configuration: configuration)
        let report = try await Self.offMainActor {
            try writer.write(content: content, to: destination, previous: previous, progress: progress)
        }
        if configuration.contentType.isNative {
            lastWritten = (destination, content)
            if board.currentUpdate.version == frozen.version { isDirty = false }
        }
        return report
    }

    /// Tells the document that the current state has been written (by a writer of the host's).
    public func markSaved() {
        isDirty = false
    }

    /// Brings a package-backed board's view (manifest and images) up to date, after the queued
    /// edits, and clears `isDirty` (the edits themselves are in the op log already, fsynced; the
    /// view is saved at `close()` too). A memory board has no view: this only clears `isDirty`.
    public func saveView() async throws {
        await flush()
        let frozen = board.currentUpdate.version
        try await board.saveView()
        if board.currentUpdate.version == frozen { isDirty = false }
    }

    // MARK: Reading (reader → apply)

    public func reader(configuration: ReadConfiguration) -> BoardReader {
        BoardReader(configuration: configuration)
    }

    /// Makes the board show `snapshot` (typically one a reader loaded), after the queued edits,
    /// as ordinary edits that merge with peers and undo as one step. `previous` is accepted for
    /// the seed's shape; the replica already knows what it shows.
    @discardableResult
    public func apply(snapshot: BoardSnapshot, previous: BoardSnapshot?) async throws -> LocalEdit {
        try await commit { try $0.edits(toMatch: snapshot) }
    }

    /// Starts the board from `source` (a photo becomes the background and sizes the canvas),
    /// after the queued edits. Throws for a photo that is not a PNG, changing nothing.
    @discardableResult
    public func start(from source: CreationSource) async throws -> LocalEdit {
        try await commit { try source.edit(&$0) }
    }

    /// Runs blocking disk work on a thread of its own and returns its result.
    nonisolated static func offMainActor<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(with: Result { try work() })
            }
        }
    }
}

extension LiveBoard {
    /// Saves the store's materialized view (a package's manifest and images; nothing for a
    /// memory board). Throws `LiveBoardError.closed` once closed.
    func saveView() async throws {
        try await saveViewNow()
    }
}
