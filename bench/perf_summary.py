#!/usr/bin/env python3
"""bench/perf_summary.py PERF_DATA: inclusive share of the backend's CPU
samples spent under a few PostgreSQL / job_state functions of interest
(perf script -F ip,sym; a sample counts once per function on its stack)."""
import subprocess
import sys

FRAMES = [
    ("js_claim", "claim() (whole call)"),
    ("js_succeed", "succeed() (whole call)"),
    ("js_succeed_many", "succeed_many() (whole call)"),
    ("js_job_event_trigger", "job_event trigger (history row)"),
    ("js_job_fsm_trigger", "state-machine trigger"),
    ("JsTakeReady", "claim's walk of the ready index and its updates"),
    ("JsLockRow", "row locks of claim and completions"),
    ("ExecSimpleRelationUpdate", "single-row updates (claim, succeed)"),
    ("ExecSimpleRelationInsert", "single-row inserts (history)"),
    ("JsExecute", "SPI statements of job_state"),
    ("GetCachedPlan", "plan cache lookup / revalidation"),
    ("pg_plan_query", "planning"),
    ("standard_ExecutorStart", "executor start (plan init)"),
    ("ExecInitModifyTable", "  of which ModifyTable init"),
    ("standard_ExecutorEnd", "executor end"),
    ("_bt_first", "btree index scans: descent + first page"),
    ("_bt_next", "btree index scans: next pages"),
    ("ExecInsertIndexTuples", "index inserts of UPDATE/INSERT"),
    ("heap_update", "heap_update"),
    ("heap_insert", "heap_insert"),
    ("ExecConstraints", "constraint checks (CHECK, NOT NULL)"),
    ("stringToNode", "stringToNode (parsing stored expressions)"),
    ("AfterTriggerEndQuery", "AFTER triggers fired"),
    ("fmgr_security_definer", "SECURITY DEFINER wrapper (incl. the call)"),
    ("ProcessGUCArray", "  SET search_path of SECURITY DEFINER"),
    ("AtEOXact_GUC", "  GUC reset at end of function"),
    ("JsTokenCheck", "token MAC check"),
    ("JsTokenMint", "token minting"),
    ("LockAcquireExtended", "heavyweight lock acquire"),
    ("LWLockAcquire", "LWLock acquire"),
    ("ReadBufferExtended", "buffer reads"),
    ("GetSnapshotData", "snapshots"),
    ("CommitTransactionCommand", "commit"),
    ("XLogInsertRecord", "WAL insert"),
    ("pq_getbyte", "waiting for the client (socket read)"),
    ("exec_parse_message", "parse messages"),
    ("exec_bind_message", "bind messages"),
]


def main():
    data = sys.argv[1]
    out = subprocess.run(["perf", "script", "-i", data, "-F", "ip,sym"],
                         capture_output=True, text=True).stdout
    samples, cur = [], set()
    for line in out.splitlines():
        line = line.strip()
        if not line:
            if cur:
                samples.append(cur)
            cur = set()
            continue
        parts = line.split(None, 1)
        if len(parts) == 2:
            cur.add(parts[1].split("+")[0])
    if cur:
        samples.append(cur)
    n = len(samples)
    print(f"{n} samples")
    for sym, what in FRAMES:
        k = sum(1 for s in samples if sym in s)
        if k:
            print(f"{100.0 * k / n:6.1f}%  {sym:28s} {what}")


if __name__ == "__main__":
    main()
