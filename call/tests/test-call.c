/* SPDX-License-Identifier: MIT */
/*
 * pps_call with stand-in programs (shell scripts written to a temporary
 * directory): a viewer retried while its peer has not published, said once;
 * a publisher that fails ends the call with its reason; a stop ends every
 * child; names and the lookup of the programs. No network: the scripts say
 * what pps-client and pps-server would.
 */
#include "pps-call.h"
#include "pps-test.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
	struct event_base *base;
	int ended, exit_status;
	char why[300];
	unsigned waiting_said, lines, no_stream_lines, connected_lines;
	char last_line[256];
} run_t;

static char tmp_dir[] = "/tmp/pps-test-call-XXXXXX";

static void
write_script(const char *name, const char *body, char *path, size_t size)
{
	FILE *f;

	snprintf(path, size, "%s/%s", tmp_dir, name);
	f = fopen(path, "w");
	CHECK(f != NULL);
	if (!f)
		return;
	fprintf(f, "#!/bin/sh\n%s\n", body);
	fclose(f);
	chmod(path, 0755);
}

static void
log_cb(pps_log_level_t level, const char *message, void *user)
{
	run_t *run = user;

	if (strstr(message, "waiting for bob to publish"))
		run->waiting_said++;
}

static void
line_cb(const char *who, bool on_stdout, const char *line, void *user)
{
	run_t *run = user;

	run->lines++;
	if (strstr(line, "no stream named"))
		run->no_stream_lines++;
	if (strstr(line, "connected to"))
		run->connected_lines++;
	snprintf(run->last_line, sizeof(run->last_line), "[%s] %s", who, line);
}

static void
ended_cb(int exit_status, const char *why, void *user)
{
	run_t *run = user;

	run->ended++;
	run->exit_status = exit_status;
	snprintf(run->why, sizeof(run->why), "%s", why);
	event_base_loopbreak(run->base);
}

static const char *const one_peer[] = {"bob"};

static pps_call_t *
call_new_on(run_t *run, const char *server, const char *client, double duration_s,
            const char *display)
{
	pps_call_params_t params = {
	    .server_program = server,
	    .client_program = client,
	    .relay = "127.0.0.1:9",
	    .room = "room",
	    .name = "alice",
	    .peers = one_peer,
	    .n_peers = 1,
	    .duration_s = duration_s,
	    .display = display,
	    .retry_interval_us = 50000,
	    .stop_grace_us = 2000000,
	    .log = {.cb = log_cb, .user = run},
	};
	const pps_call_events_t events = {.line_cb = line_cb, .ended_cb = ended_cb};
	char err[256];

	run->base = event_base_new();
	if (!run->base)
		return NULL;
	return pps_call_new(run->base, &params, &events, run, err, sizeof(err));
}

static pps_call_t *
call_new(run_t *run, const char *server, const char *client, double duration_s)
{
	return call_new_on(run, server, client, duration_s, "none");
}

static unsigned
count_lines(const char *path)
{
	FILE *f = fopen(path, "r");
	unsigned n = 0;
	int c;

	if (!f)
		return 0;
	while ((c = fgetc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

/* A peer that never publishes: tried again and again (a line per try in a
 * file), the wait said once, the tries' no-stream lines not passed on, and
 * the call ends cleanly at its duration. */
static void
test_call_waits_for_peer(void)
{
	char server[512], client[512], tries[512], body[1024];
	run_t run = {0};
	pps_call_t *call;

	snprintf(tries, sizeof(tries), "%s/tries", tmp_dir);
	write_script("server-stays", "exec sleep 30", server, sizeof(server));
	snprintf(body, sizeof(body),
	         "echo try >> %s\n"
	         "echo 'pps-client: server said BYE (no-stream: no stream named room/bob on this "
	         "relay)' >&2\n"
	         "echo 'pps-client: no stream from 127.0.0.1:9/room/bob' >&2\n"
	         "exit 1",
	         tries);
	write_script("client-no-stream", body, client, sizeof(client));
	call = call_new(&run, server, client, 0.6);
	CHECK(call != NULL);
	if (!call)
		return;
	CHECK(pps_call_start(call, NULL, 0) == 0);
	event_base_dispatch(run.base);
	CHECK(run.ended == 1);
	CHECK(run.exit_status == 0);
	CHECK(strstr(run.why, "duration") != NULL);
	CHECK(run.waiting_said == 1);
	CHECK(run.no_stream_lines == 0);
	CHECK(count_lines(tries) >= 3);
	pps_call_free(call);
	event_base_free(run.base);
}

/* A publisher that fails: the call ends with 1 and its last line. */
static void
test_call_publisher_fails(void)
{
	char server[512], client[512];
	run_t run = {0};
	pps_call_t *call;

	write_script("server-fails", "echo 'pps-server: the relay refused: taken' >&2\nexit 1",
	             server, sizeof(server));
	write_script("client-stays", "exec sleep 30", client, sizeof(client));
	call = call_new(&run, server, client, 0);
	CHECK(call != NULL);
	if (!call)
		return;
	CHECK(pps_call_start(call, NULL, 0) == 0);
	event_base_dispatch(run.base);
	CHECK(run.ended == 1);
	CHECK(run.exit_status == 1);
	CHECK(strstr(run.why, "the publisher of room/alice failed (exit status 1)") != NULL);
	CHECK(strstr(run.why, "taken") != NULL);
	CHECK(strcmp(run.last_line, "[alice] pps-server: the relay refused: taken") == 0);
	pps_call_free(call);
	event_base_free(run.base);
}

/* The publisher's command line: the call's deadlines first, the
 * participant's --set after them (so that it wins), then its log. */
static void
test_call_publisher_arguments(void)
{
	static const char *const settings[] = {"pps.deadlines=window"};
	char server[512], client[512], want[1024];
	run_t run = {0};
	pps_call_t *call;
	pps_call_params_t params = {
	    .relay = "127.0.0.1:9",
	    .room = "room",
	    .name = "alice",
	    .peers = one_peer,
	    .n_peers = 1,
	    .display = "none",
	    .server_settings = settings,
	    .n_server_settings = 1,
	    .log_dir = tmp_dir,
	    .retry_interval_us = 50000,
	    .stop_grace_us = 2000000,
	    .log = {.cb = log_cb, .user = &run},
	};
	const pps_call_events_t events = {.line_cb = line_cb, .ended_cb = ended_cb};
	char err[256];

	write_script("server-args", "echo \"pps-server: $*\" >&2\nexit 1", server, sizeof(server));
	write_script("client-waits", "exec sleep 30", client, sizeof(client));
	params.server_program = server;
	params.client_program = client;
	run.base = event_base_new();
	CHECK(run.base != NULL);
	if (!run.base)
		return;
	call = pps_call_new(run.base, &params, &events, &run, err, sizeof(err));
	CHECK(call != NULL, "%s", err);
	if (!call) {
		event_base_free(run.base);
		return;
	}
	CHECK(pps_call_start(call, NULL, 0) == 0);
	event_base_dispatch(run.base);
	snprintf(want, sizeof(want),
	         "[alice] pps-server: --publish 127.0.0.1:9/room/alice --set "
	         "pps.deadlines=predictive --set pps.deadlines=window --log %s/alice.jsonl",
	         tmp_dir);
	CHECK(run.ended == 1);
	CHECK(strcmp(run.last_line, want) == 0, "%s", run.last_line);
	pps_call_free(call);
	event_base_free(run.base);
}

/* With a window, a try is a headless probe first: a peer that has not
 * published opens no window, and one that has gets its real viewer (a
 * window, once) as soon as the probe sees the stream. */
static void
test_call_probes_with_a_window(void)
{
	char server[512], client[512], tries[512], real[512], body[2048], args[256] = "";
	FILE *f;
	run_t run = {0};
	pps_call_t *call;

	snprintf(tries, sizeof(tries), "%s/probe-tries", tmp_dir);
	snprintf(real, sizeof(real), "%s/real-tries", tmp_dir);
	write_script("server-stays-3", "exec sleep 30", server, sizeof(server));
	/* No stream for the first two tries, then the stream. */
	snprintf(body, sizeof(body),
	         "case \"$*\" in\n"
	         "*'--display none'*)\n"
	         "  echo try >> %s\n"
	         "  if [ $(wc -l < %s) -le 2 ]; then\n"
	         "    echo 'pps-client: server said BYE (no-stream: no stream named room/bob on "
	         "this relay)' >&2; exit 1\n"
	         "  fi\n"
	         "  echo 'pps-client: connected to x' >&2; exec sleep 30;;\n"
	         "*) echo \"$*\" >> %s; echo 'pps-client: connected to x' >&2; exec sleep 30;;\n"
	         "esac",
	         tries, tries, real);
	write_script("client-probed", body, client, sizeof(client));
	call = call_new_on(&run, server, client, 0.8, "sdl");
	CHECK(call != NULL);
	if (!call)
		return;
	CHECK(pps_call_start(call, NULL, 0) == 0);
	event_base_dispatch(run.base);
	CHECK(run.ended == 1);
	CHECK(run.exit_status == 0, "%s", run.why);
	CHECK(run.waiting_said == 1);
	CHECK(count_lines(tries) == 3, "%u probes", count_lines(tries));
	CHECK(count_lines(real) == 1, "%u real viewers", count_lines(real));
	f = fopen(real, "r");
	if (f) {
		if (!fgets(args, sizeof(args), f))
			args[0] = '\0';
		fclose(f);
	}
	CHECK(strstr(args, "--display sdl") != NULL, "the real viewer's arguments: %s", args);
	CHECK(run.connected_lines == 1, "%u connected lines", run.connected_lines);
	CHECK(run.no_stream_lines == 0);
	pps_call_free(call);
	event_base_free(run.base);
}

static void
stop_soon_cb(evutil_socket_t fd, short what, void *user)
{
	pps_call_stop(user, 0, "asked to");
}

/* A stop while both children run: SIGTERM ends them, the call ends with 0;
 * a child that ignores SIGTERM is killed after the grace. */
static void
test_call_stop(void)
{
	char server[512], client[512];
	run_t run = {0};
	struct timeval soon = {0, 100000};
	struct event *stop;
	pps_call_t *call;

	write_script("server-deaf", "trap '' TERM\nwhile :; do sleep 1; done", server,
	             sizeof(server));
	write_script("client-stays-2", "echo 'pps-client: connected to x' >&2\nexec sleep 30",
	             client, sizeof(client));
	call = call_new(&run, server, client, 0);
	CHECK(call != NULL);
	if (!call)
		return;
	stop = evtimer_new(run.base, stop_soon_cb, call);
	evtimer_add(stop, &soon);
	CHECK(pps_call_start(call, NULL, 0) == 0);
	event_base_dispatch(run.base);
	CHECK(run.ended == 1);
	CHECK(run.exit_status == 0);
	CHECK(strcmp(run.why, "asked to") == 0);
	event_free(stop);
	pps_call_free(call);
	event_base_free(run.base);
}

static void
test_call_names(void)
{
	CHECK(pps_call_name_valid("alice", false));
	CHECK(pps_call_name_valid("room/a.b_c-d", true));
	CHECK(!pps_call_name_valid("room/alice", false));
	CHECK(!pps_call_name_valid("", true));
	CHECK(!pps_call_name_valid("..", false));
	CHECK(!pps_call_name_valid("room//x", true));
	CHECK(!pps_call_name_valid("room/", true));
	CHECK(!pps_call_name_valid("a b", false));
}

static void
test_call_find_program(void)
{
	char dir[600], path[1024], err[1024], script[512];

	snprintf(dir, sizeof(dir), "%s/call", tmp_dir);
	mkdir(dir, 0755);
	snprintf(path, sizeof(path), "%s/server", tmp_dir);
	mkdir(path, 0755);
	CHECK(pps_call_find_program(dir, "pps-server", "server", path, sizeof(path), err,
	                            sizeof(err)) == -ENOENT);
	CHECK(strstr(err, "cannot find pps-server") != NULL);
	write_script("server/pps-server", "exit 0", script, sizeof(script));
	CHECK(pps_call_find_program(dir, "pps-server", "server", path, sizeof(path), err,
	                            sizeof(err)) == 0);
	CHECK(strstr(path, "/call/../server/pps-server") != NULL);
	write_script("call/pps-server", "exit 0", script, sizeof(script));
	CHECK(pps_call_find_program(dir, "pps-server", "server", path, sizeof(path), err,
	                            sizeof(err)) == 0);
	CHECK(strcmp(path, script) == 0);
}

static void
test_call_bad_params(void)
{
	static const char *const self_peer[] = {"alice"};
	pps_call_params_t params = {
	    .server_program = "/bin/true",
	    .client_program = "/bin/true",
	    .relay = "127.0.0.1:9",
	    .room = "room",
	    .name = "alice",
	    .peers = self_peer,
	    .n_peers = 1,
	    .display = "none",
	};
	struct event_base *base = event_base_new();
	char err[256];

	errno = 0;
	CHECK(pps_call_new(base, &params, NULL, NULL, err, sizeof(err)) == NULL);
	CHECK(errno == EINVAL);
	params.peers = one_peer;
	params.n_peers = 0;
	CHECK(pps_call_new(base, &params, NULL, NULL, err, sizeof(err)) == NULL);
	event_base_free(base);
}

int
main(int argc, char **argv)
{
	int status;

	if (!mkdtemp(tmp_dir)) {
		perror("mkdtemp");
		return 1;
	}
	pps_test_init(&argc, argv);
	PPS_TEST_RUN(test_call_names);
	PPS_TEST_RUN(test_call_find_program);
	PPS_TEST_RUN(test_call_bad_params);
	PPS_TEST_RUN(test_call_waits_for_peer);
	PPS_TEST_RUN(test_call_publisher_fails);
	PPS_TEST_RUN(test_call_publisher_arguments);
	PPS_TEST_RUN(test_call_stop);
	PPS_TEST_RUN(test_call_probes_with_a_window);
	status = pps_test_result();
	{
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp_dir);
		if (system(cmd) != 0)
			fprintf(stderr, "cannot remove %s\n", tmp_dir);
	}
	return status;
}
