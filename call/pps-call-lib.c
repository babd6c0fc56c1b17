/* SPDX-License-Identifier: MIT */
/*
 * pps_call (pps-call.h): a publisher and one viewer per peer as child
 * processes (pps_process: pipes read by events, bounded lines), supervised on
 * the caller's loop; exits come through a SIGCHLD signal event and
 * waitpid(WNOHANG). A viewer has one timer that means what its state says:
 * start the next try (idle), give up on a try that has no stream yet
 * (trying), or nothing once it streams.
 *
 * With a window (display other than none), a try is a headless probe first
 * (no --log, no --output, its lines kept to itself): a peer that has not
 * published would otherwise open and close a window each second. A probe
 * that gets the stream is stopped and the real viewer started at once; its
 * join asks the publisher for an IDR again, within the recovery bounds.
 */
#include "pps-call.h"
#include "pps-process.h"
#include "pps-time.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Arguments of one child: the program, its fixed options, every --set. */
#define CALL_MAX_ARGS 64

/* How a viewer's pps-client tells us what happened (client/pps-client.c,
 * client/pps-connection.c, server/pps-relay-lib.c). */
#define CLIENT_NO_STREAM_TEXT "no stream named "
#define CLIENT_NO_STREAM_FROM "pps-client: no stream from "
#define CLIENT_CONNECTED_TEXT "pps-client: connected to "
#define CLIENT_BYE_TEXT       "pps-client: server said BYE"

typedef enum {
	CHILD_IDLE,    /* not running; a viewer's timer starts the next try */
	CHILD_TRYING,  /* a viewer running without a stream yet (its timer bounds the try) */
	CHILD_RUNNING, /* the publisher, or a viewer that has its stream */
	CHILD_DONE,    /* will not run again */
} child_state_t;

typedef struct {
	pps_call_t *call;
	char who[65];
	bool publisher;
	pps_process_t *proc;
	child_state_t state;
	struct event *timer;
	/* Of the current try (a viewer): */
	bool saw_no_stream, saw_bye;
	bool probe;   /* a headless try, to learn whether the peer publishes */
	bool promote; /* the probe found the stream: the real viewer next, at once */
	/* Of the current wait for the peer: said once each. */
	bool said_waiting, said_failing;
	char last_line[200]; /* the last stderr line, for the reason it failed */
} call_child_t;

struct pps_call {
	struct event_base *base;
	pps_call_params_t params; /* its strings and arrays are the caller's */
	pps_call_events_t events;
	void *user;
	call_child_t children[1 + PPS_CALL_MAX_PEERS]; /* [0] the publisher */
	unsigned n_children;
	struct event *sigchld, *deadline, *kill_timer, *finish;
	int64_t deadline_us; /* monotonic; 0: none */
	bool started, stopping;
	int exit_status;
	char why[300];
};

static void child_start(call_child_t *child);

bool
pps_call_name_valid(const char *name, bool slashes)
{
	const char *component = name;

	if (!*name || strlen(name) > 64)
		return false;
	for (const char *p = name;; p++) {
		if (*p == '/' || *p == '\0') {
			size_t len = (size_t)(p - component);

			if (len == 0 || (len == 1 && component[0] == '.') ||
			    (len == 2 && component[0] == '.' && component[1] == '.'))
				return false;
			if (*p == '\0')
				return true;
			if (!slashes)
				return false;
			component = p + 1;
		} else if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		             (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' || *p == '-')) {
			return false;
		}
	}
}

int
pps_call_find_program(const char *self_dir, const char *name, const char *sibling, char *path,
                      size_t path_size, char *err, size_t err_size)
{
	char beside[PATH_MAX], built[PATH_MAX];

	snprintf(beside, sizeof(beside), "%s/%s", self_dir, name);
	snprintf(built, sizeof(built), "%s/../%s/%s", self_dir, sibling, name);
	if (access(beside, X_OK) == 0) {
		snprintf(path, path_size, "%s", beside);
		return 0;
	}
	if (access(built, X_OK) == 0) {
		snprintf(path, path_size, "%s", built);
		return 0;
	}
	snprintf(err, err_size, "cannot find %s: neither %s nor %s is an executable", name, beside,
	         built);
	return -ENOENT;
}

static int64_t
call_now_us(void)
{
	return pps_time_monotonic_us();
}

static int64_t
param_or(int64_t value, int64_t fallback)
{
	return value > 0 ? value : fallback;
}

static void
timer_in(struct event *timer, int64_t us)
{
	struct timeval tv = pps_time_us_to_timeval(us > 0 ? us : 0);

	event_add(timer, &tv);
}

/* ---- the end --------------------------------------------------------------- */

static bool
any_running(const pps_call_t *call)
{
	for (unsigned i = 0; i < call->n_children; i++)
		if (pps_process_pid(call->children[i].proc) > 0)
			return true;
	return false;
}

static void
finish_cb(evutil_socket_t fd, short what, void *user)
{
	pps_call_t *call = user;

	if (call->events.ended_cb)
		call->events.ended_cb(call->exit_status, call->why, call->user);
}

static void
signal_all(pps_call_t *call, int sig)
{
	for (unsigned i = 0; i < call->n_children; i++)
		pps_process_signal(call->children[i].proc, sig);
}

static void
kill_cb(evutil_socket_t fd, short what, void *user)
{
	pps_call_t *call = user;

	for (unsigned i = 0; i < call->n_children; i++)
		if (pps_process_pid(call->children[i].proc) > 0)
			pps_log(&call->params.log, PPS_LOG_WARNING,
			        "%s's %s did not stop in %.0f s: killed", call->children[i].who,
			        call->children[i].publisher ? "publisher" : "viewer",
			        (double)param_or(call->params.stop_grace_us,
			                         PPS_CALL_DEFAULT_STOP_GRACE_US) /
			            1e6);
	signal_all(call, SIGKILL);
}

void
pps_call_stop(pps_call_t *call, int exit_status, const char *why)
{
	if (exit_status > call->exit_status)
		call->exit_status = exit_status;
	if (call->stopping)
		return;
	call->stopping = true;
	snprintf(call->why, sizeof(call->why), "%s", why);
	event_del(call->deadline);
	for (unsigned i = 0; i < call->n_children; i++) {
		event_del(call->children[i].timer);
		if (pps_process_pid(call->children[i].proc) == 0)
			call->children[i].state = CHILD_DONE;
	}
	if (any_running(call)) {
		signal_all(call, SIGTERM);
		timer_in(call->kill_timer,
		         param_or(call->params.stop_grace_us, PPS_CALL_DEFAULT_STOP_GRACE_US));
	} else {
		event_active(call->finish, EV_TIMEOUT, 0);
	}
}

static void
deadline_cb(evutil_socket_t fd, short what, void *user)
{
	pps_call_stop(user, 0, "the call's duration ended");
}

/* ---- children's output ---------------------------------------------------- */

static bool
starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* One whole line of @child's: what it tells the call, then (unless it is a
 * viewer's "no stream yet", said once by the call instead, or a probe's) to
 * the caller. */
static void
child_line_cb(bool on_stdout, const char *line, void *user)
{
	call_child_t *child = user;
	pps_call_t *call = child->call;

	if (!on_stdout && !child->publisher) {
		if (strstr(line, CLIENT_NO_STREAM_TEXT)) {
			child->saw_no_stream = true;
			return;
		}
		if (child->saw_no_stream && starts_with(line, CLIENT_NO_STREAM_FROM))
			return;
		if (starts_with(line, CLIENT_BYE_TEXT))
			child->saw_bye = true;
		if (child->probe) {
			if (starts_with(line, CLIENT_CONNECTED_TEXT) && !child->promote) {
				child->promote = true;
				pps_process_signal(child->proc, SIGTERM);
			}
			snprintf(child->last_line, sizeof(child->last_line), "%s", line);
			return;
		}
		if (starts_with(line, CLIENT_CONNECTED_TEXT) && child->state == CHILD_TRYING) {
			child->state = CHILD_RUNNING;
			event_del(child->timer);
			child->said_waiting = child->said_failing = false;
		}
	}
	if (on_stdout && child->probe)
		return;
	if (!on_stdout)
		snprintf(child->last_line, sizeof(child->last_line), "%s", line);
	if (call->events.line_cb)
		call->events.line_cb(child->who, on_stdout, line, call->user);
}

/* ---- children's lives ----------------------------------------------------- */

static void
describe_status(int status, char *text, size_t size)
{
	if (WIFEXITED(status))
		snprintf(text, size, "exit status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(text, size, "killed by signal %d (%s)", WTERMSIG(status),
		         strsignal(WTERMSIG(status)));
	else
		snprintf(text, size, "status %d", status);
}

/* Whether a try started @after_us from now would still have half a retry
 * interval to show something before the call's end. */
static bool
time_left_for_a_try(const pps_call_t *call, int64_t after_us)
{
	int64_t interval_us =
	    param_or(call->params.retry_interval_us, PPS_CALL_DEFAULT_RETRY_INTERVAL_US);

	return !call->deadline_us || call->deadline_us - call_now_us() - after_us > interval_us / 2;
}

static int64_t
retry_interval_us(const pps_call_t *call)
{
	return param_or(call->params.retry_interval_us, PPS_CALL_DEFAULT_RETRY_INTERVAL_US);
}

static void
viewer_retry_later(call_child_t *child)
{
	pps_call_t *call = child->call;

	child->state = CHILD_IDLE;
	timer_in(child->timer, retry_interval_us(call));
}

static void
publisher_exited(call_child_t *child, int status)
{
	pps_call_t *call = child->call;
	char how[80], why[400];

	child->state = CHILD_DONE;
	if (call->stopping)
		return;
	describe_status(status, how, sizeof(how));
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		pps_call_stop(call, 0, "the publisher ended");
		return;
	}
	snprintf(why, sizeof(why), "the publisher of %s/%s failed (%s)%s%s", call->params.room,
	         call->params.name, how, child->last_line[0] ? ": " : "", child->last_line);
	pps_call_stop(call, WIFEXITED(status) && WEXITSTATUS(status) == 2 ? 2 : 1, why);
}

static void
viewer_exited(call_child_t *child, int status)
{
	pps_call_t *call = child->call;
	bool streamed = child->state == CHILD_RUNNING;
	bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
	char how[80], why[400];

	if (call->stopping) {
		child->state = CHILD_DONE;
		return;
	}
	if (child->promote) {
		child->state = CHILD_IDLE;
		child_start(child);
		return;
	}
	describe_status(status, how, sizeof(how));
	if (WIFEXITED(status) && WEXITSTATUS(status) == 2) {
		child->state = CHILD_DONE;
		snprintf(why, sizeof(why), "the viewer of %s refused its settings (%s)%s%s",
		         child->who, how, child->probe && child->last_line[0] ? ": " : "",
		         child->probe ? child->last_line : "");
		pps_call_stop(call, 2, why);
		return;
	}
	if (streamed && clean && !child->saw_bye) {
		/* Its own duration, or its window closed by the user: not again. */
		child->state = CHILD_DONE;
		if (time_left_for_a_try(call, 0))
			pps_log(&call->params.log, PPS_LOG_INFO, "stopped showing %s", child->who);
		return;
	}
	if (!time_left_for_a_try(call, retry_interval_us(call))) {
		child->state = CHILD_DONE;
		return;
	}
	if (streamed || child->saw_no_stream) {
		if (!child->said_waiting)
			pps_log(&call->params.log, PPS_LOG_INFO, "waiting for %s to publish%s",
			        child->who, streamed ? " again" : "");
		child->said_waiting = true;
	} else if (!child->said_failing) {
		pps_log(
		    &call->params.log, PPS_LOG_WARNING,
		    "the viewer of %s ended without a stream (%s)%s%s; trying again every %.0f s",
		    child->who, how, child->last_line[0] ? ": " : "", child->last_line,
		    (double)retry_interval_us(call) / 1e6);
		child->said_failing = true;
	}
	viewer_retry_later(child);
}

static void
sigchld_cb(evutil_socket_t fd, short what, void *user)
{
	pps_call_t *call = user;
	pid_t pid;
	int status;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		for (unsigned i = 0; i < call->n_children; i++) {
			call_child_t *child = &call->children[i];

			if (pps_process_pid(child->proc) != pid)
				continue;
			pps_process_reaped(child->proc);
			event_del(child->timer);
			if (child->publisher)
				publisher_exited(child, status);
			else
				viewer_exited(child, status);
			break;
		}
	}
	if (call->stopping && !any_running(call)) {
		event_del(call->kill_timer);
		event_active(call->finish, EV_TIMEOUT, 0);
	}
}

/* A viewer's timer: the next try (idle), or the end of a try without a stream. */
static void
child_timer_cb(evutil_socket_t fd, short what, void *user)
{
	call_child_t *child = user;
	pps_call_t *call = child->call;

	if (call->stopping)
		return;
	if (child->state == CHILD_IDLE) {
		child_start(child);
	} else if (child->state == CHILD_TRYING && pps_process_pid(child->proc) > 0) {
		if (!child->said_failing)
			pps_log(&call->params.log, PPS_LOG_WARNING,
			        "the viewer of %s has no stream after %.0f s: stopping it, trying "
			        "again",
			        child->who,
			        (double)param_or(call->params.attempt_timeout_us,
			                         PPS_CALL_DEFAULT_ATTEMPT_TIMEOUT_US) /
			            1e6);
		child->said_failing = true;
		pps_process_signal(child->proc, SIGKILL);
	}
}

static void
args_add(char **argv, unsigned *argc, const char *arg)
{
	if (*argc < CALL_MAX_ARGS - 1)
		argv[(*argc)++] = (char *)arg;
}

static void
child_start(call_child_t *child)
{
	pps_call_t *call = child->call;
	const pps_call_params_t *p = &call->params;
	char *argv[CALL_MAX_ARGS];
	char location[600], duration[32], log_path[PATH_MAX], output_path[PATH_MAX];
	unsigned argc = 0;
	int ret;

	duration[0] = '\0';
	if (call->deadline_us) {
		double left_s = (double)(call->deadline_us - call_now_us()) / 1e6;

		snprintf(duration, sizeof(duration), "%.3f", left_s > 0.001 ? left_s : 0.001);
	}
	if (child->publisher) {
		snprintf(location, sizeof(location), "%s/%s/%s", p->relay, p->room, p->name);
		args_add(argv, &argc, p->server_program);
		args_add(argv, &argc, "--publish");
		args_add(argv, &argc, location);
		/* A call is a conversation: what would reach the relay after its
		 * deadline is dropped before it is written (predictive deadlines),
		 * at the price of some throughput share; the participant's own
		 * --set, later on the line, may say otherwise. */
		args_add(argv, &argc, "--set");
		args_add(argv, &argc, PPS_CALL_PUBLISHER_DEADLINES);
		for (unsigned i = 0; i < p->n_server_settings; i++) {
			args_add(argv, &argc, "--set");
			args_add(argv, &argc, p->server_settings[i]);
		}
		if (p->log_dir) {
			/* This participant's own name: never a peer's, so never a viewer's log. */
			snprintf(log_path, sizeof(log_path), "%s/%s.jsonl", p->log_dir, p->name);
			args_add(argv, &argc, "--log");
			args_add(argv, &argc, log_path);
		}
	} else {
		child->probe = strcmp(p->display, "none") != 0 && !child->promote;
		child->promote = false;
		snprintf(location, sizeof(location), "%s/%s/%s", p->relay, p->room, child->who);
		args_add(argv, &argc, p->client_program);
		args_add(argv, &argc, location);
		args_add(argv, &argc, "--display");
		args_add(argv, &argc, child->probe ? "none" : p->display);
		if (child->probe) {
			args_add(argv, &argc, "--quiet");
			args_add(argv, &argc, "--audio");
			args_add(argv, &argc, "off");
		} else if (p->log_dir) {
			snprintf(log_path, sizeof(log_path), "%s/%s.jsonl", p->log_dir, child->who);
			args_add(argv, &argc, "--log");
			args_add(argv, &argc, log_path);
		}
		if (p->output_dir && !child->probe) {
			snprintf(output_path, sizeof(output_path), "%s/%s.y4m", p->output_dir,
			         child->who);
			args_add(argv, &argc, "--output");
			args_add(argv, &argc, output_path);
		}
		for (unsigned i = 0; i < p->n_client_settings; i++) {
			args_add(argv, &argc, "--set");
			args_add(argv, &argc, p->client_settings[i]);
		}
	}
	if (duration[0]) {
		args_add(argv, &argc, "--duration");
		args_add(argv, &argc, duration);
	}
	if (p->quiet && (child->publisher || !child->probe))
		args_add(argv, &argc, "--quiet");
	argv[argc] = NULL;

	child->saw_no_stream = child->saw_bye = false;
	child->last_line[0] = '\0';
	ret = pps_process_spawn(child->proc, argv);
	if (ret < 0) {
		char why[200];

		snprintf(why, sizeof(why), "cannot start %s's %s: %s", child->who,
		         child->publisher ? "publisher" : "viewer", strerror(-ret));
		child->state = CHILD_DONE;
		pps_call_stop(call, 1, why);
		return;
	}
	if (child->publisher) {
		child->state = CHILD_RUNNING;
	} else {
		child->state = CHILD_TRYING;
		timer_in(child->timer,
		         param_or(p->attempt_timeout_us, PPS_CALL_DEFAULT_ATTEMPT_TIMEOUT_US));
	}
}

/* ---- the object ----------------------------------------------------------- */

pps_call_t *
pps_call_new(struct event_base *base, const pps_call_params_t *params,
             const pps_call_events_t *events, void *user, char *err, size_t err_size)
{
	pps_call_t *call;

	if (!params->server_program || !params->client_program || !params->relay || !params->room ||
	    !params->name || !params->display || !pps_call_name_valid(params->room, true) ||
	    !pps_call_name_valid(params->name, false) || params->n_peers < 1 ||
	    params->n_peers > PPS_CALL_MAX_PEERS ||
	    strlen(params->room) + 1 + strlen(params->name) > 64) {
		snprintf(err, err_size,
		         "a call needs programs, a relay, a valid room and name, and "
		         "1..%d peers",
		         PPS_CALL_MAX_PEERS);
		errno = EINVAL;
		return NULL;
	}
	for (unsigned i = 0; i < params->n_peers; i++) {
		if (!pps_call_name_valid(params->peers[i], false) ||
		    strlen(params->room) + 1 + strlen(params->peers[i]) > 64 ||
		    strcmp(params->peers[i], params->name) == 0) {
			snprintf(err, err_size, "peer '%s': not a name other than %s",
			         params->peers[i], params->name);
			errno = EINVAL;
			return NULL;
		}
		for (unsigned j = 0; j < i; j++)
			if (strcmp(params->peers[i], params->peers[j]) == 0) {
				snprintf(err, err_size, "peer '%s' named twice", params->peers[i]);
				errno = EINVAL;
				return NULL;
			}
	}
	call = calloc(1, sizeof(*call));
	if (!call)
		goto err_memory;
	call->base = base;
	call->params = *params;
	if (events)
		call->events = *events;
	call->user = user;
	call->n_children = 1 + params->n_peers;
	for (unsigned i = 0; i < call->n_children; i++) {
		call_child_t *child = &call->children[i];

		child->call = call;
		child->publisher = i == 0;
		snprintf(child->who, sizeof(child->who), "%s",
		         i == 0 ? params->name : params->peers[i - 1]);
	}
	for (unsigned i = 0; i < call->n_children; i++) {
		const pps_process_events_t process_events = {.line_cb = child_line_cb};
		call_child_t *child = &call->children[i];

		child->timer = evtimer_new(base, child_timer_cb, child);
		child->proc = pps_process_new(base, &process_events, child);
		if (!child->timer || !child->proc)
			goto err_events;
	}
	call->sigchld = evsignal_new(base, SIGCHLD, sigchld_cb, call);
	call->deadline = evtimer_new(base, deadline_cb, call);
	call->kill_timer = evtimer_new(base, kill_cb, call);
	call->finish = event_new(base, -1, 0, finish_cb, call);
	if (!call->sigchld || !call->deadline || !call->kill_timer || !call->finish ||
	    event_add(call->sigchld, NULL) < 0)
		goto err_events;
	return call;

err_events:
	pps_call_free(call);
err_memory:
	snprintf(err, err_size, "out of memory");
	errno = ENOMEM;
	return NULL;
}

int
pps_call_start(pps_call_t *call, char *err, size_t err_size)
{
	if (call->started) {
		snprintf(err, err_size, "the call has started already");
		return -EALREADY;
	}
	call->started = true;
	if (call->params.duration_s > 0) {
		int64_t us = (int64_t)(call->params.duration_s * 1e6);

		call->deadline_us = call_now_us() + us;
		timer_in(call->deadline, us);
	}
	for (unsigned i = 0; i < call->n_children && !call->stopping; i++)
		child_start(&call->children[i]);
	return 0;
}

void
pps_call_free(pps_call_t *call)
{
	if (!call)
		return;
	for (unsigned i = 0; i < call->n_children; i++) {
		call_child_t *child = &call->children[i];

		pps_process_free(child->proc);
		if (child->timer)
			event_free(child->timer);
	}
	if (call->sigchld)
		event_free(call->sigchld);
	if (call->deadline)
		event_free(call->deadline);
	if (call->kill_timer)
		event_free(call->kill_timer);
	if (call->finish)
		event_free(call->finish);
	free(call);
}
