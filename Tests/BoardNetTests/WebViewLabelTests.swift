import BoardCRDT
import BoardModel
import BoardNet
import BoardStore
import BoardSync
import Foundation
import Testing

/// The time slider's listing names the versions labels name (WebView+History.swift): a label
/// made on a package reaches the server by sync, and a page asking for the history gets it with
/// the number of the version it names.
@Suite(.serialized) struct WebViewLabelTests {
    @Test func theVersionsListingCarriesTheLabels() throws {
        let fixture = try WebFixture()
        defer { fixture.stop() }
        let (temp, server) = (fixture.temp, fixture.server)
        var (a, _) = try WebViewTests.sticker(temp, server)
        defer { a.close() }
        let version = a.replica.versionVector
        _ = try a.commit { try $0.setLabel(text: "Only the “sticker”", version: version, time: 1) }
        try syncOnce(&a, board: "team", server: server.address, timeout: 20)
        let page = try fixture.page()
        #expect(page.upgrade("/ws/team")?.status == 101)
        page.say("{\"type\":\"history\"}")
        let listing = try #require(page.message(type: "versions"))
        let labels = try #require(listing["labels"] as? [[String: Any]], "\(listing)")
        #expect(labels.count == 1 && labels.first?["text"] as? String == "Only the “sticker”", "\(listing)")
        #expect(labels.first?["n"] as? Int == 1, "the version the label names, as the server's history numbers it: \(listing)")
    }
}
