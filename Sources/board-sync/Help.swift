/// Help texts in swift-argument-parser's layout: OVERVIEW, USAGE, ARGUMENTS, OPTIONS.
struct CommandHelp {
    let name: String
    let overview: String
    let usage: String
    var arguments: [(String, String)] = []
    var options: [(String, String)] = []

    var text: String {
        var lines = ["OVERVIEW: \(overview)", "", "USAGE: board-sync \(usage)"]
        // A name too long for the column gets a line of its own (padding would cut it).
        func entry(_ item: (String, String)) -> String {
            item.0.count < 24 ? "  \(item.0.padding(toLength: 24, withPad: " ", startingAt: 0)) \(item.1)"
                              : "  \(item.0)\n  \(String(repeating: " ", count: 24)) \(item.1)"
        }
        if !arguments.isEmpty {
            lines += ["", "ARGUMENTS:"] + arguments.map(entry)
        }
        lines += ["", "OPTIONS:"] + (options + [("-h, --help", "Show help information.")]).map(entry)
        return lines.joined(separator: "\n")
    }
}

let packageArgument = ("<package>", "The board package directory (NAME.boardpkg).")
let idArgument = ("<id>", "The item's id, a UUID exactly as `show` prints it.")
let jsonOption = ("--json", "Print the result as JSON for scripts.")

let commandHelps: [String: CommandHelp] = [
    "new": CommandHelp(name: "new", overview: "Create a new, empty board package.",
                       usage: "new <package> [--canvas WxH] [--background FILE.png] [--json]",
                       arguments: [packageArgument],
                       options: [("--canvas WxH", "Canvas size in points (default 1600x1200)."),
                                 ("--background FILE.png", "A PNG photo for the background."), jsonOption]),
    "stroke": CommandHelp(name: "stroke", overview: "Draw a stroke on top of the board and print its id.",
                          usage: "stroke <package> --points \"X,Y X,Y ...\" [--color #RRGGBBAA] [--width W] [--json]",
                          arguments: [packageArgument],
                          options: [("--points \"X,Y ...\"", "The stroke's points, separated by spaces."),
                                    ("--color #RRGGBB[AA]", "Ink colour (default #000000FF)."),
                                    ("--width W", "Line width in points (default 2)."), jsonOption]),
    "sticker": CommandHelp(name: "sticker", overview: "Place a PNG image on top of the board and print its id.",
                           usage: "sticker <package> --image FILE.png --at X,Y [--scale S] [--rotation RADIANS] [--json]",
                           arguments: [packageArgument],
                           options: [("--image FILE.png", "The sticker's image."), ("--at X,Y", "Where its centre goes."),
                                     ("--scale S", "Scale factor (default 1)."), ("--rotation RADIANS", "Rotation (default 0)."), jsonOption]),
    "move": CommandHelp(name: "move", overview: "Move a sticker.", usage: "move <package> <id> --to X,Y [--json]",
                        arguments: [packageArgument, idArgument], options: [("--to X,Y", "The sticker's new centre."), jsonOption]),
    "transform": CommandHelp(name: "transform", overview: "Scale and/or rotate a sticker.",
                             usage: "transform <package> <id> [--scale S] [--rotation RADIANS] [--json]",
                             arguments: [packageArgument, idArgument],
                             options: [("--scale S", "New scale factor."), ("--rotation RADIANS", "New rotation."), jsonOption]),
    "image": CommandHelp(name: "image", overview: "Replace a sticker's image (it keeps its place, scale and rotation).",
                         usage: "image <package> <id> --image FILE.png [--json]", arguments: [packageArgument, idArgument],
                         options: [("--image FILE.png", "The new image."), jsonOption]),
    "style": CommandHelp(name: "style", overview: "Change a stroke's colour and/or width (one undo step).",
                         usage: "style <package> <id> [--color #RRGGBBAA] [--width W] [--json]", arguments: [packageArgument, idArgument],
                         options: [("--color #RRGGBB[AA]", "The new ink colour."), ("--width W", "The new line width in points."), jsonOption]),
    "canvas": CommandHelp(name: "canvas", overview: "Resize the board's canvas.",
                          usage: "canvas <package> --size WxH [--json]", arguments: [packageArgument],
                          options: [("--size WxH", "The new canvas size in points."), jsonOption]),
    "background": CommandHelp(name: "background", overview: "Set or clear the board's background image.",
                              usage: "background <package> (--image FILE.png | --none) [--json]", arguments: [packageArgument],
                              options: [("--image FILE.png", "The new background."), ("--none", "No background image."), jsonOption]),
    "between": CommandHelp(name: "between", overview: "Paint an item just above one item and below another.",
                           usage: "between <package> <id> --above ID --below ID [--json]", arguments: [packageArgument, idArgument],
                           options: [("--above ID", "The item it goes above."), ("--below ID", "The item it goes below."), jsonOption]),
    "delete": CommandHelp(name: "delete", overview: "Erase a stroke or delete a sticker (restore brings it back).",
                          usage: "delete <package> <id> [--json]", arguments: [packageArgument, idArgument], options: [jsonOption]),
    "restore": CommandHelp(name: "restore", overview: "Bring back an erased stroke or deleted sticker with every edit merged meanwhile; with --from, restore a server's backups into a data directory.",
                           usage: "restore <package> <id> [--json]\n       board-sync restore --from DIR|s3://BUCKET/PREFIX --data DIR [--board NAME]... [--force] [--json]",
                           arguments: [packageArgument, idArgument], options: [jsonOption] + ServeBackup.restoreHelp),
    "front": CommandHelp(name: "front", overview: "Bring an item to the front.", usage: "front <package> <id> [--json]",
                         arguments: [packageArgument, idArgument], options: [jsonOption]),
    "back": CommandHelp(name: "back", overview: "Send an item to the back.", usage: "back <package> <id> [--json]",
                        arguments: [packageArgument, idArgument], options: [jsonOption]),
    "undo": CommandHelp(name: "undo", overview: "Undo this package's most recent edit (its own edits only, across invocations).",
                        usage: "undo <package> [--json]", arguments: [packageArgument], options: [jsonOption]),
    "redo": CommandHelp(name: "redo", overview: "Redo the most recently undone edit.", usage: "redo <package> [--json]",
                        arguments: [packageArgument], options: [jsonOption]),
    "show": CommandHelp(name: "show", overview: "Show the board: canvas, background, strokes and stickers in paint order.",
                        usage: "show <package> [--json]", arguments: [packageArgument],
                        options: [("--json", "Print the canonical snapshot as JSON, shaped like manifest.json.")]),
    "export": CommandHelp(name: "export", overview: "Render the board to a PNG, PDF or SVG file a person can look at.",
                          usage: "export <package> <output.png|output.pdf|output.svg> [--scale S] [--transparent] [--at V] [--json]",
                          arguments: [packageArgument, ("<output>", "The file to write; its extension picks the format. Replaced atomically.")],
                          options: [("--scale S", "Pixels (PNG) or points (PDF, SVG) per board point (default 1, at most 64)."),
                                    ("--transparent", "Leave the paper transparent instead of white where no background image covers it."),
                                    ("--at V", "Draw the board as it was at a version of its history (see `history`)."),
                                    ("--json", "Print what was written (and any warnings) as JSON.")]),
    "log": CommandHelp(name: "log", overview: "List the board's whole history: every operation the package recorded, including those compaction archived, oldest first, each with the time its record was saved (by this package's clock; metadata only, never used to decide a conflict), the version that first holds it, and Lamport@author, the author's sequence number and the operation. Operations overwritten before this package heard of them are not in its history (peers send only what survives); after `history prune`, the board at the horizon stands for what came before.",
                       usage: "log <package> [--json]", arguments: [packageArgument],
                       options: [("--json", "Print the operations as a JSON array: each one's fields, with `author`, `time` (ISO 8601, null when not known), `timeMilliseconds` and `version` (a number of `history list`).")]),
    "history": CommandHelp(name: "history", overview: "See the board's history: list its versions, show or diff versions, restore one as a new undoable edit, name versions with labels that travel to every replica; read the history a server holds.",
                           usage: "history list <package> [--gap MINUTES] [--json] | history show <package> --at V [--json] | history diff <package> V1 V2 [--json] | history restore <package> V [--json] | history fork <package> V <new package> [--json] | history prune <package> --before V [--json] | history label <package> V TEXT [--json] | history label <package> --rename ID TEXT | history label <package> --delete ID | history list --server HOST:PORT --board NAME [--token T | --token-file F] [--tls] [--json] | history show --server HOST:PORT --board NAME --at N|latest [--token T | --token-file F] [--json]",
                           arguments: [("list", "Every version (the state after each saved record), grouped into editing sessions, with its time, authors, operation count and vector."),
                                       ("show", "The board as it was at a version (as `show` prints the present)."),
                                       ("diff", "Items added, changed and removed from version V1 to V2, and canvas, background and paint-order changes."),
                                       ("restore", "Set the board back to version V with ordinary new operations, one undo step (`undo` takes it back); points appended to a stroke since V stay."),
                                       ("fork", "Write a new package (a new replica id) holding the board as it was at version V; its history starts there."),
                                       ("prune", "Drop the history before version V (the board at V is kept as where the history starts); the board and sync are untouched."),
                                       ("label", "Name version V with TEXT (at most 200 bytes of UTF-8, no control characters; at most 1,000 labels a board): an ordinary operation that sync sends to every replica and that never changes the board; `--rename ID TEXT` and `--delete ID` change one (ID as `list` shows it, REPLICA#NUMBER). `list` shows each label under the version it names."),
                                       packageArgument,
                                       ("V", "A version: its number in `history list` (0: the empty board), `latest`, a label's id REPLICA#NUMBER (the version it names), or a vector REPLICA:SEQ,... (replica ids in hex, or a prefix naming one author).")],
                           options: [("--at V", "The version `show` draws."),
                                     ("--before V", "Where `prune` makes the history start."),
                                     ("--rename ID", "`label`: give label ID a new text."),
                                     ("--delete ID", "`label`: delete label ID."),
                                     ("--gap MINUTES", "A pause longer than this starts a new session in `list` (default 30)."),
                                     ("--server HOST:PORT", "`list` and `show` read the history the server holds for --board instead of a package's (any token that opens the board may; versions are the server's numbers). Images are not fetched."),
                                     ("--json", "Print the versions, the board, the changes or what the restore wrote as JSON.")]),
    "repair": CommandHelp(name: "repair", overview: "Salvage a package whose op log is damaged: keep every record that checks out, under a new replica id, and list each value it reverted (canvas, background, an item's place, scale, rotation, image, colour, width, points, paint order, deleted or not) as before → after, and each item it lost.",
                          usage: "repair <package> [--json]", arguments: [packageArgument],
                          options: [("--json", "Print what was kept, dropped, copied and changed (each register's before and after, in board units) as JSON.")]),
]

let netHelps: [String: CommandHelp] = [
    "admin": AdminCommands.help,
    "demo": CommandHelp(name: "demo", overview: "Show three peers editing one board through an embedded sync server on loopback.",
                        usage: "demo [--out DIR] [--steps N] [--servers N [--redis HOST:PORT]] [--verbose] [--json]",
                        options: [("--out DIR", "Where to write the packages (default: a new folder under the temp directory)."),
                                  ("--steps N", "Editing rounds per peer (default 40)."),
                                  ("--servers N", "Scale-out (docs/SCALE-OUT.md): N sync servers (1 to 8; 1 is the default single embedded server, 2 or more share one Redis), the peers spread over them. The demo starts its own redis-server (Debian's) on a free port unless --redis is given."),
                                  ("--redis HOST:PORT", "The Redis 7 server --servers uses (its boards are kept under bs:...)."),
                                  ("--verbose", "Also print, on standard error, every line the servers, their Redis links and the peers log, each with its source and the seconds since the demo began."),
                                  ("--json", "Print the summary as JSON.")]),
    "serve": CommandHelp(name: "serve", overview: "Run a sync server hosting every board in a data directory.",
                         usage: "serve --data DIR [--listen HOST:PORT] [--web HOST:PORT [--web-host NAME] [--web-origin ORIGIN] [--web-token-file FILE]] [--redis HOST:PORT [--node-id ID] [--checkpoint-every N]] [--secret-file FILE] [--tls-cert CERT --tls-key KEY] [--admin HOST:PORT [--admin-token-file FILE]] [--log-format text|json] [--backup-to DIR|s3://BUCKET/PREFIX [--backup-every D]] [--webhook URL|--webhook-url-file FILE --webhook-secret-file FILE] [--max-... N] [--config FILE] [--print-config]",
                         options: [("--data DIR", "Where boards live, one DIR/<name>.boardpkg each (created if missing)."),
                                   ("--listen HOST:PORT", "Address to listen on (default 127.0.0.1:7420; port 0 picks one)."),
                                   ("--web HOST:PORT", "Also serve the boards to web browsers here (off by default): http://HOST:PORT/ lists them, /b/NAME shows one live with everyone's pointers and lets the page draw, add stickers, move, delete and undo, each tab with its own undo (a light author on the server's replica of the board). Every page needs ?token=...: with --secret-file a token for its board (a read token: watch only), without one the random token the server mints at start and prints in the URL it logs. With --tls-cert the view speaks HTTPS with the same certificate."),
                                   ("--web-host NAME", "A host name (besides IP addresses and localhost) that browsers may reach the web view under, such as a reverse proxy's; repeatable. Requests naming any other host are refused (DNS rebinding)."),
                                   ("--web-token-file FILE", "Without --secret-file: keep the web view's token in FILE (created with mode 0600 when missing) instead of minting a new one each run, so open pages reconnect after a restart."),
                                   ("--web-pages-per-address N", "Web pages open at once from one IP address (default 32). Behind a reverse proxy every page comes from the proxy's address: raise it there."),
                                   ("--web-origin ORIGIN", "An origin (https://boards.example) besides the view's own whose pages may open its WebSockets; repeatable."),
                                   ("--redis HOST:PORT", "Scale out (docs/SCALE-OUT.md): keep every board in this Redis 7 server's streams, shared with other servers started with the same --redis, so clients of any of them see each other's edits. Edits are acknowledged only once Redis holds them; DIR becomes a local cache. Run Redis with appendonly yes and appendfsync always."),
                                   ("--node-id ID", "This server's name in Redis entries and logs (default: the host name); a random suffix keeps two processes apart."),
                                   ("--redis-password-file FILE", "With --redis: the password Redis requires (requirepass or an ACL user's), read from the first line of FILE (kept out of the process list)."),
                                   ("--redis-user NAME", "With --redis-password-file: the Redis ACL user to authenticate as."),
                                   ("--checkpoint-every N", "With --redis: after N stream entries of a board, one server writes its compacted state to Redis and trims the stream (default 2000; 0: never)."),
                                   ("--checkpoint-lease S", "With --redis: the compaction lease's lifetime in seconds (default 30); a compactor stalled longer is fenced off."),
                                   ("--checkpoint-retention S", "With --redis: entries older than S seconds before a checkpoint are trimmed (default 60)."),
                                   ("--secret-file FILE", "Require a token (see `token`) for every connection; FILE holds the signing secret and is created (mode 0600) when missing. Revocations (`token revoke`) are read from FILE.revoked within a second of each change, and open connections they revoke, or whose token expires, are closed; with --redis they reach every server. Without it anyone who can connect reads and writes every board."),
                                   ("--tls-cert CERT", "Speak TLS (1.2 or newer): CERT is the server's PEM certificate chain."),
                                   ("--tls-key KEY", "The PEM private key of --tls-cert (keep it mode 0600).")]
                            + ServeAdmin.help + ServeConfig.help
                            + ServeLimits.flags.map { ("--\($0.name) N", "\($0.help) Default \($0.value == $0.value.rounded() ? String(Int($0.value)) : String($0.value)).") }
                            + ServeBackup.serveHelp + ServeWebhooks.help),
    "sync": CommandHelp(name: "sync", overview: "Sync a package with a server once, both directions, images included, then exit (one connection, no retries; the library's LiveBoard.syncOnce). Reports what was sent, acknowledged and received.",
                        usage: "sync <package> --server HOST:PORT --board NAME [--token T | --token-file F] [--tls [--tls-ca CA] [--tls-name NAME]] [--timeout S] [--json]",
                        arguments: [packageArgument],
                        options: [("--server HOST:PORT", "The sync server."), ("--board NAME", "The board's name on the server."),
                                  ("--token T", "The access token for the board (from `board-sync token`)."),
                                  ("--token-file F", "Read the token from a file instead (keeps it out of the process list); read again once if the server says it expired."),
                                  ("--tls", "Speak TLS and verify the server's certificate against the system's trust store."),
                                  ("--tls-ca CA", "Trust the certificate authorities in this PEM file instead (implies --tls)."),
                                  ("--tls-name NAME", "The name the server's certificate must carry (default: the address dialed; implies --tls)."),
                                  ("--timeout S", "Give up after S seconds (default 60), saying what was still awaited."), jsonOption]),
    "peer": CommandHelp(name: "peer", overview: "Run a live replica. With one --connect and no --listen it is the library's LiveBoard client of that server: it prints its status changes (connecting, live, offline and retrying, failed), stops on SIGINT/SIGTERM after up to 5 s for the server to acknowledge every edit (exit 0), and stops with exit 1 on a refusal retrying cannot fix (read-only, revoked, expired twice). With --listen or several --connect it is a mesh peer that accepts and dials peers and relays what it learns. While either runs, the other commands on its package (stroke, undo, show, export, ...) run on its board through the package's control socket (sync/control.sock).",
                        usage: "peer <package> [--listen HOST:PORT [--secret-file FILE] [--tls-cert CERT --tls-key KEY]] [--connect HOST:PORT]... [--board NAME] [--name NAME] [--color #RRGGBB] [--token T | --token-file F] [--tls [--tls-ca CA] [--tls-name NAME]]",
                        arguments: [packageArgument],
                        options: [("--listen HOST:PORT", "Accept peers here."),
                                  ("--connect HOST:PORT", "Dial this peer or server (repeatable); reconnects with backoff."),
                                  ("--board NAME", "Board name sent when dialing (default: the package's name)."),
                                  ("--name NAME", "The name others see for this peer (presence; default: $USER). Who joins and leaves the board is logged."),
                                  ("--color #RRGGBB", "The colour others see for this peer (presence)."),
                                  ("--secret-file FILE", "Require a token for connections this peer accepts (as `serve --secret-file`, revocations in FILE.revoked included)."),
                                  ("--token T", "The access token presented when dialing a server that requires one."),
                                  ("--token-file F", "Read the token from a file instead, again before every connect (rotate short-lived tokens under a running peer by rewriting F)."),
                                  ("--tls-cert CERT", "Accept peers over TLS with this PEM certificate chain (with --tls-key)."),
                                  ("--tls-key KEY", "The PEM private key of --tls-cert."),
                                  ("--tls", "Speak TLS and verify the server's certificate against the system's trust store."),
                                  ("--tls-ca CA", "Trust the certificate authorities in this PEM file instead (implies --tls)."),
                                  ("--tls-name NAME", "The name the server's certificate must carry (default: the address dialed; implies --tls).")]),
    "token": CommandHelp(name: "token", overview: "Mint a signed access token for one board and role, or revoke tokens.",
                         usage: "token --secret-file FILE (--board NAME --role read|write|peer | --role admin) [--expires DURATION|never] [--subject ID] [--json]\n       board-sync token revoke --secret-file FILE (--subject ID | --token-id ID | --token T)",
                         options: [("--secret-file FILE", "The server's secret (as given to `serve --secret-file`)."),
                                   ("--board NAME", "The board the token opens (not with --role admin)."),
                                   ("--role read|write|peer|admin", "read: receive everything, send nothing; write: read and edit as its own replicas; peer: also relay others' edits; admin: the admin port's /metrics and admin API (`serve --admin`, `board-sync admin`), no board."),
                                   ("--expires DURATION", "Valid for 90s, 15m, 12h, 30d... (default: 24h); `never` mints a token that never expires. A connection open when its token expires is closed (`token expired`)."),
                                   ("--subject ID", "Who the token is for (default: a random id). Minting prints the token id on stderr (and in --json) for revoking it."),
                                   ("revoke", "Revoke instead of minting: the lines go to FILE.revoked, beside the secret; running servers read it within a second and close the connections it revokes, and under --redis every server of the cluster does."),
                                   ("--subject ID (revoke)", "Revoke every token of this subject minted until now (tokens minted for it later work)."),
                                   ("--token-id ID (revoke)", "Revoke the one token with this id."),
                                   ("--token T (revoke)", "Revoke this token (by its id; a token from before token ids: its subject)."), jsonOption]),
]

let commandOrder = ["demo", "serve", "sync", "peer", "token", "admin", "new", "stroke", "sticker", "move", "transform", "image", "style", "canvas", "background", "between", "delete", "restore", "front", "back", "undo", "redo", "show", "export", "log", "history", "repair"]

let toolVersion = "0.3.0"

var mainHelp: String {
    var lines = [
        "OVERVIEW: Edit, inspect and sync BoardSync board packages.",
        "",
        "USAGE: board-sync <subcommand> [options]",
        "",
        "OPTIONS:",
        "  --version                Show the version.",
        "  -h, --help               Show help information.",
        "",
        "SUBCOMMANDS:",
    ]
    for name in commandOrder {
        lines.append("  \(name.padding(toLength: 24, withPad: " ", startingAt: 0)) \((commandHelps[name] ?? netHelps[name])!.overview)")
    }
    lines += ["", "  See 'board-sync help <subcommand>' for detailed help.",
              "", "EXIT CODES: 0 success, 1 failure, 64 bad usage."]
    return lines.joined(separator: "\n")
}
