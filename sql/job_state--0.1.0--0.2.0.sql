/* job_state 0.1.0 -> 0.2.0: upgrade script */

\echo Use "ALTER EXTENSION job_state UPDATE TO '0.2.0'" to load this file. \quit

/*
 * 0.1.0 is released and its install script is frozen.  Every schema change
 * of 0.2.0 goes here, in the order of the install script (types, tables,
 * trigger functions and triggers, API, views, privileges).  A fresh
 * CREATE EXTENSION runs job_state--0.1.0.sql and then this file, so a fresh
 * install and an upgraded one are the same schema by construction; the
 * upgrade test checks it with data in place.
 */
