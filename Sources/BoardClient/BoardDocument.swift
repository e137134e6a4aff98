import BoardCRDT
import BoardModel
import BoardStore
import Foundation

/// How a new document starts (the seed's creation sources).
public enum CreationSource: Sendable, Equatable {
    /// An empty board of the default canvas size.
    case blankBoard
    /// A board whose background is this PNG photo, with the canvas sized to it.
    case photoBoard(Data)
}

/// The editable document, mirroring the seed's document model in portable Swift: it owns the
/// replica (and so its undo stack), freezes itself into a `BoardSnapshot` for writers, and
/// applies snapshots that readers load. An Apple app adopts it with a thin `WritableDocument` /
/// `ReadableDocument` adapter; on Linux the CLI and hosts drive it directly.
///
/// Backed by a `BoardPackage`, every edit is saved durably to the op log before `edit` returns,
/// and `save()` brings the package's view up to date. Unbacked, it lives in memory until a
/// writer writes it somewhere. Either way every user-facing change sets `isDirty` and calls
/// `autosave`, the hook a host uses to schedule a (coalesced) save.
public final class BoardDocument {
    public static let writableContentTypes = ContentType.writable
    public static let readableContentTypes = ContentType.readable

    private var memoryReplica: Replica
    public let package: BoardPackage?
    public private(set) var isDirty = false
    /// Called after every change that marks the document unsaved.
    public var autosave: ((BoardDocument) -> Void)?

    /// A new in-memory document.
    public init(replicaID: ReplicaID, source: CreationSource = .blankBoard) throws {
        memoryReplica = Replica(id: replicaID)
        package = nil
        try start(from: source)
        isDirty = false
    }

    /// A document backed by an open package.
    public init(package: BoardPackage) {
        self.package = package
        memoryReplica = package.replica
    }

    /// Starts a fresh document from `source` inside a package (its first edits are logged).
    public convenience init(package: BoardPackage, source: CreationSource) throws {
        self.init(package: package)
        try start(from: source)
    }

    private func start(from source: CreationSource) throws {
        guard case .photoBoard(let photo) = source else { return }
        let header: PNGHeader
        do {
            header = try PNGHeader(validating: Array(photo))
        } catch let error as PNGError {
            throw StoreError.invalidImage(path: "photo", error.description, cause: error)
        }
        _ = try edit { replica in
            replica.beginUndoGroup()
            defer { replica.endUndoGroup() }
            var made = try replica.setCanvasSize(CodableSize(width: Double(header.width), height: Double(header.height))).operations
            made += try replica.setBackground(imagePNG: photo).operations
            return LocalEdit(operations: made)
        }
    }

    /// The replica: the merged state and this replica's undo stack.
    public var replica: Replica { package?.replica ?? memoryReplica }

    /// Makes a local edit. With a package, its operations are on disk when this returns.
    @discardableResult
    public func edit(_ body: (inout Replica) throws -> LocalEdit) throws -> LocalEdit {
        let edit: LocalEdit
        if let package {
            edit = try package.commit(body)
        } else {
            var next = memoryReplica
            edit = try body(&next)
            memoryReplica = next
        }
        if !edit.operations.isEmpty { changed() }
        return edit
    }

    /// Merges a peer's operations (durably when backed by a package).
    @discardableResult
    public func merge(_ batch: OperationBatch) throws -> Int {
        let count: Int
        if let package {
            count = try package.merge(batch)
        } else {
            count = try memoryReplica.apply(batch)
        }
        if count > 0 { changed() }
        return count
    }

    public func undo() throws -> LocalEdit { try edit { try $0.undo() } }
    public func redo() throws -> LocalEdit { try edit { try $0.redo() } }

    private func changed() {
        isDirty = true
        autosave?(self)
    }

    // MARK: Writing (snapshot → writer)

    /// Freezes the document for `contentType`. Every writable type renders from the same
    /// snapshot.
    public func snapshot(contentType: ContentType) throws -> BoardSnapshot {
        guard Self.writableContentTypes.contains(contentType) else {
            throw StoreError.unsupportedContentType(contentType.description)
        }
        return replica.snapshot()
    }

    public func writer(configuration: WriteConfiguration) -> BoardWriter {
        BoardWriter(configuration: configuration)
    }

    /// Saves the backing package's view (manifest and images) and clears `isDirty`. Without a
    /// package, use a writer instead.
    @discardableResult
    public func save(progress: (PackageWriter.Progress) -> Void = { _ in }) throws -> PackageWriter.Report {
        guard let package else { throw StoreError.notAPackage(path: "(in-memory document)", "it has no package to save to; use a writer") }
        let report = try package.save(progress: progress)
        isDirty = false
        return report
    }

    /// Tells the document that a writer has written the current state.
    public func markSaved() {
        isDirty = false
    }

    // MARK: Reading (reader → apply)

    public func reader(configuration: ReadConfiguration) -> BoardReader {
        BoardReader(configuration: configuration)
    }

    /// Makes the document show `snapshot` (typically one a reader loaded), as ordinary edits that
    /// merge with peers and undo as one step. `previous` is accepted for the seed's shape; the
    /// replica already knows what it shows.
    @discardableResult
    public func apply(snapshot: BoardSnapshot, previous: BoardSnapshot?) throws -> LocalEdit {
        try edit { try $0.edits(toMatch: snapshot) }
    }
}
