import BoardCRDT
import BoardModel
import Foundation

// The store seam: what the sync layer asks of wherever a board is kept. Board packages
// (BoardStore's `BoardPackage`) implement it over an injected file system; `MemoryReplicaStore`
// serves tests and simulations. The sync layer itself touches no file.

/// Where a hub keeps its board: merges must be durable before they are acknowledged.
/// `BoardPackage` is the real one; `MemoryReplicaStore` serves tests and simulations.
public protocol ReplicaStore: AnyObject {
    var replica: Replica { get }
    /// Merges a peer's operations durably; returns how many were new.
    @discardableResult func merge(_ batch: OperationBatch) throws -> Int
    /// Merges a peer's operations, durable only after `syncMerges()` (group commit: the hub
    /// acknowledges them after that). Stores without a log merge durably at once.
    @discardableResult func merge(_ batch: OperationBatch, deferringSync: Bool) throws -> Int
    /// `merge(_:deferringSync:)`, returning the operations that were new (admission picks them
    /// while it checks the batch: the hub filters nothing again).
    func merging(_ batch: OperationBatch, deferringSync: Bool) throws -> [Op]
    /// Makes every merge since the last sync durable.
    func syncMerges() throws
    /// Stores asset bytes a peer sent, refusing bytes that do not match `claimedHash`. (A store
    /// may defer the directory fsync: a received asset lost to a crash is fetched again.)
    @discardableResult func addReceivedAsset(_ data: Data, claimedHash: AssetHash?) throws -> AssetHash
    /// Which token subject owns each replica id (authorship, on servers with access control:
    /// bound at the replica's first operation). Stores without persistence keep nothing: the
    /// hub remembers for its lifetime. A hub whose replication layer shares authorship
    /// (`BoardHub.sharesAuthorship`) uses neither.
    func loadAuthors() throws -> [ReplicaID: String]
    /// Records durably that `replica` belongs to `subject` before its operations are accepted.
    func bindAuthor(_ replica: ReplicaID, to subject: String) throws
}

extension ReplicaStore {
    @discardableResult public func merge(_ batch: OperationBatch, deferringSync: Bool) throws -> Int { try merge(batch) }
    /// For stores that only implement `merge`: the new operations are picked before it.
    public func merging(_ batch: OperationBatch, deferringSync: Bool) throws -> [Op] {
        let fresh = try replica.admitted(batch)
        try merge(batch, deferringSync: deferringSync)
        return fresh
    }
    public func syncMerges() throws {}
    public func loadAuthors() throws -> [ReplicaID: String] { [:] }
    public func bindAuthor(_ replica: ReplicaID, to subject: String) throws {}
}

/// A replica held in memory (no durability), for tests and simulations.
public final class MemoryReplicaStore: ReplicaStore {
    public private(set) var replica: Replica

    public init(replica: Replica) {
        self.replica = replica
    }

    public func merge(_ batch: OperationBatch) throws -> Int {
        try merging(batch, deferringSync: false).count
    }

    /// Admits the batch once, then integrates its new operations without checking them again.
    public func merging(_ batch: OperationBatch, deferringSync: Bool) throws -> [Op] {
        let fresh = try replica.admitted(batch)
        guard !fresh.isEmpty || batch.covers != nil else { return [] }
        try replica.apply(OperationBatch(operations: fresh, base: batch.base, covers: batch.covers), from: .ownLog)
        return fresh
    }

    public func addReceivedAsset(_ data: Data, claimedHash: AssetHash?) throws -> AssetHash {
        if let claimedHash { try replica.assets.insert(data, claimedHash: claimedHash) } else { replica.assets.insert(data) }
        return AssetHash.of(data)
    }

    /// A local edit, applied directly.
    public func edit(_ body: (inout Replica) throws -> LocalEdit) rethrows -> LocalEdit {
        try body(&replica)
    }
}

/// Where an endpoint keeps a board: a durable store it can also save and close. Board packages
/// are one (through the injected `FileSystem`, so the simulator can run them on a simulated
/// disk); `MemoryReplicaStore` is another.
public protocol HostedStore: ReplicaStore {
    /// Makes a local edit durable and returns it (nothing changes when it throws).
    func commitEdit(_ body: (inout Replica) throws -> LocalEdit) throws -> LocalEdit
    /// Runs `body` on the store's replica in place; `body` must leave it exactly as it found
    /// it (`Replica.draft(as:_:)` does: an author's edit is drafted, then merged).
    func drafting<T>(_ body: (inout Replica) throws -> T) throws -> T
    /// Brings the materialized view up to date (a no-op for stores without one).
    func saveView() throws
    /// Releases the store (its lock); the endpoint never uses it again.
    func closeStore()
    /// The first half of a view save whose file writes may run on another thread
    /// (`SyncEndpoint.Options.viewSavesOffThread`): the job to run, or nil when this store
    /// saved at once (the default: `saveView()`).
    func beginViewSave() throws -> ViewSaveJob?
    /// The second half, on the endpoint's thread, once the job ran (`error` nil) or threw.
    func endViewSave(_ job: ViewSaveJob, error: (any Error)?) throws
}

extension HostedStore {
    public func beginViewSave() throws -> ViewSaveJob? {
        try saveView()
        return nil
    }

    public func endViewSave(_ job: ViewSaveJob, error: (any Error)?) throws {}

    /// Stores that host no authors (a simulation's planted stores) refuse drafts.
    public func drafting<T>(_ body: (inout Replica) throws -> T) throws -> T {
        throw DraftsUnsupported()
    }
}

/// A store without `drafting` was asked to draft an author's edit.
public struct DraftsUnsupported: Error, CustomStringConvertible {
    public var description: String { "this store cannot host authors' edits" }
}

/// A view save's file writes, taken from a store on its owner's thread to run on any other
/// (a host's save thread), one at a time per board; the host hands the outcome back with
/// `SyncEndpoint.viewSaveFinished`. `run` touches only the view's files, never the op log.
public struct ViewSaveJob: Sendable {
    /// The store's own record of what it is writing, handed back to `endViewSave`.
    public let work: any Sendable
    /// The file writes.
    public let run: @Sendable () throws -> Void

    public init(work: any Sendable, run: @escaping @Sendable () throws -> Void) {
        self.work = work
        self.run = run
    }
}

extension MemoryReplicaStore: HostedStore {
    public func commitEdit(_ body: (inout Replica) throws -> LocalEdit) throws -> LocalEdit {
        try edit(body)
    }

    public func drafting<T>(_ body: (inout Replica) throws -> T) throws -> T {
        try body(&replica)
    }

    public func saveView() throws {}

    public func closeStore() {}
}


/// An error whose description may go to a remote peer: it names what was wrong without this
/// host's paths (a store's errors keep their paths for the operator's log).
public protocol PeerSafeError: Error {
    var descriptionWithoutPaths: String { get }
    /// Trouble of the storage rather than of the request (held by another process, cannot be
    /// written): the client is told to retry (`storageUnavailable`).
    var isStorageTrouble: Bool { get }
}

extension PeerSafeError {
    public var isStorageTrouble: Bool { false }
}
