#!/usr/bin/env python3
"""bench/report.py OUTDIR: markdown report from OUTDIR/results.tsv (written by bench/run).

Per point (suite, condition, mode, clients, sync commit):
  jobs/s      median over repetitions of pgbench tps x jobs per script
  ratio       that median / the median of the mode's floor at the same point
              (floor for claim modes, floor_insert for submit, floor_cycle for js_cycle);
              the notes add the ratio of each repetition to the floor's run of the
              same repetition (runs are interleaved), which shows how far one run
              can be from the median
  min/max 5-s lowest / highest 5-second slice (pgbench --progress=5) over all repetitions
  db check    median of (jobs the database saw finish) / (pgbench transactions x jobs per script)
  waiting     lowest count of waiting jobs left after a run (the backlog must never run dry)
  WAL B/job   median of pg_stat_wal.wal_bytes during the run / jobs the database saw finish
  notes       among others the largest share of the machine's CPU that processes outside
              the benchmark used during a run of that point (the machine may be shared)
"""
import csv
import os
import statistics
import sys

out = sys.argv[1]
MODE_ORDER = ["floor", "floor_same_writes", "job_state", "job_state_events_off", "job_state_limited",
              "job_state_rated", "job_state_retry", "floor_batch", "job_state_batch", "job_state_batch_notify_off", "job_state_batch_each",
              "floor_insert", "floor_insert_same_writes", "floor_insert_notify", "submit_nokey", "submit_key", "submit_key_commit",
              "floor_insert_many", "floor_insert_many_same_writes", "submit_many", "submit_each", "floor_cycle", "js_cycle"]
FLOOR = {"floor_same_writes": "floor", "job_state": "floor", "job_state_events_off": "floor", "job_state_limited": "floor",
         "job_state_rated": "floor", "job_state_retry": "floor", "job_state_batch": "floor", "job_state_batch_notify_off": "floor", "job_state_batch_each": "floor",
         "submit_nokey": "floor_insert", "submit_key": "floor_insert", "submit_key_commit": "floor_insert", "floor_insert_notify": "floor_insert", "floor_insert_same_writes": "floor_insert", "js_cycle": "floor_cycle",
         "floor_insert_many_same_writes": "floor_insert_many", "submit_many": "floor_insert_many", "submit_each": "floor_insert_many"}
UNIT = {"job_state_retry": "attempts/s"}


def fnum(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def fmt(x, nd=0):
    if x is None:
        return "-"
    return f"{x:,.{nd}f}"


rows = list(csv.DictReader(open(os.path.join(out, "results.tsv")), delimiter="\t"))
print(open(os.path.join(out, "meta.md")).read().rstrip())
print()

skipped = []
if os.path.exists(os.path.join(out, "skipped.tsv")):
    for line in open(os.path.join(out, "skipped.tsv")):
        if line.strip():
            m, why = line.rstrip("\n").split("\t", 1)
            if (m, why) not in skipped:
                skipped.append((m, why))


def group(rs):
    g = {}
    for r in rs:
        key = (r["cond"], r["mode"], int(r["clients"]), r["sync"])
        g.setdefault(key, []).append(r)
    return g


def point(rs):
    jps = float(rs[0]["jps"])
    ok = [r for r in rs if not r["error"]]
    vals = [float(r["jobs_s"]) for r in ok]
    slices = [float(s) * jps for r in ok for s in r["slices"].split(",") if s]
    checks = [fnum(r["dbcheck"]) for r in ok if fnum(r["dbcheck"]) is not None]
    waits = [int(r["waiting_after"]) for r in ok if r["waiting_after"].isdigit()]
    return {
        "median": statistics.median(vals) if vals else None,
        "min": min(slices) if slices else None,
        "max": max(slices) if slices else None,
        "runs": f"{len(ok)}/{len(rs)}",
        "check": statistics.median(checks) if checks else None,
        "waiting": min(waits) if waits else None,
        "wal": statistics.median([fnum(r["wal_per_job"]) for r in ok if fnum(r.get("wal_per_job"))])
        if [r for r in ok if fnum(r.get("wal_per_job"))] else None,
        "errors": sorted({r["error"] for r in rs if r["error"]}),
        "other": max(fnum(r.get("other_cpu", "").rstrip("%")) or 0 for r in rs),
        "steal": max(fnum((r.get("steal") or "").rstrip("%")) or 0 for r in rs),
    }


def table(suite, rs, with_cond):
    g = group(rs)
    pts = {k: point(v) for k, v in g.items()}
    keys = sorted(g, key=lambda k: (k[0], k[3] != "on", k[2],
                                    MODE_ORDER.index(k[1]) if k[1] in MODE_ORDER else 99))
    head = (["condition"] if with_cond else []) + [
        "mode", "clients", "sync commit", "jobs/s (median)", "ratio to floor",
        "min 5-s slice", "max 5-s slice", "runs", "db check", "min waiting after", "WAL B/job", "notes"]
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---" if i < (2 if with_cond else 1) else "---:" for i in range(len(head) - 1)) + "|---|")
    for k in keys:
        cond, mode, clients, sync = k
        p = pts[k]
        fl = FLOOR.get(mode)
        ratio = None
        if fl and (cond, fl, clients, sync) in pts:
            fm = pts[(cond, fl, clients, sync)]["median"]
            if fm and p["median"] is not None:
                ratio = p["median"] / fm
        notes = []
        if mode in UNIT:
            notes.append(UNIT[mode])
        if fl and (cond, fl, clients, sync) in g:
            # runs are interleaved: repetition r of the mode ran next to
            # repetition r of its floor, on the same machine conditions
            fr = {r["rep"]: float(r["jobs_s"]) for r in g[(cond, fl, clients, sync)] if not r["error"]}
            per = [float(r["jobs_s"]) / fr[r["rep"]] for r in sorted(g[k], key=lambda r: int(r["rep"]))
                   if not r["error"] and fr.get(r["rep"])]
            if len(per) > 1:
                notes.append("per-run ratios " + " ".join(f"{x:.2f}" for x in per))
        if mode in ("job_state", "job_state_limited", "job_state_rated") and (cond, "floor_same_writes", clients, sync) in pts:
            fw = pts[(cond, "floor_same_writes", clients, sync)]["median"]
            if fw and p["median"] is not None:
                notes.append(f"{p['median'] / fw:.2f}x floor_same_writes")
        if mode == "submit_many":
            for other in ("floor_insert_many_same_writes", "submit_each"):
                if (cond, other, clients, sync) in pts:
                    fo = pts[(cond, other, clients, sync)]["median"]
                    if fo and p["median"] is not None:
                        notes.append(f"{p['median'] / fo:.2f}x {other}")
        if mode.startswith("submit_") and (cond, "floor_insert_same_writes", clients, sync) in pts:
            fw = pts[(cond, "floor_insert_same_writes", clients, sync)]["median"]
            if fw and p["median"] is not None:
                notes.append(f"{p['median'] / fw:.2f}x floor_insert_same_writes")
        if mode.startswith("job_state_batch") and (cond, "floor_batch", clients, sync) in pts:
            fb = pts[(cond, "floor_batch", clients, sync)]["median"]
            if fb and p["median"] is not None:
                notes.append(f"{p['median'] / fb:.2f}x floor_batch")
        if p["check"] is not None and p["check"] < 0.98:
            notes.append("SHORT CLAIMS (db check < 0.98)")
        if p["waiting"] == 0:
            notes.append("BACKLOG RAN DRY")
        if p["other"] >= 5:
            notes.append(f"other processes used up to {p['other']:.0f}% of the CPUs")
        if p["steal"] >= 5:
            notes.append(f"the hypervisor took up to {p['steal']:.0f}% of the CPUs (steal)")
        for e in p["errors"]:
            notes.append("ERROR: " + e.replace("|", "/")[:160])
        cells = ([cond] if with_cond else []) + [
            mode, str(clients), sync, fmt(p["median"]),
            f"{ratio:.2f}" if ratio is not None else ("1.00" if not fl else "-"),
            fmt(p["min"]), fmt(p["max"]), p["runs"],
            f"{p['check']:.3f}" if p["check"] is not None else "-",
            fmt(p["waiting"]) if p["waiting"] is not None else "-",
            fmt(p["wal"]), "; ".join(notes)]
        print("| " + " | ".join(cells) + " |")
    print()


def run_tag(r):
    tag = f"{r['suite']}_{r['cond']}_{r['mode']}_c{r['clients']}_{r['sync']}_r{r['rep']}"
    return "".join(c if c.isalnum() or c in "_.=-" else "_" for c in tag)


def cpu_minutes(r, mins):
    """per-minute stolen CPU (% of the machine) and cluster CPU per job (us)
    from raw/<run>.cpu, the 5-s samples "seconds steal_ticks cluster_ticks"
    bench/run takes during a sustained run; ([], []) when there are none"""
    p = os.path.join(out, "raw", run_tag(r) + ".cpu")
    if not os.path.exists(p):
        return [], []
    samples = [tuple(map(float, ln.split())) for ln in open(p) if len(ln.split()) == 3]
    if len(samples) < 2:
        return [], []
    hz, ncpu = os.sysconf("SC_CLK_TCK"), os.cpu_count()

    def at(t):
        return min(samples, key=lambda x: abs(x[0] - t))
    steal, cpu = [], []
    for i, rate in enumerate(mins):
        a, b = at(60 * i), at(60 * (i + 1))
        wall = b[0] - a[0]
        if wall <= 0:
            break
        steal.append((b[1] - a[1]) / (wall * hz * ncpu) * 100)
        cpu.append((b[2] - a[2]) / hz / (rate * wall) * 1e6 if rate else None)
    return steal, cpu


def minutes(r):
    """per-minute rates from the 5-s slices of one run"""
    jps = float(r["jps"])
    sl = [float(s) * jps for s in r["slices"].split(",") if s]
    per = [sl[i:i + 12] for i in range(0, len(sl), 12)]
    return [sum(m) / len(m) for m in per if m], sl


suites = []
for r in rows:
    if r["suite"] not in suites:
        suites.append(r["suite"])

for suite in suites:
    rs = [r for r in rows if r["suite"] == suite]
    if suite in ("quick", "full"):
        cond = rs[0]["cond"]
        print(f"## {suite}: floor vs job_state ({cond}, {rs[0]['secs']} s per run)")
        print()
        table(suite, rs, False)
    elif suite == "scale":
        print(f"## scale: steady submit+claim+succeed cycle, waiting count held constant ({rs[0]['secs']} s per run)")
        print()
        table(suite, rs, True)
    elif suite == "sustained":
        print("## sustained")
        print()
        print("Per minute: jobs/s; steal, the share of the machine's CPU the hypervisor gave to "
              "other guests; and the CPU the cluster's processes spent per job.  A minute that is "
              "slow because the machine was taken away shows high steal and unchanged CPU per job; "
              "one that is slow because the work got dearer shows CPU per job rising.")
        print()
        print("| mode | run | clients | sync commit | backlog | mean jobs/s | first minute | last minute | last/first | lowest 5-s | highest 5-s | per-minute jobs/s | per-minute steal % | per-minute cluster CPU us/job | CPU/job last/first | db check | waiting after | notes |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|---:|---:|---:|---|")
        for r in sorted(rs, key=lambda r: (MODE_ORDER.index(r["mode"]) if r["mode"] in MODE_ORDER else 99, int(r["rep"]))):
            mins, sl = minutes(r)
            first, last = (mins[0], mins[-1]) if mins else (None, None)
            steal, cpu = cpu_minutes(r, mins)
            c_ratio = f"{cpu[-1] / cpu[0]:.2f}" if len(cpu) == len(mins) and cpu and cpu[0] and cpu[-1] else "-"
            print("| " + " | ".join([
                r["mode"], r["rep"], r["clients"], r["sync"], r["cond"].split("=")[-1], fmt(fnum(r["jobs_s"])),
                fmt(first), fmt(last), f"{last / first:.2f}" if first else "-",
                fmt(min(sl) if sl else None), fmt(max(sl) if sl else None),
                " ".join(fmt(m) for m in mins),
                " ".join(f"{x:.0f}" for x in steal) or "-",
                " ".join(fmt(x) for x in cpu) or "-", c_ratio,
                r["dbcheck"], r["waiting_after"],
                ("ERROR: " + r["error"]) if r["error"] else ""]) + " |")
        print()
    elif suite == "soak":
        r = rs[0]
        mins, sl = minutes(r)
        purge = open(os.path.join(out, "soak_purge.txt")).read().strip() if os.path.exists(os.path.join(out, "soak_purge.txt")) else "?"
        print(f"## soak: submit+claim+succeed for {int(r['secs']) // 60} min, {r['clients']} clients, "
              f"sync commit {r['sync']}, autovacuum on, purge({purge!r}) every minute" if purge != "off" else
              f"## soak: submit+claim+succeed for {int(r['secs']) // 60} min, {r['clients']} clients, sync commit {r['sync']}, autovacuum on, no purge")
        print()
        print(f"mean {fmt(fnum(r['jobs_s']))} jobs/s, db check {r['dbcheck']}, lowest 5-s slice {fmt(min(sl) if sl else None)}, "
              f"highest {fmt(max(sl) if sl else None)}, waiting after {r['waiting_after']}" + (f", ERROR: {r['error']}" if r["error"] else ""))
        print()
        samples = list(csv.DictReader(open(os.path.join(out, "soak_samples.tsv")), delimiter="\t"))
        print("| minute | jobs/s in the minute before | job heap MB | job indexes MB | job_ready MB | job_pkey MB | job_event MB | job_event idx MB | waiting | live rows | dead rows | autovacuums of job since start | purged |")
        print("|" + "---:|" * 13)
        av0 = int(samples[0]["autovacuums"] or 0) if samples else 0
        for s in samples:
            m = int(s["minute"]) if s["minute"].isdigit() else len(mins)
            rate = fmt(mins[m - 1]) if 0 < m <= len(mins) else "-"
            s["autovacuums"] = str(int(s["autovacuums"] or 0) - av0)
            print("| " + " | ".join([s["minute"], rate, s["job_mb"], s["job_idx_mb"], s["job_ready_mb"],
                                      s["job_pkey_mb"], s["event_mb"], s["event_idx_mb"], s["waiting"],
                                      s["rows"], s["dead"], s["autovacuums"], s["purged"]]) + " |")
        print()
    elif suite == "profile":
        r = rs[0]
        print(f"## profile: {r['mode']}, {r['clients']} clients, sync commit {r['sync']}")
        print()
        p = os.path.join(out, "profile-self.txt")
        if os.path.exists(p):
            lines = [ln.rstrip() for ln in open(p) if ln.strip() and not ln.startswith("#")]
            print("perf (cpu-clock samples of one backend, self time by symbol):")
            print()
            print("```")
            print("\n".join(lines[:40]))
            print("```")
            print()
        p = os.path.join(out, "profile-summary.txt")
        if os.path.exists(p):
            print("perf, inclusive share of the backend's samples under selected functions (bench/perf_summary.py):")
            print()
            print("```")
            print(open(p).read().rstrip())
            print("```")
            print()
        p = os.path.join(out, "profile-pgss.tsv")
        if os.path.exists(p):
            print(f"pg_stat_statements (track = all, track_planning = on; 10-s run at {fmt(fnum(r['jobs_s']))} jobs/s):")
            print()
            print("| calls | plans | total exec ms | mean exec us | mean plan us | top level | query |")
            print("|---:|---:|---:|---:|---:|---|---|")
            for ln in open(p):
                c = ln.rstrip("\n").split("\t")
                if len(c) >= 7:
                    print("| " + " | ".join(c[:6] + ["`" + c[6].replace("|", "/") + "`"]) + " |")
            print()
    elif suite == "sustained-probe":
        continue

if skipped:
    print("## skipped")
    print()
    for m, why in skipped:
        print(f"- {m}: {why}")
    print()
