-- floor_insert: a bare INSERT, the floor for submit.
INSERT INTO bench_insert (payload) VALUES ('{"kind": "bench", "n": 1}');
