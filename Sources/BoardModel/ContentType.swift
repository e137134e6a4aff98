/// A document content type: the identifier a platform registers and the file extension.
/// Mirrors the seed's UTType use (`.boardPackage`, `.png`, `.pdf`) without depending on it.
public struct ContentType: Hashable, Sendable, CustomStringConvertible {
    public let identifier: String
    public let fileExtension: String
    /// Whether this is an editable (native) format rather than an export.
    public let isNative: Bool

    public init(identifier: String, fileExtension: String, isNative: Bool) {
        self.identifier = identifier
        self.fileExtension = fileExtension
        self.isNative = isNative
    }

    public static let boardPackage = ContentType(identifier: "org.boardsync.board-package", fileExtension: "boardpkg", isNative: true)
    public static let png = ContentType(identifier: "public.png", fileExtension: "png", isNative: false)
    public static let pdf = ContentType(identifier: "com.adobe.pdf", fileExtension: "pdf", isNative: false)
    public static let svg = ContentType(identifier: "public.svg-image", fileExtension: "svg", isNative: false)

    /// Every type a board document can write, native first.
    public static let writable: [ContentType] = [.boardPackage, .png, .pdf, .svg]
    /// Every type a board document can read.
    public static let readable: [ContentType] = [.boardPackage]

    /// The type whose extension `path` ends with (case-insensitive), if any.
    public static func forPath(_ path: String) -> ContentType? {
        let trimmed = path.hasSuffix("/") ? String(path.dropLast()) : path
        guard let dot = trimmed.lastIndex(of: ".") else { return nil }
        let ext = trimmed[trimmed.index(after: dot)...].lowercased()
        return writable.first { $0.fileExtension == ext }
    }

    public var description: String { "\(identifier) (.\(fileExtension))" }
}
