#!/usr/bin/python3
"""examples/api.py: the HTTP front of the 202 round trip.

    POST /jobs              body = the job's input (JSON), header
                            Idempotency-Key; optional Prefer: wait=N (N <= 30)
    GET  /jobs/{id}         state, result or error, attempts (and progress,
                            where the job table has such a column)
    POST /callbacks/{token} {"result": ...} or {"error": ..., "class": ...}
                            from the system a waiting job was handed to

Two database roles, each with only what its endpoints need
(examples/setup.sql): js_example_front submits, waits and reads;
js_example_callback may only succeed, fail or heartbeat with a token on the
demo queue.  Every HTTP status is chosen from the SQLSTATE, never from an
error's text.  Tokens are secrets: the access log shows /callbacks/*** only.

One connection per request, in autocommit: job_state.wait must be CALLed
outside a transaction block (it commits between its reads, so a waiting
request holds no snapshot).

    api.py --dsn DSN --port PORT [--queue demo]
"""

import argparse
import json
import re
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import psycopg

MAX_WAIT_SECONDS = 30          # Prefer: wait=N is capped here
MAX_BODY = 64 * 1024           # a job's input, at most

# SQLSTATE -> HTTP status, for submit and reads
SUBMIT_STATUS = {
    "JS002": 409,   # idempotency_conflict: the key was used with another input
    "42501": 403,   # insufficient_privilege on the queue
    "JS008": 404,   # no such queue
    "22023": 400,   # invalid_parameter_value (e.g. a key over 255 bytes)
    "22004": 400,   # null_value_not_allowed
}
# SQLSTATE -> HTTP status, for callbacks
CALLBACK_STATUS = {
    "22P02": 400,   # the text is not a token at all
    "JS007": 404,   # forged token: the MAC does not verify
    "JS008": 404,   # no such job
    "JS001": 409,   # stale: an older generation, or the job moved on
    "JS003": 409,   # the job's state does not allow it
    "42501": 403,   # the role may not act on that queue
    "22023": 400,
}
TERMINAL = {"succeeded", "failed", "cancelled"}


def connect(dsn):
    return psycopg.connect(dsn, autocommit=True)


class Api(BaseHTTPRequestHandler):
    server_version = "job_state-example/0.2"
    protocol_version = "HTTP/1.1"

    # --- plumbing ---------------------------------------------------------

    def log_message(self, fmt, *args):
        # never log a token: it is the callback's credential
        line = fmt % args
        line = re.sub(r"/callbacks/[^ ]*", "/callbacks/***", line)
        if self.server.verbose:
            sys.stderr.write("api: %s\n" % line)

    def reply(self, status, body, headers=None):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def error(self, status, sqlstate, what):
        self.reply(status, {"error": what, "sqlstate": sqlstate})

    def read_json(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n < 0 or n > MAX_BODY:
            raise ValueError("body too large")
        return json.loads(self.rfile.read(n) or b"null")

    # --- routes -----------------------------------------------------------

    def do_POST(self):
        try:
            body = self.read_json()
        except (ValueError, UnicodeDecodeError):
            return self.reply(400, {"error": "body is not JSON"})
        if self.path == "/jobs":
            return self.post_job(body)
        m = re.fullmatch(r"/callbacks/([A-Za-z0-9_-]{1,200})", self.path)
        if m:
            return self.post_callback(m.group(1), body)
        if self.path.startswith("/callbacks/"):
            return self.reply(400, {"error": "malformed token"})
        self.reply(404, {"error": "no such resource"})

    def do_GET(self):
        m = re.fullmatch(r"/jobs/([0-9]{1,18})", self.path)
        if not m:
            return self.reply(404, {"error": "no such resource"})
        try:
            with connect(self.server.dsn) as conn:
                job = read_job(conn, int(m.group(1)))
        except psycopg.Error as e:
            state = e.sqlstate or ""
            return self.error(SUBMIT_STATUS.get(state, 500), state, "read refused")
        if job is None:
            return self.reply(404, {"error": "no such job"})
        self.reply(200, job)

    def post_job(self, body):
        key = self.headers.get("Idempotency-Key")
        if not key:
            return self.reply(400, {"error": "Idempotency-Key header required"})
        wait = prefer_wait(self.headers.get("Prefer"))
        try:
            with connect(self.server.dsn) as conn:
                job_id, created, status = conn.execute(
                    "SELECT job_id, created, status::text"
                    "  FROM job_state.submit(%s, %s::jsonb, %s)",
                    (self.server.queue, json.dumps(body), key)).fetchone()
                applied = {}
                if wait and status not in TERMINAL:
                    if wait_for(conn, job_id, wait):
                        applied = {"Preference-Applied": "wait=%d" % wait}
                job = read_job(conn, job_id)
        except psycopg.Error as e:
            state = e.sqlstate or ""
            return self.error(SUBMIT_STATUS.get(state, 500), state,
                              "submit refused")
        code = 200 if job["status"] in TERMINAL else 202
        job["created"] = created
        self.reply(code, job, dict(applied, Location="/jobs/%d" % job_id))

    def post_callback(self, token, body):
        if not isinstance(body, dict) or ("result" in body) == ("error" in body):
            return self.reply(400, {"error": 'give "result" or "error"'})
        try:
            with connect(self.server.callback_dsn) as conn:
                if "result" in body:
                    conn.execute("SELECT job_state.succeed(%s::job_state.claim_token, %s::jsonb)",
                                 (token, json.dumps(body["result"])))
                    status = "succeeded"
                else:
                    cls = body.get("class", "permanent")
                    status = conn.execute(
                        "SELECT job_state.fail(%s::job_state.claim_token,"
                        " %s::job_state.error_class, %s::jsonb)::text",
                        (token, cls, json.dumps(body["error"]))).fetchone()[0]
        except psycopg.Error as e:
            state = e.sqlstate or ""
            return self.error(CALLBACK_STATUS.get(state, 500), state,
                              "callback refused")
        self.reply(200, {"status": status})


def prefer_wait(header):
    """Prefer: wait=N -> N seconds (bounded), or 0."""
    m = re.search(r"(?:^|[,;\s])wait=([0-9]{1,4})\b", header or "")
    return min(int(m.group(1)), MAX_WAIT_SECONDS) if m else 0


def wait_for(conn, job_id, seconds):
    """Wait until the job ends or the time is up (answered as
    Preference-Applied).  CALL job_state.wait holds no snapshot and no lock
    while it sleeps; it needs autocommit, as it commits between its reads."""
    conn.execute("CALL job_state.wait(%s, %s::interval, NULL, NULL, NULL, NULL, NULL)",
                 (job_id, "%d s" % seconds))
    return True


def read_job(conn, job_id):
    """The job as the client sees it, through the view queue_jobs (which
    shows only the queues the role may read), with the progress its
    worker last reported."""
    cols = "job_id, status::text, result, last_error, reason, attempts, progress"
    row = conn.execute("SELECT %s FROM job_state.queue_jobs"
                       " WHERE job_id OPERATOR(pg_catalog.=) %%s" % cols,
                       (job_id,)).fetchone()
    if row is None:
        return None
    job = {"job_id": row[0], "status": row[1], "attempts": row[5]}
    if row[1] == "succeeded":
        job["result"] = row[2]
    if row[3] is not None:
        job["last_error"] = row[3]
    if row[4] is not None:
        job["reason"] = row[4]
    if row[6] is not None:
        job["progress"] = row[6]
    return job


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dsn", required=True, help="front role's connection")
    ap.add_argument("--callback-dsn", required=True, help="callback role's connection")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--queue", default="demo")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", args.port), Api)
    srv.daemon_threads = True
    srv.dsn, srv.callback_dsn = args.dsn, args.callback_dsn
    srv.queue, srv.verbose = args.queue, args.verbose
    print("api: listening on 127.0.0.1:%d" % args.port, flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
