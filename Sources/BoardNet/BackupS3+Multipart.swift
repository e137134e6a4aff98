import BoardModel
import Foundation

/// Objects above `limits.multipartThreshold` go up as an S3 multipart upload: parts of
/// `limits.partBytes`, each read from the file, hashed (its SigV4 payload hash) and sent on its
/// own, so one part at most is in memory and a part's request has the whole `--backup-timeout`;
/// the object appears only when the completion names every part (atomic, as one PUT is). A
/// failed upload is aborted so the store keeps no stray parts. (docs/DEPLOYMENT.md, "Backups",
/// says why parts and not one streamed PUT.)
extension S3BackupTarget {
    /// Parts one upload may have (S3's bound).
    public static let maxParts = 10_000

    public func put(_ key: String, from source: BackupReader) throws {
        guard source.count > limits.multipartThreshold else {
            return try put(key, try source.read(0, source.count))
        }
        try putInParts(key, source)
    }

    func putInParts(_ key: String, _ source: BackupReader) throws {
        let partBytes = max(1, limits.partBytes)
        guard (source.count + partBytes - 1) / partBytes <= Self.maxParts else {
            throw BackupTooLarge(what: "object \(key)", bytes: source.count, limit: partBytes * Self.maxParts, bound: "partBytes (times S3's 10,000 parts)")
        }
        let created = try send("POST", key: key, query: [("uploads", "")])
        guard created.status == 200 else { throw failure("POST (start a multipart upload)", key, created) }
        guard let uploadID = Self.element("UploadId", in: String(decoding: created.body, as: UTF8.self)).first, !uploadID.isEmpty,
              uploadID.utf8.count <= 1024 else {
            throw BackupError("S3 POST \(prefix + key)?uploads: the answer names no UploadId")
        }
        do {
            var etags: [String] = []
            var offset = 0
            while offset < source.count {
                let part = try source.read(offset, min(partBytes, source.count - offset))
                let number = etags.count + 1
                let response = try send("PUT", key: key, query: [("partNumber", String(number)), ("uploadId", uploadID)], body: part)
                guard response.status == 200 else { throw failure("PUT (part \(number))", key, response) }
                guard let etag = response.headers["etag"], !etag.isEmpty, etag.utf8.count <= 1024 else {
                    throw BackupError("S3 PUT \(prefix + key) part \(number): the answer has no ETag")
                }
                etags.append(etag)
                offset += part.count
            }
            var xml = "<CompleteMultipartUpload>"
            for (index, etag) in etags.enumerated() {
                xml += "<Part><PartNumber>\(index + 1)</PartNumber><ETag>\(Self.xmlEscaped(etag))</ETag></Part>"
            }
            xml += "</CompleteMultipartUpload>"
            let done = try send("POST", key: key, query: [("uploadId", uploadID)], body: Array(xml.utf8))
            // S3 may answer 200 and still fail the completion (the error is then in the body).
            guard done.status == 200, !String(decoding: done.body, as: UTF8.self).contains("<Error>") else {
                throw failure("POST (complete the multipart upload)", key, done)
            }
        } catch {
            _ = try? send("DELETE", key: key, query: [("uploadId", uploadID)])  // abort: no stray parts kept (and billed)
            throw error
        }
    }

    static func xmlEscaped(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }
}
