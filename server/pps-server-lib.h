/* SPDX-License-Identifier: MIT */
/*
 * The server library's objects beyond sessions and media (those are in
 * pps-server-internal.h):
 *
 *   recovery: when to force an IDR for clients that joined or lost their base
 *             layer (per client, in time, and in bits)
 *   listener: the listening socket, admission (max_clients, per address,
 *             handshakes bounded apart), the sessions, the fan-out of windows
 *             and the routing of IDR requests through the recovery bounds
 *   adapt loop: the closed loop's timer (path estimates -> rate allocator ->
 *             encoder)
 *   log:      --log, JSON Lines once a second
 *   report:   the status line and the final counters (--stats-json)
 *
 * pps-server.c parses the command line and the configuration, creates these
 * and connects their callbacks. Everything runs on the thread that owns the
 * event_base.
 */
#ifndef PPS_SERVER_LIB_H
#define PPS_SERVER_LIB_H

#include "pps-server-internal.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* ---- recovery ---------------------------------------------------------- */

#define PPS_DEFAULT_RECOVERY_MIN_INTERVAL_US 500000
#define PPS_DEFAULT_RECOVERY_BUDGET_PCT      5

/* A full server admits a newcomer in place of the streaming client that has
 * taken no data for longest, if that is at least this long (BYE too-slow,
 * counted as evicted). Slow readers that rejoin after each eviction would
 * otherwise hold their slots for good; a viewer on a live path takes data
 * every window, and one that stalls 2 s is already frozen. */
#define PPS_LISTENER_DISPLACE_STALLED_US 2000000

typedef struct {
	int64_t min_interval_us;    /* between two forced IDRs */
	int64_t client_interval_us; /* between two loss requests of one client */
	unsigned budget_pct;        /* forced IDRs' extra bits, % of the encoded rate; 0 = none */
} pps_recovery_params_t;

/* Per-client state, held by the caller (zeroed at join). */
typedef struct {
	int64_t last_request_us;
} pps_recovery_client_t;

/* One closed window of the encoded stream. */
typedef struct {
	int64_t now_us;
	uint64_t bits;       /* every ADU of the window */
	int64_t duration_us; /* frames / frame rate */
	unsigned frames;
	uint64_t idr_bits;      /* of its IDR pictures (0: none) */
	int64_t idr_capture_us; /* capture time of its first IDR picture */
} pps_recovery_window_t;

typedef struct {
	uint64_t requests;          /* joins and losses asked */
	uint64_t granted;           /* forced IDRs asked of the encoder */
	uint64_t deferred;          /* requests held back by a bound (served later) */
	uint64_t dropped_client;    /* loss requests within client_interval_us of the last */
	uint64_t served_by_encoder; /* pending requests an IDR of the encoder served */
	uint64_t idr_cost_bits;     /* estimated extra bits of one IDR */
	uint64_t tokens_bits;       /* in the bucket now */
} pps_recovery_stats_t;

enum {
	PPS_RECOVERY_NONE = 0,     /* nothing pending */
	PPS_RECOVERY_NOW = 1,      /* force an IDR now */
	PPS_RECOVERY_DEFERRED = 2, /* poll again at *when_us */
	PPS_RECOVERY_DROPPED = 3,  /* this client asked too recently; the next IDR serves it */
};

typedef struct pps_recovery pps_recovery_t;

/* NULL with errno EINVAL (budget over 100, negative intervals) or ENOMEM. */
pps_recovery_t *pps_recovery_new(const pps_recovery_params_t *params);
void pps_recovery_free(pps_recovery_t *recovery);
/* Learns the encoded rate and an IDR's cost; an IDR captured after the
 * pending requests were made serves them. */
void pps_recovery_add_window(pps_recovery_t *recovery, const pps_recovery_window_t *window);
/* A client joined (@join) or lost base-layer data. Returns PPS_RECOVERY_NOW,
 * _DEFERRED (with *when_us) or _DROPPED. */
int pps_recovery_request(pps_recovery_t *recovery, pps_recovery_client_t *client, bool join,
                         int64_t now_us, int64_t *when_us);
/* A deferred request's time came: PPS_RECOVERY_NOW, _DEFERRED again (with
 * *when_us) or _NONE (served meanwhile). */
int pps_recovery_poll(pps_recovery_t *recovery, int64_t now_us, int64_t *when_us);
void pps_recovery_get_stats(const pps_recovery_t *recovery, pps_recovery_stats_t *stats);

/* ---- listener ---------------------------------------------------------- */

typedef struct {
	/* Every session's parameters (admit_cb is the listener's own). */
	pps_session_params_t session;
	unsigned max_clients;     /* streaming at once; when full, a newcomer displaces a client
	                           * that took no data for PPS_LISTENER_DISPLACE_STALLED_US */
	unsigned max_pending;     /* in their handshake at once; 0 = max_clients */
	unsigned max_per_address; /* connections from one address, in any state */
	pps_recovery_params_t recovery;
	int64_t frame_duration_us; /* of the stream, to learn its rate from windows */
	/* [server] tls_cert and tls_key (PEM files), both or neither: TLS on the
	 * listener, loaded by pps_listener_listen(). NULL or "": plaintext. */
	const char *tls_cert;
	const char *tls_key;
	/* Where the listener and its sessions report (listening, joins, refusals,
	 * errors); zeroed: nowhere. Each session's params get a copy. */
	pps_log_t log;
} pps_listener_params_t;

typedef struct {
	/* Ask the encoder for an IDR now (the recovery bounds are applied). */
	void (*idr_cb)(void *user);
} pps_listener_callbacks_t;

typedef struct {
	unsigned sessions;             /* open, in any state */
	unsigned streaming;            /* of them, admitted */
	uint64_t clients_total;        /* connections accepted */
	uint64_t clients_refused;      /* refused at accept or at HELLO (full, per address) */
	uint64_t clients_unauthorized; /* refused with BYE unauthorized */
	uint64_t clients_evicted;      /* dropped with BYE too-slow */
	uint64_t handshakes_dropped;   /* pending: for a newcomer, a timeout, bad bytes */
	uint64_t refusals_unlogged;    /* refusals past PPS_LISTENER_REFUSALS_LOGGED_PER_S */
	pps_recovery_stats_t recovery;
} pps_listener_stats_t;

/* Refused connections logged per second at most; the rest are counted. */
#define PPS_LISTENER_REFUSALS_LOGGED_PER_S 5

typedef struct pps_listener pps_listener_t;

/* A client that has not finished its handshake within this is dropped. */
#define PPS_DEFAULT_HELLO_TIMEOUT_US (5 * 1000000)

/*
 * @params from [server], [pps] and [transport] of @config, as pps-server and
 * the ppssink element serve with them (stream_info and frame_duration_us are
 * the media's, left zero). @config must outlive the listener. 0, or -EINVAL
 * with the reason (naming the key) in @err.
 */
int pps_listener_params_from_config(const pps_config_t *config, pps_listener_params_t *params,
                                    char *err, size_t err_size);

/* NULL with errno (EINVAL, ENOMEM). Nothing listens before pps_listener_listen(). */
pps_listener_t *pps_listener_new(struct event_base *base, const pps_listener_params_t *params,
                                 const pps_listener_callbacks_t *callbacks, void *user);
/*
 * Listens on @listen_at ("host:port", "[v6]:port"); the port bound goes to
 * @port_out. With params->tls_cert and tls_key, loads them first: every
 * connection then starts with a TLS handshake. Warns (params->log) when the
 * address reaches beyond loopback without an access token or without TLS.
 * 0 or a negative errno with the reason in @err.
 */
int pps_listener_listen(pps_listener_t *listener, const char *listen_at, unsigned *port_out,
                        char *err, size_t err_size);
/*
 * A connection to admit (accepted here, or a test's socketpair); the listener
 * owns @fd from now on. 0 when it became a session, -EBUSY when it was
 * refused (BYE written, fd closed), -ENOMEM.
 */
int pps_listener_add(pps_listener_t *listener, int fd, const struct sockaddr *addr,
                     socklen_t addr_len);
/* Queues @window for every streaming client (the caller keeps its reference). */
void pps_listener_push_window(pps_listener_t *listener, pps_window_t *window);
/* An open window pushed before got an ADU or closed (pps_media_events_t):
 * every streaming client's writer runs again. */
void pps_listener_window_grew(pps_listener_t *listener, pps_window_t *window);
/* Applies the timeouts and the deferred IDR request at the sessions' clock's now. */
void pps_listener_check_timeouts(pps_listener_t *listener);
typedef void (*pps_listener_session_cb)(pps_session_t *session, void *user);
/* Calls @cb for every open session, newest first; @cb must not close any. */
void pps_listener_foreach(pps_listener_t *listener, pps_listener_session_cb cb, void *user);
/* Best-effort BYE to every session (shutdown). */
void pps_listener_say_bye_all(pps_listener_t *listener, pps_wire_bye_reason_t reason,
                              const char *text);
void pps_listener_get_stats(const pps_listener_t *listener, pps_listener_stats_t *stats);
/* Frees every session (closing its socket) and stops listening. */
void pps_listener_free(pps_listener_t *listener);

/* ---- closed loop ------------------------------------------------------- */

typedef struct pps_adapt_loop pps_adapt_loop_t;

/*
 * The rate allocator seeded from [encoder] and [adapt], its initial rates
 * handed to @media, and a timer every [adapt] interval_ms. NULL with errno
 * (the reason logged once).
 */
pps_adapt_loop_t *pps_adapt_loop_new(struct event_base *base, const pps_config_t *config,
                                     const pps_wire_stream_info_t *info, int64_t latency_budget_us,
                                     pps_media_t *media, pps_listener_t *listener);
void pps_adapt_loop_free(pps_adapt_loop_t *loop);

/* ---- --log ------------------------------------------------------------- */

typedef struct pps_server_log pps_server_log_t;

/*
 * JSON Lines to @path once a second: one "path" event per streaming client
 * and one "rates" event (see the README). NULL with errno and @err set.
 */
pps_server_log_t *pps_server_log_new(struct event_base *base, const char *path, int quality_layers,
                                     pps_media_t *media, pps_listener_t *listener, char *err,
                                     size_t err_size);
/* Stops and closes: 0, or a negative errno when the file could not be written. */
int pps_server_log_close(pps_server_log_t *log);

/* ---- status line and final counters ------------------------------------ */

typedef struct pps_server_report pps_server_report_t;

/* Reads @media and @listener (borrowed); rates are measured from now. NULL + errno. */
pps_server_report_t *pps_server_report_new(pps_media_t *media, pps_listener_t *listener,
                                           int quality_layers, bool rate_adaptive);
void pps_server_report_free(pps_server_report_t *report);
/* One status line on stderr: rates since the last one, each streaming client. */
void pps_server_report_status(pps_server_report_t *report);
/* The run's counters on stderr (unless @quiet) and as JSON in @stats_json
 * (NULL: none): 0, or a negative errno when the file could not be written. */
int pps_server_report_final(const pps_server_report_t *report, bool quiet, const char *stats_json);

#endif /* PPS_SERVER_LIB_H */
