/* SPDX-License-Identifier: MIT */
/*
 * pps_call: one participant of a call through a relay (docs/RELAY.md#calls).
 * It publishes the participant's source as ROOM/NAME with a child pps-server
 * (--publish) and shows each peer ROOM/PEER with a child pps-client, on the
 * caller's libevent loop:
 *
 *   pps-server --publish RELAY/ROOM/NAME   (the call ends when it fails)
 *   pps-client RELAY/ROOM/PEER, per peer   (retried each second while the
 *                                           peer has not published yet)
 *
 * Children run in process groups of their own (the terminal's Ctrl-C reaches
 * the call, which stops them) and get SIGTERM if the call's process dies
 * (PR_SET_PDEATHSIG). With a window (display not "none"), a viewer's try is
 * a headless probe until the peer's stream is there, then the real viewer.
 * Their stdout and stderr are read by events, line by line, and handed to
 * the caller with the participant they concern. Child exits arrive through
 * a SIGCHLD signal event: the caller's event_base must hold no other SIGCHLD
 * event, and the call reaps any child of the process.
 *
 * Thread: everything on the loop's thread. A library: it never prints; its
 * own messages go through params.log.
 */
#ifndef PPS_CALL_H
#define PPS_CALL_H

#include "pps-log.h"

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Peers one participant shows at most (a relay hosts 16 streams by default). */
#define PPS_CALL_MAX_PEERS 15
/* A viewer of a peer that has not published yet tries again this often. */
#define PPS_CALL_DEFAULT_RETRY_INTERVAL_US 1000000
/* A viewer that has no stream this long after it started is stopped and
 * retried (pps-client's own handshake timeout usually ends it first). */
#define PPS_CALL_DEFAULT_ATTEMPT_TIMEOUT_US 10000000
/* SIGTERM to a child, then SIGKILL after this long. */
#define PPS_CALL_DEFAULT_STOP_GRACE_US 5000000

/* The publisher's deadlines in a call, before the participant's --set. */
#define PPS_CALL_PUBLISHER_DEADLINES "pps.deadlines=predictive"

typedef struct pps_call pps_call_t;

typedef struct {
	const char *server_program;         /* path of pps-server */
	const char *client_program;         /* path of pps-client */
	const char *relay;                  /* HOST:PORT */
	const char *room;                   /* ROOM: one or more name components joined by '/' */
	const char *name;                   /* this participant: publishes ROOM/NAME */
	const char *const *peers;           /* shown as ROOM/PEER each */
	unsigned n_peers;                   /* 1..PPS_CALL_MAX_PEERS */
	double duration_s;                  /* 0: until pps_call_stop */
	const char *display;                /* pps-client --display: auto, sdl or none */
	const char *log_dir;                /* NULL, or each viewer's --log DIR/PEER.jsonl */
	const char *output_dir;             /* NULL, or each viewer's --output DIR/PEER.y4m */
	const char *const *server_settings; /* the publisher's --set SECTION.KEY=VALUE */
	unsigned n_server_settings;
	const char *const *client_settings; /* every viewer's --set */
	unsigned n_client_settings;
	bool quiet;                 /* children get -q (no status lines) */
	int64_t retry_interval_us;  /* 0: PPS_CALL_DEFAULT_RETRY_INTERVAL_US */
	int64_t attempt_timeout_us; /* 0: PPS_CALL_DEFAULT_ATTEMPT_TIMEOUT_US */
	int64_t stop_grace_us;      /* 0: PPS_CALL_DEFAULT_STOP_GRACE_US */
	pps_log_t log;              /* the call's own messages ("waiting for bob ...") */
} pps_call_params_t;

typedef struct {
	/* One line a child wrote (no newline; PPS_PROCESS_MAX_LINE_BYTES at most):
	 * @who is the participant (NAME for the publisher, PEER for a viewer),
	 * @on_stdout which of the child's streams it came from. */
	void (*line_cb)(const char *who, bool on_stdout, const char *line, void *user);
	/* Every child has exited: the call is over. @exit_status: 0 it ended
	 * cleanly (its duration, pps_call_stop(0)), 1 a failure (the publisher
	 * failed, a child could not start), 2 a child refused its settings; @why
	 * says which. Called from the loop, never from inside a pps_call_ call. */
	void (*ended_cb)(int exit_status, const char *why, void *user);
} pps_call_events_t;

/*
 * A call on @base (not started). Copies @params but not the strings and
 * arrays it points at: they must outlive the call. NULL with errno (EINVAL:
 * @params wrong, the reason in @err; ENOMEM) on failure.
 */
pps_call_t *pps_call_new(struct event_base *base, const pps_call_params_t *params,
                         const pps_call_events_t *events, void *user, char *err, size_t err_size);

/* Starts the publisher and every viewer, and the duration. 0, or -EALREADY
 * (with @err) when called twice. A child that cannot start (fork, pipes)
 * ends the call: ended_cb with status 1 follows. */
int pps_call_start(pps_call_t *call, char *err, size_t err_size);

/*
 * Ends the call: SIGTERM to every child, SIGKILL to those left after the
 * grace; ended_cb follows once all have exited. @exit_status and @why as in
 * ended_cb; a second stop keeps the first reason and the higher status.
 */
void pps_call_stop(pps_call_t *call, int exit_status, const char *why);

/* Kills (SIGKILL) and reaps children still running, frees the call. */
void pps_call_free(pps_call_t *call);

/*
 * Finds program @name for a call: in @self_dir (the directory of the running
 * executable), else in @self_dir/../@sibling (the build tree: call/ beside
 * server/ and client/). Writes the path to @path; 0, or -ENOENT with both
 * places tried named in @err.
 */
int pps_call_find_program(const char *self_dir, const char *name, const char *sibling, char *path,
                          size_t path_size, char *err, size_t err_size);

/*
 * Whether @name is one component of a relay stream name (letters, digits,
 * '.', '_', '-'; not "." or ".."); with @slashes, components joined by '/'.
 */
bool pps_call_name_valid(const char *name, bool slashes);

#endif
