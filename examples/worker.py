#!/usr/bin/python3
"""examples/worker.py: workers, a simulated flaky model, and a simulated
asynchronous runtime, for the 202 round trip.

A worker claims a job of the demo queue and looks at its input:
  {"kind": "short", ...}  calls the model once, recording the call as an
                          operation (begin_operation / finish_operation) so
                          that its side effect happens at most once;
  {"kind": "long", ...}   hands the job to the runtime and parks it
                          (wait_for_callback); the runtime POSTs the result
                          to the API's /callbacks/{token} later.

The model is deterministic from the seed (job id, attempt):
  ok        does the work (writes example.effect) and answers
  429       throttled, with Retry-After   -> fail(token, 'throttled', retry_after)
  500       server error                  -> fail(token, 'transient')
  timeout   hangs: the worker dies silently, its lease expires, the job
            becomes unknown, an operator runs it again
  lost      does the work, but the answer never arrives -> the worker
            reports a transient failure; the next attempt's begin_operation
            says in_doubt, the worker asks the model by operation id and
            finds the work done
The runtime's behaviour per job (mode), also from the seed:
  on_time   calls back within the callback timeout
  twice     calls back twice with the same result (the second is harmless)
  late      calls back after the timeout: the job went unknown, the
            late callback with the current token still resolves it
  never     does the work, never calls back: the job goes unknown; the
            operator finds the result in the runtime's record and reconciles
  lost      loses the task: the operator reconciles the job to run again;
            the lost task calls back much later with the old token (409)
Each system keeps its record in schema example (see setup.sql).  Tokens are
never printed.

    worker.py --dsn DSN --external-dsn DSN --api URL --seed N [--workers 4]
"""

import argparse
import json
import random
import sys
import threading
import time
import urllib.error
import urllib.request

import psycopg

CALLBACK_TIMEOUT = 2.0      # seconds a long job waits for its callback
FATES = ["ok"] * 10 + ["429"] * 2 + ["500"] * 2 + ["timeout"] + ["lost"] * 2
MODES = ["on_time", "twice", "late", "never", "lost"]


def fate(seed, n, attempt):
    """What the model does on this attempt of the client's job number n
    (not the job id, which depends on the order of concurrent submits);
    from the fourth attempt on it works."""
    if attempt >= 4:
        return "ok"
    return random.Random("%s:%d:%d" % (seed, n, attempt)).choice(FATES)


def mode(seed, n, first):
    """How the runtime treats a task of job number n (the client makes
    every third job long, so n // 3 numbers them); a re-run is on time.
    The modes take turns, so that five long jobs show each of them."""
    if not first:
        return "on_time"
    return MODES[(n // 3 + seed) % len(MODES)]


class Throttled(Exception):
    def __init__(self, retry_after):
        self.retry_after = retry_after


class ServerError(Exception):
    pass


class Hang(Exception):
    pass


class ResponseLost(Exception):
    pass


class Model:
    """The flaky model: an external system with its own records."""

    def __init__(self, dsn, seed):
        self.dsn, self.seed = dsn, seed

    def call(self, op_id, job_id, attempt, job_input):
        f = fate(self.seed, job_input.get("n", 0), attempt)
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute("INSERT INTO example.model_call VALUES (%s, %s, %s)",
                         (job_id, attempt, f))
            if f == "429":
                raise Throttled(0.3)
            if f == "500":
                raise ServerError()
            if f == "timeout":
                raise Hang()
            result = {"answer": "%s for job %d" % (job_input.get("prompt", "?"), job_id)}
            try:
                conn.execute("INSERT INTO example.effect (op_id, job_id, result)"
                             " VALUES (%s, %s, %s::jsonb)", (op_id, job_id, json.dumps(result)))
            except psycopg.errors.UniqueViolation:
                # a second execution of the same operation: the invariant
                # the demo is about; counted, the verdict fails on it
                conn.execute("INSERT INTO example.duplicate_effect (op_id) VALUES (%s)", (op_id,))
            if f == "lost":
                raise ResponseLost()
            return result

    def lookup(self, op_id):
        """Ask the model whether it did op_id (its idempotency key)."""
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            row = conn.execute("SELECT result FROM example.effect WHERE op_id = %s",
                               (op_id,)).fetchone()
        return row[0] if row else None


class Runtime:
    """The asynchronous runtime: runs long tasks, calls back over HTTP."""

    def __init__(self, dsn, api, seed):
        self.dsn, self.api, self.seed = dsn, api, seed

    def hand(self, job_id, generation, token, job_input):
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            first = conn.execute("SELECT NOT EXISTS (SELECT FROM example.runtime_task"
                                 " WHERE job_id = %s)", (job_id,)).fetchone()[0]
            m = mode(self.seed, job_input.get("n", 0), first)
            # a lost task: the runtime's record says so at once (it dropped
            # it), though a zombie of it will still call back much later
            conn.execute("INSERT INTO example.runtime_task VALUES (%s, %s, %s, %s, NULL)",
                         (job_id, generation, m, "lost" if m == "lost" else "running"))
        threading.Thread(target=self.run, args=(job_id, generation, token, m, job_input),
                         daemon=True).start()

    def record(self, job_id, generation, state, result=None):
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute("UPDATE example.runtime_task SET state = %s, result = %s::jsonb"
                         " WHERE job_id = %s AND generation = %s",
                         (state, json.dumps(result) if result is not None else None,
                          job_id, generation))

    def callback(self, job_id, generation, token, m, result):
        req = urllib.request.Request(
            "%s/callbacks/%s" % (self.api, token), method="POST",
            data=json.dumps({"result": result}).encode(),
            headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                status = r.status
        except urllib.error.HTTPError as e:
            status = e.code
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute("INSERT INTO example.callback_sent VALUES (%s, %s, %s, %s)",
                         (job_id, generation, m, status))

    def run(self, job_id, generation, token, m, job_input):
        result = {"report": "long task %d done" % job_id}
        delay = {"on_time": 0.5, "twice": 0.5, "late": CALLBACK_TIMEOUT + 2.0,
                 "never": 0.5, "lost": CALLBACK_TIMEOUT + 4.5}[m]
        time.sleep(delay)
        if m == "never":
            self.record(job_id, generation, "done_silently", result)
            return
        if m != "lost":
            self.record(job_id, generation, "called_back", result)
        self.callback(job_id, generation, token, m, result)
        if m == "twice":
            self.callback(job_id, generation, token, m, result)


def work(args, model, runtime, stop, name):
    """One worker's loop; returns when it 'dies' (a model timeout)."""
    conn = psycopg.connect(args.dsn, autocommit=True)
    try:
        while not stop.is_set():
            row = conn.execute(
                "SELECT token::text, job_id, attempt, input,"
                "       job_state.token_generation(token)"
                "  FROM job_state.claim('demo', %s)", (name,)).fetchone()
            if row is None:
                time.sleep(0.1)
                continue
            token, job_id, attempt, job_input, generation = row
            if job_input.get("kind") == "long":
                # where the work goes, so an operator can find the job from
                # the runtime's side (find_job), then the hand-over
                conn.execute("SELECT job_state.add_ref(%s::job_state.claim_token, 'runtime_task', %s)",
                             (token, "task-%d-%d" % (job_id, generation)))
                conn.execute("SELECT job_state.wait_for_callback(%s::job_state.claim_token,"
                             " %s::interval)", (token, "%s s" % CALLBACK_TIMEOUT))
                runtime.hand(job_id, generation, token, job_input)
                continue
            if not short_job(conn, model, token, job_id, attempt, job_input):
                return          # died: the lease will expire
    finally:
        conn.close()


def note(model, job_id, attempt, what):
    with psycopg.connect(model.dsn, autocommit=True) as c:
        c.execute("INSERT INTO example.operation_note VALUES (%s, %s, %s)",
                  (job_id, attempt, what))


def short_job(conn, model, token, job_id, attempt, job_input):
    """Call the model once under operation id model:<job>; False = died."""
    op_id = "model:%d" % job_id
    state, stored = conn.execute(
        "SELECT state, result FROM job_state.begin_operation(%s::job_state.claim_token, %s)",
        (token, op_id)).fetchone()
    note(model, job_id, attempt, state)
    # the API's GET /jobs/{id} shows this (fenced like the lease it extends)
    conn.execute("SELECT job_state.heartbeat(%s::job_state.claim_token, progress => %s::jsonb)",
                 (token, json.dumps({"step": "calling the model", "attempt": attempt})))
    result = None
    if state == "done":
        result = stored
    elif state == "in_doubt":
        # an earlier attempt started it and never finished: ask the model
        result = model.lookup(op_id)
        note(model, job_id, attempt, "in_doubt_found" if result is not None else "in_doubt_not_done")
    if result is None:
        try:
            result = model.call(op_id, job_id, attempt, job_input)
        except Throttled as e:
            conn.execute("SELECT job_state.fail(%s::job_state.claim_token, 'throttled',"
                         " %s::jsonb, %s::interval)",
                         (token, json.dumps({"http": 429}), "%s s" % e.retry_after))
            return True
        except ServerError:
            conn.execute("SELECT job_state.fail(%s::job_state.claim_token, 'transient', %s::jsonb)",
                         (token, json.dumps({"http": 500})))
            return True
        except ResponseLost:
            conn.execute("SELECT job_state.fail(%s::job_state.claim_token, 'transient', %s::jsonb)",
                         (token, json.dumps({"error": "no response from the model"})))
            return True
        except Hang:
            return False
    conn.execute("SELECT job_state.finish_operation(%s::job_state.claim_token, %s, %s::jsonb)",
                 (token, op_id, json.dumps(result)))
    conn.execute("SELECT job_state.succeed(%s::job_state.claim_token, %s::jsonb)",
                 (token, json.dumps(result)))
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dsn", required=True, help="worker role's connection")
    ap.add_argument("--external-dsn", required=True, help="the external systems' connection")
    ap.add_argument("--api", required=True, help="the API's base URL, for callbacks")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=4)
    args = ap.parse_args()
    model = Model(args.external_dsn, args.seed)
    runtime = Runtime(args.external_dsn, args.api, args.seed)
    stop = threading.Event()

    def supervise(i):
        # a worker that died is replaced, as a process manager would
        n = 0
        while not stop.is_set():
            try:
                work(args, model, runtime, stop, "w%d.%d" % (i, n))
            except psycopg.Error as e:
                print("worker: w%d.%d stopped on SQLSTATE %s" % (i, n, e.sqlstate),
                      file=sys.stderr, flush=True)
                time.sleep(0.2)
            n += 1

    threads = [threading.Thread(target=supervise, args=(i,), daemon=True)
               for i in range(max(1, min(args.workers, 32)))]
    for t in threads:
        t.start()
    print("worker: %d workers running" % len(threads), flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        stop.set()


if __name__ == "__main__":
    main()
