/*-------------------------------------------------------------------------
 *
 * token.c
 *	  The job_state.claim_token type: text and binary I/O, accessors, and
 *	  the MAC that makes a token unforgeable.
 *
 * A token is 32 bytes: job id, generation, queue number, the claim's
 * nonce and the first 12 bytes of
 * HMAC-SHA-256(secret, "job_state/2" || id || generation || queue || nonce),
 * all integers big-endian.  The nonce is the job row's claim_nonce, a
 * random value every new generation draws (fsm.c): a claim that a server
 * never saw (lost in a failover, or made on another server) has a nonce
 * that server's row does not hold, so its token is refused there even
 * where the generation is the same.  The fence of every statement that
 * acts on a claim compares generation and nonce (JS_FENCE_NONCE).
 * Tokens minted by the 0.1.0 library hold a 16-byte MAC of
 * "job_state/1" || id || generation || queue in place of nonce and MAC:
 * they verify as nonce 0, the claim_nonce of every row claimed before
 * the update, so they work until their job's next generation.  Its text
 * form is the unpadded base64url of the big-endian layout (43
 * characters).  Parsing checks only the form; the MAC is checked when a
 * token is used (JsTokenCheck), before anything else, so a forged token
 * learns nothing about the job.
 *
 * The keys live in job_state.secret, readable only by the extension owner
 * (our SECURITY DEFINER functions).  The newest key signs new tokens; a
 * token verifies under any of the JS_MAX_SECRETS newest keys, newest first,
 * so tokens in flight survive one rotate_secret() (the previous key is
 * kept) and are refused once their key is retired.  The keys and the
 * queue-number-to-name map are cached per backend; any change to the
 * secret table (rotate_secret, raw SQL, DROP EXTENSION) sends a relcache
 * invalidation of it at commit (its statement trigger, js_secret_trigger),
 * which empties the cache of every backend before its next transaction.
 * With the keys the cache keeps the MACs of the tokens it last signed or
 * verified with the newest one (js_mac_memo), emptied with them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/trigger.h"
#include "common/base64.h"
#include "common/cryptohash.h"
#include "common/hmac.h"
#include "common/sha2.h"
#include "libpq/pqformat.h"
#include "miscadmin.h"
#include "port/pg_bswap.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"

#include "job_state.h"
#include "tables.h"
#include "token.h"
#include "acl.h"
#include "dispatch.h"

#define JS_TOKEN_TEXT_LEN	43	/* base64url of 32 bytes, no padding */
#define JS_SECRET_LEN		32
#define JS_MAC_DOMAIN		"job_state/2"
#define JS_MAC_DOMAIN_0_1	"job_state/1"	/* tokens of the 0.1.0 library */
#define JS_MAX_SECRETS		8	/* keys a token may verify under */

PG_FUNCTION_INFO_V1(js_claim_token_in);
PG_FUNCTION_INFO_V1(js_claim_token_out);
PG_FUNCTION_INFO_V1(js_claim_token_recv);
PG_FUNCTION_INFO_V1(js_claim_token_send);
PG_FUNCTION_INFO_V1(js_claim_token_eq);
PG_FUNCTION_INFO_V1(js_claim_token_ne);
PG_FUNCTION_INFO_V1(js_token_job);
PG_FUNCTION_INFO_V1(js_token_generation);
PG_FUNCTION_INFO_V1(js_new_secret);
PG_FUNCTION_INFO_V1(js_rotate_secret);
PG_FUNCTION_INFO_V1(js_secret_trigger);

/* Per-backend cache: MAC key and queue names */
typedef struct JsQueueNameEntry
{
	int32		queue_id;		/* hash key */
	char	   *name;
	Acl		   *acl;			/* NULL: open (acl.c) */
	int			min_sync;		/* min_synchronous_commit's level; -1: none */
} JsQueueNameEntry;

static MemoryContext JsCacheContext = NULL;
static uint8 *js_secrets[JS_MAX_SECRETS];	/* newest first */
static int	js_secret_lens[JS_MAX_SECRETS];
static int	js_nsecrets = 0;
static Oid	js_secret_relid = InvalidOid;
static Oid	js_queue_relid = InvalidOid;
static HTAB *js_queue_names = NULL;

/*
 * The MACs under the newest key of the tokens this backend minted or
 * last verified, by token fields: a worker that claims a job and then acts
 * on it through the same session presents a token minted here, and its
 * MAC is compared with the one kept instead of being computed again (an
 * HMAC-SHA-256 through OpenSSL 3 costs about as much as a claim's index
 * inserts).  A kept MAC is exactly what JsComputeMac(0, ...) returns for
 * those fields, so comparing with it is comparing with a fresh
 * computation; a token that does not match goes the full way through
 * every key.  Direct-mapped by job id; emptied whenever the keys are
 * (JsCacheReset), so no MAC outlives its key.
 */
#define JS_MAC_MEMO_SIZE	64	/* a power of 2 */

typedef struct JsMacMemo
{
	int64		job_id;
	int32		generation;
	int32		queue_id;
	int32		nonce;			/* what the token stands for */
	bool		valid;
	uint8		tail[JS_TOKEN_TAIL_LEN];
} JsMacMemo;

static JsMacMemo js_mac_memo[JS_MAC_MEMO_SIZE];

static JsPlan secret_plan = {
	"SELECT key, 'job_state.secret'::pg_catalog.regclass::pg_catalog.oid"
	"  FROM job_state.secret ORDER BY created_at DESC"
	"  LIMIT " CppAsString2(JS_MAX_SECRETS),
	0, {0}
};

static JsPlan add_secret_plan = {
	"INSERT INTO job_state.secret (created_at, key)"
	" VALUES (pg_catalog.clock_timestamp(), job_state.new_secret())",
	0, {0}
};

/* every key older than the $1 newest */
static JsPlan retire_secrets_plan = {
	"DELETE FROM job_state.secret"
	" WHERE created_at OPERATOR(pg_catalog.<) (SELECT s.created_at FROM job_state.secret s"
	"  ORDER BY s.created_at DESC OFFSET $1 OPERATOR(pg_catalog.-) 1 LIMIT 1)",
	1, {INT4OID}
};

static JsPlan queue_name_plan = {
	"SELECT name, acl, 'job_state.queue'::pg_catalog.regclass::pg_catalog.oid,"
	"  min_synchronous_commit"
	"  FROM job_state.queue WHERE id OPERATOR(pg_catalog.=) $1",
	1, {INT4OID}
};

/* before ALTER EXTENSION UPDATE to 0.2.0: no acl, every queue open, no floor */
static JsPlan queue_name_plan_0_1 = {
	"SELECT name, NULL::pg_catalog.aclitem[],"
	"  'job_state.queue'::pg_catalog.regclass::pg_catalog.oid, NULL::pg_catalog.text"
	"  FROM job_state.queue WHERE id OPERATOR(pg_catalog.=) $1",
	1, {INT4OID}
};

static void
JsCacheReset(void)
{
	if (JsCacheContext != NULL)
		MemoryContextReset(JsCacheContext);
	js_nsecrets = 0;
	memset(js_mac_memo, 0, sizeof(js_mac_memo));
	js_secret_relid = InvalidOid;
	js_queue_relid = InvalidOid;
	js_queue_names = NULL;
}

static void
JsRelcacheCallback(Datum arg, Oid relid)
{
	/* a queue's privileges change: the queue trigger invalidates the table */
	if (relid == InvalidOid || relid == js_secret_relid || relid == js_queue_relid)
		JsCacheReset();
}

static void
JsCacheInit(void)
{
	if (JsCacheContext == NULL)
		JsCacheContext = AllocSetContextCreate(CacheMemoryContext,
											   "job_state cache",
											   ALLOCSET_SMALL_SIZES);
	JsOnRelcache(JsRelcacheCallback);
}

/* load the keys into the cache; returns how many there are (at least 1) */
static int
JsLoadSecrets(void)
{
	if (js_nsecrets == 0)
	{
		int			n;
		int			i;
		bool		isnull;

		JsCacheInit();
		n = JsExecute(&secret_plan, NULL, NULL, true, JS_MAX_SECRETS);
		if (n < 1)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("job_state has no MAC secret"),
					 errhint("Run job_state.rotate_secret(), or restore job_state.secret from a dump.")));
		for (i = 0; i < n; i++)
		{
			bytea	   *key = DatumGetByteaPP(SPI_getbinval(SPI_tuptable->vals[i],
															SPI_tuptable->tupdesc,
															1, &isnull));

			js_secret_lens[i] = VARSIZE_ANY_EXHDR(key);
			js_secrets[i] = MemoryContextAlloc(JsCacheContext, js_secret_lens[i]);
			memcpy(js_secrets[i], VARDATA_ANY(key), js_secret_lens[i]);
		}
		js_secret_relid = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
														 SPI_tuptable->tupdesc,
														 2, &isnull));
		js_nsecrets = n;
	}
	return js_nsecrets;
}

/* copy of key number keyno (0 = newest) in the caller's context */
static uint8 *
JsSecret(int keyno, int *len)
{
	uint8	   *copy;

	Assert(keyno < js_nsecrets);
	copy = palloc(js_secret_lens[keyno]);
	memcpy(copy, js_secrets[keyno], js_secret_lens[keyno]);
	*len = js_secret_lens[keyno];
	return copy;
}

/*
 * The MAC of a token's fields under key keyno: 12 bytes over the nonce as
 * well (legacy false), or the 0.1.0 library's 16 bytes without it.
 */
static void
JsComputeMac(int keyno, int64 job_id, int32 generation, int32 queue_id,
			 uint32 nonce, bool legacy, uint8 *mac)
{
	uint8		msg[sizeof(JS_MAC_DOMAIN) - 1 + 20];
	uint8		digest[PG_SHA256_DIGEST_LENGTH];
	uint64		id_be = pg_hton64((uint64) job_id);
	uint32		gen_be = pg_hton32((uint32) generation);
	uint32		queue_be = pg_hton32((uint32) queue_id);
	uint32		nonce_be = pg_hton32(nonce);
	size_t		off = sizeof(JS_MAC_DOMAIN) - 1;
	uint8	   *key;
	int			keylen;
	pg_hmac_ctx *ctx;

	StaticAssertStmt(sizeof(JS_MAC_DOMAIN) == sizeof(JS_MAC_DOMAIN_0_1),
					 "the MAC domains have one length");
	memcpy(msg, legacy ? JS_MAC_DOMAIN_0_1 : JS_MAC_DOMAIN, off);
	memcpy(msg + off, &id_be, 8);
	memcpy(msg + off + 8, &gen_be, 4);
	memcpy(msg + off + 12, &queue_be, 4);
	memcpy(msg + off + 16, &nonce_be, 4);

	key = JsSecret(keyno, &keylen);
	ctx = pg_hmac_create(PG_SHA256);
	if (ctx == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	if (pg_hmac_init(ctx, key, keylen) < 0 ||
		pg_hmac_update(ctx, msg, legacy ? off + 16 : off + 20) < 0 ||
		pg_hmac_final(ctx, digest, sizeof(digest)) < 0)
	{
		pg_hmac_free(ctx);
		elog(ERROR, "job_state: could not compute the token MAC");
	}
	pg_hmac_free(ctx);
	memcpy(mac, digest, legacy ? JS_TOKEN_TAIL_LEN : JS_TOKEN_MAC_LEN);
	explicit_bzero(key, keylen);
	pfree(key);
}

/* the nonce a token carries (not yet verified) */
static inline uint32
JsTokenTailNonce(const JsClaimToken *token)
{
	uint32		nonce_be;

	memcpy(&nonce_be, token->tail, JS_TOKEN_NONCE_LEN);
	return pg_ntoh32(nonce_be);
}

/* in constant time */
static inline bool
JsSameBytes(const uint8 *a, const uint8 *b, int len)
{
	uint8		diff = 0;
	int			i;

	for (i = 0; i < len; i++)
		diff |= a[i] ^ b[i];
	return diff == 0;
}

static inline JsMacMemo *
JsMacMemoSlot(const JsClaimToken *token)
{
	return &js_mac_memo[(uint64) token->job_id & (JS_MAC_MEMO_SIZE - 1)];
}

/* keep the MAC of a token signed with the newest key, and its nonce */
static void
JsMacMemoRemember(const JsClaimToken *token, int32 nonce)
{
	JsMacMemo  *m = JsMacMemoSlot(token);

	m->job_id = token->job_id;
	m->generation = token->generation;
	m->queue_id = token->queue_id;
	m->nonce = nonce;
	memcpy(m->tail, token->tail, JS_TOKEN_TAIL_LEN);
	m->valid = true;
}

/* is the token, MAC and all, one kept: signed with the newest key? */
static bool
JsMacMemoHolds(const JsClaimToken *token, int32 *nonce)
{
	const JsMacMemo *m = JsMacMemoSlot(token);

	if (!m->valid || m->job_id != token->job_id ||
		m->generation != token->generation || m->queue_id != token->queue_id)
		return false;
	/* in constant time, as the full check */
	if (!JsSameBytes(m->tail, token->tail, JS_TOKEN_TAIL_LEN))
		return false;
	*nonce = m->nonce;
	return true;
}

/*
 * A claim's nonce: random, never 0 (the nonce of rows and tokens from
 * before 0.2.0).  pg_strong_random, so that no worker can predict the
 * nonce of a claim it did not make.
 */
int32
JsNewClaimNonce(void)
{
	int32		nonce = 0;

	while (nonce == 0)
	{
		if (!pg_strong_random(&nonce, sizeof(nonce)))
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not generate a random claim nonce")));
	}
	return nonce;
}

JsClaimToken *
JsTokenMint(int64 job_id, int32 generation, int32 queue_id, int32 nonce)
{
	JsClaimToken *token = palloc(sizeof(JsClaimToken));
	uint32		nonce_be = pg_hton32((uint32) nonce);

	token->job_id = job_id;
	token->generation = generation;
	token->queue_id = queue_id;
	memcpy(token->tail, &nonce_be, JS_TOKEN_NONCE_LEN);
	(void) JsLoadSecrets();
	JsComputeMac(0, job_id, generation, queue_id, (uint32) nonce, false,
				 token->tail + JS_TOKEN_NONCE_LEN);
	JsMacMemoRemember(token, nonce);
	return token;
}

/* JS008 for a token's queue that is gone, or that the caller may not see */
pg_noreturn static void
JsTokenQueueMissing(int32 queue_id)
{
	ereport(ERROR,
			(errcode(ERRCODE_JS_NO_SUCH_OBJECT),
			 errmsg("queue number %d does not exist", queue_id),
			 errdetail("The token names a queue that was dropped, or one this role holds no privilege on.")));
}

/*
 * Does the token's MAC verify under one of the keys?  Then *nonce is the
 * claim nonce it stands for: the one it carries, or 0 for a token of the
 * 0.1.0 library (a 16-byte MAC without nonce).  Needs SPI.
 */
static bool
JsTokenMacVerifies(const JsClaimToken *token, int32 *nonce)
{
	uint8		mac[JS_TOKEN_TAIL_LEN];
	int			keyno;

	/* the keys first: taking in an invalidation of them empties the memo */
	if (JsLoadSecrets() > 0 && JsMacMemoHolds(token, nonce))
		return true;
	/* the cache holds at most JS_MAX_SECRETS keys: bounded loops */
	for (keyno = 0; keyno < JsLoadSecrets(); keyno++)
	{
		JsComputeMac(keyno, token->job_id, token->generation, token->queue_id,
					 JsTokenTailNonce(token), false, mac);
		if (JsSameBytes(mac, token->tail + JS_TOKEN_NONCE_LEN, JS_TOKEN_MAC_LEN))
		{
			*nonce = (int32) JsTokenTailNonce(token);
			/* signed elsewhere (or no longer kept), with the newest key */
			if (keyno == 0)
				JsMacMemoRemember(token, *nonce);
			return true;
		}
	}
	for (keyno = 0; keyno < JsLoadSecrets(); keyno++)
	{
		JsComputeMac(keyno, token->job_id, token->generation, token->queue_id,
					 0, true, mac);
		if (JsSameBytes(mac, token->tail, JS_TOKEN_TAIL_LEN))
		{
			*nonce = 0;
			if (keyno == 0)
				JsMacMemoRemember(token, 0);
			return true;
		}
	}
	return false;
}

/*
 * The claim nonce a token stands for (JsTokenMacVerifies), for a token
 * already checked; JS007 if it does not verify.  Needs SPI.
 */
int32
JsTokenNonce(const JsClaimToken *token)
{
	int32		nonce;

	if (!JsTokenMacVerifies(token, &nonce))
		ereport(ERROR,
				(errcode(ERRCODE_JS_INVALID_TOKEN),
				 errmsg("claim token is not valid"),
				 errdetail("The token's signature does not verify."),
				 errhint("Use the token exactly as claim returned it.")));
	return nonce;
}

/*
 * Name and privileges of a queue by its number, palloc'd in the caller's
 * context (the cache may be reset by any later catalog access).  Read
 * under the latest snapshot: a revoke that committed before this backend
 * processed its invalidation is seen, and one that commits later resets
 * the cache when its invalidation arrives.
 */
static const char *
JsQueueNameAcl(int32 queue_id, Acl **acl, int *min_sync)
{
	JsQueueNameEntry *entry;
	bool		found;

	JsCacheInit();
	if (js_queue_names == NULL)
		js_queue_names = JsHashCreate("job_state queue names", 16, sizeof(int32),
									  sizeof(JsQueueNameEntry), HASH_BLOBS,
									  JsCacheContext);

	entry = hash_search(js_queue_names, &queue_id, HASH_FIND, NULL);
	if (entry == NULL)
	{
		Datum		arg = Int32GetDatum(queue_id);
		char	   *name;
		bool		isnull;
		Datum		acl_datum;
		Oid			relid;
		char	   *floor;

		if (JsExecuteLatest(JsQueueHasAcl() ? &queue_name_plan : &queue_name_plan_0_1,
							&arg, NULL, 1) != 1)
			JsTokenQueueMissing(queue_id);
		name = JsGetText(0, 1);
		acl_datum = JsGetDatumCopy(0, 2, &isnull);
		*acl = isnull ? NULL : DatumGetAclPCopy(acl_datum);
		relid = DatumGetObjectId(JsGetDatumCopy(0, 3, &isnull));
		floor = JsGetText(0, 4);
		*min_sync = floor != NULL ? JsSyncCommitLevel(floor) : -1;
		/* the lookup may have reset the cache: look again */
		if (js_queue_names == NULL)
			return pstrdup(name);
		entry = hash_search(js_queue_names, &queue_id, HASH_ENTER, &found);
		if (!found)
		{
			entry->name = MemoryContextStrdup(JsCacheContext, name);
			entry->min_sync = *min_sync;
			entry->acl = NULL;
			if (*acl != NULL)
			{
				entry->acl = MemoryContextAlloc(JsCacheContext, ACL_SIZE(*acl));
				memcpy(entry->acl, *acl, ACL_SIZE(*acl));
			}
			js_queue_relid = relid;
		}
		return pstrdup(name);
	}
	*min_sync = entry->min_sync;
	*acl = NULL;
	if (entry->acl != NULL)
	{
		*acl = palloc(ACL_SIZE(entry->acl));
		memcpy(*acl, entry->acl, ACL_SIZE(entry->acl));
	}
	return pstrdup(entry->name);
}

/*
 * The queue of a verified token: its name and privileges, or, for a role
 * that holds no privilege on it, the answer of a queue that is gone.
 */
static const char *
JsTokenQueue(const JsClaimToken *token, Acl **acl, int *min_sync)
{
	const char *queue = JsQueueNameAcl(token->queue_id, acl, min_sync);

	if (!JsQueueVisible(*acl, GetOuterUserId()))
		JsTokenQueueMissing(token->queue_id);
	return queue;
}

/*
 * Verify a token's MAC (JS007 if it does not verify) and return its queue
 * name and privileges.  Needs SPI.
 */
static const char *
JsTokenVerify(const JsClaimToken *token, Acl **acl, int32 *nonce)
{
	const char *queue;
	int			min_sync;

	if (!JsTokenMacVerifies(token, nonce))
		ereport(ERROR,
				(errcode(ERRCODE_JS_INVALID_TOKEN),
				 errmsg("claim token is not valid"),
				 errdetail("The token's signature does not verify."),
				 errhint("Use the token exactly as claim returned it.")));
	queue = JsTokenQueue(token, acl, &min_sync);
	/* what a call under the claim writes commits as the queue requires */
	JsRaiseSynchronousCommit(min_sync);
	return queue;
}

/*
 * Verify a token's MAC (JS007 if it does not verify) and the calling
 * role's claim privilege on its queue (42501), and return its queue name.
 * Needs SPI.
 */
static const char *
JsTokenCheckNonce(const JsClaimToken *token, int32 *nonce)
{
	Acl		   *acl;
	const char *queue = JsTokenVerify(token, &acl, nonce);

	/* a token is acted on only by a role that may claim from its queue */
	JsRequireQueuePrivilege(queue, acl, JS_QUEUE_CLAIM);
	return queue;
}

/*
 * The same for succeed, fail and heartbeat: the claim privilege or the
 * callback privilege of the token's queue will do (an external system
 * answering a job that waits for it holds only the latter).
 */
static const char *
JsTokenCheckCallbackNonce(const JsClaimToken *token, int32 *nonce)
{
	Acl		   *acl;
	const char *queue = JsTokenVerify(token, &acl, nonce);

	Oid			role = GetOuterUserId();

	/* a worker needs claim: name it, not callback, when both are missing */
	if (!JsQueueAllows(acl, role, JS_QUEUE_CLAIM) &&
		!JsQueueAllows(acl, role, JS_QUEUE_CALLBACK))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for queue \"%s\"", queue),
				 errdetail("Role \"%s\" holds neither the claim privilege nor the callback privilege on the queue.",
						   GetUserNameFromId(role, false)),
				 errhint("A worker acts on its claim with the claim privilege; an external system answering a waiting job needs only the callback privilege.  Both are granted with job_state.grant_queue().")));
	return queue;
}

const char *
JsTokenCheck(const JsClaimToken *token)
{
	int32		nonce;

	return JsTokenCheckNonce(token, &nonce);
}

const char *
JsTokenCheckCallback(const JsClaimToken *token)
{
	int32		nonce;

	return JsTokenCheckCallbackNonce(token, &nonce);
}

/*
 * The first four parameters of a fenced statement: $1 queue, $2 job id,
 * $3 generation, $4 the claim's nonce (token.h)
 */
static const char *
JsFenceParams(const char *queue, const JsClaimToken *token, int32 nonce,
			  Datum *values)
{
	values[0] = CStringGetTextDatum(queue);
	values[1] = Int64GetDatum(token->job_id);
	values[2] = Int32GetDatum(token->generation);
	values[3] = Int32GetDatum(nonce);
	return queue;
}

/*
 * Check a token (JsTokenCheck) and fill the first four parameters of a
 * fenced statement.  Needs SPI.
 */
const char *
JsTokenFence(const JsClaimToken *token, Datum *values)
{
	int32		nonce;
	const char *queue = JsTokenCheckNonce(token, &nonce);

	return JsFenceParams(queue, token, nonce, values);
}

/* JsTokenFence with JsTokenCheckCallback's privileges */
const char *
JsTokenFenceCallback(const JsClaimToken *token, Datum *values)
{
	int32		nonce;
	const char *queue = JsTokenCheckCallbackNonce(token, &nonce);

	return JsFenceParams(queue, token, nonce, values);
}

/*
 * I/O
 */
static void
JsTokenPack(const JsClaimToken *token, uint8 buf[32])
{
	uint64		id_be = pg_hton64((uint64) token->job_id);
	uint32		gen_be = pg_hton32((uint32) token->generation);
	uint32		queue_be = pg_hton32((uint32) token->queue_id);

	memcpy(buf, &id_be, 8);
	memcpy(buf + 8, &gen_be, 4);
	memcpy(buf + 12, &queue_be, 4);
	memcpy(buf + 16, token->tail, JS_TOKEN_TAIL_LEN);
}

static JsClaimToken *
JsTokenUnpack(const uint8 buf[32])
{
	JsClaimToken *token = palloc(sizeof(JsClaimToken));
	uint64		id_be;
	uint32		gen_be;
	uint32		queue_be;

	memcpy(&id_be, buf, 8);
	memcpy(&gen_be, buf + 8, 4);
	memcpy(&queue_be, buf + 12, 4);
	token->job_id = (int64) pg_ntoh64(id_be);
	token->generation = (int32) pg_ntoh32(gen_be);
	token->queue_id = (int32) pg_ntoh32(queue_be);
	memcpy(token->tail, buf + 16, JS_TOKEN_TAIL_LEN);
	return token;
}

#if PG_VERSION_NUM >= 180000
#define JS_B64_BYTES(p) ((uint8 *) (p))
#else
#define JS_B64_BYTES(p) ((char *) (p))
#endif

Datum
js_claim_token_in(PG_FUNCTION_ARGS)
{
	char	   *str = PG_GETARG_CSTRING(0);
	char		b64[JS_TOKEN_TEXT_LEN + 2];
	uint8		buf[32 + 4];
	size_t		len = strlen(str);
	int			i;

	if (len != JS_TOKEN_TEXT_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("invalid input syntax for type claim_token: \"%s\"", str),
				 errdetail("A claim token has %d characters.", JS_TOKEN_TEXT_LEN)));

	/* base64url -> base64 */
	for (i = 0; i < JS_TOKEN_TEXT_LEN; i++)
	{
		char		c = str[i];

		if (c == '-')
			c = '+';
		else if (c == '_')
			c = '/';
		else if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
				   (c >= '0' && c <= '9')))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
					 errmsg("invalid input syntax for type claim_token: \"%s\"", str),
					 errdetail("A claim token has only the characters A-Z, a-z, 0-9, \"-\" and \"_\".")));
		b64[i] = c;
	}
	b64[JS_TOKEN_TEXT_LEN] = '=';
	b64[JS_TOKEN_TEXT_LEN + 1] = '\0';

	/*
	 * The last character carries the last 4 bits of the 32 bytes and 2
	 * unused ones, which must be zero: otherwise four spellings would name
	 * one token (and compare unequal as text in a client's own tables).
	 */
	{
		char		c = b64[JS_TOKEN_TEXT_LEN - 1];
		int			v = c >= 'A' && c <= 'Z' ? c - 'A' :
			c >= 'a' && c <= 'z' ? c - 'a' + 26 :
			c >= '0' && c <= '9' ? c - '0' + 52 :
			c == '+' ? 62 : 63;

		if ((v & 3) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
					 errmsg("invalid input syntax for type claim_token: \"%s\"", str),
					 errdetail("The last character of a claim token encodes 4 bits; its 2 unused bits must be zero."),
					 errhint("Use the token exactly as claim returned it.")));
	}

	if (pg_b64_decode(b64, JS_TOKEN_TEXT_LEN + 1, JS_B64_BYTES(buf), sizeof(buf)) != 32)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("invalid input syntax for type claim_token: \"%s\"", str)));

	PG_RETURN_CLAIM_TOKEN(JsTokenUnpack(buf));
}

Datum
js_claim_token_out(PG_FUNCTION_ARGS)
{
	JsClaimToken *token = PG_GETARG_CLAIM_TOKEN(0);
	uint8		buf[32];
	char		b64[48];
	char	   *out;
	int			len;
	int			i;

	JsTokenPack(token, buf);
	len = pg_b64_encode(JS_B64_BYTES(buf), 32, b64, sizeof(b64));
	if (len < JS_TOKEN_TEXT_LEN)
		elog(ERROR, "job_state: could not encode a claim token");

	out = palloc(JS_TOKEN_TEXT_LEN + 1);
	for (i = 0; i < JS_TOKEN_TEXT_LEN; i++)
		out[i] = b64[i] == '+' ? '-' : b64[i] == '/' ? '_' : b64[i];
	out[JS_TOKEN_TEXT_LEN] = '\0';
	PG_RETURN_CSTRING(out);
}

Datum
js_claim_token_recv(PG_FUNCTION_ARGS)
{
	StringInfo	msg = (StringInfo) PG_GETARG_POINTER(0);
	const char *bytes;

	if (msg->len - msg->cursor != 32)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("invalid binary claim_token"),
				 errdetail("A claim token has 32 bytes, not %d.",
						   msg->len - msg->cursor)));
	bytes = pq_getmsgbytes(msg, 32);
	PG_RETURN_CLAIM_TOKEN(JsTokenUnpack((const uint8 *) bytes));
}

Datum
js_claim_token_send(PG_FUNCTION_ARGS)
{
	JsClaimToken *token = PG_GETARG_CLAIM_TOKEN(0);
	uint8		buf[32];
	StringInfoData out;

	JsTokenPack(token, buf);
	pq_begintypsend(&out);
	pq_sendbytes(&out, (const char *) buf, 32);
	PG_RETURN_BYTEA_P(pq_endtypsend(&out));
}

Datum
js_claim_token_eq(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(memcmp(PG_GETARG_POINTER(0), PG_GETARG_POINTER(1),
						  sizeof(JsClaimToken)) == 0);
}

Datum
js_claim_token_ne(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(memcmp(PG_GETARG_POINTER(0), PG_GETARG_POINTER(1),
						  sizeof(JsClaimToken)) != 0);
}

Datum
js_token_job(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(PG_GETARG_CLAIM_TOKEN(0)->job_id);
}

Datum
js_token_generation(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(PG_GETARG_CLAIM_TOKEN(0)->generation);
}

Datum
js_new_secret(PG_FUNCTION_ARGS)
{
	bytea	   *key = palloc(VARHDRSZ + JS_SECRET_LEN);

	SET_VARSIZE(key, VARHDRSZ + JS_SECRET_LEN);
	if (!pg_strong_random(VARDATA(key), JS_SECRET_LEN))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate a random MAC secret")));
	PG_RETURN_BYTEA_P(key);
}

/*
 * rotate_secret(keep_previous): a new key signs every token minted after
 * the commit; tokens signed by the previous key keep verifying while it is
 * kept, and every older key is retired, so the tokens it signed are
 * refused (JS007).  Rotations take turns on the table's lock.  Returns how
 * many keys were retired.
 */
Datum
js_rotate_secret(PG_FUNCTION_ARGS)
{
	Oid			relid;
	Datum		keep;
	int			retired;

	JsRefuseNull(fcinfo, 0, "keep_previous");
	keep = Int32GetDatum(PG_GETARG_BOOL(0) ? 2 : 1);
	PreventCommandIfReadOnly("rotate_secret()");
	relid = JsOwnRelid("secret");
	LockRelationOid(relid, ShareRowExclusiveLock);
	SPI_connect();
	JsExecute(&add_secret_plan, NULL, NULL, false, 0);
	retired = JsExecute(&retire_secrets_plan, &keep, NULL, false, 0);
	SPI_finish();
	CacheInvalidateRelcacheByRelid(relid);
	PG_RETURN_INT32(retired);
}

/*
 * After any statement that changes job_state.secret, raw SQL included: its
 * relcache invalidation, sent to every backend at commit, empties their
 * cached keys (JsRelcacheCallback), so a key removed is refused everywhere
 * from the next transaction on.
 */
Datum
js_secret_trigger(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		elog(ERROR, "job_state_secret: not called by trigger manager");
	if (!TRIGGER_FIRED_AFTER(trigdata->tg_event) ||
		!TRIGGER_FIRED_FOR_STATEMENT(trigdata->tg_event))
		elog(ERROR, "job_state_secret: must be fired after each statement");
	CacheInvalidateRelcacheByRelid(RelationGetRelid(trigdata->tg_relation));
	return PointerGetDatum(NULL);
}
