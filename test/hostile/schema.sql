-- A hostile schema for the test suites' second run (tools/test): it is put
-- ahead of pg_catalog in the test database's search_path, and shadows the
-- operators and functions that SQL commonly uses without a schema, for the
-- types our tables have.  Each shadow computes what pg_catalog's does (the
-- suites' own statements use them and must give the same results), so the
-- shadows are found by name resolution only: with
-- job_state.check_statement_names on, a job_state statement that resolves
-- any of them is refused, and the suite run fails.
CREATE SCHEMA hostile;
GRANT USAGE ON SCHEMA hostile TO PUBLIC;

DO $$
DECLARE
	o record;
	f record;
	n int := 0;
BEGIN
	FOR o IN
		SELECT op.oprname, op.oprleft::regtype AS l, op.oprright::regtype AS r,
		       op.oprcode::regproc AS code
		  FROM pg_catalog.pg_operator op
		 WHERE op.oprnamespace OPERATOR(pg_catalog.=) 'pg_catalog'::regnamespace
		   AND op.oprname OPERATOR(pg_catalog.=) ANY (ARRAY['=', '<>', '<', '>', '<=',
		       '>=', '+', '-', '||', '->>', '->', '?', '@>', '~~', '!~~'])
		   AND op.oprleft OPERATOR(pg_catalog.<>) 0
		   AND op.oprleft OPERATOR(pg_catalog.=) ANY (ARRAY['text', 'name', 'int2', 'int4', 'int8',
		       'bool', 'timestamptz', 'interval', 'jsonb', 'numeric', 'float8', 'oid',
		       'bytea', 'anyenum', 'anyarray', 'anyelement']::regtype[]::oid[])
	LOOP
		EXECUTE pg_catalog.format(
			'CREATE OPERATOR hostile.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = %s)',
			o.oprname, o.l, o.r, o.code);
		n := n OPERATOR(pg_catalog.+) 1;
	END LOOP;
	RAISE NOTICE 'hostile: % operators', n;

	n := 0;
	FOR f IN
		SELECT p.proname, pg_catalog.pg_get_function_identity_arguments(p.oid) AS args,
		       pg_catalog.pg_get_function_result(p.oid) AS res, p.pronargs,
		       p.provolatile, p.proretset
		  FROM pg_catalog.pg_proc p
		 WHERE p.pronamespace OPERATOR(pg_catalog.=) 'pg_catalog'::regnamespace
		   AND p.prokind OPERATOR(pg_catalog.=) 'f'
		   AND p.provariadic OPERATOR(pg_catalog.=) 0
		   AND p.proname OPERATOR(pg_catalog.=) ANY (ARRAY['now', 'clock_timestamp',
		       'statement_timestamp', 'transaction_timestamp', 'jsonb_set', 'to_jsonb',
		       'jsonb_each', 'jsonb_build_object', 'jsonb_object_keys', 'length',
		       'lower', 'upper', 'nextval', 'currval', 'generate_series', 'random',
		       'hashtext', 'pg_advisory_xact_lock', 'pg_try_advisory_xact_lock',
		       'txid_current', 'pg_current_xact_id', 'pg_notify', 'current_setting',
		       'set_config', 'gen_random_uuid', 'md5', 'sha256', 'encode', 'decode',
		       'date_trunc', 'extract', 'age', 'abs', 'floor', 'ceil', 'power', 'round',
		       'left', 'right', 'substr', 'strpos', 'replace', 'concat', 'array_length',
		       'cardinality', 'unnest', 'array_agg', 'string_agg'])
		   AND NOT EXISTS (
		       SELECT 1 FROM pg_catalog.unnest(p.proargtypes::oid[]) t
		        WHERE t OPERATOR(pg_catalog.=) ANY (ARRAY['anyelement', 'anyarray',
		              'anynonarray', 'anyenum', 'anycompatible', 'anycompatiblearray',
		              'internal', '"any"', 'anyrange', 'anymultirange']::regtype[]::oid[]))
		   AND p.prorettype OPERATOR(pg_catalog.<>) ALL (ARRAY['anyelement', 'anyarray',
		       'internal', 'record', 'anycompatible']::regtype[]::oid[])
	LOOP
		EXECUTE pg_catalog.format(
			'CREATE FUNCTION hostile.%I(%s) RETURNS %s LANGUAGE sql %s AS %L',
			f.proname, f.args, f.res,
			CASE f.provolatile WHEN 'i' THEN 'IMMUTABLE' WHEN 's' THEN 'STABLE' ELSE 'VOLATILE' END,
			pg_catalog.format('SELECT %s pg_catalog.%I(%s)',
				CASE WHEN f.proretset THEN '* FROM' ELSE '' END, f.proname,
				(SELECT pg_catalog.string_agg('$' OPERATOR(pg_catalog.||) i, ', ')
				   FROM pg_catalog.generate_series(1, f.pronargs) i)));
		n := n OPERATOR(pg_catalog.+) 1;
	END LOOP;
	RAISE NOTICE 'hostile: % functions', n;
END $$;
