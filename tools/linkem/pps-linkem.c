/* SPDX-License-Identifier: MIT */
/*
 * pps-linkem: a user-space bottleneck link between two network namespaces, in
 * the spirit of mahimahi and cellsim: real kernel TCP at both ends, this
 * process in the middle.
 *
 * It creates (or attaches to) one TUN device in each namespace: it enters the
 * namespace with setns() on /var/run/netns/NAME, opens /dev/net/tun and issues
 * TUNSETIFF there (a TUN device belongs to the namespace it is created in),
 * then returns to its own namespace. The devices are not persistent, so they
 * vanish with the process; pps-netlab configures addresses and routes once
 * pps-linkem reports ready on --ready-fd.
 *
 * Packets read from the sender side's device go through the "fwd" link model
 * and are written to the receiver side's device when due; the "rev" direction
 * is the mirror image. One libevent loop, one timer per direction armed for
 * the next delivery: nothing polls. libevent's precise timers (timerfd) and a
 * 1 ns timer slack keep deliveries within a few microseconds of their time.
 */
#include "linkem.h"
#include "pps-version.h"
#include "pps-time.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <linux/if.h>
#include <linux/if_tun.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>

#include <event2/event.h>
#include <json-glib/json-glib.h>

#define PROGRAM "pps-linkem"

#define PPS_DEFAULT_LINKEM_DEV         "pps0"
#define PPS_DEFAULT_LINKEM_DRD_MIN     0.5 /* bandwidth-delay products */
#define PPS_DEFAULT_LINKEM_DRD_CONGEST 1.5
/* Packets read per readiness callback, so one busy side cannot starve the other. */
#define LINKEM_READ_BATCH_PKTS 64
#define LINKEM_MTU_BYTES       1500
/* Delivery timing error histogram: 1 us bins up to 10 ms, the last bin holds the rest. */
#define LINKEM_TIMING_BIN_NS 1000
#define LINKEM_TIMING_BINS   10001
/* Bounds and step of the timer wake-up lead (see direction_timer_cb). */
#define LINKEM_WAKE_LEAD_INITIAL_NS 60000
#define LINKEM_WAKE_LEAD_MAX_NS     200000
#define LINKEM_WAKE_LEAD_STEP_NS    3000

enum { DIR_FWD, DIR_REV, DIR_COUNT };

typedef struct {
	const char *name;  /* "fwd" (snd -> rcv) or "rev" (rcv -> snd) */
	uint64_t rate_bps; /* 0: not given */
	const char *trace_path;
	int64_t delay_ns;
	const char *queue_pkts_text; /* NULL or "auto": derived */
	const char *queue_bytes_text;
	pps_linkem_aqm_t aqm;
	double drd_min_bdp, drd_congest_bdp;
	bool drd_drop_not_ect;
	double loss_probability;
} direction_settings_t;

typedef struct {
	direction_settings_t dir[DIR_COUNT];
	const char *netns[DIR_COUNT]; /* [DIR_FWD] = sender side, [DIR_REV] = receiver side */
	const char *dev[DIR_COUNT];
	const char *log_path;
	const char *stats_path;
	int64_t duration_ns; /* 0: until a signal */
	int ready_fd;
	uint64_t seed;
	int rt_priority; /* SCHED_FIFO priority; 0: normal scheduling */
	bool check_only;
	bool die_with_parent;
} settings_t;

typedef struct linkem linkem_t;

typedef struct {
	linkem_t *linkem;
	int index;
	int in_fd;  /* TUN device packets arrive on */
	int out_fd; /* TUN device packets are delivered to */
	pps_linkem_trace_t *trace;
	pps_linkem_link_config_t config;
	pps_linkem_link_t *link;
	struct event *read_event;
	struct event *timer_event;
	int64_t armed_ns;      /* delivery time the timer is armed for; INT64_MAX: not armed */
	int64_t wake_lead_ns;  /* the timer is armed this much before the delivery time */
	int64_t armed_wake_ns; /* when the timer should go off; INT64_MIN: at once */
	uint64_t write_errors;
	/* |time written to the far device - delivery time|, and how many went early. */
	uint32_t timing_error_bins[LINKEM_TIMING_BINS];
	int64_t timing_error_max_ns;
	uint64_t early_pkts;
} direction_t;

struct linkem {
	settings_t settings;
	struct event_base *base;
	direction_t dir[DIR_COUNT];
	int tun_fd[DIR_COUNT]; /* [DIR_FWD] sender side's device, [DIR_REV] receiver side's */
	int64_t epoch_ns;
	/* The same instant on CLOCK_REALTIME: lets a reader place a trace's
	 * time line beside other programs' wall-clock logs (stats file). */
	int64_t epoch_realtime_ns;
	FILE *log;
	struct event *signal_events[3];
	struct event *duration_event;
};

static void
usage(FILE *out)
{
	fprintf(
	    out,
	    "Usage: " PROGRAM " --snd-netns NS --rcv-netns NS [options]\n"
	    "Forwards IP packets between a TUN device in the sender's namespace and one in\n"
	    "the receiver's, through an emulated bottleneck in each direction.\n"
	    "\n"
	    "Link settings (both directions; prefix with fwd- for snd->rcv or rev- for\n"
	    "rcv->snd only, e.g. --fwd-rate 10mbit --rev-rate 1mbit):\n"
	    "  --rate RATE          bottleneck rate: 10mbit, 800kbit, 12000 (bit/s)\n"
	    "  --trace FILE         mahimahi trace instead of a rate (1500-byte opportunities, "
	    "ms)\n"
	    "  --delay TIME         one-way propagation delay: 25ms, 500us (default 0)\n"
	    "  --queue N|auto       queue limit in packets (default auto: 1 BDP, DRD: 2x "
	    "drdcongest)\n"
	    "  --queue-bytes N|auto queue limit in bytes (default: as --queue, 1500 B/packet;\n"
	    "                       auto: 1 BDP of bytes, packets counted only as 40-byte\n"
	    "                       headers, so small packets do not fill it early)\n"
	    "  --aqm droptail|drd   queue discipline (default droptail)\n"
	    "  --drd-min X          DRD: mark ECT packets above X BDP (default %.1f)\n"
	    "  --drd-congest Y      DRD: drop above Y BDP (default %.1f)\n"
	    "  --drd-drop-not-ect   DRD: drop non-ECT packets where ECT ones would be marked\n"
	    "  --loss P             independent random loss probability: 0.01 or 1%%\n"
	    "BDP = rate x (fwd delay + rev delay), per direction; a trace uses its mean rate.\n"
	    "\n"
	    "Other options:\n"
	    "  --snd-dev NAME, --rcv-dev NAME  TUN device names (default " PPS_DEFAULT_LINKEM_DEV
	    ")\n"
	    "  --log FILE           per-packet log (TSV: arrival, departure, sojourn, verdict)\n"
	    "  --stats-json FILE    counters as JSON, written on exit and on SIGUSR1 (also\n"
	    "                       --stats FILE)\n"
	    "  --duration TIME      exit after this long (default: at SIGINT/SIGTERM)\n"
	    "  --seed N             seed of the loss and DRD random draws (default 1)\n"
	    "  --ready-fd N         write \"ready\\n\" to fd N once both devices exist\n"
	    "  --die-with-parent    exit when the parent process exits\n"
	    "  --rt-priority N      run SCHED_FIFO at priority N (1-99) if permitted (default 0: "
	    "off)\n"
	    "  --check              validate, print the resolved settings as JSON, exit\n"
	    "  -h, --help           this help\n"
	    "  -V, --version        the version\n"
	    "\n"
	    "Exit status: 0 done; 1 runtime error; 2 usage error (bad settings); 77 not\n"
	    "permitted (no root or no /dev/net/tun).\n",
	    PPS_DEFAULT_LINKEM_DRD_MIN, PPS_DEFAULT_LINKEM_DRD_CONGEST);
}

static void __attribute__((format(printf, 1, 2), noreturn)) die_usage(const char *format, ...)
{
	va_list args;

	fprintf(stderr, PROGRAM ": ");
	va_start(args, format);
	vfprintf(stderr, format, args);
	va_end(args);
	fputc('\n', stderr);
	exit(PPS_LINKEM_EXIT_USAGE);
}

/* Applies one link option to the directions it names. Returns false if @key is not one. */
static bool
settings_apply_link_option(settings_t *s, const char *option, const char *key, const char *value,
                           bool both, int only)
{
	for (int d = 0; d < DIR_COUNT; d++) {
		direction_settings_t *dir = &s->dir[d];

		if (!both && d != only)
			continue;
		if (strcmp(key, "rate") == 0) {
			if (pps_linkem_parse_rate_bps(value, &dir->rate_bps) < 0)
				die_usage("%s: '%s' is not a rate > 0 (e.g. 10mbit, 800kbit)",
				          option, value);
		} else if (strcmp(key, "trace") == 0) {
			dir->trace_path = value;
		} else if (strcmp(key, "delay") == 0) {
			if (pps_linkem_parse_duration_ns(value, &dir->delay_ns) < 0)
				die_usage("%s: '%s' is not a delay >= 0 (e.g. 25ms)", option,
				          value);
		} else if (strcmp(key, "queue") == 0) {
			dir->queue_pkts_text = value;
		} else if (strcmp(key, "queue-bytes") == 0) {
			dir->queue_bytes_text = value;
		} else if (strcmp(key, "aqm") == 0) {
			if (pps_linkem_aqm_from_name(value, &dir->aqm) < 0)
				die_usage("%s: '%s' is not droptail or drd", option, value);
		} else if (strcmp(key, "drd-min") == 0 || strcmp(key, "drd-congest") == 0) {
			double *target = key[4] == 'm' ? &dir->drd_min_bdp : &dir->drd_congest_bdp;
			char *end;

			errno = 0;
			*target = strtod(value, &end);
			if (errno || end == value || *end || !isfinite(*target) || *target < 0)
				die_usage("%s: '%s' is not a multiple of the BDP >= 0", option,
				          value);
		} else if (strcmp(key, "loss") == 0) {
			if (pps_linkem_parse_probability(value, &dir->loss_probability) < 0)
				die_usage(
				    "%s: '%s' is not a probability in [0, 1] (e.g. 0.01, 1%%)",
				    option, value);
		} else {
			return false;
		}
	}
	return true;
}

static void
settings_parse(settings_t *s, int argc, char **argv)
{
	memset(s, 0, sizeof(*s));
	s->ready_fd = -1;
	s->seed = 1;
	for (int d = 0; d < DIR_COUNT; d++) {
		s->dir[d].name = d == DIR_FWD ? "fwd" : "rev";
		s->dir[d].aqm = PPS_LINKEM_AQM_DROPTAIL;
		s->dir[d].drd_min_bdp = PPS_DEFAULT_LINKEM_DRD_MIN;
		s->dir[d].drd_congest_bdp = PPS_DEFAULT_LINKEM_DRD_CONGEST;
		s->dev[d] = PPS_DEFAULT_LINKEM_DEV;
	}

	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i], *key, *value = NULL, *eq;
		char option[64];
		bool both = true;
		int only = 0;

		if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
			usage(stdout);
			exit(0);
		}
		if (strcmp(arg, "-V") == 0 || strcmp(arg, "--version") == 0) {
			printf(PROGRAM " %s\n", PPS_VERSION);
			exit(0);
		}
		if (strncmp(arg, "--", 2) != 0)
			die_usage("unexpected argument '%s' (see --help)", arg);
		eq = strchr(arg, '=');
		snprintf(option, sizeof(option), "%.*s", eq ? (int)(eq - arg) : (int)strlen(arg),
		         arg);
		key = option + 2;
		if (strncmp(key, "fwd-", 4) == 0 || strncmp(key, "rev-", 4) == 0) {
			both = false;
			only = key[0] == 'f' ? DIR_FWD : DIR_REV;
			key += 4;
		}

		/* Flags first: they take no value. */
		if (strcmp(key, "drd-drop-not-ect") == 0) {
			for (int d = 0; d < DIR_COUNT; d++)
				if (both || d == only)
					s->dir[d].drd_drop_not_ect = true;
			continue;
		}
		if (both && strcmp(key, "check") == 0) {
			s->check_only = true;
			continue;
		}
		if (both && strcmp(key, "die-with-parent") == 0) {
			s->die_with_parent = true;
			continue;
		}

		if (eq)
			value = eq + 1;
		else if (i + 1 < argc)
			value = argv[++i];
		else
			die_usage("%s needs a value (see --help)", option);

		if (settings_apply_link_option(s, option, key, value, both, only))
			continue;
		if (!both)
			die_usage("unknown option '%s' (see --help)", option);
		if (strcmp(key, "snd-netns") == 0) {
			s->netns[DIR_FWD] = value;
		} else if (strcmp(key, "rcv-netns") == 0) {
			s->netns[DIR_REV] = value;
		} else if (strcmp(key, "snd-dev") == 0 || strcmp(key, "rcv-dev") == 0) {
			if (!*value || strlen(value) >= IFNAMSIZ)
				die_usage("%s: '%s' is not a device name (1-%d characters)", option,
				          value, IFNAMSIZ - 1);
			s->dev[key[0] == 's' ? DIR_FWD : DIR_REV] = value;
		} else if (strcmp(key, "log") == 0) {
			s->log_path = value;
		} else if (strcmp(key, "stats") == 0 || strcmp(key, "stats-json") == 0) {
			s->stats_path = value;
		} else if (strcmp(key, "duration") == 0) {
			if (pps_linkem_parse_duration_ns(value, &s->duration_ns) < 0 ||
			    s->duration_ns == 0)
				die_usage("%s: '%s' is not a duration > 0 (e.g. 600s)", option,
				          value);
		} else if (strcmp(key, "seed") == 0) {
			if (pps_linkem_parse_count(value, &s->seed) < 0)
				die_usage("%s: '%s' is not a non-negative integer", option, value);
		} else if (strcmp(key, "rt-priority") == 0) {
			uint64_t priority;

			if (pps_linkem_parse_count(value, &priority) < 0 || priority > 99)
				die_usage("%s: '%s' is not a priority in [0, 99]", option, value);
			s->rt_priority = (int)priority;
		} else if (strcmp(key, "ready-fd") == 0) {
			uint64_t fd;

			if (pps_linkem_parse_count(value, &fd) < 0 || fd > INT32_MAX)
				die_usage("%s: '%s' is not a file descriptor", option, value);
			s->ready_fd = (int)fd;
		} else {
			die_usage("unknown option '%s' (see --help)", option);
		}
	}

	if (!s->check_only && (!s->netns[DIR_FWD] || !s->netns[DIR_REV]))
		die_usage("--snd-netns and --rcv-netns are required (see --help)");
	for (int d = 0; d < DIR_COUNT; d++) {
		direction_settings_t *dir = &s->dir[d];

		if (dir->trace_path && dir->rate_bps)
			die_usage("%s: give a rate or a trace, not both", dir->name);
		if (!dir->trace_path && !dir->rate_bps)
			die_usage("%s: a rate (--rate or --%s-rate) or a trace is required",
			          dir->name, dir->name);
	}
}

/* "auto" (or absent) -> 0; otherwise a count > 0. */
static uint64_t
settings_queue_value(const char *direction, const char *what, const char *text)
{
	uint64_t value;

	if (!text || strcmp(text, "auto") == 0)
		return 0;
	if (pps_linkem_parse_count(text, &value) < 0 || value == 0)
		die_usage("%s %s: '%s' is not a number > 0 or auto", direction, what, text);
	return value;
}

/*
 * Turns the settings of one direction into a link configuration: loads the
 * trace, derives the bandwidth-delay product and the queue limits from it.
 */
static void
direction_configure(linkem_t *lk, int d)
{
	direction_settings_t *ds = &lk->settings.dir[d];
	pps_linkem_link_config_t *c = &lk->dir[d].config;
	int64_t rtt_ns = lk->settings.dir[DIR_FWD].delay_ns + lk->settings.dir[DIR_REV].delay_ns;
	uint64_t mean_rate_bps, bdp_bytes, pkts, bytes;
	char err[256];

	memset(c, 0, sizeof(*c));
	if (ds->trace_path) {
		lk->dir[d].trace = pps_linkem_trace_load(ds->trace_path, err, sizeof(err));
		if (!lk->dir[d].trace) {
			if (errno == ENOMEM)
				snprintf(err, sizeof(err), "out of memory loading %s",
				         ds->trace_path);
			die_usage("%s: %s", ds->name, err);
		}
		c->trace = lk->dir[d].trace;
		mean_rate_bps = pps_linkem_trace_mean_rate_bps(c->trace);
	} else {
		c->rate_bps = ds->rate_bps;
		mean_rate_bps = ds->rate_bps;
	}
	bdp_bytes = (uint64_t)((double)mean_rate_bps / 8 * (double)rtt_ns / 1e9);
	if (ds->aqm == PPS_LINKEM_AQM_DRD) {
		if (ds->drd_min_bdp >= ds->drd_congest_bdp)
			die_usage("%s: --drd-min (%g BDP) must be below --drd-congest (%g BDP)",
			          ds->name, ds->drd_min_bdp, ds->drd_congest_bdp);
		if (bdp_bytes == 0)
			die_usage(
			    "%s: DRD thresholds are multiples of the bandwidth-delay product, "
			    "which is 0 without a delay",
			    ds->name);
	}

	c->delay_ns = ds->delay_ns;
	c->aqm = ds->aqm;
	c->drd_min_bytes = (uint64_t)(ds->drd_min_bdp * (double)bdp_bytes);
	c->drd_congest_bytes = (uint64_t)(ds->drd_congest_bdp * (double)bdp_bytes);
	c->drd_drop_not_ect = ds->drd_drop_not_ect;
	c->loss_probability = ds->loss_probability;
	c->seed = lk->settings.seed * 2 + (uint64_t)d;

	/*
	 * Scenario default: one BDP of drop-tail, since a deeper queue only adds
	 * standing delay (at least two full packets so a tiny BDP still works).
	 * Under DRD the byte limit sits well above drdcongest so that DRD, not the
	 * limit, decides.
	 */
	pkts = settings_queue_value(ds->name, "queue", ds->queue_pkts_text);
	bytes = settings_queue_value(ds->name, "queue-bytes", ds->queue_bytes_text);
	if (!pkts && !bytes && ds->queue_bytes_text) {
		/*
		 * --queue-bytes auto: one BDP of bytes whatever the packets' sizes (a
		 * link that carries acknowledgements and small audio frames beside
		 * full packets, as an uplink does, holds more of them).
		 */
		bytes = ds->aqm == PPS_LINKEM_AQM_DRD ? 2 * c->drd_congest_bytes : bdp_bytes;
		if (bytes < 2 * LINKEM_MTU_BYTES)
			bytes = 2 * LINKEM_MTU_BYTES;
		pkts = bytes / 40 + 1;
	} else if (!pkts && !bytes) {
		uint64_t target =
		    ds->aqm == PPS_LINKEM_AQM_DRD ? 2 * c->drd_congest_bytes : bdp_bytes;

		pkts = (target + LINKEM_MTU_BYTES - 1) / LINKEM_MTU_BYTES;
		if (pkts < 2)
			pkts = 2;
		bytes = pkts * LINKEM_MTU_BYTES;
	} else if (!bytes) {
		bytes = pkts * LINKEM_MTU_BYTES;
	} else if (!pkts) {
		/* A byte limit alone: count packets as at least 40-byte headers. */
		pkts = bytes / 40 + 1;
	}
	if (pkts > PPS_LINKEM_LINK_MAX_PKTS)
		pkts = PPS_LINKEM_LINK_MAX_PKTS;
	c->queue_limit_pkts = pkts;
	c->queue_limit_bytes = bytes;

	if (pps_linkem_link_config_check(c, err, sizeof(err)) < 0)
		die_usage("%s: %s", ds->name, err);
}

/* Upper edge of the timing error bin holding the @fraction quantile (capped by the max), ns. */
static int64_t
direction_timing_error_quantile_ns(const direction_t *dir, double fraction)
{
	uint64_t total = 0, seen = 0, rank;

	for (size_t bin = 0; bin < LINKEM_TIMING_BINS; bin++)
		total += dir->timing_error_bins[bin];
	if (total == 0)
		return 0;
	rank = (uint64_t)((double)total * fraction + 0.5);
	for (size_t bin = 0; bin < LINKEM_TIMING_BINS; bin++) {
		int64_t edge_ns = (int64_t)(bin + 1) * LINKEM_TIMING_BIN_NS;

		seen += dir->timing_error_bins[bin];
		if (seen >= rank && seen > 0)
			return edge_ns < dir->timing_error_max_ns ? edge_ns
			                                          : dir->timing_error_max_ns;
	}
	return dir->timing_error_max_ns;
}

/* The settings of one direction as resolved (JSON; the trace path is any string). */
static JsonObject *
direction_settings_json(const linkem_t *lk, int d)
{
	const direction_settings_t *ds = &lk->settings.dir[d];
	const pps_linkem_link_config_t *c = &lk->dir[d].config;
	JsonObject *o = json_object_new();

	json_object_set_int_member(
	    o, "rate_bps",
	    (gint64)(c->trace ? pps_linkem_trace_mean_rate_bps(c->trace) : c->rate_bps));
	if (ds->trace_path)
		json_object_set_string_member(o, "trace", ds->trace_path);
	else
		json_object_set_null_member(o, "trace");
	json_object_set_int_member(o, "delay_ns", c->delay_ns);
	json_object_set_int_member(o, "queue_limit_pkts", (gint64)c->queue_limit_pkts);
	json_object_set_int_member(o, "queue_limit_bytes", (gint64)c->queue_limit_bytes);
	json_object_set_string_member(o, "aqm", pps_linkem_aqm_name(c->aqm));
	json_object_set_double_member(o, "drd_min_bdp", ds->drd_min_bdp);
	json_object_set_double_member(o, "drd_congest_bdp", ds->drd_congest_bdp);
	json_object_set_int_member(o, "drd_min_bytes", (gint64)c->drd_min_bytes);
	json_object_set_int_member(o, "drd_congest_bytes", (gint64)c->drd_congest_bytes);
	json_object_set_boolean_member(o, "drd_drop_not_ect", c->drd_drop_not_ect);
	json_object_set_double_member(o, "loss", c->loss_probability);
	return o;
}

/* The counters of one direction's link. */
static JsonObject *
direction_stats_json(const linkem_t *lk, int d)
{
	const direction_t *dir = &lk->dir[d];
	pps_linkem_link_stats_t st;
	JsonObject *o = json_object_new();

	pps_linkem_link_stats_get(dir->link, &st);
	json_object_set_int_member(o, "arrived_pkts", (gint64)st.arrived_pkts);
	json_object_set_int_member(o, "arrived_bytes", (gint64)st.arrived_bytes);
	json_object_set_int_member(o, "delivered_pkts", (gint64)st.delivered_pkts);
	json_object_set_int_member(o, "delivered_bytes", (gint64)st.delivered_bytes);
	json_object_set_int_member(o, "lost_pkts", (gint64)st.lost_pkts);
	json_object_set_int_member(o, "dropped_queue_pkts", (gint64)st.dropped_queue_pkts);
	json_object_set_int_member(o, "dropped_aqm_pkts", (gint64)st.dropped_aqm_pkts);
	json_object_set_int_member(o, "dropped_other_pkts", (gint64)st.dropped_other_pkts);
	json_object_set_int_member(o, "marked_pkts", (gint64)st.marked_pkts);
	json_object_set_int_member(o, "write_errors", (gint64)dir->write_errors);
	json_object_set_int_member(o, "max_queue_pkts", (gint64)st.max_queue_pkts);
	json_object_set_int_member(o, "max_queue_bytes", (gint64)st.max_queue_bytes);
	json_object_set_int_member(o, "sojourn_p50_ns", st.sojourn_p50_ns);
	json_object_set_int_member(o, "sojourn_p95_ns", st.sojourn_p95_ns);
	json_object_set_int_member(o, "sojourn_p99_ns", st.sojourn_p99_ns);
	json_object_set_int_member(o, "sojourn_max_ns", st.sojourn_max_ns);
	json_object_set_int_member(o, "timing_error_p50_ns",
	                           direction_timing_error_quantile_ns(dir, 0.5));
	json_object_set_int_member(o, "timing_error_p99_ns",
	                           direction_timing_error_quantile_ns(dir, 0.99));
	json_object_set_int_member(o, "timing_error_max_ns", dir->timing_error_max_ns);
	json_object_set_int_member(o, "early_pkts", (gint64)dir->early_pkts);
	json_object_set_int_member(o, "wake_lead_ns", dir->wake_lead_ns);
	return o;
}

/* One line of JSON (json-glib: every string escaped): the epoch, the settings
 * of both directions and, once the links exist, their counters. */
static void
linkem_stats_print_json(FILE *out, const linkem_t *lk)
{
	JsonObject *root = json_object_new(), *settings = json_object_new();
	JsonNode *node;
	char *text;

	json_object_set_int_member(root, "epoch_monotonic_ns", lk->epoch_ns);
	json_object_set_int_member(root, "epoch_realtime_ns", lk->epoch_realtime_ns);
	for (int d = 0; d < DIR_COUNT; d++)
		json_object_set_object_member(settings, lk->settings.dir[d].name,
		                              direction_settings_json(lk, d));
	json_object_set_object_member(root, "settings", settings);
	for (int d = 0; d < DIR_COUNT && lk->dir[d].link; d++)
		json_object_set_object_member(root, lk->settings.dir[d].name,
		                              direction_stats_json(lk, d));
	node = json_node_init_object(json_node_alloc(), root);
	text = json_to_string(node, FALSE);
	fprintf(out, "%s\n", text);
	g_free(text);
	json_node_unref(node);
	json_object_unref(root);
}

/* Written to a temporary name and renamed, so a reader never sees half a file. */
static void
linkem_stats_write(const linkem_t *lk)
{
	char tmp[4096];
	FILE *out;

	if (!lk->settings.stats_path)
		return;
	snprintf(tmp, sizeof(tmp), "%s.tmp", lk->settings.stats_path);
	out = fopen(tmp, "w");
	if (!out) {
		fprintf(stderr, PROGRAM ": stats %s: %s\n", tmp, strerror(errno));
		return;
	}
	linkem_stats_print_json(out, lk);
	if (fclose(out) != 0 || rename(tmp, lk->settings.stats_path) != 0)
		fprintf(stderr, PROGRAM ": stats %s: %s\n", lk->settings.stats_path,
		        strerror(errno));
}

static void
linkem_summary_print(FILE *out, const linkem_t *lk)
{
	for (int d = 0; d < DIR_COUNT; d++) {
		const pps_linkem_link_config_t *c = &lk->dir[d].config;
		pps_linkem_link_stats_t st;

		if (!lk->dir[d].link)
			continue;
		pps_linkem_link_stats_get(lk->dir[d].link, &st);
		fprintf(out, "%s %s: ", lk->settings.dir[d].name,
		        d == DIR_FWD ? "(snd->rcv)" : "(rcv->snd)");
		if (c->trace)
			fprintf(out, "trace %s", lk->settings.dir[d].trace_path);
		else
			fprintf(out, "rate %" PRIu64 " bit/s", c->rate_bps);
		fprintf(out,
		        ", delay %.3f ms, queue %" PRIu64 " pkts/%" PRIu64 " bytes %s, loss %g\n",
		        (double)c->delay_ns / 1e6, c->queue_limit_pkts, c->queue_limit_bytes,
		        pps_linkem_aqm_name(c->aqm), c->loss_probability);
		fprintf(out,
		        "  arrived %" PRIu64 " pkts %" PRIu64 " bytes; delivered %" PRIu64
		        " pkts %" PRIu64 " bytes\n"
		        "  dropped: queue %" PRIu64 ", aqm %" PRIu64 ", loss %" PRIu64
		        ", other %" PRIu64 "; marked %" PRIu64 "; write errors %" PRIu64 "\n"
		        "  max queue %" PRIu64 " pkts %" PRIu64 " bytes; sojourn p50 %.3f p95 %.3f"
		        " p99 %.3f max %.3f ms\n"
		        "  delivery timing error p50 %.3f p99 %.3f max %.3f ms (%" PRIu64
		        " early, wake-up lead %.3f ms)\n",
		        st.arrived_pkts, st.arrived_bytes, st.delivered_pkts, st.delivered_bytes,
		        st.dropped_queue_pkts, st.dropped_aqm_pkts, st.lost_pkts,
		        st.dropped_other_pkts, st.marked_pkts, lk->dir[d].write_errors,
		        st.max_queue_pkts, st.max_queue_bytes, (double)st.sojourn_p50_ns / 1e6,
		        (double)st.sojourn_p95_ns / 1e6, (double)st.sojourn_p99_ns / 1e6,
		        (double)st.sojourn_max_ns / 1e6,
		        (double)direction_timing_error_quantile_ns(&lk->dir[d], 0.5) / 1e6,
		        (double)direction_timing_error_quantile_ns(&lk->dir[d], 0.99) / 1e6,
		        (double)lk->dir[d].timing_error_max_ns / 1e6, lk->dir[d].early_pkts,
		        (double)lk->dir[d].wake_lead_ns / 1e6);
	}
	fflush(out);
}

/*
 * Arms @dir's timer for its next delivery if that is earlier than what is
 * armed. The timer goes off wake_lead_ns early: waking a sleeping thread on
 * this kind of machine takes 50-150 us, more than the 0.1 ms the emulator
 * promises, so the lead absorbs the typical wake-up latency instead of adding
 * it to every delay.
 */
static void
direction_timer_arm(direction_t *dir, int64_t now)
{
	int64_t next_ns = pps_linkem_link_next_delivery_ns(dir->link);
	int64_t wait_ns;
	struct timeval tv;

	if (next_ns == INT64_MAX || next_ns >= dir->armed_ns)
		return;
	wait_ns = next_ns - dir->wake_lead_ns - now;
	dir->armed_wake_ns = wait_ns > 0 ? now + wait_ns : INT64_MIN;
	if (wait_ns < 0)
		wait_ns = 0;
	tv.tv_sec = (time_t)(wait_ns / 1000000000);
	tv.tv_usec = (suseconds_t)(wait_ns % 1000000000 / 1000);
	evtimer_add(dir->timer_event, &tv);
	dir->armed_ns = next_ns;
}

static void
direction_log_offer(direction_t *dir, int64_t arrival_ns, size_t size_bytes,
                    const pps_linkem_offer_t *offer)
{
	FILE *log = dir->linkem->log;
	int64_t epoch = dir->linkem->epoch_ns;
	bool accepted = offer->verdict == PPS_LINKEM_VERDICT_QUEUED ||
	                offer->verdict == PPS_LINKEM_VERDICT_MARKED;

	if (!log)
		return;
	if (accepted)
		fprintf(log,
		        "%s\t%s\t%" PRId64 "\t%" PRId64 "\t%" PRId64 "\t%" PRId64
		        "\t%zu\t%u\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\n",
		        dir->linkem->settings.dir[dir->index].name,
		        pps_linkem_verdict_name(offer->verdict), arrival_ns - epoch,
		        offer->departure_ns - epoch, offer->delivery_ns - epoch,
		        offer->departure_ns - arrival_ns, size_bytes, offer->ecn, offer->queue_pkts,
		        offer->queue_bytes, offer->queue_bytes_seen);
	else
		fprintf(log,
		        "%s\t%s\t%" PRId64 "\t-\t-\t-\t%zu\t%u\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64
		        "\n",
		        dir->linkem->settings.dir[dir->index].name,
		        pps_linkem_verdict_name(offer->verdict), arrival_ns - epoch, size_bytes,
		        offer->ecn, offer->queue_pkts, offer->queue_bytes, offer->queue_bytes_seen);
}

static void
direction_read_cb(evutil_socket_t fd, short what, void *arg)
{
	direction_t *dir = arg;
	uint8_t buffer[65536];

	for (int i = 0; i < LINKEM_READ_BATCH_PKTS; i++) {
		ssize_t n = read(fd, buffer, sizeof(buffer));
		pps_linkem_offer_t offer;
		int64_t arrival_ns;

		if (n < 0) {
			if (errno != EAGAIN && errno != EINTR)
				fprintf(stderr, PROGRAM ": %s read: %s\n",
				        dir->linkem->settings.dir[dir->index].name,
				        strerror(errno));
			break;
		}
		arrival_ns = pps_time_monotonic_ns();
		pps_linkem_link_packet_offer(dir->link, arrival_ns, buffer, (size_t)n, &offer);
		direction_log_offer(dir, arrival_ns, (size_t)n, &offer);
		direction_timer_arm(dir, arrival_ns);
	}
}

static void
direction_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	direction_t *dir = arg;
	int64_t now = pps_time_monotonic_ns(), until_ns;
	const uint8_t *packet;
	size_t size;

	/*
	 * Track the median wake-up latency (stochastic approximation: one step
	 * towards each sample) and lead the timer by it, so that deliveries are as
	 * often a little early as a little late. Wakes for packets already overdue
	 * when armed say nothing about the latency and are left out.
	 */
	if (dir->armed_wake_ns != INT64_MIN) {
		int64_t latency_ns = now - dir->armed_wake_ns;

		dir->wake_lead_ns += latency_ns > dir->wake_lead_ns ? LINKEM_WAKE_LEAD_STEP_NS
		                                                    : -LINKEM_WAKE_LEAD_STEP_NS;
		if (dir->wake_lead_ns < 0)
			dir->wake_lead_ns = 0;
		if (dir->wake_lead_ns > LINKEM_WAKE_LEAD_MAX_NS)
			dir->wake_lead_ns = LINKEM_WAKE_LEAD_MAX_NS;
	}
	/* The packet the timer was armed for goes now; the ones behind it when due. */
	until_ns = now > dir->armed_ns ? now : dir->armed_ns;
	dir->armed_ns = INT64_MAX;
	for (;;) {
		int64_t due_ns = pps_linkem_link_next_delivery_ns(dir->link), error_ns;
		uint64_t bin;

		size = pps_linkem_link_packet_pop(dir->link, until_ns, &packet);
		if (size == 0)
			break;
		/* A TUN write hands the packet to the namespace's stack; it does not block. */
		if (write(dir->out_fd, packet, size) != (ssize_t)size)
			dir->write_errors++;
		error_ns = pps_time_monotonic_ns() - due_ns;
		if (error_ns < 0) {
			dir->early_pkts++;
			error_ns = -error_ns;
		}
		bin = (uint64_t)error_ns / LINKEM_TIMING_BIN_NS;
		dir->timing_error_bins[bin < LINKEM_TIMING_BINS ? bin : LINKEM_TIMING_BINS - 1]++;
		if (error_ns > dir->timing_error_max_ns)
			dir->timing_error_max_ns = error_ns;
	}
	direction_timer_arm(dir, pps_time_monotonic_ns());
}

static void
linkem_signal_cb(evutil_socket_t signal_number, short what, void *arg)
{
	linkem_t *lk = arg;

	if (signal_number == SIGUSR1) {
		if (lk->log)
			fflush(lk->log);
		linkem_stats_write(lk);
		return;
	}
	event_base_loopbreak(lk->base);
}

static void
linkem_duration_cb(evutil_socket_t fd, short what, void *arg)
{
	linkem_t *lk = arg;

	event_base_loopbreak(lk->base);
}

/*
 * Opens the TUN device @dev inside the namespace @netns (a name under
 * /var/run/netns or a path), creating it if it does not exist. Returns the fd
 * or a negative errno; the calling thread is back in its own namespace either way.
 */
static int
tun_open_in_netns(const char *netns, const char *dev)
{
	char path[512];
	struct ifreq ifr;
	int self_fd, target_fd, tun_fd, error = 0;

	if (strchr(netns, '/'))
		snprintf(path, sizeof(path), "%s", netns);
	else
		snprintf(path, sizeof(path), "/var/run/netns/%s", netns);
	self_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (self_fd < 0) {
		error = -errno;
		fprintf(stderr, PROGRAM ": /proc/self/ns/net: %s\n", strerror(errno));
		goto err_self;
	}
	target_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (target_fd < 0) {
		error = -errno;
		fprintf(stderr, PROGRAM ": namespace %s: %s\n", path, strerror(errno));
		goto err_target;
	}
	if (setns(target_fd, CLONE_NEWNET) < 0) {
		error = -errno;
		fprintf(stderr, PROGRAM ": entering namespace %s: %s\n", path, strerror(errno));
		goto err_setns;
	}
	tun_fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (tun_fd < 0) {
		error = -errno;
		fprintf(stderr, PROGRAM ": /dev/net/tun: %s\n", strerror(errno));
		goto err_tun;
	}
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", dev);
	if (ioctl(tun_fd, TUNSETIFF, &ifr) < 0) {
		error = -errno;
		fprintf(stderr, PROGRAM ": TUNSETIFF %s in %s: %s\n", dev, path, strerror(errno));
		close(tun_fd);
		goto err_tun;
	}
	error = tun_fd;
err_tun:
	/* Back home: later namespace look-ups (and the log file) are relative to it. */
	if (setns(self_fd, CLONE_NEWNET) < 0) {
		fprintf(stderr, PROGRAM ": returning to own namespace: %s\n", strerror(errno));
		if (error >= 0)
			close(error);
		error = -errno;
	}
err_setns:
	close(target_fd);
err_target:
	close(self_fd);
err_self:
	return error;
}

static int
linkem_events_setup(linkem_t *lk)
{
	static const int signals[] = {SIGINT, SIGTERM, SIGUSR1};
	struct event_config *cfg;

	cfg = event_config_new();
	if (!cfg)
		return -ENOMEM;
	/* PRECISE_TIMER: timerfd-backed epoll waits instead of millisecond timeouts. */
	event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER | EVENT_BASE_FLAG_NO_CACHE_TIME);
	lk->base = event_base_new_with_config(cfg);
	event_config_free(cfg);
	if (!lk->base)
		return -ENOMEM;

	for (int d = 0; d < DIR_COUNT; d++) {
		direction_t *dir = &lk->dir[d];

		dir->read_event =
		    event_new(lk->base, dir->in_fd, EV_READ | EV_PERSIST, direction_read_cb, dir);
		dir->timer_event = evtimer_new(lk->base, direction_timer_cb, dir);
		if (!dir->read_event || !dir->timer_event || event_add(dir->read_event, NULL) < 0)
			return -ENOMEM;
	}
	for (size_t i = 0; i < sizeof(signals) / sizeof(signals[0]); i++) {
		lk->signal_events[i] = evsignal_new(lk->base, signals[i], linkem_signal_cb, lk);
		if (!lk->signal_events[i] || event_add(lk->signal_events[i], NULL) < 0)
			return -ENOMEM;
	}
	if (lk->settings.duration_ns) {
		struct timeval tv = {
		    .tv_sec = (time_t)(lk->settings.duration_ns / 1000000000),
		    .tv_usec = (suseconds_t)(lk->settings.duration_ns % 1000000000 / 1000),
		};

		lk->duration_event = evtimer_new(lk->base, linkem_duration_cb, lk);
		if (!lk->duration_event || evtimer_add(lk->duration_event, &tv) < 0)
			return -ENOMEM;
	}
	return 0;
}

static void
linkem_teardown(linkem_t *lk)
{
	for (size_t i = 0; i < sizeof(lk->signal_events) / sizeof(lk->signal_events[0]); i++)
		if (lk->signal_events[i])
			event_free(lk->signal_events[i]);
	if (lk->duration_event)
		event_free(lk->duration_event);
	for (int d = 0; d < DIR_COUNT; d++) {
		direction_t *dir = &lk->dir[d];

		if (dir->read_event)
			event_free(dir->read_event);
		if (dir->timer_event)
			event_free(dir->timer_event);
		pps_linkem_link_free(dir->link);
		pps_linkem_trace_free(dir->trace);
		if (lk->tun_fd[d] >= 0)
			close(lk->tun_fd[d]);
	}
	if (lk->base)
		event_base_free(lk->base);
	if (lk->log)
		fclose(lk->log);
}

int
main(int argc, char **argv)
{
	static linkem_t lk; /* static: large and lives for the whole run */
	sigset_t stop_signals;
	int status = 1;

	for (int d = 0; d < DIR_COUNT; d++)
		lk.tun_fd[d] = -1;
	settings_parse(&lk.settings, argc, argv);
	/* Everything is validated before anything is created. */
	for (int d = 0; d < DIR_COUNT; d++)
		direction_configure(&lk, d);
	if (lk.settings.check_only) {
		linkem_stats_print_json(stdout, &lk);
		linkem_teardown(&lk);
		return 0;
	}

	if (lk.settings.die_with_parent) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() == 1)
			return 1;
	}
	/* The default 50 us slack would blur deliveries; 0.1 ms accuracy is the goal. */
	prctl(PR_SET_TIMERSLACK, 1UL);
	/*
	 * The senders and receivers the lab runs compete with us for two cores;
	 * under load a normal-priority emulator is scheduled milliseconds late.
	 * Real-time priority is safe here because the process only ever sleeps
	 * in epoll_wait between packets: there is no busy loop to starve the box.
	 */
	if (lk.settings.rt_priority > 0) {
		struct sched_param param = {.sched_priority = lk.settings.rt_priority};

		if (sched_setscheduler(0, SCHED_FIFO, &param) < 0)
			fprintf(stderr,
			        PROGRAM ": SCHED_FIFO %d refused (%s); running unprioritized\n",
			        lk.settings.rt_priority, strerror(errno));
	}

	if (lk.settings.log_path) {
		lk.log = fopen(lk.settings.log_path, "w");
		if (!lk.log) {
			fprintf(stderr, PROGRAM ": log %s: %s\n", lk.settings.log_path,
			        strerror(errno));
			goto out;
		}
		setvbuf(lk.log, NULL, _IOFBF, 1 << 20);
	}

	for (int d = 0; d < DIR_COUNT; d++) {
		int fd = tun_open_in_netns(lk.settings.netns[d], lk.settings.dev[d]);

		if (fd < 0) {
			status = fd == -EPERM || fd == -EACCES || fd == -ENOENT ? 77 : 1;
			goto out;
		}
		lk.tun_fd[d] = fd;
	}
	lk.epoch_ns = pps_time_monotonic_ns();
	lk.epoch_realtime_ns = pps_time_realtime_ns();
	for (int d = 0; d < DIR_COUNT; d++) {
		direction_t *dir = &lk.dir[d];

		dir->linkem = &lk;
		dir->index = d;
		dir->in_fd = lk.tun_fd[d];
		dir->out_fd = lk.tun_fd[d == DIR_FWD ? DIR_REV : DIR_FWD];
		dir->armed_ns = INT64_MAX;
		dir->wake_lead_ns = LINKEM_WAKE_LEAD_INITIAL_NS;
		/* A trace starts when forwarding starts. */
		dir->config.trace_epoch_ns = lk.epoch_ns;
		dir->link = pps_linkem_link_new(&dir->config);
		if (!dir->link) {
			fprintf(stderr, PROGRAM ": %s link: %s\n", lk.settings.dir[d].name,
			        strerror(errno));
			goto out;
		}
	}
	if (linkem_events_setup(&lk) < 0) {
		fprintf(stderr, PROGRAM ": event loop set-up failed\n");
		goto out;
	}
	if (lk.log) {
		fprintf(lk.log,
		        "# pps-linkem per-packet log; times in ns since epoch_monotonic_ns=%" PRId64
		        "\n# settings ",
		        lk.epoch_ns);
		linkem_stats_print_json(lk.log, &lk);
		fprintf(lk.log,
		        "dir\tevent\tarrival_ns\tdeparture_ns\tdelivery_ns\tsojourn_ns\tbytes"
		        "\tecn\tqueue_pkts\tqueue_bytes\tqueue_bytes_seen\n");
	}
	if (lk.settings.ready_fd >= 0) {
		if (write(lk.settings.ready_fd, "ready\n", 6) != 6)
			fprintf(stderr, PROGRAM ": ready fd: %s\n", strerror(errno));
		/* Closing tells a reader that waits for EOF; stdout and stderr stay open. */
		if (lk.settings.ready_fd > 2)
			close(lk.settings.ready_fd);
	}

	if (event_base_dispatch(lk.base) < 0) {
		fprintf(stderr, PROGRAM ": event loop failed\n");
		goto out;
	}
	/*
	 * Freeing the signal events below restores the default actions: a second
	 * SIGTERM (the lab's supervisor dying sends one too) would then kill us
	 * halfway through writing the log. Keep them pending until exit instead.
	 */
	sigemptyset(&stop_signals);
	sigaddset(&stop_signals, SIGINT);
	sigaddset(&stop_signals, SIGTERM);
	sigprocmask(SIG_BLOCK, &stop_signals, NULL);
	status = 0;
	linkem_summary_print(stdout, &lk);
	linkem_stats_write(&lk);
out:
	linkem_teardown(&lk);
	return status;
}
