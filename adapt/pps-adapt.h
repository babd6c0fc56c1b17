/* SPDX-License-Identifier: MIT */
/*
 * adapt/: the closed loop. What the network says about each client's path,
 * and what the encoder and the socket writer do about it.
 *
 *   tcp_info samples --> pps_path_t (one per client) --> estimate, latency cap
 *   every client's estimate --> pps_ratealloc_t (one per server)
 *                           --> per-layer VBV rate, VBV buffer and CRF for the encoder
 *
 * Pure logic: no I/O and no clock reads (every call takes now_us, a
 * CLOCK_MONOTONIC or CLOCK_REALTIME time in microseconds, the caller's choice
 * as long as it is the same one), so unit tests drive it with recorded
 * samples. Objects are not thread-safe: the server uses them on its loop thread.
 * Constructors return NULL with errno set.
 */
#ifndef PPS_ADAPT_H
#define PPS_ADAPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------ path estimate */

/* One TCP_INFO reading, in the units the kernel reports them. */
typedef struct {
	int64_t now_us;
	uint64_t delivery_rate_bps;  /* tcpi_delivery_rate * 8 */
	bool delivery_app_limited;   /* tcpi_delivery_rate_app_limited */
	uint32_t min_rtt_us;         /* tcpi_min_rtt */
	uint32_t srtt_us;            /* tcpi_rtt */
	uint64_t bytes_acked;        /* tcpi_bytes_acked */
	uint32_t total_retrans_pkts; /* tcpi_total_retrans */
	uint32_t lost_pkts;          /* tcpi_lost */
	uint32_t cwnd_pkts;          /* tcpi_snd_cwnd */
	uint32_t unacked_pkts;       /* tcpi_unacked: packets in flight or lost */
	uint32_t mss_bytes;          /* tcpi_snd_mss */
	/* The sender holds data past its deadline (the regulator's base anchors,
	 * late): it has more to send than the path takes, so it is not
	 * application-limited, whatever the kernel's last rate sample says. */
	bool behind;
} pps_path_sample_t;

/*
 * The latency cap (see server/pps-minbuf.h for how the writer applies it):
 *   off       MIN_BUF(A,B) alone: the congestion window decides what is in flight.
 *   always    in flight <= estimate * (5/4 * min RTT + queue target), always.
 *   yielding  the same while the queue is the stream's own; when other flows
 *             keep the bottleneck queue above what the cap allows, the cap is
 *             lifted (the stream competes with its congestion window, as they
 *             do) and tried again every PPS_PATH_RETEST_US.
 */
typedef enum {
	PPS_LATENCY_CAP_OFF = 0,
	PPS_LATENCY_CAP_ALWAYS,
	PPS_LATENCY_CAP_YIELDING,
} pps_latency_cap_policy_t;

/* The names shared by config, logs and docs, in enum order, NULL-terminated. */
extern const char *const pps_latency_cap_names[];

/*
 * [transport] rate_control: what decides the stream's sending rate.
 *   congestion    the kernel's congestion control alone (cubic, bbr, ...).
 *   tcp-friendly  the congestion control, capped (SO_MAX_PACING_RATE) at a
 *                 rate that follows the rule a loss-based TCP follows (AIMD:
 *                 +PPS_PATH_FAIR_ALPHA_MILLI/1000 packet per RTT each RTT, x
 *                 PPS_PATH_FAIR_BETA_PCT/100 per round trip with a loss), so
 *                 beside such flows the stream takes about one flow's share
 *                 while a congestion control that keeps its window through
 *                 losses (bbr) spares it the stalls of a window of 2-4 packets.
 *                 Alone on a path (yielding cap, state self) it is not in force;
 *                 the server uses it in minbuf mode only (in mode tcp the
 *                 kernel's send buffer would hold what the pacer holds back).
 */
typedef enum {
	PPS_RATE_CONTROL_CONGESTION = 0,
	PPS_RATE_CONTROL_TCP_FRIENDLY,
} pps_rate_control_t;

extern const char *const pps_rate_control_names[]; /* in enum order, NULL-terminated */

/* cubic's multiplicative decrease and the additive increase that makes it as
 * fast as Reno's at the same loss rate (RFC 9438 4.3: 3(1 - b)/(1 + b)). */
#define PPS_PATH_FAIR_BETA_PCT    70
#define PPS_PATH_FAIR_ALPHA_MILLI 529

/* Where a path's cap stands. */
typedef enum {
	PPS_PATH_CAP_NONE = 0,  /* policy off, or no estimate yet */
	PPS_PATH_CAP_SELF,      /* capped: the queue is the stream's own */
	PPS_PATH_CAP_COMPETING, /* lifted: others hold the queue */
	PPS_PATH_CAP_TEST,      /* capped for a moment to see whether the queue drains */
} pps_path_cap_state_t;

const char *pps_path_cap_state_name(pps_path_cap_state_t state);

/* A yielding cap is tried again after this long without it (doubling, up to
 * 8x, while each try fails within this time). */
#define PPS_PATH_RETEST_US 4000000
/* The span, in seconds, over which the estimate counts the seconds that
 * had a retransmission (retrans_seconds). */
#define PPS_PATH_RETRANS_SECONDS 5

typedef struct {
	pps_latency_cap_policy_t cap_policy;
	/* Queueing the stream may add on its own path; the server derives it
	 * from the latency budget ([transport] queue_target_ms). */
	int64_t queue_target_us;
	pps_rate_control_t rate_control;
	/* The pacing rate under the tcp-friendly rate control, in percent of
	 * that rate ([transport] pacing_gain_pct; 0 reads as 100). */
	int pacing_gain_pct;
} pps_path_params_t;

typedef struct {
	bool valid;                 /* enough samples for an estimate */
	uint64_t estimate_bps;      /* what the path carries for this stream now */
	uint64_t delivery_rate_bps; /* the kernel's latest delivery-rate sample */
	uint64_t acked_bps;         /* bytes acknowledged per second, last ~0.5 s */
	uint64_t bytes_acked;       /* acknowledged so far, at the last reading */
	uint64_t inflight_bytes;    /* unacknowledged then (packets x MSS: at most that) */
	uint32_t mss_bytes;         /* the connection's MSS at the last reading */
	uint32_t min_rtt_us;
	uint32_t srtt_us;
	uint32_t queue_delay_us; /* srtt - min RTT: queueing on the path */
	uint64_t retrans_pkts;   /* retransmissions since the first sample */
	/* Of the last PPS_PATH_RETRANS_SECONDS whole seconds of the monotonic
	 * clock and the current one, those in which retransmissions grew: a
	 * queue shared with loss-based flows drops a packet or more nearly
	 * every second, a capacity step down costs a burst in one or two. */
	uint32_t retrans_seconds;
	uint32_t lost_pkts; /* currently marked lost */
	bool app_limited;   /* the last delivery sample was application-limited */
	bool congested;     /* queue over the target, or a retransmission, just now */
	uint32_t cwnd_pkts;
	uint32_t inflight_cap_pkts; /* 0 = no cap */
	pps_path_cap_state_t cap_state;
	/* A test of the cap failed since the state was last SELF: others hold
	 * the queue, not a moment of the stream's own (a loss at a capacity
	 * step down also leaves SELF, and the next test brings it back). */
	bool others_confirmed;
	uint64_t fair_rate_bps; /* tcp-friendly rate cap in force (then the estimate); 0 = none */
	uint64_t loss_events;   /* round trips with a retransmission (the AIMD's decreases) */
	/* Times the estimate (and the tcp-friendly rate) came down to what was
	 * acknowledged while the sender was behind its deadlines for a whole span. */
	uint64_t behind_events;
} pps_path_estimate_t;

typedef struct pps_path pps_path_t;

pps_path_t *pps_path_new(const pps_path_params_t *params);
void pps_path_free(pps_path_t *path);
/* Samples must come in time order; a sample older than the last is ignored. */
void pps_path_add_sample(pps_path_t *path, const pps_path_sample_t *sample);
void pps_path_get_estimate(const pps_path_t *path, pps_path_estimate_t *out);
/* Packets the writer may keep in flight (unacknowledged + unsent): the
 * latency cap while it is on, and with the tcp-friendly rate in force at most
 * that rate x min(srtt, min RTT + 2 x queue target) + 2 packets (more would
 * wait unsent behind the pacer); 0 = no cap. */
uint32_t pps_path_inflight_cap_pkts(const pps_path_t *path);
/* The tcp-friendly sending rate in bits/s (the writer's pacing cap) while it is
 * in force: others hold the queue (yielding cap in state competing), or always
 * under latency cap off/always; 0 = none. */
uint64_t pps_path_rate_cap_bps(const pps_path_t *path);
/* Whether others share the queue: the yielding cap is lifted (competing) or
 * being tested; false under the other cap policies and before an estimate. */
bool pps_path_shared(const pps_path_t *path);

/* ---------------------------------------------------------- rate allocation */

/*
 * [adapt] mode:
 *   closed-loop  the clients' path estimates steer every layer's VBV rate,
 *                VBV buffer and CRF (pps_ratealloc_t)
 *   fixed        the [encoder] CRF and VBV settings, unchanged for the run
 */
typedef enum {
	PPS_ADAPT_MODE_CLOSED_LOOP = 0,
	PPS_ADAPT_MODE_FIXED,
} pps_adapt_mode_t;

extern const char *const pps_adapt_mode_names[]; /* in enum order, NULL-terminated */

#define PPS_ADAPT_MAX_LAYERS 4
/* Clients one allocator considers: [server] max_clients' largest value. */
#define PPS_ADAPT_MAX_CLIENTS 1024

typedef struct {
	int quality_layers; /* 1..PPS_ADAPT_MAX_LAYERS */
	int base_share_pct; /* base rate: this % of the slowest client's estimate */
	/* ... its lowest over this long: a path whose rate swings (an AIMD's
	 * sawtooth) carries the base in its troughs too; 0 = its latest. */
	int64_t base_memory_us;
	int probe_pct;                      /* top of the layers: this % of the fastest's */
	int min_base_kbps;                  /* the base never goes below this */
	int max_kbps[PPS_ADAPT_MAX_LAYERS]; /* per layer upper bound ([encoder] *_vbv_kbps) */
	int max_crf[PPS_ADAPT_MAX_LAYERS];  /* configured CRF: the coarsest quality allowed */
	int min_crf;                        /* the finest CRF the allocator may ask for */
	int64_t latency_budget_us;          /* [pps] latency_budget_ms */
	int64_t window_us;                  /* window_frames / fps */
	int64_t interval_us;                /* between updates */
} pps_ratealloc_params_t;

typedef struct {
	int kbps[PPS_ADAPT_MAX_LAYERS];        /* VBV maximum rate */
	int buffer_kbit[PPS_ADAPT_MAX_LAYERS]; /* VBV buffer: the largest frame */
	int crf[PPS_ADAPT_MAX_LAYERS];
} pps_layer_rates_t;

typedef struct {
	uint64_t estimate_bps;
	uint32_t min_rtt_us;
	/* The estimate is the client's tcp-friendly rate (the pacing cap): the
	 * rate is set by its AIMD, not found by probing, so the layers do not
	 * reach above it (more would only wait for the window deadline); they
	 * fill 85% of it. */
	bool rate_capped;
} pps_ratealloc_client_t;

typedef struct pps_ratealloc pps_ratealloc_t;

/* Starts at every layer's maximum rate and configured CRF. */
/* The lowest rate an enhancement layer is ever given (its cap may not be lower). */
#define PPS_RATEALLOC_MIN_ENHANCEMENT_KBPS 50

pps_ratealloc_t *pps_ratealloc_new(const pps_ratealloc_params_t *params);
void pps_ratealloc_free(pps_ratealloc_t *ra);
/*
 * One step of the loop, at most once per params->interval_us (earlier calls
 * return 0). @clients: the estimates of the clients that have one (none keeps
 * the current rates). @encoded_bps: what each layer produced since the last
 * update (it steers the CRF: a layer far below its rate gets a finer CRF, one
 * pressing on its rate a coarser one, never beyond the configured CRF).
 * Decreases apply at once; increases need 10% and are bounded to x1.25 per
 * update (the probe). A layer top set by a rate_capped client is 85% of its
 * estimate, not probe_pct of it, and is shared by what the layers below
 * produce (5/4 of their smoothed @encoded_bps, at most their rates) rather
 * than by their rates; a layer under such a top gets a finer CRF below 80%
 * of its rate and a coarser one above 95% (1/2 and 85% otherwise). Returns 1 when @out holds new
 * settings for the encoder, 0 when nothing changed enough to apply.
 */
int pps_ratealloc_update(pps_ratealloc_t *ra, int64_t now_us, const pps_ratealloc_client_t *clients,
                         size_t n_clients, const uint64_t *encoded_bps, pps_layer_rates_t *out);
/* The settings last returned (or the initial ones). */
void pps_ratealloc_get(const pps_ratealloc_t *ra, pps_layer_rates_t *out);

/*
 * The drain: how much coarser (CRF, added to every layer's) the encoder codes
 * the next mini-GOP when the viewer that waits least has had pictures waiting
 * in the sender @wait_us (the first capture of its oldest window with data
 * unsent, to the moment the next window is ready). A window's pictures
 * normally wait its span and their encoding, and the previous window has
 * gone out by then: up to two windows (@window_us each) of wait is 0, past
 * that PPS_DRAIN_FIRST_CRF plus PPS_DRAIN_CRF_PER_100MS per 100 ms more, at
 * most @max_crf (0: never).
 */
#define PPS_DRAIN_FIRST_CRF     3
#define PPS_DRAIN_CRF_PER_100MS 6
int pps_drain_crf(int64_t wait_us, int64_t window_us, int max_crf);

/* ------------------------------------------------------------ B frames */

/*
 * [pps] b_frames: when the windows carry the droppable temporal layer (the
 * mini-GOP's B frames, which make a window wait for its last frame):
 *   always    in every window (the regulators can always drop them);
 *   on-drops  only while a regulator drops or a client competes: windows of
 *             anchors alone (each frame out as it is captured, as fresh as
 *             1-frame windows) while no client's regulator dropped anything
 *             and no client's path is shared with other flows (its latency
 *             cap stepped aside: they hold the queue), B frames from the
 *             first drop or competing step on, anchors again once neither
 *             was seen for the hold time. A hold that ends in a drop within its own
 *             length doubles (up to PPS_B_FRAMES_MAX_HOLDS holds), so a
 *             path that drops now and then switches rarely; one that stays
 *             clean for the longer hold brings it back. A client's
 *             start counts as a drop without a hold: B frames from its
 *             join until its path reads clean (no retransmission, no
 *             window cut, not shared), anchors at once then.
 *   on-cuts   as on-drops, but a shared path alone does not switch them on:
 *             only a window a regulator cut short (or a start) does. A
 *             latency cap steps aside at a retransmission, so random loss
 *             on a path nobody shares reads as competing too.
 */
typedef enum {
	PPS_B_FRAMES_ALWAYS = 0,
	PPS_B_FRAMES_ON_DROPS,
	PPS_B_FRAMES_ON_CUTS,
	PPS_B_FRAMES_POLICY_COUNT
} pps_b_frames_policy_t;

extern const char *const pps_b_frames_names[]; /* in enum order, NULL-terminated */

#define PPS_B_FRAMES_MAX_HOLDS 8

typedef struct {
	pps_b_frames_policy_t policy;
	int64_t hold_us; /* on-drops: clean time before anchors come back */
} pps_b_frames_params_t;

typedef struct pps_b_frames pps_b_frames_t;

pps_b_frames_t *pps_b_frames_new(const pps_b_frames_params_t *params);
void pps_b_frames_free(pps_b_frames_t *b);
/*
 * One look at the regulators and the paths: @dropped, some client's regulator
 * cut a window short since the last look (the caller leaves out clients that
 * cannot be helped: a reader that has stopped taking data); @competing, some
 * client's path is shared with other flows now (counts as a drop: competing,
 * a thin stream's window gets cut); @starting, some client joined and its
 * path has not been read clean yet (B frames, no hold: once no client is
 * starting and nothing dropped since, anchors at once). Returns whether the
 * windows should carry B frames from now on.
 */
bool pps_b_frames_update(pps_b_frames_t *b, int64_t now_us, bool dropped, bool competing,
                         bool starting);
/* A client joined: B frames from now on until an update without @starting
 * (unless a drop keeps them). Returns whether that switched them on. */
bool pps_b_frames_join(pps_b_frames_t *b);
/* The current choice (before any update: B frames unless on-drops). */
bool pps_b_frames_on(const pps_b_frames_t *b);
/* Whether they are on only for clients' starts (no drop since). */
bool pps_b_frames_for_start(const pps_b_frames_t *b);
/* The clean time that turns them off now (the hold, doubled while anchors do
 * not last); an update that turns them off leaves it as it was. */
int64_t pps_b_frames_hold_us(const pps_b_frames_t *b);
/* Changes of the choice so far. */
uint64_t pps_b_frames_switches(const pps_b_frames_t *b);

#endif /* PPS_ADAPT_H */
