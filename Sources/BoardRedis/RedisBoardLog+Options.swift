extension RedisBoardLog {
    public struct Options {
        /// Written with every entry; entries a server wrote itself are not merged again.
        public var node: String
        public var keyPrefix = "bs"
        /// How long one `XREAD` blocks (ms) and how many entries one read or range returns.
        public var blockMilliseconds = 2000
        public var readCount = 512
        /// After an error reply (`-LOADING`, `-OOM`, ...), the command is sent again this much later.
        public var retryDelay = 0.25
        /// A command unanswered this long (s) means the link is dead: the driver drops it.
        public var replyTimeout = 10.0
        /// How long to keep asking Redis for an image another server has not stored yet.
        public var assetWait = 30.0
        /// Images larger than this are stored in chunks of this size (one huge value would hold
        /// up Redis's single thread while it is written or read).
        public var assetChunkBytes = 1 << 20
        /// A server that has seen this many entries of a board since its last checkpoint tries
        /// to write a new one (0: never).
        public var checkpointEvery = 2000
        /// The compaction lease's lifetime (ms): a compactor that stalls longer is fenced off.
        public var leaseMilliseconds = 30_000
        /// Entries this much older (ms) than a checkpoint are trimmed from the stream; servers
        /// that fell further behind reload from the checkpoint.
        public var retentionMilliseconds = 60_000

        public var log: (String) -> Void = { _ in }
        /// Sent first on every link (`AUTH [user] password`) when Redis requires one
        /// (`requirepass`, or an ACL user).
        public var password: String?
        public var user: String?
        /// Authorship is decided here, once for every server (servers with access control):
        /// each hub asks the board's `authors` hash through `authorScript` instead of its own
        /// `sync/authors`, and every append also records its authors in the board's `replicas`
        /// set (`appendScript`), so no replica id with operations in the log can be taken over.
        public var sharesAuthorship = false
        /// How log lines, and clients the server turns away, name this Redis (the driver sets
        /// "Redis at HOST:PORT"). Never holds a password.
        public var redisName = "Redis"
        /// Deleted boards' tombstones live in Redis (`RedisBoardLog+Deletion.swift`): every
        /// board is checked before its catch-up, deletion notices close it (`serve` sets it).
        public var checksTombstones = false
        /// Boards that may be deleted (tombstones kept) at once; beyond, a delete is refused
        /// (`undelete` frees a place). A tombstone is at most ~400 bytes.
        public var maxTombstones = 100_000

        public init(node: String) {
            self.node = node
        }
    }
}

extension RedisBoardLog.Options {
    /// The same options logging nothing (for retries whose cause `storageTrouble` reports).
    static func quiet(_ options: RedisBoardLog.Options) -> RedisBoardLog.Options {
        var quiet = options
        quiet.log = { _ in }
        return quiet
    }
}
