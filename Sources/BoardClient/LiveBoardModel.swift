import BoardCRDT
import BoardModel
import BoardSync
import Foundation
import Observation

/// A `LiveBoard` shaped for an app's views: an `@Observable` object on the main actor that
/// mirrors the board's snapshot, peers, status and undo state, with a synchronous `edit` for
/// gestures. It is also the board's document (the seed's save path, `isDirty`, `autosave`: see
/// `LiveBoardModel+Document.swift`).
///
/// ```swift
/// @State var model = LiveBoardModel(board: board)
/// BoardCanvas(snapshot: model.snapshot)
///     .task { await model.observe() }     // mirrors the board until the view goes away
///     .task { try? await board.run() }    // keeps the board live
/// // in a gesture: returns at once; applied in order
/// model.edit { try $0.beginStroke(color: .black, width: 2, points: points) }
/// ```
///
/// `edit`, `undo`, `redo`, `updatePresence` and `clearPresence` return at once: each goes into
/// one serial queue that a single task drains, awaiting the board for each in turn, so they apply
/// in the order they were made. An edit that throws changes nothing, and its error becomes
/// `lastError`. `flush()` waits until everything queued before it has been applied.
///
/// Local edits, undo and redo show in `snapshot` as soon as the board has applied them;
/// others' edits, `status` and `peers` while `observe()` runs.
@MainActor @Observable
public final class LiveBoardModel {
    /// The board this model mirrors and edits.
    public let board: LiveBoard

    /// The board as it is now (as of the latest update this model has mirrored).
    public private(set) var snapshot: BoardSnapshot
    /// The connection status.
    public private(set) var status: LiveStatus
    /// The other replicas on the board (their pointers, selections, strokes being drawn).
    public private(set) var peers: [Presence]
    /// Whether `undo()` / `redo()` have something to do (this replica's own edits).
    public private(set) var canUndo = false
    public private(set) var canRedo = false
    /// Where the changes in the latest mirrored update came from (`.loaded` at first: the board
    /// as it was opened), and the board's update count it had (`BoardUpdate.version`). For the
    /// typed changes of every update, iterate `board.updates` instead: the model mirrors
    /// whole snapshots and may skip updates.
    public private(set) var lastOrigins: Set<UpdateOrigin>
    public private(set) var version: UInt64
    /// Edits, undos, redos and presence calls queued and not applied yet.
    public private(set) var pendingEdits = 0
    /// The error of the latest `edit`, `undo` or `redo` that threw (nothing changed for it); set
    /// it to nil once shown.
    public var lastError: (any Error)? = nil

    /// Set by every change to the board (local or remote) since the document was last written
    /// to its native type, saved or marked saved.
    public internal(set) var isDirty = false
    /// Called after every change that marks the document unsaved: the hook a host uses to
    /// schedule a (coalesced) save.
    @ObservationIgnored public var autosave: (@MainActor (LiveBoardModel) -> Void)?

    @ObservationIgnored private let jobs: AsyncStream<Job>.Continuation
    @ObservationIgnored private var undoReadsStarted = 0
    @ObservationIgnored private var undoReadsApplied = 0
    /// What this model last wrote with a writer, and where (the next write's `previous`).
    @ObservationIgnored var lastWritten: (destination: String, content: BoardSnapshot)?

    enum Job: Sendable {
        case edit(@Sendable (inout Replica) throws -> LocalEdit, reply: CheckedContinuation<LocalEdit, any Error>?)
        case undo
        case redo
        case presence(pointer: GridPoint?, selection: [ItemID], stroke: InkPreview?)
        case clearPresence
        case flush(CheckedContinuation<Void, Never>)
    }

    /// A model over `board`, showing its current snapshot, status and peers at once. Its queue
    /// of edits runs for the model's lifetime; call `observe()` to follow remote changes.
    public init(board: LiveBoard) {
        self.board = board
        let current = board.currentUpdate
        snapshot = current.snapshot
        version = current.version
        lastOrigins = [.loaded]
        status = board.currentStatus
        peers = board.currentPeers
        let (stream, jobs) = AsyncStream.makeStream(of: Job.self)
        self.jobs = jobs
        // One task drains the queue, in order. It holds the model weakly: the model going away
        // finishes the queue (deinit), which ends the task.
        Task { [weak self] in
            await self?.refreshUndoState()
            for await job in stream {
                await Self.perform(job, on: board) { error in self?.lastError = error }
                await self?.jobDone(job)
            }
        }
    }

    deinit {
        jobs.finish()
    }

    // MARK: Editing (synchronous, queued)

    /// Queues `body` to run on the board's replica (after everything queued before it) and
    /// returns at once: what a gesture calls. When it throws, nothing changes and the error
    /// becomes `lastError`.
    public func edit(_ body: @escaping @Sendable (inout Replica) throws -> LocalEdit) {
        enqueue(.edit(body, reply: nil))
    }

    /// Undoes this replica's latest edit once everything queued before has been applied.
    public func undo() { enqueue(.undo) }

    /// Redoes the latest undone edit once everything queued before has been applied.
    public func redo() { enqueue(.redo) }

    /// Says what this replica is doing (`LiveBoard.updatePresence`), in order with the edits.
    public func updatePresence(pointer: GridPoint?, selection: [ItemID] = [], stroke: InkPreview? = nil) {
        enqueue(.presence(pointer: pointer, selection: selection, stroke: stroke))
    }

    /// Says this replica left (`LiveBoard.clearPresence`), in order with the edits.
    public func clearPresence() { enqueue(.clearPresence) }

    /// Runs `body` after everything queued and returns its `LocalEdit` (the item it made), or
    /// throws its error (which does not become `lastError`).
    @discardableResult
    public func commit(_ body: @escaping @Sendable (inout Replica) throws -> LocalEdit) async throws -> LocalEdit {
        try await withCheckedThrowingContinuation { reply in
            enqueue(.edit(body, reply: reply))
        }
    }

    /// Returns once everything queued before this call has been applied (and shows in
    /// `snapshot`, `canUndo` and `canRedo`).
    public func flush() async {
        await withCheckedContinuation { done in enqueue(.flush(done)) }
    }

    private func enqueue(_ job: Job) {
        if case .flush = job {} else { pendingEdits += 1 }
        jobs.yield(job)
    }

    /// Runs one job on the board (off the main actor between hops); errors of unanswered jobs go
    /// to `failed`.
    private static func perform(_ job: Job, on board: LiveBoard, failed: @MainActor (any Error) -> Void) async {
        do {
            switch job {
            case .edit(let body, let reply?):
                do { reply.resume(returning: try await board.edit(body)) } catch { reply.resume(throwing: error) }
            case .edit(let body, nil):
                try await board.edit(body)
            case .undo:
                try await board.undo()
            case .redo:
                try await board.redo()
            case .presence(let pointer, let selection, let stroke):
                await board.updatePresence(pointer: pointer, selection: selection, stroke: stroke)
            case .clearPresence:
                await board.clearPresence()
            case .flush(let done):
                done.resume()
            }
        } catch {
            failed(error)
        }
    }

    private func jobDone(_ job: Job) async {
        mirror(board.currentUpdate)
        await refreshUndoState()
        if case .flush = job {} else { pendingEdits -= 1 }
    }

    // MARK: Mirroring

    /// Mirrors the board's updates, status and peers on the main actor until the task is
    /// cancelled or the board closes: what `.task { await model.observe() }` calls. Local edits
    /// show without it; remote ones, status and peers need it.
    public func observe() async {
        let board = self.board
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await update in board.updates {
                    await self.mirror(update)
                    await self.refreshUndoState()
                }
            }
            group.addTask {
                for await status in board.status { await self.mirror(status: status) }
            }
            group.addTask {
                for await roster in board.peers { await self.mirror(peers: roster) }
            }
        }
    }

    /// Shows `update` unless this model already shows it or a later one.
    private func mirror(_ update: BoardUpdate) {
        guard update.version > version else { return }
        snapshot = update.snapshot
        version = update.version
        lastOrigins = update.origins
        isDirty = true
        autosave?(self)
    }

    private func mirror(status: LiveStatus) {
        if status != self.status { self.status = status }
    }

    private func mirror(peers roster: [Presence]) {
        if roster != peers { peers = roster }
    }

    /// Reads the board's undo state; a read that finishes after a later one is dropped.
    private func refreshUndoState() async {
        undoReadsStarted += 1
        let read = undoReadsStarted
        let state = await board.undoState()
        guard read > undoReadsApplied else { return }
        undoReadsApplied = read
        if canUndo != state.canUndo { canUndo = state.canUndo }
        if canRedo != state.canRedo { canRedo = state.canRedo }
    }
}

extension LiveBoard {
    /// The latest update published (snapshot and version together), without waiting.
    nonisolated var currentUpdate: BoardUpdate { updateChannel.current }

    /// `canUndo` and `canRedo` in one read of the replica.
    func undoState() -> (canUndo: Bool, canRedo: Bool) {
        let replica = self.replica
        return (replica.canUndo, replica.canRedo)
    }
}
