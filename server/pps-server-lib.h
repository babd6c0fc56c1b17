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
 *   server:   all of the above made into one object (pps_server_t), the
 *             counterpart of the client's pps_player: pps-server and the
 *             ppssink element both serve through it
 *
 * Everything runs on the thread that owns the event_base. The objects report
 * through their events and a pps_log_t (common/pps-log.h); none prints.
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
/* Audio-only connections admitted per max_clients slot (a client may carry
 * its audio on a pool of up to twelve, beside its video). */
#define PPS_LISTENER_AUDIO_PER_CLIENT 12
/* Copies of a stream (HELLO's copy flag) admitted per max_clients slot: a
 * client views its stream on up to four connections, the copies beside its
 * own; they do not take client slots. */
#define PPS_LISTENER_COPIES_PER_CLIENT 3

/* A retransmission with less queueing than this on the stream's own
 * connection is a loss of the path (random, a radio), not of a queue the
 * stream fills itself. */
#define PPS_LISTENER_COPY_CALM_QUEUE_US 10000
/* An awake copy at rest (transport.copy_rest) is checked over each
 * PPS_LISTENER_COPY_CHECK_US it carries: the share of the bytes the stream's
 * own connection and the copy deliver that they may retransmit meanwhile;
 * at least this many packets delivered for a verdict; how long a copy that
 * failed rests (the first time, doubling up to the last). */
#define PPS_LISTENER_COPY_CHECK_US       3000000
#define PPS_LISTENER_COPY_SELF_LOSS_PCT  25
#define PPS_LISTENER_COPY_CHECK_MIN_PKTS 16
#define PPS_LISTENER_COPY_HOLD_US        30000000
#define PPS_LISTENER_COPY_HOLD_MAX_US    240000000

typedef enum {
	PPS_COPY_CHECK_UNDECIDED = 0, /* too little delivered to judge */
	PPS_COPY_CHECK_PASSED,
	PPS_COPY_CHECK_FAILED, /* the copy makes the losses: it rests */
} pps_copy_check_t;

/*
 * One check of an awake copy: the stream's own connection and the copy
 * retransmitted @retrans_pkts packets of @mss bytes while they delivered
 * @bytes, and the own connection queues @queue_delay_us now. It fails when
 * they retransmit more than PPS_LISTENER_COPY_SELF_LOSS_PCT of what they
 * deliver with a queue: a path the stream fills itself, whose queue two
 * connections of it overflow (measured on a 0.5 Mbit/s path with a 3-packet
 * queue: 31-56% with the copy awake, 2-15% on one connection; beside 20
 * cubic flows 4-22% with the copy awake; a lossy path loses without a
 * queue).
 */
pps_copy_check_t pps_listener_copy_check(uint64_t retrans_pkts, uint64_t bytes, uint32_t mss,
                                         uint32_t queue_delay_us);
/* The rest after a failed check, given the last one's (0: none yet). */
int64_t pps_listener_copy_next_hold_us(int64_t hold_us);

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
	unsigned max_pending;     /* in their handshake at once; 0 = max_clients;
	                           * at most PPS_LISTENER_MAX_PENDING_LIMIT */
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

/*
 * Raises this process's open-files soft limit to its hard one (a server's
 * program calls it at start; a library embedding the server does not). False,
 * with what to do in @why, when the limit is still below what a listener
 * with @params may hold (every client with its audio connections, the
 * handshakes).
 */
bool pps_listener_raise_fd_limit(const pps_listener_params_t *params, char *why, size_t why_size);

typedef struct {
	/* Ask the encoder for an IDR now (the recovery bounds are applied). */
	void (*idr_cb)(void *user);
	/* A streaming session is going (its figures are final); optional. */
	void (*left_cb)(pps_session_t *session, void *user);
	/* A video client was admitted (before its join's IDR is asked for);
	 * optional. */
	void (*joined_cb)(pps_session_t *session, void *user);
} pps_listener_callbacks_t;

typedef struct {
	unsigned sessions;                /* open, in any state */
	unsigned streaming;               /* of them, admitted */
	uint64_t connections_total;       /* TCP connections accepted (HTTP fetches and failed
	                                   * handshakes included) */
	uint64_t clients_total;           /* clients admitted to the stream (audio-only connections
	                                   * apart) */
	uint64_t audio_connections_total; /* audio-only connections admitted */
	uint64_t clients_refused;         /* refused at accept or at HELLO (full, per address,
	                                   * busy) */
	uint64_t clients_refused_busy;    /* of them, refused while the fan-out guard held */
	uint64_t clients_unauthorized;    /* refused with BYE unauthorized */
	uint64_t auth_throttled;     /* of them, refused untried: their address's tries spent */
	uint64_t clients_evicted;    /* dropped with BYE too-slow */
	uint64_t handshakes_dropped; /* pending: for a newcomer, a timeout, bad bytes */
	uint64_t log_lines_unlogged; /* lines peers caused past the log's rate limit */
	pps_recovery_stats_t recovery;
} pps_listener_stats_t;

typedef struct pps_listener pps_listener_t;

/*
 * The fan-out guard: whether the loop keeps up with the stream. Writing a
 * window to every session takes time that grows with the sessions; once it
 * takes PPS_FANOUT_BUSY_PCT of the time between two windows' captures
 * (averaged over about PPS_FANOUT_LOAD_WINDOWS windows, or twice that time
 * for one window), the loop is about to fall behind the stream, and then
 * every viewer's windows go late together. Newcomers are refused (BYE
 * server-full) while that holds and PPS_FANOUT_BUSY_HOLD_US after, so the
 * viewers already in keep their stream. A pure state machine (times given),
 * tested apart.
 */
#define PPS_FANOUT_BUSY_PCT     90
#define PPS_FANOUT_LOAD_WINDOWS 4
#define PPS_FANOUT_BUSY_HOLD_US 2000000
typedef struct {
	bool have_window;
	uint32_t window_id;       /* the window being written out */
	int64_t first_capture_us; /* its first frame's */
	int64_t interval_us;      /* between the last two windows' captures; 0: not known */
	int64_t spent_us;         /* writing that window to the sessions, so far */
	int64_t last_spent_us;    /* the last window's whole, for the log */
	double load;              /* smoothed share of the interval spent writing windows */
	int64_t busy_until_us;    /* newcomers refused until then; 0: never busy */
	uint64_t episodes;        /* times the guard went busy from idle */
} pps_fanout_guard_t;

/* @spent_us of the loop's time (at @now_us) went to writing window @window_id
 * (captured from @first_capture_us) to the sessions. True when this made the
 * guard busy from idle (the caller logs it once). */
bool pps_fanout_guard_note(pps_fanout_guard_t *g, uint32_t window_id, int64_t first_capture_us,
                           int64_t spent_us, int64_t now_us);
bool pps_fanout_guard_busy(const pps_fanout_guard_t *g, int64_t now_us);

/* Tries at the access token per address: a burst, then a rate; addresses
 * remembered at once (a full bucket is as good as forgotten). */
#define PPS_LISTENER_AUTH_BURST       5
#define PPS_LISTENER_AUTH_TRIES_PER_S 2
#define PPS_LISTENER_AUTH_ADDRESSES   256

/* Connections accepted per wake-up of the listening socket, its backlog, and
 * the pause after a failed accept (out of descriptors). */
#define PPS_LISTENER_ACCEPTS_PER_WAKEUP 16
#define PPS_LISTENER_BACKLOG            1024
#define PPS_LISTENER_ACCEPT_PAUSE_US    100000
/*
 * TCP_DEFER_ACCEPT on the listening socket: every client of this server
 * speaks first (HELLO, a TLS ClientHello, an HTTP request), so the kernel
 * hands a connection over when its first bytes arrive. One that sends
 * nothing is handed over after this long (one SYN-ACK retransmission), and
 * one that is reset before it said anything (a connect churn) never costs
 * the loop an accept, a session or a wake-up.
 */
#define PPS_LISTENER_DEFER_ACCEPT_S 1
/* SO_RCVBUF of a client's connection (the kernel doubles it). */
#define PPS_LISTENER_RCVBUF_BYTES 16384

/* The largest handshake pool a listener keeps. */
#define PPS_LISTENER_MAX_PENDING_LIMIT 1024

/* A client that has not finished its handshake within this is dropped. */
#define PPS_DEFAULT_HELLO_TIMEOUT_US (5 * 1000000)

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
/*
 * pps_listener_add(), and the session then handles @input (@input_len
 * bytes, may be 0) as the first bytes its client sent: the records a relay
 * read from the connection to route it by its HELLO (or a browser's HTTP
 * request, routed by its path), or a publisher's relay's HELLO
 * (pps_session_input()). Plaintext connections only.
 */
int pps_listener_add_with_input(pps_listener_t *listener, int fd, const struct sockaddr *addr,
                                socklen_t addr_len, const uint8_t *input, size_t input_len);
/* Sessions from now on announce @transport (STREAM_INFO's audio_transport)
 * instead of the one the listener was made with: a publisher whose relay
 * did not take its audio connection sends the audio in the windows. */
void pps_listener_set_audio_transport(pps_listener_t *listener, uint8_t transport);
/* pps_listener_add_with_input() for a connection whose TLS handshake the
 * router already ran (@tls, made on @fd; NULL: plaintext): @input is the
 * decrypted bytes it read. The session owns @tls from now on, or it is
 * freed here. */
int pps_listener_add_routed(pps_listener_t *listener, int fd, const struct sockaddr *addr,
                            socklen_t addr_len, struct pps_tls *tls, const uint8_t *input,
                            size_t input_len);
/* Queues @window for every streaming client (the caller keeps its reference). */
void pps_listener_push_window(pps_listener_t *listener, pps_window_t *window);
/* An open window pushed before got an ADU or closed (pps_media_events_t):
 * every streaming client's writer runs again. */
void pps_listener_window_grew(pps_listener_t *listener, pps_window_t *window);
/* An audio frame for every session that takes audio (pps_session_push_audio()). */
void pps_listener_push_audio(pps_listener_t *listener, const pps_wire_audio_frame_t *frame);
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

typedef struct {
	int base_share_pct;     /* the base layer's rate, % of the slowest client's estimate */
	int64_t base_memory_us; /* ... its lowest over this long (0: its latest) */
	int probe_pct;          /* the top layer's, % of the fastest client's estimate */
	int min_base_kbps;
	int min_crf; /* finest CRF the loop may ask for */
	int64_t interval_us;
	/* While every viewer still has a window unsent when the next is ready,
	 * the encoder codes up to this much coarser (CRF) so their queues
	 * drain (pps_adapt_loop_window_ready); 0: never. */
	int drain_crf;
	/* The encoder's fixed settings bound each layer: its CRF is the
	 * coarsest, its VBV cap (0: none) the largest rate. */
	int base_crf, enhancement_crf;
	int base_vbv_kbps, enhancement_vbv_kbps;
	/* Whether the windows carry B frames, decided at each step from what
	 * the clients' regulators drop. */
	pps_b_frames_params_t b_frames;
	/* false: the rates stay as configured (adapt.mode = fixed); the loop
	 * only decides the B frames. */
	bool steer_rates;
	pps_log_t log; /* B frames switching on or off, and why */
} pps_adapt_loop_params_t;

/*
 * The rate allocator seeded from @params, its initial rates handed to
 * @media, and a timer every interval_us. NULL with errno and the reason
 * in @err.
 */
pps_adapt_loop_t *pps_adapt_loop_new(struct event_base *base, const pps_adapt_loop_params_t *params,
                                     const pps_wire_stream_info_t *info, int64_t latency_budget_us,
                                     pps_media_t *media, pps_listener_t *listener, char *err,
                                     size_t err_size);
void pps_adapt_loop_free(pps_adapt_loop_t *loop);
/* A video client joined: with B frames on drops, they come on now, until its
 * path reads clean (pps_session_take_start()). */
void pps_adapt_loop_joined(pps_adapt_loop_t *loop, pps_session_t *session);
/* A window is ready for the viewers (call before it is pushed to them):
 * decides how much coarser the encoder codes from its next mini-GOP on,
 * from how long the viewers' pictures wait in this sender. */
void pps_adapt_loop_window_ready(pps_adapt_loop_t *loop);

/* ---- --log ------------------------------------------------------------- */

typedef struct pps_server_log pps_server_log_t;

/*
 * JSON Lines to @path once a second: one "path" event per streaming client
 * and one "rates" event; one "encoded" event per window once all its ADUs
 * are in (pps_server_log_window) (docs/RUNNING.md). NULL with errno and @err set.
 */
pps_server_log_t *pps_server_log_new(struct event_base *base, const char *path, int quality_layers,
                                     pps_media_t *media, pps_listener_t *listener, char *err,
                                     size_t err_size);
/* Stops and closes: 0, or a negative errno when the file could not be written. */
int pps_server_log_close(pps_server_log_t *log);
/* The file's path, for messages. */
const char *pps_server_log_path(const pps_server_log_t *log);
/* One record of the caller's (@json: one JSON object, no newline). */
void pps_server_log_record(pps_server_log_t *log, const char *json);
/* The "encoded" record of a closed @window (pps_window_is_open() false): its
 * bytes per quality layer, per frame and in IDR pictures. Loop thread. */
void pps_server_log_window(pps_server_log_t *log, const pps_window_t *window);
/* The open file, for a record written by another object (the summary). */
FILE *pps_server_log_file(pps_server_log_t *log);

/* ---- status line, final counters, snapshots ---------------------------- */

typedef struct pps_server_report pps_server_report_t;

/* Clients that left, kept for the summary: the last this many (the rest are
 * counted in clients_omitted). */
#define PPS_SERVER_REPORT_CLIENTS_KEPT 256

/* One client's figures (a streaming session's, read now or when it left). */
typedef struct {
	unsigned id;
	char address[64];                       /* "addr:port" */
	char name[PPS_WIRE_MAX_NAME_BYTES + 1]; /* the HELLO's, "" without */
	bool audio_only;
	bool copy;                  /* one more copy of another connection's stream (HELLO flag) */
	int64_t copy_delay_us;      /* a copy: what each window waits before it is sent */
	bool connected;             /* still streaming when the figures were read */
	int64_t joined_us, left_us; /* real time; left_us 0 while connected */
	pps_sched_stats_t sched;    /* windows, ADUs, audio */
	uint64_t adu_bytes_sent;    /* over every layer */
	bool has_transport;         /* the writer's counters below are set */
	pps_minbuf_stats_t transport;
	pps_path_estimate_t path;
} pps_server_client_t;

/* The server's figures at one moment: what --stats-json, the --log's
 * summary and GET /metrics (both formats) render. */
typedef struct {
	int64_t time_us;   /* when they were read (real time) */
	double duration_s; /* since the server started */
	double cpu_user_s, cpu_system_s;
	pps_media_stats_t media;
	pps_listener_stats_t listener;
	pps_server_client_t *clients; /* the streaming sessions, ascending id */
	size_t n_clients;
	uint64_t clients_left; /* clients that had left by then (the report's count) */
} pps_server_snapshot_t;

/* What the start record and the summaries' "start" say about the run. */
typedef struct {
	const char *listen;    /* the address listened on, its port the one bound */
	const char *source;    /* "test", "camera", ..., "pushed" */
	const char *transport; /* "minbuf", "tcp" */
	bool tls;
	bool audio;
	pps_wire_stream_info_t info;
	const char *metrics; /* "off", "on", "token" */
} pps_server_report_start_t;

/* Reads @media and @listener (borrowed); rates are measured from now, which
 * is the run's start. @start is copied (its strings must outlive the
 * report). NULL + errno. */
pps_server_report_t *pps_server_report_new(pps_media_t *media, pps_listener_t *listener,
                                           int quality_layers, bool rate_adaptive,
                                           const pps_server_report_start_t *start);
void pps_server_report_free(pps_server_report_t *report);
/* What it was made with, and when (real time, µs). */
const pps_server_report_start_t *pps_server_report_start(const pps_server_report_t *report);
int64_t pps_server_report_start_us(const pps_server_report_t *report);
/* One status line on @out: rates since the last one, each streaming client. */
void pps_server_report_status(pps_server_report_t *report, FILE *out);
/* A streaming session is going: its figures are kept (the last
 * PPS_SERVER_REPORT_CLIENTS_KEPT). */
void pps_server_report_client_left(pps_server_report_t *report, pps_session_t *session);
/* Reads every figure now into @snapshot (its clients array allocated;
 * pps_server_snapshot_clear() frees it). 0 or -ENOMEM. */
int pps_server_report_snapshot(const pps_server_report_t *report, pps_server_snapshot_t *snapshot);
void pps_server_snapshot_clear(pps_server_snapshot_t *snapshot);
/* The start record, one JSON line without its newline (g_free() it). */
char *pps_server_report_start_json(const pps_server_report_t *report);
/* @snapshot as one JSON object of type @type ("summary", "snapshot"): the
 * start block, the counters, and the clients (those of the last
 * PPS_SERVER_REPORT_CLIENTS_KEPT that had left by the snapshot, then the
 * connected ones); one line without its newline (g_free() it). */
char *pps_server_report_json(const pps_server_report_t *report,
                             const pps_server_snapshot_t *snapshot, const char *type);
/* The run's counters on @out (NULL: none), and the summary as one JSON line
 * to @stats_json (NULL: none; not closed; @stats_json_name names it in
 * messages) and to @log (NULL: none): 0, or a negative errno with the reason
 * in @err when @stats_json could not be written. */
int pps_server_report_final(const pps_server_report_t *report, FILE *out, FILE *stats_json,
                            const char *stats_json_name, FILE *log, char *err, size_t err_size);

/* ---- GET /metrics -------------------------------------------------------- */

typedef enum {
	PPS_SERVER_METRICS_OFF,   /* 404, as any unknown path */
	PPS_SERVER_METRICS_ON,    /* anyone who reaches the listener */
	PPS_SERVER_METRICS_TOKEN, /* with [server] access_token, as a bearer token or ?token= */
	PPS_SERVER_METRICS_COUNT,
} pps_server_metrics_mode_t;

/* "off", "on", "token", NULL-terminated, indexed by the mode. */
extern const char *const pps_server_metrics_mode_names[];

/* The figures of a snapshot are reused for this long: a scrape flood costs
 * one reading of every session per interval, and the text and JSON formats
 * asked within it show the same moment. */
#define PPS_SERVER_METRICS_SNAPSHOT_US 1000000

typedef struct pps_server_metrics pps_server_metrics_t;

/* The /metrics page over @report (borrowed). @token: the access token for
 * PPS_SERVER_METRICS_TOKEN (borrowed). NULL + errno. */
pps_server_metrics_t *pps_server_metrics_new(pps_server_report_t *report,
                                             pps_server_metrics_mode_t mode, const char *token);
void pps_server_metrics_free(pps_server_metrics_t *metrics);
/* The pps_web_page_cb of GET /metrics (Prometheus text; ?format=json: the
 * snapshot in --stats-json's schema); @user is the metrics object. */
bool pps_server_metrics_page_cb(const pps_ws_request_t *request, pps_web_page_t *page, void *user);
/* The Prometheus text of @snapshot (g_free() it); *len_out its length. */
char *pps_server_metrics_text(const pps_server_report_t *report,
                              const pps_server_snapshot_t *snapshot, size_t *len_out);

/* ---- record: the stream as encoded, into a file --------------------------- */

/*
 * --record (pps-record.c): every quality layer's H.264 pictures as they were
 * encoded, one Matroska track per layer (the base first), each picture at
 * its capture time, through GStreamer's matroskamux (pps-matroska.h: the
 * loop copies each picture into a bounded queue, GStreamer's threads
 * write). Loop thread only.
 */
typedef struct pps_record pps_record_t;

typedef struct {
	uint64_t pictures;              /* written, x264's fillers included, every layer */
	uint64_t pictures_before_start; /* of a layer before its first IDR: left out */
	uint64_t pictures_retimed;      /* a capture time that went back, moved up */
	int64_t duration_us;            /* first capture to the last picture's end */
} pps_record_stats_t;

/* Opens @path now (an unwritable one fails here, before anything listens;
 * so does a name ending in .nut, EINVAL): NULL with errno and a one-line
 * reason in @err. @info: the stream's sizes, rate and layers. */
pps_record_t *pps_record_new(const char *path, const pps_wire_stream_info_t *info, char *err,
                             size_t err_size);
/* One ADU, in the encoder's order (borrowed). 0, or a negative errno with
 * a one-line reason in @err: -ENOSPC or -EIO for a write that failed (said
 * at the call after it: the writing is GStreamer's), -ENOBUFS when the disk
 * does not keep up with the stream. After an error nothing more is written
 * and every later call returns it. */
int pps_record_adu(pps_record_t *record, const pps_adu_t *adu, char *err, size_t err_size);
/* Writes what is queued and the file's index, and closes it: 0 or a
 * negative errno with @err. @stats may be NULL. Once, before free. */
int pps_record_finish(pps_record_t *record, pps_record_stats_t *stats, char *err, size_t err_size);
const char *pps_record_path(const pps_record_t *record);
void pps_record_free(pps_record_t *record);

/* ---- the server: media, listener, closed loop, log, report -------------- */

typedef struct pps_server pps_server_t;

typedef enum {
	PPS_SERVER_STATE_READY,     /* made, not serving yet */
	PPS_SERVER_STATE_STREAMING, /* listening, the source running */
	PPS_SERVER_STATE_STOPPED,   /* pps_server_stop(): the source stopped */
	PPS_SERVER_STATE_FAILED,    /* the source or the encoder failed; it stays so */
} pps_server_state_t;

/* "ready", "streaming", "stopped", "failed". */
const char *pps_server_state_name(pps_server_state_t state);

/* What the server announces, on the loop's thread, with the user pointer. */
typedef struct {
	/* The state changed. @error: one line for FAILED (a source that ended
	 * or broke, the encoder), NULL otherwise. A failure is announced as
	 * soon as the loop runs after it. Optional. */
	void (*state_cb)(pps_server_state_t old_state, pps_server_state_t state, const char *error,
	                 void *user);
} pps_server_events_t;

typedef struct {
	pps_media_params_t media;       /* what to capture and encode */
	pps_listener_params_t listener; /* stream_info and frame_duration_us: the media's */
	bool closed_loop;               /* the clients' paths steer the rates */
	pps_adapt_loop_params_t adapt;  /* with closed_loop, or B frames on drops */
	const char *listen;             /* HOST:PORT, port 0: any free one */
	/* Pictures come from pps_server_push_frame(), and the audio track (if
	 * media.capture.audio is not off) from pps_server_push_audio(). */
	bool pushed;
	const char *log_path;    /* JSON Lines once a second (pps_server_log_t); NULL: none */
	const char *record_path; /* the stream as encoded (pps_record_t); NULL or "": none */
	pps_server_metrics_mode_t metrics; /* GET /metrics on the listener */
	pps_log_t log;                     /* every object's messages; zero: dropped */
	/* HOST:PORT/NAME: publish to that relay (pps-relay.h) instead of
	 * listening: the relay is the one client, served by the same session,
	 * regulator and writer as a viewer; listener.session.access_token is
	 * what the relay's challenge is answered with. The audio, if any, goes
	 * on that connection, or with publish_audio_own on a second one of its
	 * own (in the windows when the relay does not take it). The server
	 * fails once the connection ends. NULL or "": listen. */
	const char *publish;
	bool publish_audio_own;
	/* TLS to the relay (its certificate verified for the host named,
	 * against relay_tls_ca, or the system's store when NULL or ""). */
	bool relay_tls;
	const char *relay_tls_ca;
} pps_server_params_t;

/*
 * Media, listener, closed loop and log on @base, wired together: windows go
 * to every client, the clients' IDR requests to the encoder, their paths to
 * the rate allocator. Nothing listens yet. NULL with errno and a one-line
 * reason in @err. @params is copied; its strings must outlive the server.
 */
pps_server_t *pps_server_new(struct event_base *base, const pps_server_params_t *params,
                             const pps_server_events_t *events, void *user, char *err,
                             size_t err_size);
/* Starts the source (a capture waits for its first frame), then listens
 * ("listening on ..." through the log): STREAMING. 0, or a negative errno
 * with the reason in @err; a source that fails to start fails it before
 * anything listens. */
int pps_server_start(pps_server_t *server, char *err, size_t err_size);
/* The source stops (STOPPED); the clients stay connected. Idempotent. */
void pps_server_stop(pps_server_t *server);
/* BYE normal with @text to every client (shutdown, end of stream). */
void pps_server_say_bye(pps_server_t *server, const char *text);
/* A pushed server, any one thread: the next picture, copied (the size the
 * capture was made with; else -EINVAL). Never blocks. */
int pps_server_push_frame(pps_server_t *server, const pps_frame_t *frame);
/* A pushed server with an audio track, any one thread: one 10 ms block
 * (PPS_AUDIO_BLOCK_SAMPLES mono S16 48 kHz samples, borrowed) captured at
 * @capture_us, encoded on the caller's thread (pps_media_push_audio()).
 * Never blocks. 0, -ENOENT without an audio track, -EINVAL. */
int pps_server_push_audio(pps_server_t *server, const int16_t *pcm, size_t samples,
                          int64_t capture_us);
pps_server_state_t pps_server_state(const pps_server_t *server);
/* The port listened on (after start), the stream's STREAM_INFO. */
unsigned pps_server_port(const pps_server_t *server);
const pps_wire_stream_info_t *pps_server_stream_info(const pps_server_t *server);
/* "test source 640x480@30, 3 temporal x 2 quality layers, window 2 frames,
 * budget 250 ms, minbuf transport": what is served, for a log line. */
void pps_server_describe(const pps_server_t *server, char *buf, size_t size);
void pps_server_get_stats(const pps_server_t *server, pps_media_stats_t *media,
                          pps_listener_stats_t *listener);
/* The status line (rates since the last one, each client) on @out. */
void pps_server_write_status(pps_server_t *server, FILE *out);
/* The run's counters on @out (NULL: none), the summary as one JSON line to
 * @stats_json (NULL: none; the caller opened it, and closes it; named
 * @stats_json_name in messages) and to the log, and the log closed: 0, or a negative errno with
 * @err when a file could not be written. After pps_server_stop(). */
int pps_server_finish(pps_server_t *server, FILE *out, FILE *stats_json,
                      const char *stats_json_name, char *err, size_t err_size);
void pps_server_free(pps_server_t *server);

#endif /* PPS_SERVER_LIB_H */
