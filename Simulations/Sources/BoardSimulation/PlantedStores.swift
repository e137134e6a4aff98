import BoardModel
import BoardStore
@_spi(Mutations) import BoardCRDT
@_spi(Mutations) import BoardSync
import Foundation

// MARK: Planted bugs (mutation testing of the oracles)

/// Acknowledges merges before they are durable: they are logged only at the next view save.
/// The planted `acknowledge-before-sync` bug: merges are deferred (appended, not fsynced) and
/// the group commit's sync does nothing.
final class UnsyncedStore: HostedStore {
    let package: BoardPackage
    init(_ package: BoardPackage) { self.package = package }
    var replica: Replica { package.replica }
    func merge(_ batch: OperationBatch) throws -> Int { try package.merge(batch, deferringSync: true) }
    func merge(_ batch: OperationBatch, deferringSync: Bool) throws -> Int { try package.merge(batch, deferringSync: true) }
    func syncMerges() throws {}
    func addReceivedAsset(_ data: Data, claimedHash: AssetHash?) throws -> AssetHash { try package.addReceivedAsset(data, claimedHash: claimedHash) }
    func loadAuthors() throws -> [ReplicaID: String] { try package.loadAuthors() }
    func bindAuthor(_ replica: ReplicaID, to subject: String) throws { try package.bindAuthor(replica, to: subject) }
    func commitEdit(_ body: (inout Replica) throws -> LocalEdit) throws -> LocalEdit { try package.commit(body) }
    func saveView() throws { try package.save() }
    func closeStore() {}
}

final class LateLoggingStore: HostedStore {
    let package: BoardPackage
    private var unlogged: [OperationBatch] = []
    private(set) var replica: Replica

    init(_ package: BoardPackage) {
        self.package = package
        self.replica = package.replica
    }

    func merge(_ batch: OperationBatch) throws -> Int {
        let count = try replica.apply(batch)
        unlogged.append(batch)
        return count
    }

    func addReceivedAsset(_ data: Data, claimedHash: AssetHash?) throws -> AssetHash {
        let hash = try package.addReceivedAsset(data, claimedHash: claimedHash)
        replica.assets.insert(data)
        return hash
    }

    func commitEdit(_ body: (inout Replica) throws -> LocalEdit) throws -> LocalEdit {
        try body(&replica)
    }

    func saveView() throws {
        for batch in unlogged { try package.merge(batch) }
        unlogged = []
        try package.save()
    }

    func closeStore() { package.close() }
    // Authorship is kept in the package like the real store does (a restart that forgot it
    // left replica ids with operations and no owner, refused to their own writers).
    func loadAuthors() throws -> [ReplicaID: String] { try package.loadAuthors() }
    func bindAuthor(_ replica: ReplicaID, to subject: String) throws { try package.bindAuthor(replica, to: subject) }
}

/// Serves no image bytes: its replica, as the hub sees it, holds none.
final class ImagelessStore: HostedStore {
    let package: BoardPackage

    init(_ package: BoardPackage) {
        self.package = package
    }

    var replica: Replica {
        var replica = package.replica
        replica.assets = AssetStore()
        return replica
    }

    func merge(_ batch: OperationBatch) throws -> Int { try package.merge(batch) }

    func addReceivedAsset(_ data: Data, claimedHash: AssetHash?) throws -> AssetHash {
        try package.addReceivedAsset(data, claimedHash: claimedHash)
    }

    func commitEdit(_ body: (inout Replica) throws -> LocalEdit) throws -> LocalEdit { try package.commit(body) }
    func saveView() throws { try package.save() }
    func closeStore() { package.close() }
    // Authorship is kept in the package like the real store does (a restart that forgot it
    // left replica ids with operations and no owner, refused to their own writers).
    func loadAuthors() throws -> [ReplicaID: String] { try package.loadAuthors() }
    func bindAuthor(_ replica: ReplicaID, to subject: String) throws { try package.bindAuthor(replica, to: subject) }
}

/// Merges with registers that break Lamport ties by arrival order (the package underneath logs
/// durably as usual; the hub serves this store's replica).
final class ArrivalOrderStore: HostedStore {
    let package: BoardPackage
    private(set) var replica: Replica

    init(_ package: BoardPackage) {
        self.package = package
        replica = package.replica
        replica.breaksTiesByArrival = true
    }

    func merge(_ batch: OperationBatch) throws -> Int {
        try package.merge(batch)
        return try replica.apply(batch)
    }

    func addReceivedAsset(_ data: Data, claimedHash: AssetHash?) throws -> AssetHash {
        let hash = try package.addReceivedAsset(data, claimedHash: claimedHash)
        replica.assets.insert(data)
        return hash
    }

    func commitEdit(_ body: (inout Replica) throws -> LocalEdit) throws -> LocalEdit {
        let edit = try package.commit(body)
        try replica.apply(OperationBatch(operations: edit.operations), from: .ownLog)
        return edit
    }

    func saveView() throws { try package.save() }
    func closeStore() { package.close() }
    // Authorship is kept in the package like the real store does (a restart that forgot it
    // left replica ids with operations and no owner, refused to their own writers).
    func loadAuthors() throws -> [ReplicaID: String] { try package.loadAuthors() }
    func bindAuthor(_ replica: ReplicaID, to subject: String) throws { try package.bindAuthor(replica, to: subject) }
}
