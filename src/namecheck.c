/*-------------------------------------------------------------------------
 *
 * namecheck.c
 *	  A testing aid: prove that every statement job_state prepares names
 *	  only objects of pg_catalog and job_state, whatever the search_path.
 *
 * Our statements run under the caller's search_path (triggers) or their
 * database's (background workers).  A table, function, operator or type
 * named without its schema would resolve through that path, to an object
 * someone else planted ahead of pg_catalog.  With
 * job_state.check_statement_names on, each statement is checked once, when
 * spi.c prepares it: every relation, function, operator and type the
 * parsed and rewritten query refers to must live in pg_catalog or
 * job_state, or the statement is refused with an internal error naming
 * the object.  The test suites run once with a hostile schema ahead of
 * pg_catalog in search_path and this check on (tools/test), so that an
 * unqualified name anywhere fails them.
 *
 * Two checks, both when spi.c prepares a statement:
 *	- the statement as written (the raw parse tree): every table, function,
 *	  operator and type name carries its schema, and no construct is used
 *	  that looks an operator up by the search_path without a way to name
 *	  its schema (IN, BETWEEN, LIKE, IS DISTINCT FROM, NULLIF, CASE x WHEN,
 *	  JOIN USING).  This holds whatever the search_path is;
 *	- the statement as resolved: every relation, function, operator and
 *	  type it refers to lives in pg_catalog or job_state.  Under a hostile
 *	  search_path this catches whatever the first check cannot see.
 * Sort and group operators are not checked: ORDER BY, GROUP BY and
 * DISTINCT without USING take them from the type's default operator class,
 * never from the search_path.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "nodes/nodeFuncs.h"
#include "nodes/parsenodes.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/plancache.h"
#include "utils/regproc.h"
#include "utils/syscache.h"

#include "job_state.h"


typedef struct JsNameCheck
{
	Oid			own_namespace;
	const char *sql;
	List	   *cte_names;		/* names a FROM item may use without schema */
} JsNameCheck;

static void
JsRefuseUnqualified(JsNameCheck *check, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_INTERNAL_ERROR),
			 errmsg("job_state statement names %s without its schema", what),
			 errdetail("Statement: %s", check->sql),
			 errhint("Name the schema of every table, function, operator and type in SQL that job_state runs; write OPERATOR(pg_catalog.=) ANY (...) for IN, and spell out BETWEEN, LIKE and IS DISTINCT FROM with qualified operators.")));
}

/* the CTE names of a statement, wherever their WITH stands */
static bool
JsCollectCteNames(Node *node, JsNameCheck *check)
{
	if (node == NULL)
		return false;
	if (IsA(node, CommonTableExpr))
		check->cte_names = lappend(check->cte_names,
								   ((CommonTableExpr *) node)->ctename);
	return raw_expression_tree_walker(node, JsCollectCteNames, check);
}

static bool
JsIsCteName(JsNameCheck *check, const char *name)
{
	ListCell   *lc;

	foreach(lc, check->cte_names)
		if (strcmp((const char *) lfirst(lc), name) == 0)
			return true;
	return false;
}

static bool
JsRawNameWalker(Node *node, JsNameCheck *check)
{
	if (node == NULL)
		return false;

	switch (nodeTag(node))
	{
		case T_LockingClause:
			/* FOR UPDATE OF names the statement's own aliases */
			return false;
		case T_RangeVar:
			{
				RangeVar   *rv = (RangeVar *) node;

				if (rv->schemaname == NULL && !JsIsCteName(check, rv->relname))
					JsRefuseUnqualified(check, psprintf("table \"%s\"", rv->relname));
			}
			break;
		case T_FuncCall:
			if (list_length(((FuncCall *) node)->funcname) < 2)
				JsRefuseUnqualified(check,
									psprintf("function %s",
											 NameListToString(((FuncCall *) node)->funcname)));
			break;
		case T_TypeName:
			{
				TypeName   *tn = (TypeName *) node;

				if (tn->typeOid == InvalidOid && list_length(tn->names) < 2)
					JsRefuseUnqualified(check,
										psprintf("type %s", NameListToString(tn->names)));
			}
			break;
		case T_A_Expr:
			{
				A_Expr	   *e = (A_Expr *) node;

				if (e->kind != AEXPR_OP && e->kind != AEXPR_OP_ANY &&
					e->kind != AEXPR_OP_ALL)
					JsRefuseUnqualified(check, "an operator (IN, BETWEEN, LIKE, DISTINCT or NULLIF)");
				if (list_length(e->name) < 2)
					JsRefuseUnqualified(check,
										psprintf("operator %s", NameListToString(e->name)));
			}
			break;
		case T_SubLink:
			{
				SubLink    *sl = (SubLink *) node;

				if (sl->operName != NIL && list_length(sl->operName) < 2)
					JsRefuseUnqualified(check,
										psprintf("operator %s of a subquery",
												 NameListToString(sl->operName)));
			}
			break;
		case T_SortBy:
			{
				SortBy	   *sb = (SortBy *) node;

				if (sb->useOp != NIL && list_length(sb->useOp) < 2)
					JsRefuseUnqualified(check,
										psprintf("operator %s of ORDER BY USING",
												 NameListToString(sb->useOp)));
			}
			break;
		case T_CaseExpr:
			if (((CaseExpr *) node)->arg != NULL)
				JsRefuseUnqualified(check, "the \"=\" of CASE x WHEN");
			break;
		case T_JoinExpr:
			if (((JoinExpr *) node)->usingClause != NIL ||
				((JoinExpr *) node)->isNatural)
				JsRefuseUnqualified(check, "the \"=\" of JOIN USING or NATURAL JOIN");
			break;
		default:
			break;
	}
	return raw_expression_tree_walker(node, JsRawNameWalker, check);
}

static void
JsRefuseName(JsNameCheck *check, const char *kind, const char *name, Oid nsp)
{
	ereport(ERROR,
			(errcode(ERRCODE_INTERNAL_ERROR),
			 errmsg("job_state statement resolved %s %s through the search_path",
					kind, name),
			 errdetail("It lives in schema \"%s\", not in pg_catalog or job_state.  Statement: %s",
					   get_namespace_name(nsp), check->sql),
			 errhint("Name the schema of every table, function, operator and type in SQL that job_state runs.")));
}

static bool
JsForeign(JsNameCheck *check, Oid nsp)
{
	return nsp != PG_CATALOG_NAMESPACE && nsp != check->own_namespace;
}

static void
JsCheckOperator(JsNameCheck *check, Oid opno)
{
	HeapTuple	tup = SearchSysCache1(OPEROID, ObjectIdGetDatum(opno));
	Oid			nsp;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for operator %u", opno);
	nsp = ((Form_pg_operator) GETSTRUCT(tup))->oprnamespace;
	ReleaseSysCache(tup);
	if (JsForeign(check, nsp))
		JsRefuseName(check, "operator", format_operator(opno), nsp);
}

static void
JsCheckFunction(JsNameCheck *check, Oid funcid)
{
	Oid			nsp = get_func_namespace(funcid);

	if (JsForeign(check, nsp))
		JsRefuseName(check, "function", format_procedure(funcid), nsp);
}

static void
JsCheckType(JsNameCheck *check, Oid typid)
{
	HeapTuple	tup = SearchSysCache1(TYPEOID, ObjectIdGetDatum(typid));
	Oid			nsp;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for type %u", typid);
	nsp = ((Form_pg_type) GETSTRUCT(tup))->typnamespace;
	ReleaseSysCache(tup);
	if (JsForeign(check, nsp))
		JsRefuseName(check, "type", format_type_be(typid), nsp);
}

static bool
JsNameCheckWalker(Node *node, JsNameCheck *check)
{
	if (node == NULL)
		return false;

	if (IsA(node, Query))
		return query_tree_walker((Query *) node, JsNameCheckWalker, check,
								 QTW_EXAMINE_RTES_BEFORE);
	if (IsA(node, RangeTblEntry))
	{
		RangeTblEntry *rte = (RangeTblEntry *) node;
		Oid			nsp;

		if (rte->rtekind == RTE_RELATION)
		{
			nsp = get_rel_namespace(rte->relid);
			if (JsForeign(check, nsp))
				JsRefuseName(check, "relation", get_rel_name(rte->relid), nsp);
		}
		return false;
	}

	switch (nodeTag(node))
	{
		case T_OpExpr:
		case T_DistinctExpr:
		case T_NullIfExpr:
			JsCheckOperator(check, ((OpExpr *) node)->opno);
			break;
		case T_ScalarArrayOpExpr:
			JsCheckOperator(check, ((ScalarArrayOpExpr *) node)->opno);
			break;
		case T_RowCompareExpr:
			{
				ListCell   *lc;

				foreach(lc, ((RowCompareExpr *) node)->opnos)
					JsCheckOperator(check, lfirst_oid(lc));
			}
			break;
		case T_FuncExpr:
			JsCheckFunction(check, ((FuncExpr *) node)->funcid);
			JsCheckType(check, ((FuncExpr *) node)->funcresulttype);
			break;
		case T_Aggref:
			JsCheckFunction(check, ((Aggref *) node)->aggfnoid);
			break;
		case T_WindowFunc:
			JsCheckFunction(check, ((WindowFunc *) node)->winfnoid);
			break;
		case T_Const:
			JsCheckType(check, ((Const *) node)->consttype);
			break;
		case T_RelabelType:
			JsCheckType(check, ((RelabelType *) node)->resulttype);
			break;
		case T_CoerceViaIO:
			JsCheckType(check, ((CoerceViaIO *) node)->resulttype);
			break;
		case T_ArrayCoerceExpr:
			JsCheckType(check, ((ArrayCoerceExpr *) node)->resulttype);
			break;
		case T_CoerceToDomain:
			JsCheckType(check, ((CoerceToDomain *) node)->resulttype);
			break;
		default:
			break;
	}
	return expression_tree_walker(node, JsNameCheckWalker, check);
}

/*
 * With job_state.check_statement_names on, refuse a prepared statement
 * that refers to an object outside pg_catalog and job_state.
 */
void
JsCheckStatementNames(SPIPlanPtr plan, const char *sql)
{
	JsNameCheck check;
	ListCell   *lc;

	if (!js_check_statement_names)
		return;
	check.own_namespace = get_namespace_oid("job_state", true);
	check.sql = sql;
	check.cte_names = NIL;
	foreach(lc, SPI_plan_get_plan_sources(plan))
	{
		CachedPlanSource *source = (CachedPlanSource *) lfirst(lc);
		ListCell   *q;

		if (source->raw_parse_tree != NULL)
		{
			Node	   *stmt = source->raw_parse_tree->stmt;

			(void) JsCollectCteNames(stmt, &check);
			(void) JsRawNameWalker(stmt, &check);
		}

		foreach(q, source->query_list)
			(void) JsNameCheckWalker((Node *) lfirst(q), &check);
	}
}
