-- pressure (producer, floor): one row into bench_floor; created_at is its
-- default, now().  bench/run runs it with pgbench -R (a fixed offered rate).
INSERT INTO bench_floor (payload) VALUES ('{"kind": "bench", "n": 1}');
