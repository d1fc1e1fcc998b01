-- pressure (producer, oracle): one row into bench_oracle, as the floor's
-- producer inserts one into bench_floor.  bench/run runs it with pgbench -R.
INSERT INTO bench_oracle (payload) VALUES ('{"kind": "bench", "n": 1}');
