import BoardModel
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A web page edits as a light author on its server's replica of the board; with several
/// servers sharing Redis its edit goes into the shared log like a peer's, so a replica syncing
/// through the other server gets it. Skipped, loudly, where no `redis-server` exists.
@Suite(.serialized) struct RedisWebTests {
    /// A page's WebSocket, as little of one as the test needs: the upgrade, and masked text.
    struct Page {
        let fd: Int32

        init(_ address: String, path: String) throws {
            let parts = address.split(separator: ":")
            fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var to = sockaddr_in()
            to.sin_family = sa_family_t(AF_INET)
            to.sin_port = UInt16(try #require(UInt16(parts[1]))).bigEndian
            to.sin_addr.s_addr = inet_addr(String(parts[0]))
            let connected = withUnsafePointer(to: &to) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            try #require(connected == 0, "connect to \(address)")
            var timeout = timeval(tv_sec: 10, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            write("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
            var head = [UInt8]()
            var byte: UInt8 = 0
            while !head.suffix(4).elementsEqual([13, 10, 13, 10]), read(fd, &byte, 1) == 1 { head.append(byte) }
            let status = String(decoding: head, as: UTF8.self)
            try #require(status.hasPrefix("HTTP/1.1 101"), "upgrade answered: \(status)")
        }

        func write(_ text: String) {
            let bytes = Array(text.utf8)
            _ = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        }

        /// One masked text frame (payloads under 64 KiB).
        func say(_ text: String) {
            let payload = Array(text.utf8)
            let mask: [UInt8] = [0x37, 0xFA, 0x21, 0x3D]
            var frame: [UInt8] = [0x81]
            if payload.count < 126 {
                frame.append(0x80 | UInt8(payload.count))
            } else {
                frame += [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
            }
            frame += mask
            frame += payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
            _ = frame.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        }

        func close() { Glibc.close(fd) }
    }

    @Test func aPagesEditOnOneServerReachesAReplicaOnTheOther() throws {
        if RedisClusterTests.skipped() { return }
        let workspace = try Workspace()
        let redis = try RedisProcess(in: workspace.path)
        let one = try Daemon(["serve", "--data", "one", "--listen", "127.0.0.1:0", "--web", "127.0.0.1:0",
                              "--redis", redis.address, "--node-id", "one"], in: workspace.path)
        let addressOne = try #require(one.listeningAddress(), "\(one.log)")
        let (two, addressTwo) = try RedisClusterTests.server(workspace, "two", redis: redis, node: "two")
        let web = try #require(one.waitFor("web view at http://"), "\(one.log)")
        let url = try #require(web.components(separatedBy: "web view at http://").last?.split(separator: " ").first.map(String.init))
        let host = String(url.prefix { $0 != "/" })
        let token = try #require(url.components(separatedBy: "?token=").last)

        let cli = workspace.cli
        try cli.run("new", "A.boardpkg")
        try cli.run("sticker", "A.boardpkg", "--image", "red.png", "--at", "10,10")
        #expect(try cli.run("sync", "A.boardpkg", "--server", addressOne, "--board", "team").status == 0)
        let page = try Page(host, path: "/ws/team?token=\(token)")
        defer { page.close() }
        page.say("{\"type\":\"stroke\",\"points\":[5,5,50,60,90,20],\"color\":\"#3355aaff\",\"width\":4}")
        // A sticker from the page: its image goes into the shared log too.
        let blue = Data(PNGEncoder.solid(width: 6, height: 5, red: 0, green: 0, blue: 255))
        page.say("{\"type\":\"sticker\",\"png\":\"\(blue.base64EncodedString())\",\"x\":70,\"y\":80}")

        try cli.run("new", "C.boardpkg")
        var strokes = 0
        var images: [Data] = []
        for _ in 0..<100 {
            let sync = try cli.run("sync", "C.boardpkg", "--server", addressTwo, "--board", "team")
            #expect(sync.status == 0, "\(sync.stderr)")
            if sync.status != 0 { break }
            let board = try workspace.board("C.boardpkg")
            strokes = board.strokes.count
            images = board.stickers.compactMap { FileManager.default.contents(atPath: workspace.path + "/C.boardpkg/stickers/\($0.id.uuidString).png") }
            if strokes == 1, images.contains(blue) { break }
            usleep(100_000)
        }
        #expect(strokes == 1, "the page's stroke, made on server one, reached C through server two: \(one.log)")
        #expect(images.contains(blue), "and the page's sticker with its image")
        let stroke = try #require(try workspace.board("C.boardpkg").strokes.first)
        #expect(stroke.points.count == 3 && stroke.width == 4)
        // The page's operations are its own replica's, neither the server's nor A's.
        let shown = try cli.run("show", "C.boardpkg", "--json").stdout
        #expect(shown.contains(stroke.id.uuidString))
        #expect(one.terminate() == 0 && two.terminate() == 0)
    }
}
