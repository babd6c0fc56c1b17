/* SPDX-License-Identifier: MIT */
/*
 * pps_server, the server as one object, fed with pushed pictures (no
 * capture pipeline): its states and their announcements, the port it
 * listens on, the pictures it takes and refuses, and the library's messages
 * going to the log callback instead of stderr.
 */
#include "pps-server-settings.h"
#include "pps-test.h"

#include <errno.h>
#include <event2/event.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

static pps_server_state_t states[8];
static int n_states;
static int n_logs;
static char logged[2048];

static void
state_cb(pps_server_state_t old_state, pps_server_state_t state, const char *error, void *user)
{
	CHECK(error == NULL, "%s", error);
	if (n_states < (int)(sizeof(states) / sizeof(states[0])))
		states[n_states++] = state;
}

static void
log_cb(pps_log_level_t level, const char *message, void *user)
{
	size_t used = strlen(logged);

	n_logs++;
	snprintf(logged + used, sizeof(logged) - used, "%s: %s\n", pps_log_level_name(level),
	         message);
}

static pps_config_t *
small_pushed_config(void)
{
	static const char *const sets[] = {"source.width=128", "source.height=96",
	                                   "server.listen=127.0.0.1:0", NULL};
	pps_config_t *c = pps_config_new(pps_server_settings_schema());
	char err[256];

	REQUIRE(c);
	for (const char *const *s = sets; *s; s++)
		REQUIRE(pps_config_set(c, *s, err, sizeof(err)) == 0);
	return c;
}

static void
test_states_and_messages(void)
{
	pps_config_t *c = small_pushed_config();
	pps_server_settings_t settings;
	struct event_base *base = event_base_new();
	pps_frame_t *frame = pps_frame_new(128, 96), *wrong = pps_frame_new(64, 64);
	pps_server_t *srv;
	char err[512] = "", text[256];

	REQUIRE(base && frame && wrong);
	REQUIRE(pps_server_settings_from_config(c, &settings, err, sizeof(err)) == 0);
	settings.server.pushed = true;
	settings.server.log = (pps_log_t){.cb = log_cb};
	srv = pps_server_new(base, &settings.server, &(pps_server_events_t){.state_cb = state_cb},
	                     NULL, err, sizeof(err));
	REQUIRE(srv);
	CHECK(pps_server_state(srv) == PPS_SERVER_STATE_READY);
	CHECK_EQ_INT(n_states, 0);

	CHECK_EQ_INT(pps_server_start(srv, err, sizeof(err)), 0);
	CHECK(n_states == 1 && states[0] == PPS_SERVER_STATE_STREAMING);
	CHECK(pps_server_port(srv) > 0);
	/* The listener's line came through the callback (the program prints it). */
	CHECK(n_logs >= 1 && strstr(logged, "info: listening on 127.0.0.1:"), "%s", logged);
	pps_server_describe(srv, text, sizeof(text));
	CHECK(strncmp(text, "pushed source 128x96@30, ", 25) == 0, "%s", text);
	CHECK(strstr(text, "minbuf transport") != NULL, "%s", text);
	/* A second start is refused with a reason. */
	CHECK_EQ_INT(pps_server_start(srv, err, sizeof(err)), -EINVAL);
	CHECK(strcmp(err, "the server is streaming") == 0, "%s", err);

	CHECK_EQ_INT(pps_server_push_frame(srv, frame), 0);
	CHECK_EQ_INT(pps_server_push_frame(srv, wrong), -EINVAL);

	pps_server_stop(srv);
	CHECK(n_states == 2 && states[1] == PPS_SERVER_STATE_STOPPED);
	pps_server_stop(srv); /* idempotent: no second announcement */
	CHECK_EQ_INT(n_states, 2);
	pps_server_say_bye(srv, "done");
	CHECK_EQ_INT(pps_server_finish(srv, NULL, NULL, NULL, err, sizeof(err)), 0);
	pps_server_free(srv);
	pps_frame_free(frame);
	pps_frame_free(wrong);
	event_base_free(base);
	pps_config_free(c);
}

/* A log file that cannot be opened fails pps_server_new with the reason. */
static void
test_unwritable_log(void)
{
	pps_config_t *c = small_pushed_config();
	pps_server_settings_t settings;
	struct event_base *base = event_base_new();
	char err[512] = "";

	REQUIRE(base);
	REQUIRE(pps_server_settings_from_config(c, &settings, err, sizeof(err)) == 0);
	settings.server.pushed = true;
	settings.server.log_path = "/nonexistent/dir/server.jsonl";
	CHECK(pps_server_new(base, &settings.server, NULL, NULL, err, sizeof(err)) == NULL);
	CHECK(strstr(err, "/nonexistent/dir/server.jsonl") != NULL, "%s", err);
	event_base_free(base);
	pps_config_free(c);
}

int
main(int argc, char **argv)
{
	pps_test_init(&argc, argv);
	signal(SIGPIPE, SIG_IGN);
	PPS_TEST_RUN(test_states_and_messages);
	PPS_TEST_RUN(test_unwritable_log);
	return pps_test_result();
}
