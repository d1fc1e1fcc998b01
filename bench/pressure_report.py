#!/usr/bin/env python3
"""bench/pressure_report.py OUTDIR: the pressure suite's report (markdown on
stdout) and OUTDIR/pressure_slices.tsv, from the raw files bench/run writes
per run (OUTDIR/raw/pressure_<scenario>_<system>.*):

  .phases.tsv   start of the run (epoch us), phase lengths, offered rate, ...
  .samples.tsv  the sampler, one line every 5 s: DB clock, pg_stat_user_tables
                (n_live_tup, n_dead_tup, vacuums) of the job table,
                idx_tup_read of its ready index, sizes, horizon age, and
                /proc/stat (time, busy ticks, steal ticks, cluster ticks, ticks
                of the live pgbench processes)
  .slices.tsv   per slice (between consecutive samples), from the rows' own
                timestamps after the run: inserted, claimed, completed,
                pickup latency p50 / p95 / max in ms of the jobs claimed in it
  .bytes.tsv    relation, kind, bytes, rows in the job table, after the run
  .producer.log pgbench -R of the producer (its 5-s lag)
  .sched.tsv    once a second, each server process of the bench database: pid,
                role, state and wait event (pg_stat_activity), on-CPU and
                runqueue-wait ns (/proc/PID/schedstat)

A slice belongs to the phase its middle falls in.  Per phase (see
bench/README.md, "Pressure"):
  offered jobs/s    the producer's -R rate; offered jobs = rate x phase seconds
  inserted jobs/s   rows created in the phase's slices / phase seconds
  completed jobs/s  rows that reached done / succeeded in them / phase seconds
  completed/offered completed / offered jobs
  pickup p95        median of the slices' p95 (slices with claims), and the worst
  entries per claim the phase's idx_tup_read delta of the ready index / its claims
  max depth         most rows waiting (inserted - claimed since the start) at
                    the end of a slice
  dead, sizes       at the phase's last sample
Recovery: seconds from the end of pressure to the start of the first slice of
the recovery phase whose p95 is at most max(1.5 x clean median p95, clean
median p95 + 10 ms) and whose next slice is too.
"""
import csv
import os
import re
import statistics
import sys

out = sys.argv[1]
RAW = os.path.join(out, "raw")
ALL_SYSTEMS = ["oracle", "floor", "same_writes", "job_state"]
# ratio columns: (numerator, denominator), shown when both systems ran
RATIOS = [("job_state", "floor"), ("same_writes", "floor"), ("job_state", "same_writes"),
          ("floor", "oracle"), ("job_state", "oracle")]
# said under a scenario's heading
SCEN_NOTE = {
    "rr": "The readers' parallel workers live for one query and the sampler does not find them, so under pressure "
          "\"the rest (the queue)\" includes them; the queue's own processes (consumers, producers) are in the "
          "table of where the backends' time goes.",
}
MIN_SLICE = 2.5  # seconds; shorter slices give no latency figures
SCEN_TEXT = {
    "idle": "one session `BEGIN; SELECT txid_current();` then idle in transaction",
    "rr": "4 sessions `BEGIN ISOLATION LEVEL REPEATABLE READ`, then `count(*)` of the job table over and over in that transaction",
    "none": "nothing pins the horizon (its middle phase is named pressure only to line up with the others): "
            "the baseline for the sizes",
}
SAMPLE_COLS = ["t", "live", "dead", "vacuums", "idx_read", "heap", "idx", "total", "hist", "horizon",
               "ctime", "busy", "steal", "ours", "clients", "pins"]


def fnum(x):
    try:
        return int(x)
    except (TypeError, ValueError):
        pass
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def fmt(x, nd=0):
    if x is None:
        return "-"
    return f"{x:,.{nd}f}"


def mb(x):
    return None if x is None else x / 1048576.0


def ratio(a, b, nd=2):
    if a is None or b is None or b == 0:
        return "-"
    return f"{a / b:,.{nd}f}"


def load_run(tag):
    p = os.path.join(RAW, tag)
    if not os.path.exists(p + ".phases.tsv"):
        return None
    ph = {}
    for line in open(p + ".phases.tsv"):
        k, v = line.rstrip("\n").split("\t", 1)
        ph[k] = v
    base = int(ph["base_us"]) / 1e6
    c, pr, rc = int(ph["clean"]), int(ph["pressure"]), int(ph["recovery"])
    rate, hz, nproc = float(ph["rate"]), float(ph["hz"]), int(ph["nproc"])
    samples = []
    if os.path.exists(p + ".samples.tsv"):
        for line in open(p + ".samples.tsv"):
            f = line.rstrip("\n").split("\t")
            if len(f) == len(SAMPLE_COLS) - 1:
                f.append("")  # recorded before the horizon sessions' ticks were
            if len(f) != len(SAMPLE_COLS) or fnum(f[0]) is None:
                continue
            samples.append({k: fnum(v) for k, v in zip(SAMPLE_COLS, f)})
    db = {}
    if os.path.exists(p + ".slices.tsv"):
        for line in open(p + ".slices.tsv"):
            f = line.rstrip("\n").split("\t")
            if len(f) == 7 and f[0].isdigit():
                db[int(f[0])] = {"ins": int(f[1]), "claims": int(f[2]), "done": int(f[3]),
                                 "p50": fnum(f[4]), "p95": fnum(f[5]), "max": fnum(f[6])}
    lag = {}
    if os.path.exists(p + ".producer.log"):
        for line in open(p + ".producer.log"):
            m = re.match(r"progress: ([\d.]+) s, ([\d.]+) tps.*?lag ([\d.]+) ms", line)
            if m:
                lag[int(round(float(m.group(1)) / 5.0)) - 1] = float(m.group(3))
    slices = []
    ins_cum = claims_cum = 0
    for j in range(len(samples) - 1):
        a, b = samples[j], samples[j + 1]
        d = db.get(j + 1, {"ins": 0, "claims": 0, "done": 0, "p50": None, "p95": None, "max": None})
        ins_cum += d["ins"]
        claims_cum += d["claims"]
        mid = (a["t"] + b["t"]) / 2 - base
        phase = "clean" if mid < c else "pressure" if mid < c + pr else "recovery"
        dur = b["t"] - a["t"]
        cdur = b["ctime"] - a["ctime"]
        cap = cdur * hz * nproc if cdur > 0 else None
        # live pgbench processes only: the slice in which they exit has no figure
        cl = b["clients"] - a["clients"] if b["clients"] >= a["clients"] else None
        # the server's processes: a backend that has exited and is not yet in the
        # postmaster's children's total takes its ticks out of the sum, so a
        # slice in which the sum falls has no figure
        ours = b["ours"] - a["ours"] if b["ours"] >= a["ours"] else None
        # the horizon sessions' backends: the slice in which one ends has no figure
        pins = b["pins"] - a["pins"] if a["pins"] is not None and b["pins"] is not None \
            and b["pins"] >= a["pins"] else None
        idx_delta = b["idx_read"] - a["idx_read"]
        slices.append({
            "slice": j + 1, "t_start": a["t"] - base, "t_end": b["t"] - base, "secs": dur, "phase": phase,
            "inserted": d["ins"], "claims": d["claims"], "completed": d["done"],
            "p50_ms": d["p50"], "p95_ms": d["p95"], "max_ms": d["max"],
            "depth": ins_cum - claims_cum,
            "n_live_tup": b["live"], "n_dead_tup": b["dead"], "vacuums": b["vacuums"] - samples[0]["vacuums"],
            "ready_idx_tup_read": idx_delta,
            "entries_per_claim": idx_delta / d["claims"] if d["claims"] else None,
            "heap_bytes": b["heap"], "index_bytes": b["idx"], "table_total_bytes": b["total"],
            "history_total_bytes": b["hist"], "horizon_age_xids": b["horizon"],
            "cpu_busy_pct": (b["busy"] - a["busy"]) / cap * 100 if cap else None,
            "steal_pct": (b["steal"] - a["steal"]) / cap * 100 if cap else None,
            "cluster_cpu_pct": ours / cap * 100 if cap and ours is not None else None,
            "clients_cpu_pct": cl / cap * 100 if cap and cl is not None else None,
            "pins_cpu_pct": pins / cap * 100 if cap and pins is not None else None,
            "queue_cpu_pct": (ours - pins) / cap * 100 if cap and pins is not None and ours is not None else None,
            "others_cpu_pct": max(0.0, (b["busy"] - a["busy"] - ours - cl) / cap * 100)
            if cap and cl is not None and ours is not None else None,
            "producer_lag_ms": lag.get(j),
        })
    rels = []
    if os.path.exists(p + ".bytes.tsv"):
        for line in open(p + ".bytes.tsv"):
            f = line.rstrip("\n").split("\t")
            if len(f) == 4:
                rels.append((f[0], f[1], int(f[2]), int(f[3])))
    return {"phases": {"clean": c, "pressure": pr, "recovery": rc}, "rate": rate, "slices": slices,
            "base": base, "sched": load_sched(p + ".sched.tsv", base, c, pr),
            "rels": rels, "pin_log": open(p + ".pin.log").read() if os.path.exists(p + ".pin.log") else "",
            "consumers": ph.get("consumers"), "sessions": ph.get("sessions"), "nproc": nproc,
            "producers": ph.get("producers", "2"), "pin_class": ph.get("pin_class", "none"),
            "sched_mode": ph.get("sched", "on")}


# the roles of pressure_sched's lines, in the order the report shows them
SCHED_ROLES = [("consumers", "the 8 consumers' backends"), ("producers", "the producer's backends"),
               ("readers", "the horizon sessions' backends"), ("readers' workers", "their parallel workers"),
               ("autovacuum", "autovacuum workers"), ("other", "other backends of the bench database")]


def sched_role(app):
    if app.startswith("job_state_bench_pin"):
        return "readers' workers" if app.endswith("/worker") else "readers"
    if app.startswith("job_state_bench_consumer"):
        return "consumers"
    if app.startswith("job_state_bench_producer"):
        return "producers"
    if app == "autovacuum worker":
        return "autovacuum"
    return "other"


def load_sched(path, base, c, pr):
    """pressure_sched's 1-s lines: per phase and role, the seconds on a CPU
    and waiting for one (deltas of /proc/PID/schedstat between two samples of
    the same process, given to the phase of their midpoint), the distinct
    processes, and the sampled states: 'no wait event' (active, on a CPU or
    runnable), 'client' (idle: waiting for its pgbench client), else the
    wait event.  None when the run has no such file."""
    if not os.path.exists(path):
        return None
    def phase_of(t):
        return "clean" if t - base < c else "pressure" if t - base < c + pr else "recovery"
    last, out = {}, {}
    for line in open(path):
        f = line.rstrip("\n").split("\t")
        if len(f) != 8:
            continue
        try:
            t, pid, run_ns, wait_ns = float(f[0]), int(f[1]), int(f[6]), int(f[7])
        except ValueError:
            continue
        role = sched_role(f[2])
        st, wt, we = f[3], f[4], f[5]
        ph = phase_of(t)
        r = out.setdefault(ph, {}).setdefault(role, {"run": 0.0, "wait": 0.0, "pids": set(), "states": {}})
        r["pids"].add(pid)
        if st.startswith("idle"):
            k = "client"
        elif wt:
            k = f"{wt}:{we}"
        else:
            k = "no wait event"
        r["states"][k] = r["states"].get(k, 0) + 1
        prev = last.get(pid)
        last[pid] = (t, run_ns, wait_ns)
        if prev and run_ns >= prev[1] and wait_ns >= prev[2]:
            d = out.setdefault(phase_of((t + prev[0]) / 2), {}).setdefault(
                role, {"run": 0.0, "wait": 0.0, "pids": set(), "states": {}})
            d["run"] += (run_ns - prev[1]) / 1e9
            d["wait"] += (wait_ns - prev[2]) / 1e9
    return out


def phase_stats(run, phase):
    secs = run["phases"][phase]
    ss = [s for s in run["slices"] if s["phase"] == phase]
    if not ss:
        return None
    offered = run["rate"] * secs
    ins = sum(s["inserted"] for s in ss)
    done = sum(s["completed"] for s in ss)
    claims = sum(s["claims"] for s in ss)
    # the run's last slice (after the last 5-s sample, until pgbench has
    # exited) is a fraction of a second: counted, but not a latency sample
    full = [s for s in ss if s["secs"] >= MIN_SLICE]
    p95s = [s["p95_ms"] for s in full if s["p95_ms"] is not None]
    p50s = [s["p50_ms"] for s in full if s["p50_ms"] is not None]
    maxs = [s["max_ms"] for s in ss if s["max_ms"] is not None]
    last = ss[-1]
    busy = [s["cpu_busy_pct"] for s in ss if s["cpu_busy_pct"] is not None]
    steal = [s["steal_pct"] for s in ss if s["steal_pct"] is not None]
    ours = [s["cluster_cpu_pct"] for s in ss if s["cluster_cpu_pct"] is not None]
    clients = [s["clients_cpu_pct"] for s in ss if s["clients_cpu_pct"] is not None]
    pins = [s["pins_cpu_pct"] for s in ss if s["pins_cpu_pct"] is not None]
    queue = [s["queue_cpu_pct"] for s in ss if s["queue_cpu_pct"] is not None]
    others = [s["others_cpu_pct"] for s in ss if s["others_cpu_pct"] is not None]
    lags = [s["producer_lag_ms"] for s in ss if s["producer_lag_ms"] is not None]
    return {
        "offered_s": run["rate"], "inserted_s": ins / secs, "completed_s": done / secs,
        "completed_frac": done / offered if offered else None,
        "p50_med": statistics.median(p50s) if p50s else None,
        "p95_med": statistics.median(p95s) if p95s else None,
        "p95_worst": max(p95s) if p95s else None,
        "max_ms": max(maxs) if maxs else None,
        "per_claim": sum(s["ready_idx_tup_read"] for s in ss) / claims if claims else None,
        "max_depth": max(s["depth"] for s in ss),
        "dead_end": last["n_dead_tup"], "live_end": last["n_live_tup"],
        "table_mb_end": mb(last["table_total_bytes"]), "hist_mb_end": mb(last["history_total_bytes"]),
        "total_mb_end": mb(last["table_total_bytes"] + last["history_total_bytes"]),
        "horizon_max": max(s["horizon_age_xids"] for s in ss),
        "busy_mean": statistics.mean(busy) if busy else None,
        "steal_max": max(steal) if steal else None,
        "cluster_mean": statistics.mean(ours) if ours else None,
        "clients_mean": statistics.mean(clients) if clients else None,
        "pins_mean": statistics.mean(pins) if pins else None,
        "queue_mean": statistics.mean(queue) if queue else None,
        "others_max": max(others) if others else None,
        "lag_max": max(lags) if lags else None,
        "vacuums_end": last["vacuums"],
    }


def recovery(run):
    clean = [s["p95_ms"] for s in run["slices"]
             if s["phase"] == "clean" and s["p95_ms"] is not None and s["secs"] >= MIN_SLICE]
    rec = [s for s in run["slices"] if s["phase"] == "recovery" and s["secs"] >= MIN_SLICE]
    if not clean:
        return "-", None
    m = statistics.median(clean)
    thr = max(1.5 * m, m + 10.0)
    end_p = run["phases"]["clean"] + run["phases"]["pressure"]
    ok = [s["p95_ms"] is not None and s["p95_ms"] <= thr for s in rec]
    for i in range(len(rec) - 1):
        if ok[i] and ok[i + 1]:
            return f"{max(0.0, rec[i]['t_start'] - end_p):.0f} s", thr
    return f"not within {run['phases']['recovery']} s", thr


ROWS = [
    ("offered jobs/s", "offered_s", 0),
    ("inserted jobs/s", "inserted_s", 0),
    ("completed jobs/s", "completed_s", 0),
    ("completed / offered", "completed_frac", 2),
    ("pickup p50 ms, median of slices", "p50_med", 1),
    ("pickup p95 ms, median of slices", "p95_med", 1),
    ("pickup p95 ms, worst slice", "p95_worst", 1),
    ("pickup max ms", "max_ms", 0),
    ("ready-index entries read per claim", "per_claim", 1),
    ("max depth (rows waiting)", "max_depth", 0),
    ("dead tuples at the end", "dead_end", 0),
    ("live tuples at the end", "live_end", 0),
    ("job table + indexes MB at the end", "table_mb_end", 1),
    ("history + indexes MB at the end", "hist_mb_end", 1),
    ("total MB at the end", "total_mb_end", 1),
    ("vacuums of the job table since the start", "vacuums_end", 0),
    ("oldest xid/xmin held, max age (xids)", "horizon_max", 0),
    ("machine CPU busy %, mean", "busy_mean", 0),
    ("cluster's processes CPU %, mean", "cluster_mean", 0),
    ("of which the horizon sessions' backends, mean", "pins_mean", 0),
    ("of which the rest (the queue), mean", "queue_mean", 0),
    ("pgbench CPU %, mean", "clients_mean", 0),
    ("other processes CPU %, worst slice", "others_max", 0),
    ("steal %, worst slice", "steal_max", 0),
    ("producer lag ms (pgbench -R), worst 5 s", "lag_max", 1),
]
NO_RATIO = {"offered_s", "horizon_max", "busy_mean", "steal_max", "cluster_mean", "clients_mean", "others_max",
            "pins_mean",
            "lag_max", "vacuums_end"}

runs_file = os.path.join(out, "pressure_runs.tsv")
# (scenario, system, tag) of round 1, which the tables below show; every
# round's runs by (scenario, system, round) for the rounds section
order, errors, rounds_order = [], {}, []
for line in open(runs_file):
    f = line.rstrip("\n").split("\t")
    if len(f) >= 3:
        rnd = int(f[4]) if len(f) > 4 and f[4].isdigit() else 1
        rounds_order.append((f[0], f[1], f[2], rnd))
        if rnd == 1:
            order.append((f[0], f[1], f[2]))
        if len(f) > 3 and f[3]:
            errors.setdefault((f[0], f[1]), []).append((rnd, f[3]))
all_runs = {(sc, sy, rnd): load_run(tag) for sc, sy, tag, rnd in rounds_order}
all_runs = {k: v for k, v in all_runs.items() if v}
runs = {(sc, sy): v for (sc, sy, rnd), v in all_runs.items() if rnd == 1}
NROUNDS = max((rnd for _, _, _, rnd in rounds_order), default=1)
errors = {k: "; ".join(f"round {rnd}: {e}" if NROUNDS > 1 else e for rnd, e in v)
          for k, v in errors.items()}
SYSTEMS = [sy for sy in ALL_SYSTEMS if any(y == sy for _, y, _ in order)]
ratios = [(a, b) for a, b in RATIOS if a in SYSTEMS and b in SYSTEMS]

# every slice of every run
cols = ["scenario", "system", "slice", "phase", "t_start", "t_end", "secs", "inserted", "claims", "completed",
        "p50_ms", "p95_ms", "max_ms", "depth", "n_live_tup", "n_dead_tup", "vacuums", "ready_idx_tup_read",
        "entries_per_claim", "heap_bytes", "index_bytes", "table_total_bytes", "history_total_bytes",
        "horizon_age_xids", "cpu_busy_pct", "steal_pct", "cluster_cpu_pct", "pins_cpu_pct", "queue_cpu_pct",
        "clients_cpu_pct", "others_cpu_pct",
        "producer_lag_ms", "round"]
with open(os.path.join(out, "pressure_slices.tsv"), "w", newline="") as fh:
    w = csv.writer(fh, delimiter="\t", lineterminator="\n")
    w.writerow(cols)
    for (sc, sy, rnd), run in all_runs.items():
        for s in run["slices"]:
            row = [sc, sy]
            for c in cols[2:-1]:
                v = s[c]
                row.append("" if v is None else (f"{v:.3f}" if isinstance(v, float) else v))
            row.append(rnd)
            w.writerow(row)

scenarios = []
for sc, _, _ in order:
    if sc not in scenarios:
        scenarios.append(sc)
any_run = next(iter(runs.values()), None)
print("## pressure: a queue at a fixed offered rate while the xmin horizon is pinned")
print()
if any_run:
    ph = any_run["phases"]
    print(f"Producer: pgbench -R {any_run['rate']:,.0f} jobs/s, {any_run['producers']} clients; {any_run['consumers']} consumers "
          f"(claim, then done/succeed; 5 ms sleep when the claim is empty); phases clean {ph['clean']} s, "
          f"pressure {ph['pressure']} s, recovery {ph['recovery']} s; 5-s slices.  Each run starts from "
          f"an empty queue (2,000 finished rows).  The producer and the consumers share the {any_run['nproc']} CPUs with the server.  "
          "same_writes: job_state's tables and writes by hand-written SQL (no trigger, no function; its "
          "claim walks the ready index from the head, as the floor's).  oracle: the floor's rows and two transactions "
          "per job, each consumer told by a sequence which row to claim by its primary key: no search, the least "
          "work per job of a queue with those transactions (it has no ready index: no entries per claim).  "
          "Every slice: `pressure_slices.tsv`.")
    print()
    if any_run["pin_class"] != "none":
        how = "at nice 19" if any_run["pin_class"] == "nice" else "in the SCHED_IDLE class"
        print(f"**Experiment, not the scenario of the targets:** the horizon sessions' backends ran {how} "
              "with serial plans (`--pressure-pin-class`), so that they take only the CPU the queue leaves; "
              "the queue's own limit shows apart from the CPU the readers take on this machine.")
        print()
    if any_run["sched_mode"] == "off":
        print("The once-a-second sampler of the backends' scheduling was off (`--pressure-sched off`): "
              "no table of where the backends' time goes.")
        print()
for sc in scenarios:
    pair = {sy: runs.get((sc, sy)) for sy in SYSTEMS}
    print(f"### {sc}: {SCEN_TEXT.get(sc, sc)}")
    print()
    if sc in SCEN_NOTE:
        print(SCEN_NOTE[sc])
        print()
    for sy in SYSTEMS:
        if (sc, sy) in errors:
            print(f"- {sy}: ERROR: {errors[(sc, sy)]}")
        if not pair[sy] and any(s == sc and y == sy for s, y, _ in order):
            print(f"- {sy}: no data")
    for phase in ("clean", "pressure", "recovery"):
        st = {sy: phase_stats(pair[sy], phase) if pair[sy] else None for sy in SYSTEMS}
        secs = next((r["phases"][phase] for r in pair.values() if r), "?")
        print(f"#### {sc}, {phase} ({secs} s)")
        print()
        print("| | " + " | ".join(SYSTEMS) + "".join(f" | {a} / {b}" for a, b in ratios) + " |")
        print("|---|" + "---:|" * (len(SYSTEMS) + len(ratios)))
        for label, key, nd in ROWS:
            v = {sy: st[sy][key] if st[sy] else None for sy in SYSTEMS}
            if key == "hist_mb_end":
                for sy in ("floor", "oracle"):
                    if sy in v:
                        v[sy] = None
            # the oracle has no ready index; its primary key is also what
            # the rr readers' count(*) may scan
            if key == "per_claim" and "oracle" in v:
                v["oracle"] = None
            cells = [fmt(v[sy], nd) for sy in SYSTEMS]
            cells += ["" if key in NO_RATIO else ratio(v[a], v[b]) for a, b in ratios]
            print(f"| {label} | " + " | ".join(cells) + " |")
        print()
    rec = {sy: recovery(pair[sy]) if pair[sy] else ("-", None) for sy in SYSTEMS}
    print("Recovery (seconds from the end of pressure to the first 5-s slice whose pickup p95 is within "
          "max(1.5 x the clean median, clean median + 10 ms), and the next slice too): " +
          "; ".join(f"{sy} {rec[sy][0]}" + (f" (threshold {rec[sy][1]:.1f} ms)" if rec[sy][1] is not None else "")
                    for sy in SYSTEMS))
    print()
    print(f"Bytes per job after the {sc} runs (each relation's size / rows in the job table):")
    print()
    print("| system | relation | kind | MB | rows in job table | bytes/job |")
    print("|---|---|---|---:|---:|---:|")
    for sy in SYSTEMS:
        if not pair[sy]:
            continue
        for rel, kind, size, nrows in pair[sy]["rels"]:
            print(f"| {sy} | {rel} | {kind} | {size / 1048576:,.1f} | {nrows:,} | "
                  f"{fmt(size / nrows if nrows else None)} |")
    print()
    for sy in SYSTEMS:
        if pair[sy] and pair[sy]["pin_log"].strip():
            print(f"Horizon sessions, {sy}: " + "; ".join(
                ln.strip() for ln in pair[sy]["pin_log"].splitlines() if ln.strip() and "session" in ln))
            print()

# where the backends' time goes: on a CPU, waiting for one, or waiting for
# something else (pressure_sched, once a second)
if any(r.get("sched") for r in runs.values()):
    print("### where the backends' time goes (`/proc/PID/schedstat` and `pg_stat_activity`, once a second)")
    print()
    print("On a CPU and waiting for a CPU: the processes' run and runqueue-wait time from "
          "`/proc/PID/schedstat` over the phase, in CPUs (seconds per second; the machine has "
          f"{any_run['nproc'] if any_run else '?'}).  A process that lives less than a second (most parallel "
          "workers) is missed by the deltas, not by the samples.  Sampled: the share of 1-s samples of the "
          "role's processes in each state: no wait event (active, on a CPU or runnable), client (idle, "
          "waiting for its pgbench client), else `wait_event_type:wait_event`, the largest three.")
    print()
    print("| scenario | phase | system | role | processes | on a CPU | waiting for a CPU | "
          "sampled: no wait event | client | other waits, largest three |")
    print("|---|---|---|---|---:|---:|---:|---:|---:|---|")
    for sc in scenarios:
        for phase in ("clean", "pressure", "recovery"):
            for sy in SYSTEMS:
                run = runs.get((sc, sy))
                sched = run.get("sched") if run else None
                if not sched or phase not in sched:
                    continue
                secs = run["phases"][phase]
                for role, _ in SCHED_ROLES:
                    r = sched[phase].get(role)
                    if not r:
                        continue
                    n = sum(r["states"].values())
                    waits = sorted(((v, k) for k, v in r["states"].items()
                                    if k not in ("no wait event", "client")), reverse=True)[:3]
                    pct = lambda v: f"{100.0 * v / n:.0f} %" if n else "-"
                    print(f"| {sc} | {phase} | {sy} | {role} | {len(r['pids'])} | {r['run'] / secs:.2f} | "
                          f"{r['wait'] / secs:.2f} | {pct(r['states'].get('no wait event', 0))} | "
                          f"{pct(r['states'].get('client', 0))} | "
                          + (", ".join(f"{k} {pct(v)}" for v, k in waits) or "-") + " |")
    print()

# sizes at the end of each run against the run in which nothing pinned the
# horizon (scenario none), per system: what a pinned horizon left behind
base_runs = {sy: runs.get(("none", sy)) for sy in SYSTEMS}
if any(base_runs.values()) and len(scenarios) > 1:
    print("### sizes at the end of each run against the run without a pinned horizon (none)")
    print()
    print("Sizes at the last sample (after the recovery phase): the job table with its indexes, the "
          "history with its index, and their sum, in MB; the ratios are this run's total and bytes per job over "
          "the none run's (they differ when the producer fell behind in one run).  "
          "No rows are purged in any run, so every run keeps all the jobs it completed.")
    print()
    print("| system | scenario | jobs in the table | job table + indexes MB | history + index MB | total MB | bytes/job | total / none | bytes/job / none |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for sy in SYSTEMS:
        b = base_runs.get(sy)
        if not b:
            continue
        bl = b["slices"][-1] if b["slices"] else None
        for sc in scenarios:
            run = runs.get((sc, sy))
            if not run or not run["slices"]:
                continue
            last = run["slices"][-1]
            tot = last["table_total_bytes"] + last["history_total_bytes"]
            nrows = run["rels"][0][3] if run["rels"] else None
            btot = bl["table_total_bytes"] + bl["history_total_bytes"] if bl else None
            bn = b["rels"][0][3] if b["rels"] else None
            print(f"| {sy} | {sc} | {fmt(nrows)} | {fmt(mb(last['table_total_bytes']), 1)} | "
                  f"{fmt(mb(last['history_total_bytes']), 1)} | {fmt(mb(tot), 1)} | "
                  f"{fmt(tot / nrows if nrows else None)} | {ratio(tot, btot)} | "
                  f"{ratio(tot / nrows if nrows else None, btot / bn if btot and bn else None)} |")
    print()


def clean_cpu(run):
    """The clean phase of one run: its stats, and the queue backends' CPU ms
    per completed job (their ticks over the slices that have a figure, over
    the jobs completed in those slices)."""
    st = phase_stats(run, "clean")
    if not st:
        return None
    cpu_s = done = 0.0
    for s in run["slices"]:
        if s["phase"] == "clean" and s["queue_cpu_pct"] is not None:
            cpu_s += s["queue_cpu_pct"] / 100 * s["secs"] * run["nproc"]
            done += s["completed"]
    st["queue_ms_job"] = cpu_s * 1000 / done if done else None
    return st


def paired(pairs, key):
    """Per round, the first system's figure over the second's."""
    return [x[key] / y[key] if x[key] and y[key] else None for x, y in pairs]


def spread(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "-"
    return f"{statistics.median(xs):.2f} ({min(xs):.2f} to {max(xs):.2f})"


# the clean phase of every round, and the ratios of the systems that ran in
# the same round: paired, so that a slow minute of the machine counts once
if NROUNDS > 1:
    print(f"### rounds: the clean phase of each of the {NROUNDS} rounds")
    print()
    print("Odd rounds run the systems in the order given, even ones in reverse.  queue CPU ms / job: the queue "
          "backends' (consumers' and producer's) user and system time over the clean slices, divided by the jobs "
          "completed in them.  A system that fell behind (completed / offered below 1, a growing depth) "
          "ran a different mix (no empty polls, fuller group commits) from one that kept up.")
    print()
    for sc in scenarios:
        print(f"#### {sc}")
        print()
        print("| round | system | completed / offered | pickup p95 ms, median of slices | max depth | "
              "machine CPU busy %, mean | queue CPU %, mean | queue CPU ms / job |")
        print("|---:|---|---:|---:|---:|---:|---:|---:|")
        per_round = {}
        for sc2, sy, _, rnd in rounds_order:
            run = all_runs.get((sc2, sy, rnd))
            if sc2 != sc or not run:
                continue
            st = clean_cpu(run)
            if not st:
                continue
            per_round.setdefault(rnd, {})[sy] = st
            print(f"| {rnd} | {sy} | {fmt(st['completed_frac'], 2)} | {fmt(st['p95_med'], 1)} | "
                  f"{fmt(st['max_depth'])} | {fmt(st['busy_mean'])} | {fmt(st['queue_mean'])} | "
                  f"{fmt(st['queue_ms_job'], 3)} |")
        print()
        for a, b in ratios:
            pairs = [(r[a], r[b]) for _, r in sorted(per_round.items()) if a in r and b in r]
            if not pairs:
                continue
            print(f"{a} / {b}, median of {len(pairs)} rounds (lowest to highest): machine CPU busy "
                  f"{spread(paired(pairs, 'busy_mean'))}; queue CPU {spread(paired(pairs, 'queue_mean'))}; "
                  f"queue CPU per job {spread(paired(pairs, 'queue_ms_job'))}; "
                  f"completed / offered {spread(paired(pairs, 'completed_frac'))}")
            print()
