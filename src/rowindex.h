/*-------------------------------------------------------------------------
 *
 * rowindex.h
 *	  The indexes a row writer maintains, with each plain btree index's
 *	  IndexInfo kept per backend (rowindex.c), and the end-of-transaction
 *	  release of a backend cache's replaced memory.
 *
 *-------------------------------------------------------------------------
 */
#ifndef JS_ROWINDEX_H
#define JS_ROWINDEX_H

#include "nodes/execnodes.h"

extern void JsOpenIndices(ResultRelInfo *rri, bool speculative);
extern bool JsOnlyBuiltinFunctions(Node *node);
extern void JsRetireContext(MemoryContext context);

#endif							/* JS_ROWINDEX_H */
