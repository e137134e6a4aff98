/// The facts of a PNG file that BoardSync checks before accepting bytes as an image: signature,
/// chunk structure with valid CRCs, an IHDR first and an IEND last.
public struct PNGHeader: Equatable, Sendable {
    public let width: UInt32
    public let height: UInt32
    public let bitDepth: UInt8
    public let colorType: UInt8

    public static let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]

    /// Parses and checks `bytes`; throws `PNGError` naming the first problem.
    public init<Bytes: RandomAccessCollection>(validating bytes: Bytes) throws where Bytes.Element == UInt8, Bytes.Index == Int {
        let data = Array(bytes)
        guard data.count >= 8, Array(data[0..<8]) == PNGHeader.signature else { throw PNGError.notPNG }
        var offset = 8
        var header: (UInt32, UInt32, UInt8, UInt8)?
        var sawEnd = false
        func u32(_ at: Int) -> UInt32 {
            UInt32(data[at]) << 24 | UInt32(data[at + 1]) << 16 | UInt32(data[at + 2]) << 8 | UInt32(data[at + 3])
        }
        while offset < data.count {
            guard !sawEnd else { throw PNGError.dataAfterEnd }
            guard data.count - offset >= 12 else { throw PNGError.truncated }
            let length = Int(u32(offset))
            guard length <= data.count - offset - 12 else { throw PNGError.truncated }
            let typeStart = offset + 4
            let type = String(decoding: data[typeStart..<typeStart + 4], as: UTF8.self)
            let crcStored = u32(typeStart + 4 + length)
            guard CRC32.checksum(data[typeStart..<typeStart + 4 + length]) == crcStored else {
                throw PNGError.badChecksum(chunk: type)
            }
            if header == nil {
                guard type == "IHDR", length == 13 else { throw PNGError.missingHeader }
                let body = typeStart + 4
                header = (u32(body), u32(body + 4), data[body + 8], data[body + 9])
            }
            if type == "IEND" { sawEnd = true }
            offset = typeStart + 4 + length + 4
        }
        guard let header else { throw PNGError.missingHeader }
        guard sawEnd else { throw PNGError.truncated }
        guard header.0 > 0, header.1 > 0 else { throw PNGError.zeroSize }
        (width, height, bitDepth, colorType) = header
    }
}

public enum PNGError: Error, Equatable, CustomStringConvertible {
    case notPNG
    case truncated
    case badChecksum(chunk: String)
    case missingHeader
    case zeroSize
    case dataAfterEnd

    public var description: String {
        switch self {
        case .notPNG: return "not a PNG file (the 8-byte PNG signature is missing)"
        case .truncated: return "the PNG file is truncated"
        case .badChecksum(let chunk): return "the PNG chunk \(chunk) fails its CRC check (the file is damaged)"
        case .missingHeader: return "the PNG file has no IHDR header chunk first"
        case .zeroSize: return "the PNG image has zero width or height"
        case .dataAfterEnd: return "the PNG file has data after its IEND chunk"
        }
    }
}
