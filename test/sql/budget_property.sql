-- Randomized property test of the budget and meter JSON checks (src/budget.c
-- JsCheckBudget, JsBudgetExhaustedMeter, JsMeterAmountValid through the job
-- trigger's spent checks).  They take Jsonb, which only a live server can
-- build, so this is their fuzz test (test/fuzz/ covers token.c and cron.c).
-- Every run draws new random JSON (no setseed) and compares each function
-- with an oracle written in SQL from the documented rules; any case where
-- they disagree is printed, so a failing run shows its own reproducer.
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/fresh_extension.sql
SELECT job_state.create_queue('prop');

-- random JSON: numbers at the edges (zero, negative zero, tiny, huge,
-- negative), strings that look like numbers, booleans, null, arrays, objects
CREATE FUNCTION pg_temp.rnd_pick(VARIADIC choices text[]) RETURNS text
LANGUAGE sql VOLATILE AS $$
	SELECT choices[1 + floor(random() * pg_catalog.array_length(choices, 1))::int]
$$;
CREATE FUNCTION pg_temp.rnd_number() RETURNS jsonb LANGUAGE sql VOLATILE AS $$
	SELECT (CASE WHEN random() < 0.4
		THEN (floor(random() * 21) - 10)::text
		ELSE pg_temp.rnd_pick('0', '-0', '0.0', '1', '-1', '0.5', '-0.0001', '1e30',
			'-1e-30', '1e-1000', '12345678901234567890.5', '99.999999999999999999', '100')
		END)::jsonb
$$;
CREATE FUNCTION pg_temp.rnd_key() RETURNS text LANGUAGE sql VOLATILE AS $$
	SELECT CASE floor(random() * 12)::int
		WHEN 0 THEN '' WHEN 1 THEN repeat('k', 128) WHEN 2 THEN repeat('k', 129)
		WHEN 3 THEN repeat('é', 128) WHEN 4 THEN repeat('é', 129)
		WHEN 5 THEN ' ' WHEN 6 THEN 'usd cents'
		ELSE pg_temp.rnd_pick('a', 'b', 'c', 'tokens', 'usd_cents') END
$$;
CREATE FUNCTION pg_temp.rnd_value(depth int) RETURNS jsonb LANGUAGE plpgsql VOLATILE AS $$
DECLARE
	r float8 := random();
BEGIN
	IF r < 0.55 OR depth > 2 THEN
		RETURN pg_temp.rnd_number();
	ELSIF r < 0.65 THEN
		RETURN to_jsonb(pg_temp.rnd_pick('5', '-1', 'Infinity', 'NaN', ''));
	ELSIF r < 0.72 THEN
		RETURN pg_temp.rnd_pick('true', 'false')::jsonb;
	ELSIF r < 0.78 THEN
		RETURN 'null'::jsonb;
	ELSIF r < 0.89 THEN
		RETURN (SELECT COALESCE(jsonb_agg(pg_temp.rnd_value(depth + 1)), '[]')
			FROM generate_series(1, floor(random() * 3)::int));
	END IF;
	RETURN pg_temp.rnd_object(depth + 1);
END
$$;
CREATE FUNCTION pg_temp.rnd_object(depth int) RETURNS jsonb LANGUAGE sql VOLATILE AS $$
	SELECT COALESCE(jsonb_object_agg(pg_temp.rnd_key(), pg_temp.rnd_value(depth)), '{}')
	FROM generate_series(1, floor(random() * 5)::int)
$$;
-- a spend shaped after a budget: its meters, amounts around the limits
CREATE FUNCTION pg_temp.rnd_spent_for(budget jsonb) RETURNS jsonb LANGUAGE plpgsql VOLATILE AS $$
DECLARE
	r float8 := random();
BEGIN
	IF r < 0.1 THEN
		RETURN NULL;
	ELSIF r < 0.3 OR jsonb_typeof(budget) <> 'object' THEN
		RETURN pg_temp.rnd_value(1);
	END IF;
	RETURN (SELECT COALESCE(jsonb_object_agg(key,
			CASE WHEN jsonb_typeof(value) = 'number' AND random() < 0.8
				THEN to_jsonb(value::numeric + pg_temp.rnd_pick('0', '1', '-1', '1e-20', '-1e-20', '-0.5')::numeric)
				ELSE pg_temp.rnd_value(2) END), '{}')
		FROM jsonb_each(budget) WHERE random() < 0.8);
END
$$;

-- the oracles, from the rules the README and src/budget.c state
CREATE FUNCTION pg_temp.is_amount(v jsonb) RETURNS bool LANGUAGE sql AS $$
	SELECT CASE WHEN jsonb_typeof(v) = 'number' THEN v::numeric >= 0 ELSE false END
$$;
-- a budget: an object of meter names (1 to 128 characters) to numbers >= 0
CREATE FUNCTION pg_temp.budget_ok(b jsonb) RETURNS bool LANGUAGE sql AS $$
	SELECT jsonb_typeof(b) = 'object' AND NOT EXISTS (
		SELECT FROM jsonb_each(b) e
		WHERE char_length(e.key) NOT BETWEEN 1 AND 128 OR NOT pg_temp.is_amount(e.value))
$$;
-- used up: some meter with a numeric limit whose spend (0 when absent, or
-- spent is not an object) is at or above it, or whose spend is not a number
CREATE FUNCTION pg_temp.exhausted(b jsonb, s jsonb) RETURNS bool LANGUAGE sql AS $$
	SELECT COALESCE(jsonb_typeof(b) = 'object' AND EXISTS (
		SELECT FROM jsonb_each(b) e
		-- one CASE, so that no cast runs before its type is checked (the
		-- planner may evaluate the operands of AND in any order)
		WHERE CASE WHEN jsonb_typeof(e.value) <> 'number' THEN false
			WHEN jsonb_typeof(s) = 'object' AND s ? e.key
				THEN CASE WHEN jsonb_typeof(s -> e.key) <> 'number' THEN true
					ELSE (s -> e.key)::numeric >= e.value::numeric END
			ELSE 0 >= e.value::numeric END), false)
$$;
-- a new spent: an object of numbers >= 0 that keeps every numeric meter of
-- the old one at no smaller an amount
CREATE FUNCTION pg_temp.spent_update_ok(old jsonb, new jsonb) RETURNS bool LANGUAGE sql AS $$
	SELECT jsonb_typeof(new) = 'object'
		AND NOT EXISTS (SELECT FROM jsonb_each(new) e WHERE NOT pg_temp.is_amount(e.value))
		AND NOT EXISTS (SELECT FROM jsonb_each(old) o
			WHERE CASE WHEN jsonb_typeof(o.value) <> 'number' THEN false
				WHEN jsonb_typeof(new -> o.key) = 'number'
					THEN (new -> o.key)::numeric < o.value::numeric ELSE true END)
$$;

CREATE TEMP TABLE mismatch (property text, input jsonb, other jsonb, expected text, got text);
CREATE TEMP TABLE seen (property text, outcome text, n int);

-- submit(budget => b): accepted exactly when budget_ok(b); refused with 22023
DO $$
DECLARE
	b jsonb;
	expected text;
	got text;
BEGIN
	FOR i IN 1..1500 LOOP
		b := CASE WHEN random() < 0.85 THEN pg_temp.rnd_object(0) ELSE pg_temp.rnd_value(1) END;
		BEGIN
			PERFORM job_state.submit('prop', '{}', budget => b);
			got := 'accepted';
		EXCEPTION WHEN OTHERS THEN
			got := SQLSTATE;
		END;
		expected := CASE WHEN pg_temp.budget_ok(b) THEN 'accepted' ELSE '22023' END;
		IF got IS DISTINCT FROM expected THEN
			INSERT INTO mismatch VALUES ('submit budget', b, NULL, expected, got);
		END IF;
		INSERT INTO seen VALUES ('submit budget', got, 1);
	END LOOP;
END
$$;

-- budget_exhausted(b, s) = exhausted(b, s)
DO $$
DECLARE
	b jsonb;
	s jsonb;
	got bool;
BEGIN
	FOR i IN 1..3000 LOOP
		b := CASE WHEN random() < 0.05 THEN NULL
			WHEN random() < 0.85 THEN pg_temp.rnd_object(0) ELSE pg_temp.rnd_value(1) END;
		s := pg_temp.rnd_spent_for(b);
		got := job_state.budget_exhausted(b, s);
		IF got IS DISTINCT FROM pg_temp.exhausted(b, s) THEN
			INSERT INTO mismatch VALUES ('budget_exhausted', b, s,
				pg_temp.exhausted(b, s)::text, got::text);
		END IF;
		INSERT INTO seen VALUES ('budget_exhausted', got::text, 1);
	END LOOP;
END
$$;

-- the job trigger on UPDATE of spent (JsMeterAmountValid): from a valid old
-- spent to a random new one, accepted exactly when spent_update_ok(old, new);
-- refused with JS003 (illegal transition).  Each case is rolled back.
SELECT set_config('prop.job', job_id::text, false) AS prop_job
	FROM job_state.submit('prop', '{}', budget => '{"a": 100, "b": 100, "c": 100}') \gset
DO $$
DECLARE
	j bigint := current_setting('prop.job')::bigint;
	old jsonb;
	new jsonb;
	got text;
	expected text;
BEGIN
	FOR i IN 1..1500 LOOP
		SELECT COALESCE(jsonb_object_agg(k, pg_temp.rnd_pick('0', '1', '2.5', '1e-20', '50')::numeric), '{}')
			INTO old FROM unnest(ARRAY['a', 'b', 'c']) k WHERE random() < 0.6;
		new := CASE WHEN random() < 0.7
			THEN (SELECT COALESCE(jsonb_object_agg(key,
					CASE WHEN random() < 0.8
						THEN to_jsonb(value::numeric + pg_temp.rnd_pick('0', '1', '-1', '1e-20', '-1e-20', '-60')::numeric)
						ELSE pg_temp.rnd_value(2) END), '{}')
				FROM jsonb_each(old) WHERE random() < 0.9) ||
				CASE WHEN random() < 0.3 THEN pg_temp.rnd_object(1) ELSE '{}' END
			ELSE pg_temp.rnd_value(1) END;
		BEGIN
			UPDATE job_state.job SET spent = old WHERE id = j;
			BEGIN
				UPDATE job_state.job SET spent = new WHERE id = j;
				got := 'accepted';
			EXCEPTION WHEN OTHERS THEN
				got := SQLSTATE;
			END;
			RAISE EXCEPTION USING ERRCODE = 'P0003';	-- roll both back
		EXCEPTION WHEN too_many_rows THEN
			NULL;
		END;
		expected := CASE WHEN pg_temp.spent_update_ok(old, new) THEN 'accepted' ELSE 'JS003' END;
		IF got IS DISTINCT FROM expected THEN
			INSERT INTO mismatch VALUES ('spent update', old, new, expected, got);
		END IF;
		INSERT INTO seen VALUES ('spent update', got, 1);
	END LOOP;
END
$$;

-- every disagreement, with its inputs (none expected)
\x on
SELECT property, input, other, expected, got FROM mismatch ORDER BY 1 LIMIT 20;
\x off
-- both outcomes of every property came up often enough to mean something
SELECT property, outcome, sum(n) >= 100 AS at_least_100 FROM seen GROUP BY 1, 2 ORDER BY 1, 2;
