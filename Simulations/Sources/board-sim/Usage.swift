import Foundation

let usage = "board-sim run FILE... [--svg DIR] | cluster (--seed N [--plan | --shrink [--out FILE]] [--verbose] | --seeds K [--from N]) [--plant ack-before-redis] [--json] | --seed N [--peers P] [--edits R] [--plant BUG] [--plan | --shrink [--out FILE]] [--verbose] [--json] | --seeds K [--from N] [--peers P] [--edits R] [--plant BUG] [--json]"
let help = """
OVERVIEW: Run BoardSync's real server and peer code over simulated links, time and disks, with
seeded faults (link cuts and resets, corrupted bytes, partitions, clogged and slow links, server
and peer crashes, torn writes, full disks, peers offline), then heal and check that every replica
converges to the board the conflict contract gives, with nothing acknowledged or saved lost.

USAGE: \(usage)

SUBCOMMANDS:
  run FILE... [--svg DIR]  Run scenario files (docs/SIMULATION.md, Simulations/Scenarios): conflict
                           scenarios (peers, edits, expectations) and world scenarios (a seed's
                           plan, as --plan or --shrink print it). Print each timeline and every
                           replica's final board, check the expectations and oracles; exit 1 when
                           one fails, 64 when a file is malformed. --svg DIR draws every
                           replica's final board as DIR/<scenario>-<host>.svg, framed
                           to what it holds (the canvas when it holds nothing).

  cluster                  Scale-out (docs/SCALE-OUT.md): two or three servers sharing a simulated
                           Redis, clients editing through any of them on the simulated network
                           under server crashes, Redis restarts, cut, reset and clogged links,
                           flipped bytes, slow links and partitions; checks convergence and that
                           nothing acknowledged is lost. With --seed N (one report, ending in
                           `hash: <hex>`; --plan prints its plan as a cluster scenario, --shrink
                           [--out FILE] reduces a failing one, --verbose logs everything) or
                           --seeds K [--from N] (on every core); --plant ack-before-redis plants a
                           bug the oracles must catch. `run FILE` runs cluster scenarios too.

OPTIONS:
  --seed N                 Run one seed and print its report; the last line is `hash: <hex>`,
                           a fingerprint of every decision (the same seed gives the same hash).
  --seeds K                Run K seeds (from --from, default 0) on every core and summarize.
  --from N                 First seed of --seeds.
  --peers P                Peers besides the server (default 3).
  --edits R                Edits per second across the peers during the faulty phase (default 20).
  --plan                   With --seed: print the seed's plan (topology, edits, faults) as a
                           world scenario instead of running it.
  --shrink                 With --seed: when the seed fails, reduce it to a short plan that
                           still fails the same way and print it as a world scenario.
  --out FILE               With --shrink: also write the scenario to FILE.
  --plant BUG              Plant a bug the oracles must catch (mutation testing):
                           acknowledge-before-logging, acknowledge-before-sync, images-never-served,
                           tie-break-by-arrival, presence-not-relayed, changes-dropped,
                           acknowledgements-unseen.
  --json                   Print JSON for scripts.
  --verbose                With --seed: print every host's log and every fault, with the time.
  -h, --help               Show help information.

EXIT CODES: 0 every seed passed, 1 a seed failed (its replay command is printed), 64 bad usage.
"""

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("Error: \(message)\nUsage: \(usage)\n".utf8))
    exit(64)
}
