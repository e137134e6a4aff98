import BoardModel
import BoardRender
import BoardStore

// The seed's writer and reader, which a `LiveBoardModel` hands out (and the CLI's export uses
// directly): they route by content type (board packages through BoardStore, exports through
// BoardRender).

/// What a writer is asked to write.
public struct WriteConfiguration: Sendable {
    public var contentType: ContentType
    public var fileSystem: any FileSystem
    /// PNG, PDF and SVG: scale and background (the renderer owns the rest of the policy).
    public var export: ExportPolicy

    public init(contentType: ContentType, fileSystem: any FileSystem = PosixFileSystem(), export: ExportPolicy = ExportPolicy()) {
        self.contentType = contentType
        self.fileSystem = fileSystem
        self.export = export
    }
}

/// What a reader is asked to read.
public struct ReadConfiguration: Sendable {
    public var contentType: ContentType
    public var fileSystem: any FileSystem

    public init(contentType: ContentType, fileSystem: any FileSystem = PosixFileSystem()) {
        self.contentType = contentType
        self.fileSystem = fileSystem
    }
}

/// Does the disk work of a save, away from the document: routes by content type.
public struct BoardWriter: Sendable {
    public let configuration: WriteConfiguration

    public init(configuration: WriteConfiguration) {
        self.configuration = configuration
    }

    /// Writes `content` to `destination`. For a board package only changed assets are written
    /// (`previous` is a hint, never proof). PNG, PDF and SVG exports are rendered whole
    /// (`BoardRender`, with `configuration.export`) and replace `destination` atomically; what
    /// had to be drawn as a placeholder is in the report's `warnings`.
    @discardableResult
    public func write(content: BoardSnapshot, to destination: String, previous: BoardSnapshot?,
                      progress: (PackageWriter.Progress) -> Void = { _ in }) throws -> PackageWriter.Report {
        let rendering: Rendering
        switch configuration.contentType {
        case .boardPackage:
            return try PackageWriter(fileSystem: configuration.fileSystem)
                .write(content, to: destination, previous: previous, progress: progress)
        case .png: rendering = try PNGRenderer.render(content, policy: configuration.export)
        case .pdf: rendering = try PDFRenderer.render(content, policy: configuration.export)
        case .svg: rendering = try SVGRenderer.render(content, policy: configuration.export)
        default:
            throw StoreError.unsupportedContentType(configuration.contentType.description)
        }
        if configuration.fileSystem.isDirectory(destination) {
            throw StoreError.writeFailed(path: destination, "it is a folder; an export is a single file")
        }
        try configuration.fileSystem.writeAtomically(destination, rendering.bytes)
        var report = PackageWriter.Report()
        report.written = [destination]
        report.warnings = rendering.warnings
        return report
    }
}

/// Does the disk work of a load.
public struct BoardReader: Sendable {
    public let configuration: ReadConfiguration

    public func read(from source: String) throws -> BoardSnapshot {
        guard configuration.contentType == .boardPackage else {
            throw StoreError.unsupportedContentType(configuration.contentType.description)
        }
        return try PackageReader(fileSystem: configuration.fileSystem).read(source)
    }
}
