/* SPDX-License-Identifier: MIT */
/*
 * The policy name tables the programs' key tables refer to: every enum value
 * has a name, the loader's index for that name is the enum value again, and
 * every enum key's choices are well formed (unique, default among them).
 */
#include "pps-adapt.h"
#include "pps-client-policy.h"
#include "pps-client-settings.h"
#include "pps-codec.h"
#include "pps-config.h"
#include "pps-minbuf.h"
#include "pps-prioritizer.h"
#include "pps-server-settings.h"
#include "pps-test.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* Sets section.key=name in a fresh configuration and returns the index the
 * loader gives back (negative errno if it refuses the name). */
static int
index_through_config(const pps_config_schema_t *schema, const char *section, const char *key,
                     const char *name)
{
	pps_config_t *c = pps_config_new(schema);
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
 * @count, the key's choices are that very table, and the loader maps each
 * name back to its value. */
static void
check_table(const pps_config_schema_t *program, const char *section, const char *key,
            const char *const *names, int count)
{
	const pps_config_key_t *k = pps_config_schema_find(program, section, key);

	REQUIRE(k);
	CHECK(k->type == PPS_CONFIG_TYPE_ENUM);
	CHECK(k->choices == names);
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

#define SERVER pps_server_settings_schema()
#define CLIENT pps_client_settings_schema()

static void
test_module_tables(void)
{
	check_table(SERVER, "transport", "mode", pps_minbuf_mode_names, PPS_MINBUF_MODE_COUNT);
	check_table(SERVER, "transport", "congestion", pps_minbuf_congestion_names,
	            PPS_MINBUF_CONGESTION_COUNT);
	check_table(SERVER, "pps", "priority_policy", pps_priority_policy_names,
	            PPS_PRIORITY_POLICY_COUNT);
	check_table(SERVER, "pps", "deadlines", pps_deadlines_names, PPS_DEADLINES_COUNT);
	check_table(CLIENT, "playout", "policy", pps_playout_policy_names,
	            PPS_PLAYOUT_POLICY_COUNT);
	check_table(CLIENT, "client", "clock", pps_clock_mode_names, PPS_CLOCK_MODE_COUNT);
	check_table(CLIENT, "display", "mode", pps_display_mode_names, PPS_DISPLAY_MODE_COUNT);
	check_table(SERVER, "source", "type", pps_capture_source_names, PPS_CAPTURE_SOURCE_COUNT);
	check_table(SERVER, "source", "timecode", pps_capture_timecode_names,
	            PPS_CAPTURE_TIMECODE_COUNT);
	check_table(SERVER, "source", "pattern", pps_capture_pattern_names, 5);
	check_table(SERVER, "encoder", "preset", pps_encoder_preset_names, 6);
	/* adapt/'s tables, referred to the same way. */
	check_table(SERVER, "transport", "latency_cap", pps_latency_cap_names,
	            PPS_LATENCY_CAP_YIELDING + 1);
	check_table(SERVER, "adapt", "mode", pps_adapt_mode_names, PPS_ADAPT_MODE_FIXED + 1);
	check_table(SERVER, "transport", "rate_control", pps_rate_control_names,
	            PPS_RATE_CONTROL_TCP_FRIENDLY + 1);
}

/* The prioritizer's accessors agree with its table. */
static void
test_priority_accessors(void)
{
	pps_priority_policy_t policy = PPS_PRIORITY_POLICY_COUNT;

	for (int p = 0; p < PPS_PRIORITY_POLICY_COUNT; p++) {
		CHECK(strcmp(pps_priority_policy_name((pps_priority_policy_t)p),
		             pps_priority_policy_names[p]) == 0);
		CHECK(pps_priority_policy_from_name(pps_priority_policy_names[p], &policy) == 0 &&
		      (int)policy == p);
	}
	CHECK(strcmp(pps_priority_policy_name(PPS_PRIORITY_POLICY_COUNT), "unknown") == 0);
	CHECK_EQ_INT(pps_priority_policy_from_name("fastest", &policy), -EINVAL);
}

/* Every enum key of the table: choices unique and the default one of them. */
static void
check_enum_keys(const pps_config_schema_t *schema)
{
	for (size_t i = 0; i < schema->n_keys; i++) {
		const pps_config_key_t *k = &schema->keys[i];
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

static void
test_every_enum_key(void)
{
	check_enum_keys(SERVER);
	check_enum_keys(CLIENT);
}

int
main(int argc, char **argv)
{
	pps_test_init(&argc, argv);
	PPS_TEST_RUN(test_module_tables);
	PPS_TEST_RUN(test_priority_accessors);
	PPS_TEST_RUN(test_every_enum_key);
	return pps_test_result();
}
