/*-------------------------------------------------------------------------
 *
 * unreachable.c
 *	  Backend symbols that src/token.c and src/cron.c reference only on
 *	  paths the fuzz harnesses never take (SPI, the per-backend caches,
 *	  locks, the MAC, the queue privilege and visibility checks, the
 *	  durability floor, SQL argument detoasting, interrupt processing).  Each aborts naming itself, so a harness
 *	  that strays there fails loudly instead of running a fake.  No
 *	  prototypes are included: these exist only to satisfy the linker.
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>

void	   *CacheMemoryContext = NULL;
void	   *SPI_tuptable = NULL;

#define JS_UNREACHABLE(name) \
	void name(void); \
	void name(void) \
	{ \
		fprintf(stderr, "fuzz: %s reached; no harness should call it\n", #name); \
		abort(); \
	}

JS_UNREACHABLE(AllocSetContextCreateInternal)
JS_UNREACHABLE(CacheInvalidateRelcacheByRelid)
JS_UNREACHABLE(GetOuterUserId)
JS_UNREACHABLE(GetUserNameFromId)
JS_UNREACHABLE(JsExecute)
JS_UNREACHABLE(JsExecuteLatest)
JS_UNREACHABLE(JsGetDatumCopy)
JS_UNREACHABLE(JsGetText)
JS_UNREACHABLE(JsHashCreate)
JS_UNREACHABLE(JsOnRelcache)
JS_UNREACHABLE(JsOwnRelid)
JS_UNREACHABLE(JsQueueAllows)
JS_UNREACHABLE(JsQueueHasAcl)
JS_UNREACHABLE(JsQueueVisible)
JS_UNREACHABLE(JsRaiseSynchronousCommit)
JS_UNREACHABLE(JsRefuseNull)
JS_UNREACHABLE(JsRequireQueuePrivilege)
JS_UNREACHABLE(JsSyncCommitLevel)
JS_UNREACHABLE(LockRelationOid)
JS_UNREACHABLE(MemoryContextAlloc)
JS_UNREACHABLE(MemoryContextReset)
JS_UNREACHABLE(MemoryContextStrdup)
JS_UNREACHABLE(PreventCommandIfReadOnly)
JS_UNREACHABLE(ProcessInterrupts)
JS_UNREACHABLE(SPI_connect)
JS_UNREACHABLE(SPI_finish)
JS_UNREACHABLE(SPI_getbinval)
JS_UNREACHABLE(cstring_to_text)
JS_UNREACHABLE(hash_search)
JS_UNREACHABLE(pg_detoast_datum_copy)
JS_UNREACHABLE(pg_detoast_datum_packed)
JS_UNREACHABLE(pg_hmac_create)
JS_UNREACHABLE(pg_hmac_final)
JS_UNREACHABLE(pg_hmac_free)
JS_UNREACHABLE(pg_hmac_init)
JS_UNREACHABLE(pg_hmac_update)
JS_UNREACHABLE(pg_strong_random)
JS_UNREACHABLE(text_to_cstring)
