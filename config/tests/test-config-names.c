/* SPDX-License-Identifier: MIT */
/*
 * The policy name tables the key table refers to: every enum value has a
 * name, the loader's index for that name is the enum value again, and every
 * enum key's choices are well formed (unique, default among them).
 */
#include "pps-adapt.h"
#include "pps-capture-source.h"
#include "pps-client-policy.h"
#include "pps-config.h"
#include "pps-minbuf.h"
#include "pps-prioritizer.h"
#include "pps-test.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* Sets section.key=name in a fresh configuration and returns the index the
 * loader gives back (negative errno if it refuses the name). */
static int
index_through_config(pps_config_program_t program, const char *section, const char *key,
                     const char *name)
{
	pps_config_t *c = pps_config_new(program);
	char assignment[128], err[256];
	int r;

	REQUIRE(c);
	snprintf(assignment, sizeof(assignment), "%s.%s=%s", section, key, name);
	r = pps_config_set(c, assignment, err, sizeof(err));
	if (r == 0)
		r = pps_config_get_enum(c, section, key);
	pps_config_free(c);
	return r;
}

/* Every value below @count has a distinct name in @names, the table ends at
 * @count, the key's choices are that table (the same names in the same
 * order: a header-defined table is one copy per translation unit, so not the
 * same pointer), and the loader maps each name back to its value. */
static void
check_table(pps_config_program_t program, const char *section, const char *key,
            const char *const *names, int count)
{
	const pps_config_key_t *k = pps_config_key_find(section, key);

	REQUIRE(k);
	CHECK(k->type == PPS_CONFIG_TYPE_ENUM);
	size_t n_choices = 0;
	while (k->choices[n_choices])
		n_choices++;
	CHECK_EQ_INT(n_choices, count);
	CHECK(names[count] == NULL);
	for (int i = 0; i < count; i++) {
		CHECK(names[i] && *names[i]);
		if (!names[i])
			continue;
		CHECK((size_t)i < n_choices && strcmp(k->choices[i], names[i]) == 0);
		for (int j = 0; j < i; j++)
			CHECK(!names[j] || strcmp(names[i], names[j]) != 0);
		CHECK_EQ_INT(index_through_config(program, section, key, names[i]), i);
	}
	CHECK(index_through_config(program, section, key, "no-such-name") < 0);
}

static void
test_module_tables(void)
{
	check_table(PPS_CONFIG_PROGRAM_SERVER, "transport", "mode", pps_minbuf_mode_names,
	            PPS_MINBUF_MODE_COUNT);
	check_table(PPS_CONFIG_PROGRAM_SERVER, "transport", "congestion",
	            pps_minbuf_congestion_names, PPS_MINBUF_CONGESTION_COUNT);
	check_table(PPS_CONFIG_PROGRAM_SERVER, "pps", "priority_policy", pps_priority_policy_names,
	            PPS_PRIORITY_POLICY_COUNT);
	check_table(PPS_CONFIG_PROGRAM_CLIENT, "playout", "policy", pps_playout_policy_names,
	            PPS_PLAYOUT_POLICY_COUNT);
	check_table(PPS_CONFIG_PROGRAM_CLIENT, "client", "clock", pps_clock_mode_names,
	            PPS_CLOCK_MODE_COUNT);
	check_table(PPS_CONFIG_PROGRAM_CLIENT, "display", "mode", pps_display_mode_names,
	            PPS_DISPLAY_MODE_COUNT);
	check_table(PPS_CONFIG_PROGRAM_SERVER, "source", "type", pps_capture_source_names,
	            PPS_CAPTURE_SOURCE_COUNT);
	check_table(PPS_CONFIG_PROGRAM_SERVER, "source", "timecode", pps_capture_timecode_names,
	            PPS_CAPTURE_TIMECODE_COUNT);
	/* adapt/'s tables, referred to the same way. */
	check_table(PPS_CONFIG_PROGRAM_SERVER, "transport", "latency_cap", pps_latency_cap_names,
	            PPS_LATENCY_CAP_YIELDING + 1);
	check_table(PPS_CONFIG_PROGRAM_SERVER, "adapt", "mode", pps_adapt_mode_names,
	            PPS_ADAPT_MODE_FIXED + 1);
	check_table(PPS_CONFIG_PROGRAM_SERVER, "transport", "rate_control", pps_rate_control_names,
	            PPS_RATE_CONTROL_TCP_FRIENDLY + 1);
}

/* The prioritizer's accessors (the library config links) agree with its table. */
static void
test_priority_accessors(void)
{
	for (int p = 0; p < PPS_PRIORITY_POLICY_COUNT; p++) {
		CHECK(strcmp(pps_priority_policy_name((pps_priority_policy_t)p),
		             pps_priority_policy_names[p]) == 0);
		CHECK_EQ_INT(pps_priority_policy_from_name(pps_priority_policy_names[p]), p);
	}
	CHECK(strcmp(pps_priority_policy_name(PPS_PRIORITY_POLICY_COUNT), "unknown") == 0);
	CHECK_EQ_INT(pps_priority_policy_from_name("fastest"), -EINVAL);
}

/* Every enum key of the table: choices unique and the default one of them. */
static void
test_every_enum_key(void)
{
	size_t n;
	const pps_config_key_t *keys = pps_config_keys(&n);

	for (size_t i = 0; i < n; i++) {
		const pps_config_key_t *k = &keys[i];
		bool default_found = false;
		size_t count = 0;

		if (k->type != PPS_CONFIG_TYPE_ENUM)
			continue;
		REQUIRE(k->choices);
		for (; k->choices[count]; count++) {
			CHECK(count < 64);
			if (count >= 64)
				break;
			if (strcmp(k->choices[count], k->default_value) == 0)
				default_found = true;
			for (size_t j = 0; j < count; j++)
				CHECK(strcmp(k->choices[j], k->choices[count]) != 0);
		}
		CHECK(count >= 2);
		if (!default_found)
			fprintf(stderr, "[%s] %s: default '%s' not among its choices\n", k->section,
			        k->key, k->default_value);
		CHECK(default_found);
	}
}

int
main(void)
{
	test_module_tables();
	test_priority_accessors();
	test_every_enum_key();
	return pps_test_result();
}
