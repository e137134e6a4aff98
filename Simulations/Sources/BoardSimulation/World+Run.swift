import BoardModel
import BoardStore
@_spi(Mutations) import BoardCRDT
@_spi(Mutations) import BoardSync
import Foundation

extension World {
    // MARK: Running

    public func run() -> Report {
        for (index, event) in plan.events.enumerated() { net.schedule(.plan(index), at: event.time) }
        for (index, interlude) in interludes.enumerated() { net.schedule(.interlude(index), at: interlude.at) }
        net.schedule(.heal, at: plan.faultyPhase)
        let deadline = plan.faultyPhase + plan.settleLimit
        while let event = net.next(until: deadline) {
            report.events += 1
            guard report.events <= eventLimit else {
                fail("event storm", "more than \(eventLimit) events by \(now) s: a livelock")
                break
            }
            let happening: Happening
            switch event {
            case .deliver(let link, let direction, let generation):
                deliver(link, direction, generation: generation)
                continue
            case .happening(let planned): happening = planned
            }
            switch happening {
            case .plan(let index): perform(plan.events[index].action)
            case .timer(let index, let generation):
                let host = hosts[index]
                guard host.timerGeneration == generation, let endpoint = host.endpoint else { continue }
                host.timerAt = nil
                endpoint.handleTimers(now: now)
                flush(host)
            case .restart(let index): restart(hosts[index])
            case .diskOK(let index):
                let host = hosts[index]
                if host.diskFullUntil <= now, host.diskFull {
                    host.diskFull = false
                    host.fs.setCapacity(nil)
                    if host.reopenPending { restart(host) }
                }
            case .online(let index):
                let host = hosts[index]
                if host.offlineUntil <= now, !isStopped(host), let endpoint = host.endpoint {
                    endpoint.setReconnecting(true, now: now)
                    flush(host)
                }
            case .heal: heal()
            case .check:
                if converged() {
                    report.convergedAfter = now - plan.faultyPhase
                    announcePresence()
                    net.schedule(.presenceCheck, at: now + 1)
                }
                net.schedule(.check, at: now + 0.25)
                continue
            case .presenceCheck:
                checkPresence()
                presenceChecked = true
            case .interlude(let index):
                note("interlude \(index)")
                interludes[index].body(self)
            }
            if presenceChecked { break }
        }
        report.simulatedSeconds = now
        report.deliveries = net.deliveries
        report.operationsDelivered = net.operationsDelivered
        check()
        report.decisionHash = net.hash
        return report
    }

    func perform(_ action: Plan.Action) {
        note(plan.describe(action))
        say("EVENT \(plan.describe(action))")
        switch action {
        case .edit(let peer): edit(hosts[peer])
        case .cut(let peer):
            let touching = linksTouching(peer)
            guard !touching.isEmpty else { return }
            hit("cut")
            net.cut(net.rng.pick(touching))
        case .reset(let peer):
            let touching = linksTouching(peer)
            guard !touching.isEmpty else { return }
            hit("reset")
            net.resetNext(net.rng.pick(touching))
        case .corrupt(let peer):
            let touching = linksTouching(peer)
            guard !touching.isEmpty else { return }
            hit("corrupt")
            net.corruptNext(net.rng.pick(touching))
        case .crash(let index, let kind, let down):
            let host = hosts[index]
            guard host.endpoint != nil else { return }
            hit(index == plan.server ? "server crash" : "peer crash")
            if kind == .tornWrite { hit("torn write") }
            for link in linksTouching(index) { net.cut(link) }
            host.fs.restart(kind.memoryKind)
            // The dead process's objects go (their lock is gone with it).
            host.endpoint = nil
            host.package = nil
            host.timerAt = nil
            net.schedule(.restart(host: index), at: now + down)
        case .diskFull(let index, let seconds):
            hit("disk full")
            hosts[index].diskFullUntil = max(hosts[index].diskFullUntil, now + seconds)
            hosts[index].diskFull = true
            hosts[index].fs.setCapacity(0)
            net.schedule(.diskOK(host: index), at: now + seconds)
        case .offline(let peer, let seconds):
            hit(seconds >= 30 ? "long offline" : "offline")
            hosts[peer].offlineUntil = max(hosts[peer].offlineUntil, now + seconds)
            hosts[peer].endpoint?.setReconnecting(false, now: now)
            for link in linksTouching(peer) { net.cut(link) }
            net.schedule(.online(peer: peer), at: now + seconds)
        case .partition(let cut, let seconds):
            if case .between = cut { hit("partition") } else { hit("one-way partition") }
            net.partition(cut, until: now + seconds)
        case .clog(let peer, let seconds):
            let touching = linksTouching(peer)
            guard !touching.isEmpty else { return }
            hit("clog")
            for index in touching { net.clog(index, until: now + seconds) }
        }
    }

    func edit(_ host: Host) {
        // Only the vector: a copy of the replica held across the edit would make the edit copy
        // the whole board (copy-on-write).
        guard let endpoint = host.endpoint, let before = replica(host)?.versionVector else { return }
        do {
            // Each edit draws from its own generator (the plan's seed, the peer, the time), so
            // removing one edit while shrinking leaves the others as they were.
            var editor = RandomEditor(rng: SeededRandom(seed: plan.seed &* 0x9E37_79B9_7F4A_7C15 ^ UInt64(host.index) << 56 ^ now.bitPattern),
                                      images: World.imageHashes)
            editor.labelChance = plan.labels ? 0.05 : 0
            let edit = try endpoint.edit(board, now: now) { replica in
                LocalEdit(operations: editor.edit(&replica))
            }
            report.operationsMade += edit.operations.count
            host.client?.engine.noteOwnOperations(edit.operations)
            if let replica = replica(host) {
                host.saved = replica.versionVector
                // Where this peer is working, shown to the others while links fail and heal.
                endpoint.setPresence(Presence(replica: replica.id, name: host.name, color: .black,
                                              pointer: GridPoint(x: Int64(report.operationsMade), y: Int64(host.index)), ttl: 3),
                                     on: board, now: now)
            }
            note("edit \(host.index) \(edit.operations.count)")
        } catch {
            // A full disk refuses the edit, and the edit must change nothing.
            if host.diskFull {
                if replica(host)?.versionVector != before {
                    fail("failed edit", "\(host.name): an edit refused on a full disk at \(now) changed the replica")
                }
            } else {
                fail("failed edit", "\(host.name): a local edit failed at \(now): \(error)")
            }
        }
        flush(host)
    }

    /// Brings a crashed host back from its disk and checks what it reopened with. On a full
    /// disk opening may fail (a torn log's new identity, say, must be written first): the host
    /// tries again once the disk has room, as a person or a supervisor would.
    func restart(_ host: Host) {
        guard host.endpoint == nil || host.reopenPending else { return }
        if host.endpoint == nil {
            host.restarts += 1
            note("restart \(host.index)")
            if host.index != plan.server {
                do {
                    let index = host.index
                    let restarts = host.restarts
                    host.package = try BoardPackage.open(at: "/p/board.boardpkg", fileSystem: host.fs,
                                                         newReplicaID: { ReplicaID(UInt64(index + 1) << 40 | restarts) })
                } catch {
                    if host.diskFull {
                        say("\(host.name) cannot reopen on a full disk (\(error)); retrying when it has room")
                        net.schedule(.restart(host: host.index), at: host.diskFullUntil)
                    } else {
                        fail("restart", "\(host.name) could not reopen its package after a crash at \(now): \(error)")
                    }
                    return
                }
            }
            start(host)
        } else {
            host.endpoint?.preload(board: board)
        }
        host.reopenPending = false
        guard let replica = replica(host) else {
            if host.diskFull {
                host.reopenPending = true
            } else {
                fail("restart", "\(host.name) could not reopen the board after a crash at \(now)")
            }
            return
        }
        // Checked at once: peers would resend what was lost, hiding the loss by the end.
        if !replica.versionVector.dominates(host.acknowledged) {
            fail("acknowledged loss", "\(host.name) lost acknowledged operations in a crash at \(now): holds \(replica.versionVector), acknowledged \(host.acknowledged)")
        }
        if !replica.versionVector.dominates(host.saved) {
            fail("saved loss", "\(host.name) lost operations it had saved before a crash at \(now)")
        }
        host.saved = replica.versionVector
        // A restarted replica equals one that never crashed holding the same operations.
        var fresh = Replica(id: ReplicaID(0xFEED_FACE))
        fresh.assets = replica.assets
        do {
            try fresh.apply(replica.fullState())
            let same = try fresh.snapshot().canonicalJSON() == replica.snapshot().canonicalJSON()
            if fresh.versionVector != replica.versionVector || !same {
                fail("restart differs", "\(host.name) reopened at \(now) with a board that differs from a replica that never crashed holding the same operations")
            }
        } catch {
            fail("restart differs", "\(host.name)'s reopened operations do not apply to a fresh replica: \(error)")
        }
    }

    func heal() {
        note("heal")
        say("HEAL")
        net.endPartitions()
        for host in hosts {
            host.fs.setCapacity(nil)
            host.diskFullUntil = 0
            host.diskFull = false
            host.offlineUntil = 0
        }
        restart(serverHost)
        for host in hosts where host.endpoint == nil || host.reopenPending { restart(host) }
        net.unclog()
        for host in hosts.dropLast() where !isStopped(host) {
            host.endpoint?.setReconnecting(true, now: now)
            flush(host)
        }
        net.schedule(.check, at: now + 0.25)
    }
}
