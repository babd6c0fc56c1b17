/* SPDX-License-Identifier: MIT */
/*
 * pps-client: the command line and the wiring of the client's objects
 * (pps-client-internal.h), on one libevent loop on the main thread:
 *
 *   connection --record--> receiver --frame--> playout --due--> display
 *        |                     |  \--missing/window--> stats (log, summary)
 *        \--pong--> clock -----/ (server capture times -> client clock)
 *
 * Data flows one way: nothing downstream calls back up. Frames are shown
 * from a one-shot timer armed at the next frame's display time; nothing polls.
 */
#include "pps-client-internal.h"
#include "pps-config.h"
#include "pps-prioritizer.h"

#include <errno.h>
#include <event2/event.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
	pps_config_t *config;
	struct event_base *base;
	const char *server;
	bool quiet;
	int exit_status;
	bool stopping;
	bool ever_streamed;
	pps_playout_policy_t policy;

	pps_connection_t *connection;
	pps_clock_t *clock;
	pps_receiver_t *receiver;
	pps_playout_t *playout;
	pps_display_t *display;
	pps_stats_t *stats;
	FILE *log;
	const char *log_path;
	FILE *table; /* the summary: stdout, or stderr when stdout carries video */

	struct event *play_timer, *status_timer, *ui_timer, *duration_timer;
	struct event *sigint_event, *sigterm_event;
	char overlay[96];
	pps_stats_rolling_t last_rolling;
} client_t;

static void
usage(FILE *out)
{
	fprintf(
	    out,
	    "Usage: pps-client [OPTION]... [HOST:PORT]\n"
	    "Receive a pps-server stream, show it on time, and report its latency.\n"
	    "\n"
	    "  HOST:PORT                server (default 127.0.0.1:7400; same as --set "
	    "client.server=...)\n"
	    "  --display auto|sdl|none  SDL window, or headless (default auto: a window if there "
	    "is a display)\n"
	    "  --output FILE.y4m        write the frames shown to a y4m file; - = stdout (summary "
	    "to stderr)\n"
	    "  --log FILE               JSON Lines events: frames, windows, clock, summary\n"
	    "  --stats-json FILE        write the summary as one JSON object on exit\n"
	    "  --policy NAME            playout policy: adaptive, smooth, asap or fixed (same as\n"
	    "                           --set playout.policy=...)\n"
	    "  --tolerance MS           fixed policy: show at capture time + MS (0 = from the "
	    "stream)\n"
	    "  --duration SECONDS       stop after this long (default: until Ctrl-C or the server "
	    "ends)\n"
	    "  --reconnect              reconnect with backoff when the connection ends; gives up\n"
	    "                           after client.reconnect_attempts tries in a row without a "
	    "stream\n"
	    "  -q, --quiet              no status line\n"
	    "  -h, --help               this help\n");
	pps_config_print_usage(out);
	fprintf(out,
	        "\n"
	        "Settings are in config/client.ini (every key, with its default) and the README.\n"
	        "Exit status: 0 the stream ran and ended (BYE, --duration, Ctrl-C); 1 no stream "
	        "(cannot\n"
	        "connect, refused, handshake timeout, reconnect gave up), the server vanished "
	        "without BYE,\n"
	        "a protocol error, or an output that cannot be written; 2 usage/config.\n");
}

static int
set_key(client_t *c, const char *key, const char *value)
{
	char assignment[512], err[512];

	snprintf(assignment, sizeof(assignment), "%s=%s", key, value);
	if (pps_config_set(c->config, assignment, err, sizeof(err)) < 0) {
		fprintf(stderr, "pps-client: %s\n", err);
		return -EINVAL;
	}
	return 0;
}

static void
stop(client_t *c, int exit_status)
{
	if (exit_status > c->exit_status)
		c->exit_status = exit_status;
	c->stopping = true;
	event_base_loopbreak(c->base);
}

static uint32_t
window_frames(const client_t *c)
{
	const pps_wire_stream_info_t *info = pps_receiver_info(c->receiver);

	return info ? info->window_frames : 1;
}

/* ---- playout -> display ---------------------------------------------------- */

static void
log_not_shown(client_t *c, const pps_playout_frame_t *m, const char *reason)
{
	pps_stats_frame_t f = {
	    .window = m->window,
	    .frame = m->frame,
	    .capture_us = m->capture_us,
	    .temporal_layers = m->temporal_layers,
	    .quality_layers = m->quality_layers,
	    .reason = reason,
	    .received_us = m->received_us,
	    .decoded_us = m->decoded_us,
	};

	pps_stats_frame(c->stats, &f);
}

static void
playout_discard_cb(const pps_playout_frame_t *frame, const char *reason, void *user)
{
	log_not_shown(user, frame, reason);
}

static void
show(client_t *c, pps_frame_t *picture, const pps_playout_frame_t *m)
{
	int64_t now = pps_client_realtime_us(NULL);
	pps_stats_rolling_t *r = &c->last_rolling;
	pps_stats_frame_t f = {
	    .window = m->window,
	    .frame = m->frame,
	    .capture_us = m->capture_us,
	    .display_us = now,
	    .temporal_layers = m->temporal_layers,
	    .quality_layers = m->quality_layers,
	    .shown = true,
	    .received_us = m->received_us,
	    .decoded_us = m->decoded_us,
	};

	snprintf(c->overlay, sizeof(c->overlay), "%4.0f ms  t%u q%u  %4.1f fps  %.2f mbit/s",
	         (double)(now - m->capture_us) / 1000.0, m->temporal_layers, m->quality_layers,
	         r->fps_shown, r->bits_per_second / 1e6);
	if (pps_display_show(
	        c->display, picture,
	        pps_receiver_info(c->receiver) ? pps_receiver_info(c->receiver)->fps_num : 30,
	        c->overlay) < 0 &&
	    !c->stopping) {
		fprintf(stderr, "pps-client: cannot write the output file: %s\n", strerror(errno));
		stop(c, 1);
	}
	pps_stats_frame(c->stats, &f);
}

static void
arm_play_timer(client_t *c)
{
	int64_t due = pps_playout_next_due_us(c->playout), wait;
	struct timeval tv;

	if (due == INT64_MAX) {
		event_del(c->play_timer);
		return;
	}
	wait = due - pps_client_realtime_us(NULL);
	if (wait < 0)
		wait = 0;
	tv.tv_sec = (time_t)(wait / 1000000);
	tv.tv_usec = (suseconds_t)(wait % 1000000);
	event_add(c->play_timer, &tv);
}

/* Shows every frame that is due, then waits for the next one. */
static void
play_due(client_t *c)
{
	pps_playout_frame_t meta;
	pps_frame_t *picture;

	while ((picture = pps_playout_pop_due(c->playout, pps_client_realtime_us(NULL), &meta))) {
		show(c, picture, &meta);
		pps_frame_free(picture);
	}
	if (pps_display_poll_quit(c->display)) {
		stop(c, 0);
		return;
	}
	arm_play_timer(c);
}

static void
play_timer_cb(evutil_socket_t fd, short what, void *user)
{
	(void)fd;
	(void)what;
	play_due(user);
}

/* ---- receiver -> playout / stats ----------------------------------------- */

static void
receiver_frame_cb(const pps_receiver_frame_t *rf, void *user)
{
	client_t *c = user;
	const pps_decoded_frame_t *df = rf->decoded;
	int64_t now = pps_client_realtime_us(NULL);
	pps_playout_frame_t m = {
	    .window = pps_window_index_of_frame(df->frame_index, window_frames(c)),
	    .frame = df->frame_index,
	    .capture_us = pps_clock_to_client(c->clock, df->capture_us),
	    .received_us = rf->received_us,
	    .decoded_us = rf->decoded_us,
	    /* Layers counted from 1 in logs: "temporal_layers":3 = all three. */
	    .temporal_layers = df->temporal_layer + 1u,
	    .quality_layers = df->quality_layers,
	};
	int ret = pps_playout_push(c->playout, &df->picture, &m, now);

	if (ret == -ETIME)
		log_not_shown(c, &m, PPS_FRAME_LATE);
	else if (ret < 0)
		log_not_shown(c, &m, "out-of-memory");
	else if (pps_playout_next_due_us(c->playout) <= now)
		play_due(c); /* due already (asap): no trip through a timer */
	else
		arm_play_timer(c);
}

static void
receiver_missing_cb(const pps_receiver_missing_t *m, void *user)
{
	client_t *c = user;

	pps_stats_missing(c->stats, window_frames(c), m->first_frame, m->count,
	                  m->first_capture_us ? pps_clock_to_client(c->clock, m->first_capture_us)
	                                      : 0,
	                  m->frame_interval_us, m->reason);
}

static void
receiver_window_cb(const pps_receiver_window_t *w, void *user)
{
	client_t *c = user;
	int64_t first_capture =
	    w->first_capture_us ? pps_clock_to_client(c->clock, w->first_capture_us) : 0;
	pps_stats_window_t sw = {
	    .window = w->window_id,
	    .windows = w->windows,
	    .first_capture_us = first_capture,
	    .complete_us = w->complete_us,
	    .status = w->status,
	    .adus_received = w->adus_received,
	    .adus_sent = w->adus_sent,
	    .adus_total = w->adus_total,
	    .bytes = w->bytes,
	};

	if (w->complete_us && strcmp(w->status, PPS_WINDOW_JOIN) != 0) {
		int64_t latency_us = w->complete_us - first_capture;
		int64_t delay_us = pps_playout_delay_us(c->playout);

		if (delay_us > 0 && latency_us > delay_us && pps_playout_drops_late(c->playout))
			sw.status = PPS_WINDOW_LATE;
		pps_playout_window(c->playout, latency_us);
	}
	pps_stats_window(c->stats, &sw);
}

/* ---- connection -> receiver / clock ---------------------------------------- */

static int
handle_stream_info(client_t *c, const pps_wire_stream_info_t *info, char *err, size_t size)
{
	int ret = pps_receiver_stream_info(c->receiver, info, err, size);

	if (ret < 0)
		return ret;
	pps_playout_set_stream(c->playout, (int64_t)info->latency_budget_ms * 1000,
	                       (int64_t)1000000 * info->fps_den * info->window_frames /
	                           info->fps_num);
	fprintf(stderr,
	        "pps-client: connected to %s: %ux%u@%u, %u temporal x %u quality layers, "
	        "window %u frames, budget %u ms, %s playout\n",
	        c->server, info->width, info->height, info->fps_num, info->temporal_layers,
	        info->quality_layers, info->window_frames, info->latency_budget_ms,
	        pps_playout_policy_name(c->policy));
	c->ever_streamed = true;
	pps_connection_stream_started(c->connection);
	return 0;
}

static void
handle_pong(client_t *c, const pps_wire_clock_pong_t *p)
{
	char event[256];

	if (pps_clock_pong(c->clock, p, pps_client_realtime_us(NULL)) < 0)
		return;
	pps_playout_set_rtt(c->playout, pps_clock_best_rtt_us(c->clock));
	snprintf(event, sizeof(event),
	         "\"type\":\"clock\",\"seq\":%" PRIu32 ",\"rtt_us\":%" PRId64
	         ",\"offset_us\":%" PRId64 ",\"best_offset_us\":%" PRId64
	         ",\"uncertainty_us\":%" PRId64,
	         p->seq, pps_clock_last_rtt_us(c->clock),
	         ((p->server_recv_us - p->client_send_us) +
	          (p->server_send_us - pps_client_realtime_us(NULL))) /
	             2,
	         pps_clock_offset_us(c->clock), pps_clock_best_rtt_us(c->clock) / 2);
	pps_stats_event(c->stats, event);
}

static int
connection_record_cb(const pps_wire_record_t *r, char *err, size_t size, void *user)
{
	client_t *c = user;

	if (!pps_receiver_info(c->receiver) && r->kind != PPS_WIRE_STREAM_INFO) {
		snprintf(err, size, "%s before STREAM_INFO", pps_wire_kind_name(r->kind));
		return -EPROTO;
	}
	switch (r->kind) {
	case PPS_WIRE_STREAM_INFO:
		return handle_stream_info(c, &r->u.stream_info, err, size);
	case PPS_WIRE_WINDOW_BEGIN:
	case PPS_WIRE_ADU_FRAGMENT:
	case PPS_WIRE_WINDOW_END:
		return pps_receiver_record(c->receiver, r, err, size);
	case PPS_WIRE_CLOCK_PONG:
		handle_pong(c, &r->u.clock_pong);
		return 0;
	default:
		snprintf(err, size, "%s is a client record", pps_wire_kind_name(r->kind));
		return -EPROTO;
	}
}

static void
connection_bytes_cb(size_t bytes, void *user)
{
	client_t *c = user;

	pps_stats_bytes(c->stats, bytes, pps_client_realtime_us(NULL));
}

static void
connection_closed_cb(const pps_connection_end_t *end, void *user)
{
	client_t *c = user;

	/* What the decoder holds comes out; the frames waiting for their
	 * display time still get it. */
	pps_receiver_finish(c->receiver);
	if (end->retry_in_us > 0) {
		fprintf(stderr, "pps-client: %s; reconnecting in %.1f s\n", end->why,
		        (double)end->retry_in_us / 1e6);
		pps_receiver_reset(c->receiver);
		pps_clock_reset(c->clock);
		return;
	}
	if (end->gave_up)
		fprintf(stderr, "pps-client: %s; giving up after %lld tries without a stream\n",
		        end->why,
		        (long long)pps_config_get_int(c->config, "client", "reconnect_attempts"));
	else
		fprintf(stderr, "pps-client: %s\n", end->why);
	stop(c, end->failure ? 1 : 0);
}

/* ---- timers and signals ---------------------------------------------------- */

static bool
log_ok(client_t *c)
{
	if (c->log && (fflush(c->log) != 0 || ferror(c->log))) {
		fprintf(stderr, "pps-client: --log %s: cannot write: %s\n", c->log_path,
		        strerror(errno ? errno : EIO));
		return false;
	}
	return true;
}

static void
status_cb(evutil_socket_t fd, short what, void *user)
{
	client_t *c = user;
	pps_stats_rolling_t *r = &c->last_rolling;

	(void)fd;
	(void)what;
	pps_stats_rolling(c->stats, pps_client_realtime_us(NULL), r);
	if (!log_ok(c)) {
		stop(c, 1);
		return;
	}
	if (c->quiet || !pps_receiver_info(c->receiver))
		return;
	fprintf(stderr,
	        "pps-client: latency p50 %.0f ms p95 %.0f ms | %.1f fps | layers t%u q%u | "
	        "%.2f Mbit/s | windows late %" PRIu64 " dropped %" PRIu64
	        " | freeze longest %.0f ms, %.1f s in all",
	        isnan(r->latency_p50_ms) ? 0 : r->latency_p50_ms,
	        isnan(r->latency_p95_ms) ? 0 : r->latency_p95_ms, r->fps_shown,
	        r->max_temporal_layers, r->max_quality_layers, r->bits_per_second / 1e6,
	        r->windows_late, r->windows_dropped, r->freeze_longest_ms,
	        r->frozen_total_ms / 1000.0);
	if (pps_clock_have_offset(c->clock))
		fprintf(stderr, " | clock %+.1f ms ±%.1f",
		        (double)pps_clock_offset_us(c->clock) / 1000.0,
		        (double)pps_clock_best_rtt_us(c->clock) / 2000.0);
	if (c->policy != PPS_PLAYOUT_ASAP)
		fprintf(stderr, " | playout %.0f ms%s%s",
		        (double)pps_playout_delay_us(c->playout) / 1000.0,
		        c->policy == PPS_PLAYOUT_ADAPTIVE ? " " : "",
		        c->policy == PPS_PLAYOUT_ADAPTIVE ? pps_playout_mode(c->playout) : "");
	fputc('\n', stderr);
}

static void
ui_cb(evutil_socket_t fd, short what, void *user)
{
	client_t *c = user;

	(void)fd;
	(void)what;
	/* The window's close button must work even when no frame arrives. */
	if (pps_display_poll_quit(c->display))
		stop(c, 0);
}

static void
stop_cb(evutil_socket_t sig, short what, void *user)
{
	(void)sig;
	(void)what;
	stop(user, 0);
}

static int
parse_duration(const char *text, double *seconds)
{
	char *end;

	errno = 0;
	*seconds = strtod(text, &end);
	/* inf and nan parse as numbers; neither is a duration. */
	if (end == text || *end || errno || !isfinite(*seconds) || *seconds <= 0 ||
	    *seconds > 1e9) {
		fprintf(stderr, "pps-client: --duration %s: expected seconds > 0 (finite)\n", text);
		return -EINVAL;
	}
	return 0;
}

static int
write_stats_json(const char *path, const pps_stats_summary_t *summary)
{
	FILE *f = fopen(path, "w");
	int ret;

	if (!f) {
		fprintf(stderr, "pps-client: --stats-json %s: %s\n", path, strerror(errno));
		return -errno;
	}
	ret = pps_stats_write_json(summary, f);
	if (fclose(f) != 0 && ret == 0)
		ret = -errno;
	if (ret < 0)
		fprintf(stderr, "pps-client: --stats-json %s: cannot write: %s\n", path,
		        strerror(-ret));
	return ret;
}

int
main(int argc, char **argv)
{
	static const struct option options[] = {
	    {"display", required_argument, NULL, 'D'},
	    {"output", required_argument, NULL, 'o'},
	    {"log", required_argument, NULL, 'L'},
	    {"stats-json", required_argument, NULL, 'j'},
	    {"policy", required_argument, NULL, 'P'},
	    {"tolerance", required_argument, NULL, 'T'},
	    {"duration", required_argument, NULL, 'd'},
	    {"reconnect", no_argument, NULL, 'r'},
	    {"quiet", no_argument, NULL, 'q'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	static const pps_receiver_callbacks_t receiver_callbacks = {
	    .frame_cb = receiver_frame_cb,
	    .missing_cb = receiver_missing_cb,
	    .window_cb = receiver_window_cb,
	};
	static const pps_connection_callbacks_t connection_callbacks = {
	    .record_cb = connection_record_cb,
	    .bytes_cb = connection_bytes_cb,
	    .closed_cb = connection_closed_cb,
	};
	client_t c = {0};
	pps_connection_params_t params = {0};
	char err[512];
	double duration_s = 0;
	const char *stats_json = NULL, *output;
	struct timeval status_tv = {1, 0}, ui_tv = {0, 100000};
	int opt;
	pps_stats_summary_t summary;

	signal(SIGPIPE, SIG_IGN);
	c.config = pps_config_new(PPS_CONFIG_PROGRAM_CLIENT);
	if (!c.config)
		return 1;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			usage(stdout);
			pps_config_free(c.config);
			return 0;
		}
	}
	if (pps_config_parse_args(c.config, &argc, argv, err, sizeof(err)) < 0) {
		fprintf(stderr, "pps-client: %s\n", err);
		pps_config_free(c.config);
		return PPS_EXIT_USAGE;
	}
	while ((opt = getopt_long(argc, argv, "qh", options, NULL)) != -1) {
		int ret = 0;

		switch (opt) {
		case 'D':
			ret = set_key(&c, "display.mode", optarg);
			break;
		case 'o':
			ret = set_key(&c, "display.output", optarg);
			break;
		case 'L':
			ret = set_key(&c, "log.file", optarg);
			break;
		case 'j':
			stats_json = optarg;
			break;
		case 'P':
			ret = set_key(&c, "playout.policy", optarg);
			break;
		case 'T':
			ret = set_key(&c, "playout.tolerance_ms", optarg);
			break;
		case 'd':
			ret = parse_duration(optarg, &duration_s);
			break;
		case 'r':
			ret = set_key(&c, "client.reconnect", "true");
			break;
		case 'q':
			c.quiet = true;
			break;
		default:
			usage(stderr);
			ret = -EINVAL;
		}
		if (ret < 0) {
			pps_config_free(c.config);
			return PPS_EXIT_USAGE;
		}
	}
	if (optind < argc && set_key(&c, "client.server", argv[optind++]) < 0) {
		pps_config_free(c.config);
		return PPS_EXIT_USAGE;
	}
	if (optind < argc) {
		fprintf(stderr, "pps-client: unexpected argument '%s' (see --help)\n",
		        argv[optind]);
		pps_config_free(c.config);
		return PPS_EXIT_USAGE;
	}

	c.server = pps_config_get_string(c.config, "client", "server");
	c.policy = (pps_playout_policy_t)pps_config_get_enum(c.config, "playout", "policy");
	output = pps_config_get_string(c.config, "display", "output");
	/* Video on stdout: everything else goes to stderr. */
	c.table = strcmp(output, "-") == 0 ? stderr : stdout;
	if (strlen(pps_config_get_string(c.config, "client", "access_token")) >
	    PPS_WIRE_MAX_AUTH_BYTES) {
		fprintf(stderr, "pps-client: [client] access_token: at most %d bytes\n",
		        PPS_WIRE_MAX_AUTH_BYTES);
		pps_config_free(c.config);
		return PPS_EXIT_USAGE;
	}
	c.log_path = pps_config_get_string(c.config, "log", "file");
	if (c.log_path[0]) {
		c.log = fopen(c.log_path, "w");
		if (!c.log) {
			fprintf(stderr, "pps-client: --log %s: %s\n", c.log_path, strerror(errno));
			pps_config_free(c.config);
			return 1;
		}
	}
	c.display =
	    pps_display_new((pps_display_mode_t)pps_config_get_enum(c.config, "display", "mode"),
	                    output, err, sizeof(err));
	if (!c.display) {
		fprintf(stderr, "pps-client: %s\n", err);
		if (c.log)
			fclose(c.log);
		pps_config_free(c.config);
		return 1;
	}
	c.base = event_base_new();
	c.playout = pps_playout_new(c.policy,
	                            pps_config_get_int(c.config, "playout", "tolerance_ms") * 1000,
	                            playout_discard_cb, &c);
	c.stats = pps_stats_new(c.log, 30);
	c.clock = pps_clock_new((pps_clock_mode_t)pps_config_get_enum(c.config, "client", "clock"));
	c.receiver = pps_receiver_new(&receiver_callbacks, pps_client_realtime_us, &c);
	params.server = c.server;
	params.name = pps_config_get_string(c.config, "client", "name");
	params.max_record_bytes =
	    (size_t)pps_config_get_int(c.config, "client", "max_record_bytes");
	params.access_token = pps_config_get_string(c.config, "client", "access_token");
	params.ping_interval_us =
	    pps_config_get_int(c.config, "client", "clock_ping_interval_ms") * 1000;
	params.handshake_timeout_us =
	    pps_config_get_int(c.config, "client", "handshake_timeout_ms") * 1000;
	params.reconnect = pps_config_get_bool(c.config, "client", "reconnect");
	params.reconnect_attempts =
	    (unsigned)pps_config_get_int(c.config, "client", "reconnect_attempts");
	params.clock_cb = pps_client_realtime_us;
	if (c.base)
		c.connection = pps_connection_new(c.base, &params, &connection_callbacks, &c);
	if (!c.playout || !c.stats || !c.base || !c.clock || !c.receiver || !c.connection) {
		fprintf(stderr, "pps-client: out of memory\n");
		return 1;
	}
	c.play_timer = evtimer_new(c.base, play_timer_cb, &c);
	c.status_timer = event_new(c.base, -1, EV_PERSIST, status_cb, &c);
	event_add(c.status_timer, &status_tv);
	if (pps_display_has_window(c.display)) {
		c.ui_timer = event_new(c.base, -1, EV_PERSIST, ui_cb, &c);
		event_add(c.ui_timer, &ui_tv);
	}
	c.sigint_event = evsignal_new(c.base, SIGINT, stop_cb, &c);
	c.sigterm_event = evsignal_new(c.base, SIGTERM, stop_cb, &c);
	event_add(c.sigint_event, NULL);
	event_add(c.sigterm_event, NULL);
	if (duration_s > 0) {
		struct timeval tv = {
		    .tv_sec = (time_t)duration_s,
		    .tv_usec = (suseconds_t)((duration_s - (double)(time_t)duration_s) * 1e6)};

		c.duration_timer = evtimer_new(c.base, stop_cb, &c);
		event_add(c.duration_timer, &tv);
	}

	pps_connection_start(c.connection);
	if (!c.stopping)
		event_base_dispatch(c.base);
	c.stopping = true;

	pps_connection_stop(c.connection);
	pps_receiver_finish(c.receiver);
	pps_playout_flush(c.playout);
	if (!c.ever_streamed && c.exit_status == 0) {
		fprintf(stderr, "pps-client: no stream from %s\n", c.server);
		c.exit_status = 1;
	}
	if (c.ever_streamed) {
		pps_stats_summarize(c.stats, &summary);
		pps_stats_write_summary(c.stats, &summary, c.table);
		if (stats_json && write_stats_json(stats_json, &summary) < 0)
			c.exit_status = 1;
	} else if (stats_json) {
		pps_stats_summarize(c.stats, &summary);
		if (write_stats_json(stats_json, &summary) < 0)
			c.exit_status = 1;
	}
	if (!log_ok(&c))
		c.exit_status = 1;
	if (c.log && fclose(c.log) != 0 && c.exit_status == 0) {
		fprintf(stderr, "pps-client: --log %s: %s\n", c.log_path, strerror(errno));
		c.exit_status = 1;
	}
	if (fflush(stdout) != 0 && c.exit_status == 0) {
		fprintf(stderr, "pps-client: stdout: %s\n", strerror(errno));
		c.exit_status = 1;
	}

	pps_connection_free(c.connection);
	pps_receiver_free(c.receiver);
	pps_clock_free(c.clock);
	pps_stats_free(c.stats);
	pps_playout_free(c.playout);
	pps_display_free(c.display);
	event_free(c.play_timer);
	event_free(c.status_timer);
	if (c.ui_timer)
		event_free(c.ui_timer);
	if (c.duration_timer)
		event_free(c.duration_timer);
	event_free(c.sigint_event);
	event_free(c.sigterm_event);
	event_base_free(c.base);
	pps_config_free(c.config);
	return c.exit_status;
}
