// board-sync: the BoardSync command-line tool. See `board-sync --help`.
import BoardStore
import BoardSync
import Foundation

let arguments = Array(CommandLine.arguments.dropFirst())

/// Prints `Error: …` (and for bad usage the command's usage line) to stderr and exits.
func fail(_ message: String, usage: String?, helpTopic: String = "", code: Int32) -> Never {
    // A message may carry what a server or a file said: escaped, it cannot drive the terminal.
    var text = "Error: \(LogText.escaped(message))\n"
    if let usage {
        text += "Usage: board-sync \(usage)\n  See 'board-sync help\(helpTopic.isEmpty ? "" : " " + helpTopic)' for more.\n"
    }
    FileHandle.standardError.write(Data(text.utf8))
    exit(code)
}

guard let first = arguments.first else {
    print(mainHelp)
    exit(0)
}
switch first {
case "-h", "--help":
    print(mainHelp)
    exit(0)
case "--version":
    print("board-sync \(toolVersion)")
    exit(0)
case "help":
    if arguments.count > 1 {
        guard let help = commandHelps[arguments[1]] ?? netHelps[arguments[1]] else {
            fail("unknown subcommand '\(arguments[1])'\(Suggest.didYouMean(arguments[1], among: Array(commandHelps.keys) + Array(netHelps.keys)))", usage: "<subcommand> [options]", code: 64)
        }
        print(help.text)
    } else {
        print(mainHelp)
    }
    exit(0)
default:
    break
}

guard let help = commandHelps[first] ?? netHelps[first] else {
    fail("unknown subcommand '\(first)'\(Suggest.didYouMean(first, among: Array(commandHelps.keys) + Array(netHelps.keys)))", usage: "<subcommand> [options]", code: 64)
}
let rest = Array(arguments.dropFirst())
if rest.contains("--help") || rest.contains("-h") {
    print(help.text)
    exit(0)
}
do {
    if netHelps[first] != nil {
        try NetCommands().run(first, rest)
    } else {
        try Commands().run(first, rest)
    }
} catch let error as UsageError {
    fail(error.message, usage: help.usage, helpTopic: first, code: 64)
} catch let error as Failure {
    fail(error.message, usage: nil, code: 1)
} catch {
    fail("\(error)", usage: nil, code: 1)
}
