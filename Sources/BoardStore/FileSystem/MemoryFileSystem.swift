import Synchronization

/// An in-memory file system that models POSIX durability, for tests and simulations: it records
/// every mutating call, can "crash" at any chosen step, and on `restart` keeps only what a real
/// machine would have kept.
///
/// Model: file data becomes durable at `syncFile`; a name created, renamed or removed becomes
/// durable at `syncDirectory` of its parent. Directories themselves are durable once created (a
/// simplification: BoardSync fsyncs a parent after creating a directory anyway). After the crash
/// step every call throws `FileSystemError.crashed` until `restart(_:)`.
public final class MemoryFileSystem: FileSystem {
    public enum Operation: String, Sendable {
        case write, append, truncate, syncFile, syncDirectory, rename, remove, createDirectory
    }

    /// One mutating call, in order.
    public struct Event: Equatable, Sendable, CustomStringConvertible {
        public let operation: Operation
        public let path: String
        public var description: String { "\(operation.rawValue) \(path)" }
    }

    /// What survives a crash.
    public enum CrashKind: Sendable {
        /// The process died; the kernel kept every write, synced or not.
        case processCrash
        /// The machine lost power: unsynced data and names are lost. With `tornTail`, a file
        /// whose unsynced data extended its synced data keeps a prefix of the extension (half,
        /// rounded down), as a torn write would.
        case powerLoss(tornTail: Bool)
    }

    private struct Inode {
        var data: [UInt8]
        var durable: [UInt8]
    }

    private struct State {
        var inodes: [Int: Inode] = [:]
        var nextInode = 1
        var names: [String: Int] = [:]
        var durableNames: [String: Int] = [:]
        var directories: [String: Int] = [:]
        var steps = 0
        var crashAtStep: Int?
        var tornWriteAtCrash = false
        var crashed = false
        var journal: [Event] = []
        var locks: Set<String> = []
        var capacity: Int?
    }

    private let state: Mutex<State>

    public init() {
        var initial = State()
        initial.directories["/"] = 0
        initial.directories["."] = 0
        state = Mutex(initial)
    }

    // MARK: Fault injection and inspection

    /// Crash when the `step`-th mutating call from now is made (1 = the next call). With
    /// `tornWrite`, a write or append that is the crash step leaves half its bytes behind.
    public func crash(atStep step: Int, tornWrite: Bool = false) {
        state.withLock {
            $0.crashAtStep = $0.steps + step
            $0.tornWriteAtCrash = tornWrite
        }
    }

    /// Models a full disk: file data may total at most `bytes` (nil: unlimited). A write or
    /// append that does not fit stores the part that fits, then throws ENOSPC, as a real one can.
    public func setCapacity(_ bytes: Int?) {
        state.withLock { $0.capacity = bytes }
    }

    /// Whether the injected crash has happened.
    public var hasCrashed: Bool { state.withLock { $0.crashed } }

    /// Brings the file system back after a crash (or simulates one now), keeping what `kind` says
    /// survives.
    public func restart(_ kind: CrashKind) {
        state.withLock { s in
            switch kind {
            case .processCrash:
                break
            case .powerLoss(let torn):
                s.names = s.durableNames
                for (number, inode) in s.inodes {
                    var kept = inode.durable
                    if torn, inode.data.count > inode.durable.count, inode.data.starts(with: inode.durable) {
                        let extra = inode.data.count - inode.durable.count
                        kept += inode.data[inode.durable.count..<(inode.durable.count + extra / 2)]
                    }
                    s.inodes[number] = Inode(data: kept, durable: inode.durable)
                }
            }
            let live = Set(s.names.values)
            s.inodes = s.inodes.filter { live.contains($0.key) }
            s.crashed = false
            s.crashAtStep = nil
            s.locks = []
        }
    }

    /// Every mutating call since the last `resetJournal()`.
    public var journal: [Event] { state.withLock { $0.journal } }

    public func resetJournal() {
        state.withLock { $0.journal = [] }
    }

    /// Mutating calls made so far (the numbering `crash(atStep:)` uses).
    public var stepCount: Int { state.withLock { $0.steps } }

    /// Copies a directory tree to a new place with new identities, as `cp -R` would. Synced.
    public func copyTree(_ from: String, to: String) {
        state.withLock { s in
            let prefix = from.hasSuffix("/") ? from : from + "/"
            for (dir, _) in s.directories where dir == from || dir.hasPrefix(prefix) {
                let target = to + dir.dropFirst(from.count)
                s.directories[target] = s.nextInode
                s.nextInode += 1
            }
            for (name, number) in s.names where name.hasPrefix(prefix) {
                let target = to + name.dropFirst(from.count)
                let data = s.inodes[number]!.data
                s.inodes[s.nextInode] = Inode(data: data, durable: data)
                s.names[target] = s.nextInode
                s.durableNames[target] = s.nextInode
                s.nextInode += 1
            }
        }
    }

    /// Overwrites bytes in place without going through the journal, to simulate damage.
    public func corrupt(_ path: String, _ transform: ([UInt8]) -> [UInt8]) {
        state.withLock { s in
            guard let number = s.names[path] else { return }
            let data = transform(s.inodes[number]!.data)
            s.inodes[number] = Inode(data: data, durable: data)
        }
    }

    // MARK: FileSystem

    public func readFile(_ path: String) throws -> [UInt8] {
        try state.withLock { s in
            try alive(s, path)
            guard let number = s.names[path] else { throw FileSystemError.notFound(path) }
            return s.inodes[number]!.data
        }
    }

    public func fileSize(_ path: String) throws -> Int? {
        try state.withLock { s in
            try alive(s, path)
            return s.names[path].map { s.inodes[$0]!.data.count }
        }
    }

    public func isDirectory(_ path: String) -> Bool {
        state.withLock { $0.directories[path] != nil }
    }

    public func listDirectory(_ path: String) throws -> [String] {
        try state.withLock { s in
            try alive(s, path)
            guard s.directories[path] != nil else { throw FileSystemError.notFound(path) }
            let names = s.names.keys.filter { Path.parent(of: $0) == path }
                + s.directories.keys.filter { $0 != path && Path.parent(of: $0) == path }
            return names.map { Path.name(of: $0) }.sorted()
        }
    }

    public func createDirectory(_ path: String) throws {
        try mutate(.createDirectory, path) { s in
            if s.directories[path] != nil { return }
            guard s.directories[Path.parent(of: path)] != nil else { throw FileSystemError.notFound(Path.parent(of: path)) }
            guard s.names[path] == nil else { throw FileSystemError(.exists, path: path, "a file is in the way") }
            s.directories[path] = s.nextInode
            s.nextInode += 1
        }
    }

    public func writeFile(_ path: String, _ bytes: [UInt8]) throws {
        try mutate(.write, path, torn: { s in self.store(&s, path, Array(bytes.prefix(bytes.count / 2)), append: false) }) { s in
            try self.checkParent(s, path)
            let old = s.names[path].map { s.inodes[$0]!.data.count } ?? 0
            let room = self.room(s) &+ old
            self.store(&s, path, Array(bytes.prefix(room)), append: false)
            if bytes.count > room { throw FileSystemError(.io, path: path, "write: No space left on device (errno 28)") }
        }
    }

    public func appendFile(_ path: String, _ bytes: [UInt8]) throws {
        try mutate(.append, path, torn: { s in self.store(&s, path, Array(bytes.prefix(bytes.count / 2)), append: true) }) { s in
            try self.checkParent(s, path)
            let room = self.room(s)
            self.store(&s, path, Array(bytes.prefix(room)), append: true)
            if bytes.count > room { throw FileSystemError(.io, path: path, "write: No space left on device (errno 28)") }
        }
    }

    /// Bytes that still fit under the capacity.
    private func room(_ s: State) -> Int {
        guard let capacity = s.capacity else { return Int.max / 2 }
        let live = Set(s.names.values)
        let used = s.inodes.reduce(0) { $0 + (live.contains($1.key) ? $1.value.data.count : 0) }
        return max(0, capacity - used)
    }

    public func truncateFile(_ path: String, to size: Int) throws {
        try mutate(.truncate, path) { s in
            guard let number = s.names[path] else { throw FileSystemError.notFound(path) }
            s.inodes[number]!.data = Array(s.inodes[number]!.data.prefix(size))
        }
    }

    public func syncFile(_ path: String) throws {
        try mutate(.syncFile, path) { s in
            guard let number = s.names[path] else { throw FileSystemError.notFound(path) }
            s.inodes[number]!.durable = s.inodes[number]!.data
        }
    }

    public func syncDirectory(_ path: String) throws {
        try mutate(.syncDirectory, path) { s in
            guard s.directories[path] != nil else { throw FileSystemError.notFound(path) }
            // Every name in the directory, as it is now, becomes durable (new, renamed or removed).
            for name in s.durableNames.keys where s.names[name] == nil && Path.isEntry(name, of: path) {
                s.durableNames[name] = nil
            }
            for (name, number) in s.names where s.durableNames[name] != number && Path.isEntry(name, of: path) {
                s.durableNames[name] = number
            }
        }
    }

    public func rename(_ from: String, _ to: String) throws {
        try mutate(.rename, from) { s in
            if s.directories[from] != nil {
                // A directory moves with everything under it (modelled as durable at once).
                guard s.directories[to] == nil, s.names[to] == nil else { throw FileSystemError(.exists, path: to, "rename: target exists") }
                let prefix = from + "/"
                func moved(_ name: String) -> String { to + name.dropFirst(from.count) }
                for (dir, number) in s.directories where dir == from || dir.hasPrefix(prefix) {
                    s.directories[dir] = nil
                    s.directories[moved(dir)] = number
                }
                for (name, number) in s.names where name.hasPrefix(prefix) {
                    s.names[name] = nil
                    s.names[moved(name)] = number
                }
                for (name, number) in s.durableNames where name.hasPrefix(prefix) {
                    s.durableNames[name] = nil
                    s.durableNames[moved(name)] = number
                }
                return
            }
            guard let number = s.names[from] else { throw FileSystemError.notFound(from) }
            try self.checkParent(s, to)
            s.names[from] = nil
            s.names[to] = number
        }
    }

    public func removeFile(_ path: String) throws {
        try mutate(.remove, path) { s in
            s.names[path] = nil
        }
    }

    public func identity(of path: String) throws -> String? {
        try state.withLock { s in
            try alive(s, path)
            if let dir = s.directories[path] { return "d\(dir)" }
            return s.names[path].map { "f\($0)" }
        }
    }

    public func lock(_ path: String) throws -> FileLock {
        try state.withLock { s in
            try alive(s, path)
            guard s.locks.insert(path).inserted else {
                throw FileSystemError(.locked, path: path, "locked by another holder")
            }
        }
        return MemoryFileLock(fileSystem: self, path: path)
    }

    fileprivate func unlock(_ path: String) {
        state.withLock { _ = $0.locks.remove(path) }
    }

    // MARK: Helpers

    private func alive(_ s: State, _ path: String) throws {
        if s.crashed { throw FileSystemError(.crashed, path: path, "simulated crash") }
    }

    private func checkParent(_ s: State, _ path: String) throws {
        guard s.directories[Path.parent(of: path)] != nil else { throw FileSystemError.notFound(Path.parent(of: path)) }
    }

    private func store(_ s: inout State, _ path: String, _ bytes: [UInt8], append: Bool) {
        if let number = s.names[path] {
            if append { s.inodes[number]!.data += bytes } else { s.inodes[number]!.data = bytes }
        } else {
            s.inodes[s.nextInode] = Inode(data: bytes, durable: [])
            s.names[path] = s.nextInode
            s.nextInode += 1
        }
    }

    private func mutate(_ operation: Operation, _ path: String, torn: ((inout State) -> Void)? = nil,
                        _ body: (inout State) throws -> Void) throws {
        try state.withLock { s in
            try alive(s, path)
            s.steps += 1
            if let crashAt = s.crashAtStep, s.steps >= crashAt {
                s.crashed = true
                if s.tornWriteAtCrash, let torn, (try? checkParent(s, path)) != nil { torn(&s) }
                throw FileSystemError(.crashed, path: path, "simulated crash at step \(s.steps) (\(operation.rawValue))")
            }
            try body(&s)
            s.journal.append(Event(operation: operation, path: path))
        }
    }
}

final class MemoryFileLock: FileLock {
    private let fileSystem: MemoryFileSystem
    private let path: String
    private let released = Atomic<Bool>(false)

    init(fileSystem: MemoryFileSystem, path: String) {
        self.fileSystem = fileSystem
        self.path = path
    }

    func release() {
        if !released.exchange(true, ordering: .relaxed) {
            fileSystem.unlock(path)
        }
    }

    deinit { release() }
}
