// The libFuzzer entry point, compiled by bin/fuzz (not part of the package): libFuzzer supplies
// `main` and calls this once per input. The target comes from BOARDSYNC_FUZZ_TARGET; with
// BOARDSYNC_FUZZ_SEEDS=DIR the target's generated seeds are written into DIR first.
import BoardFuzz
#if canImport(Glibc)
import Glibc
#endif

let fuzzTarget: String = {
    guard let name = getenv("BOARDSYNC_FUZZ_TARGET").map({ String(cString: $0) }), FuzzTargets.names.contains(name) else {
        fputs("set BOARDSYNC_FUZZ_TARGET to one of: \(FuzzTargets.names.joined(separator: ", "))\n", stderr)
        exit(64)
    }
    return name
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let bytes = size == 0 || data == nil ? [] : Array(UnsafeBufferPointer(start: data, count: size))
    FuzzTargets.run(fuzzTarget, bytes)
    return 0
}

@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutablePointer<Int32>?, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?) -> Int32 {
    if let directory = getenv("BOARDSYNC_FUZZ_SEEDS").map({ String(cString: $0) }) {
        do {
            try FuzzTargets.writeSeeds(fuzzTarget, to: directory)
        } catch {
            fputs("cannot write seeds to \(directory): \(error)\n", stderr)
            exit(1)
        }
    }
    return 0
}
