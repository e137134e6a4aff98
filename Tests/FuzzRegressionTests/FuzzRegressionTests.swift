import BoardFuzz
import Foundation
import Testing

/// Every committed fuzz input (`Fuzz/Corpus/<target>/`: each crash libFuzzer ever found, kept
/// after its fix) and every generated seed, through its target. A target traps on a broken
/// property, so a regression fails this run.
@Suite struct FuzzRegressionTests {
    static let corpus = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fuzz/Corpus")

    @Test(arguments: FuzzTargets.names)
    func committedInputsAndSeedsPass(_ target: String) throws {
        let directory = Self.corpus.appendingPathComponent(target)
        let files = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        for file in files.sorted() {
            let bytes = try [UInt8](Data(contentsOf: directory.appendingPathComponent(file)))
            FuzzTargets.run(target, bytes)
        }
        let seeds = FuzzTargets.seeds(target)
        #expect(!seeds.isEmpty)
        for seed in seeds { FuzzTargets.run(target, seed) }
    }

    /// The seeds are real inputs, not inputs every target rejects at once: each decodes.
    @Test func seedsAreValidInputs() throws {
        for seed in FuzzTargets.seeds("operations") {
            #expect(FuzzTargets.accepts("operations", seed))
        }
        for seed in FuzzTargets.seeds("frame") { #expect(FuzzTargets.accepts("frame", seed)) }
        for seed in FuzzTargets.seeds("linked") { #expect(FuzzTargets.accepts("linked", seed)) }
        for seed in FuzzTargets.seeds("session") { #expect(FuzzTargets.accepts("session", seed)) }
        for seed in FuzzTargets.seeds("oplog").prefix(1) { #expect(FuzzTargets.accepts("oplog", seed)) }
        for seed in FuzzTargets.seeds("manifest") { #expect(FuzzTargets.accepts("manifest", seed)) }
        for seed in FuzzTargets.seeds("png") { #expect(FuzzTargets.accepts("png", seed)) }
        for seed in FuzzTargets.seeds("http") { #expect(FuzzTargets.accepts("http", seed)) }
        for seed in FuzzTargets.seeds("websocket") { #expect(FuzzTargets.accepts("websocket", seed)) }
        for seed in FuzzTargets.seeds("resp") { #expect(FuzzTargets.accepts("resp", seed)) }
        #expect(!FuzzTargets.accepts("websocket", [0x81, 0x01, 65]), "an unmasked frame fails")
        #expect(!FuzzTargets.accepts("png", Array(FuzzTargets.seeds("png")[1].dropLast(20))))
        #expect(!FuzzTargets.accepts("operations", [0xFF, 0x00]))
        #expect(!FuzzTargets.accepts("linked", [1, 0, 3]), "a linked batch with no operation fails")
        #expect(!FuzzTargets.accepts("manifest", Array("{".utf8)))
    }
}
