/* SPDX-License-Identifier: MIT */
/*
 * Lookups in a name table: a NULL-terminated array of names indexed by an
 * enum (a policy's names, STYLE habit 5; the tables live with their enums,
 * e.g. pps_minbuf_mode_names, pps_playout_policy_names). The config loader
 * and each module's _name/_from_name accessors use these, so the search is
 * written once. Pure functions; any thread.
 */
#ifndef PPS_NAMES_H
#define PPS_NAMES_H

/* The index of @name in @names (exact match), or -EINVAL if it is not there. */
int pps_names_find(const char *const *names, const char *name);

/* names[value], or @fallback if @value is negative or past the table's end. */
const char *pps_names_get(const char *const *names, int value, const char *fallback);

#endif /* PPS_NAMES_H */
