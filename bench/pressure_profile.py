#!/usr/bin/env python3
"""bench/pressure_profile.py RAW SYSTEM WINDOW...: where the machine's CPU
went during the profile windows of one pressure run (bench/run
--pressure-profile SECS).

For each WINDOW (clean, pressure) bench/run left RAW.WINDOW.perf.data (perf
record -e cpu-clock -a -g on every CPU), RAW.WINDOW.roles.tsv (pid,
application_name, backend_type of every server process, read at the start
and at the end of the window) and RAW.WINDOW.window.tsv (t0, t1, freq and
the jobs inserted, claimed and completed between t0 and t1).

Every sample is given to a role by its pid: the consumers' and the
producer's backends (the queue), the horizon sessions (idle in transaction,
or the REPEATABLE READ readers, with the parallel workers of their
count(*): pg_stat_activity.leader_pid), autovacuum, the other server
processes,
the pgbench clients, idle, the rest.  Printed per window: each role's share
of the machine and its CPU milliseconds per completed job; the queue
backends' samples under a few functions (inclusive: a sample counts once
per function on its stack); the functions each main role spends its own
time in (self).  PostgreSQL's binaries keep only their exported symbols,
so a static function's samples show as [unknown] (self) and under its
exported callers (inclusive)."""
import collections
import subprocess
import sys

# inclusive frames of the queue's backends: (symbol, what)
FRAMES = [
    ("js_claim", "job_state.claim()"),
    ("js_succeed", "job_state.succeed()"),
    ("js_submit", "job_state.submit()"),
    ("js_job_fsm_trigger", "state-machine trigger"),
    ("js_job_event_trigger", "history trigger (job_event row, slots)"),
    ("JsWriteEvent", "  of which the job_event row"),
    ("JsLeaseExpiryDue", "claim's lease check"),
    ("JsTakeReady", "claim's walk of the ready index"),
    ("ExecModifyTable", "plain SQL INSERT / UPDATE / DELETE"),
    ("ExecSimpleRelationUpdate", "single-row updates (claim, succeed)"),
    ("ExecSimpleRelationInsert", "single-row inserts (history)"),
    ("ExecInsertIndexTuples", "index inserts"),
    ("heap_insert", "heap_insert"),
    ("heap_update", "heap_update"),
    ("heap_lock_tuple", "row locks"),
    ("_bt_first", "btree descent + first page"),
    ("_bt_next", "btree next pages"),
    ("heap_hot_search_buffer", "heap fetches through an index"),
    ("XLogInsert", "WAL insert"),
    ("CommitTransactionCommand", "commit"),
    ("XLogFlush", "  of which WAL flush"),
    ("kill", "  of which nudges to the WAL writer (kill)"),
    ("GetSnapshotData", "snapshots"),
    ("LWLockAcquire", "LWLock acquire"),
    ("exec_bind_message", "bind messages"),
    ("exec_execute_message", "execute messages"),
    ("pq_getbyte", "waiting for the client"),
]

QUEUE = "queue backends (consumers + producer)"


def read_kv(path):
    out = {}
    try:
        with open(path) as f:
            for line in f:
                k, _, v = line.rstrip("\n").partition("\t")
                out[k] = v
    except OSError:
        pass
    return out


def read_roles(path):
    """pid -> role; a parallel worker takes its leader's role"""
    roles, leaders = {}, {}
    try:
        with open(path) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) < 3 or not parts[0].isdigit():
                    continue
                pid, app, btype = int(parts[0]), parts[1], parts[2]
                leader = int(parts[3]) if len(parts) > 3 and parts[3].isdigit() else 0
                if btype == "parallel worker" and leader and leader != pid:
                    leaders[pid] = leader
                    continue
                if app in ("job_state_bench_consumer", "job_state_bench_producer"):
                    role = QUEUE
                elif app == "job_state_bench_pin":
                    role = "horizon sessions (backends and their parallel workers)"
                elif btype == "autovacuum worker":
                    role = "autovacuum"
                elif btype == "client backend":
                    role = "other client backends"
                else:
                    role = "server: " + btype
                roles[pid] = role
    except OSError:
        pass
    for pid, leader in leaders.items():
        roles[pid] = roles.get(leader, "parallel workers")
    return roles


def samples(data):
    """(comm, pid, [frames leaf first]) per sample of perf script."""
    proc = subprocess.run(["perf", "script", "-i", data, "-F", "comm,pid,ip,sym"],
                          capture_output=True, text=True)
    comm, pid, frames = None, None, []
    for line in proc.stdout.splitlines():
        if not line.strip():
            if comm is not None:
                yield comm, pid, frames
            comm, pid, frames = None, None, []
            continue
        if line[0] not in " \t":
            if comm is not None:
                yield comm, pid, frames
            head = line.split()
            # "comm pid" (comm may hold spaces: the pid is the last field)
            pid = int(head[-1]) if head[-1].isdigit() else -1
            comm = " ".join(head[:-1]) if head[-1].isdigit() else line.strip()
            frames = []
            continue
        parts = line.split(None, 1)
        sym = parts[1].split("+")[0].strip() if len(parts) == 2 else "[unknown]"
        if sym.startswith("[unknown]"):
            sym = "[unknown]"
        frames.append(sym)
    if comm is not None:
        yield comm, pid, frames


def role_of(comm, pid, roles):
    if pid in roles:
        return roles[pid]
    if pid == 0 or comm == "swapper":
        return "idle"
    if comm == "pgbench":
        return "pgbench clients"
    if comm == "postgres":
        return "server: started within the window (autovacuum, ...)"
    if comm == "perf":
        return "perf"
    return "other processes"


def window(raw, system, name):
    meta = read_kv(f"{raw}.{name}.window.tsv")
    if not meta:
        return
    roles = read_roles(f"{raw}.{name}.roles.tsv")
    freq = float(meta.get("freq", "0") or 0)
    secs = float(meta["t1"]) - float(meta["t0"])
    done = int(meta.get("completed", "0") or 0)
    count = collections.Counter()
    others = collections.Counter()
    selfc = collections.defaultdict(collections.Counter)
    incl = collections.Counter()
    total = 0
    for comm, pid, frames in samples(f"{raw}.{name}.perf.data"):
        total += 1
        role = role_of(comm, pid, roles)
        count[role] += 1
        if role == "other processes":
            others[comm] += 1
        selfc[role][frames[0] if frames else "[unknown]"] += 1
        if role == QUEUE:
            for sym in set(frames):
                incl[sym] += 1
    if not total:
        print(f"\n#### {system}, {name} window: no samples (perf record failed?)")
        return
    print(f"\n#### {system}, {name} window: {secs:.0f} s, {total:,} samples at {freq:.0f} Hz on every CPU")
    print(f"\njobs in the window: {int(meta.get('inserted', 0)):,} inserted, "
          f"{int(meta.get('claimed', 0)):,} claimed, {done:,} completed "
          f"({done / secs:,.0f} jobs/s)\n")
    print("| role | % of the machine | CPU ms per completed job |")
    print("|---|---:|---:|")
    for role, k in count.most_common():
        per = (k / freq * 1000.0 / done) if (freq and done and role != "idle") else None
        print(f"| {role} | {100.0 * k / total:.1f} | {'' if per is None else f'{per:.3f}'} |")
    if others:
        print("\nother processes: " + ", ".join(
            f"{c} {100.0 * n / total:.1f} %" for c, n in others.most_common(6)))
    q = count.get(QUEUE, 0)
    if q:
        print(f"\nqueue backends, inclusive (% of their {q:,} samples):\n")
        print("| function | % | what |")
        print("|---|---:|---|")
        for sym, what in FRAMES:
            if incl.get(sym):
                print(f"| `{sym}` | {100.0 * incl[sym] / q:.1f} | {what} |")
    for role, k in count.most_common(3):
        if role == "idle":
            continue
        print(f"\n{role}, self (% of their {k:,} samples): " + ", ".join(
            f"`{s}` {100.0 * n / k:.1f}" for s, n in selfc[role].most_common(10)))


def main():
    raw, system = sys.argv[1], sys.argv[2]
    for name in sys.argv[3:]:
        window(raw, system, name)


if __name__ == "__main__":
    main()
