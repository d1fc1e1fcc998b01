/*-------------------------------------------------------------------------
 *
 * submit.c
 *	  Idempotent submit.
 *
 * (queue, idempotency_key) is unique (partial unique index).  The insert
 * uses ON CONFLICT DO NOTHING, so two sessions submitting the same key at
 * once get one job: the second waits for the first to commit and then finds
 * its row.  The input hash is SHA-256 over the canonical text of the jsonb
 * (jsonb already orders and de-duplicates keys); the job trigger computes
 * it for the new row, and submit computes it again only when it meets an
 * existing key.
 *
 * Locks: the row lock of the conflicting insert, nothing else.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/cryptohash.h"
#include "common/sha2.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/tuplestore.h"

#include "job_state.h"

PG_FUNCTION_INFO_V1(js_submit);

bytea *
JsInputHash(Jsonb *input)
{
	char	   *text = JsonbToCString(NULL, &input->root, VARSIZE(input));
	bytea	   *hash = palloc(VARHDRSZ + PG_SHA256_DIGEST_LENGTH);
	pg_cryptohash_ctx *ctx = pg_cryptohash_create(PG_SHA256);

	if (ctx == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	if (pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, (uint8 *) text, strlen(text)) < 0 ||
		pg_cryptohash_final(ctx, (uint8 *) VARDATA(hash), PG_SHA256_DIGEST_LENGTH) < 0)
	{
		pg_cryptohash_free(ctx);
		elog(ERROR, "job_state: could not hash the job input");
	}
	pg_cryptohash_free(ctx);
	SET_VARSIZE(hash, VARHDRSZ + PG_SHA256_DIGEST_LENGTH);
	pfree(text);
	return hash;
}

/* the new job (the job trigger writes its first history row) */
static JsPlan insert_plan = {
	"INSERT INTO job_state.job AS j (queue, idempotency_key, input, input_hash,"
	"  priority, run_after, max_attempts, deadline, budget, resource,"
	"  concurrency_key, submitted_by)"
	" SELECT q.name, $3, $2, ''::pg_catalog.bytea, $5,"
	"  COALESCE($4, pg_catalog.now()),"
	"  COALESCE($6, q.max_attempts), $7, $8, $9, $10, $11"
	"  FROM job_state.queue q WHERE q.name = $1"
	" ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL"
	" DO NOTHING"
	" RETURNING j.id, j.status",
	11, {TEXTOID, JSONBOID, TEXTOID, TIMESTAMPTZOID, INT4OID, INT4OID,
	TIMESTAMPTZOID, JSONBOID, TEXTOID, TEXTOID, TEXTOID}
};

static JsPlan existing_plan = {
	"SELECT id, status, input_hash FROM job_state.job"
	" WHERE queue = $1 AND idempotency_key = $2",
	2, {TEXTOID, TEXTOID}
};

static JsPlan resource_exists_plan = {
	"SELECT 1 FROM job_state.resource WHERE name = $1",
	1, {TEXTOID}
};

/* claim takes the slot path in queues with jobs that name a resource */
static JsPlan uses_resources_plan = {
	"UPDATE job_state.queue SET uses_resources = true"
	" WHERE name = $1 AND NOT uses_resources",
	1, {TEXTOID}
};

static JsPlan per_key_limit_plan = {
	"SELECT per_key_limit FROM job_state.queue"
	" WHERE name = $1 AND per_key_limit IS NOT NULL",
	1, {TEXTOID}
};

static JsPlan queue_exists_plan = {
	"SELECT 1 FROM job_state.queue WHERE name = $1",
	1, {TEXTOID}
};

/*
 * A new job that names a resource or a concurrency key: check the resource
 * and make sure claim will find the slots it needs.
 */
static void
JsSubmitLimits(FunctionCallInfo fcinfo, const char *queue)
{
	Datum		arg;

	if (!PG_ARGISNULL(8))
	{
		arg = PG_GETARG_DATUM(8);
		if (JsExecute(&resource_exists_plan, &arg, NULL, true, 1) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_JS_NO_SUCH_OBJECT),
					 errmsg("resource \"%s\" does not exist",
							text_to_cstring(PG_GETARG_TEXT_PP(8))),
					 errhint("Create it with job_state.create_resource().")));
		arg = CStringGetTextDatum(queue);
		JsExecute(&uses_resources_plan, &arg, NULL, false, 0);
	}
	if (!PG_ARGISNULL(9))
	{
		arg = CStringGetTextDatum(queue);
		if (JsExecute(&per_key_limit_plan, &arg, NULL, true, 1) == 1)
			JsEnsureSlots("key", queue, text_to_cstring(PG_GETARG_TEXT_PP(9)),
						  JsGetInt32(0, 1, NULL));
	}
}

Datum
js_submit(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *queue;
	Jsonb	   *input;
	char	   *key = NULL;
	Datum		values[11];
	char		nulls[11];
	Datum		key_values[2];
	Datum		out[3];
	bool		outnulls[3] = {false, false, false};
	int			i;

	JsRefuseNull(fcinfo, 0, "queue");
	JsRefuseNull(fcinfo, 1, "input");
	queue = text_to_cstring(PG_GETARG_TEXT_PP(0));
	input = PG_GETARG_JSONB_P(1);
	if (!PG_ARGISNULL(2))
	{
		key = text_to_cstring(PG_GETARG_TEXT_PP(2));
		JsCheckKey("idempotency key", key);
	}
	if (!PG_ARGISNULL(5) && PG_GETARG_INT32(5) < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_attempts must be at least 1"),
				 errdetail("The value given is %d.", PG_GETARG_INT32(5))));
	if (!PG_ARGISNULL(7))
		JsCheckBudget(PG_GETARG_JSONB_P(7));
	if (!PG_ARGISNULL(8))
		JsCheckName("resource", text_to_cstring(PG_GETARG_TEXT_PP(8)));
	if (!PG_ARGISNULL(9))
		JsCheckKey("concurrency key", text_to_cstring(PG_GETARG_TEXT_PP(9)));

	/* the plan's parameters are submit's arguments, in order */
	for (i = 0; i < 10; i++)
	{
		values[i] = PG_ARGISNULL(i) ? (Datum) 0 : PG_GETARG_DATUM(i);
		nulls[i] = PG_ARGISNULL(i) ? 'n' : ' ';
	}
	if (PG_ARGISNULL(4))
	{
		values[4] = Int32GetDatum(0);
		nulls[4] = ' ';
	}
	/* the caller, not the definer: follows SET ROLE */
	values[10] = CStringGetTextDatum(GetUserNameFromId(GetOuterUserId(), false));
	nulls[10] = ' ';
	key_values[0] = values[0];
	key_values[1] = values[2];

	JsInitMaterialized(fcinfo);

	SPI_connect();
	for (;;)
	{
		bool		isnull;

		if (JsExecute(&insert_plan, values, nulls, false, 0) == 1)
		{
			out[0] = Int64GetDatum(JsGetInt64(0, 1, NULL));
			out[1] = BoolGetDatum(true);
			out[2] = JsGetDatumCopy(0, 2, &isnull);
			JsSubmitLimits(fcinfo, queue);
			JsNotifyNewJob(queue);
			break;
		}

		if (key != NULL &&
			JsExecute(&existing_plan, key_values, NULL, false, 1) == 1)
		{
			int64		job_id = JsGetInt64(0, 1, NULL);
			bytea	   *stored = DatumGetByteaPP(JsGetDatumCopy(0, 3, &isnull));
			bytea	   *mine = JsInputHash(input);

			if (VARSIZE_ANY_EXHDR(stored) != VARSIZE_ANY_EXHDR(mine) ||
				memcmp(VARDATA_ANY(stored), VARDATA_ANY(mine),
					   VARSIZE_ANY_EXHDR(mine)) != 0)
				ereport(ERROR,
						(errcode(ERRCODE_JS_IDEMPOTENCY_CONFLICT),
						 errmsg("idempotency key \"%s\" of queue \"%s\" was used with a different input",
								key, queue),
						 errdetail("Job %lld holds this key; its input hash differs from this input's.",
								   (long long) job_id),
						 errhint("Use a new idempotency key for a different input, or resend the original input.")));
			out[0] = Int64GetDatum(job_id);
			out[1] = BoolGetDatum(false);
			out[2] = JsGetDatumCopy(0, 2, &isnull);
			break;
		}

		if (JsExecute(&queue_exists_plan, values, NULL, false, 1) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_JS_NO_SUCH_OBJECT),
					 errmsg("queue \"%s\" does not exist", queue),
					 errhint("Create it with job_state.create_queue().")));
		/* the job holding the key was purged meanwhile: insert again */
	}
	SPI_finish();

	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, outnulls);
	return (Datum) 0;
}
