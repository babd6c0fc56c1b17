/* SPDX-License-Identifier: MIT */
/*
 * pps-client: the command line, the player (pps-client-internal.h: connection
 * -> receiver -> playout, with the clock and the stats) and the display, on
 * one libevent loop on the main thread:
 *
 *   player --show--> display (SDL2 window)
 *      \--show--> recorder (--output: y4m or Matroska, in real time)
 *      \--stats--> status line, summary, --stats-json
 */
#include "pps-client-settings.h"
#include "pps-time.h"
#include "pps-version.h"

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
	pps_playout_policy_t policy;
	unsigned reconnect_attempts;

	pps_player_t *player;
	pps_display_t *display;
	pps_recorder_t *recorder; /* NULL without --output */
	bool recorder_failed;
	const char *output;
	FILE *log;
	const char *log_path;
	FILE *table; /* the summary: stdout, or stderr when stdout carries video */
	/* What a server makes us say on stderr, connection after connection. */
	pps_peer_log_t *peer_log;

	struct event *status_timer, *ui_timer, *duration_timer, *interval_timer;
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
	    "  --output FILE            record the frames shown, in real time: FILE.mkv "
	    "(Matroska)\n"
	    "                           with each frame's display time; any other name is y4m\n"
	    "                           at the stream's rate, the last frame repeated through\n"
	    "                           freezes; - = y4m to stdout (summary to stderr)\n"
	    "  --log FILE               JSON Lines: a start record, frames, windows, clock, the\n"
	    "                           summary (docs/JSON.md)\n"
	    "  --stats-interval SECONDS with --log: an interval record this often (frames, "
	    "latency,\n"
	    "                           rate, freezes since the previous one)\n"
	    "  --stats-json FILE        write the summary as one JSON object on exit (opened at\n"
	    "                           start)\n"
	    "  --policy NAME            playout policy: adaptive, smooth, asap or fixed (same as\n"
	    "                           --set playout.policy=...)\n"
	    "  --tolerance MS           fixed policy: show at capture time + MS (0 = from the "
	    "stream)\n"
	    "  --duration SECONDS       stop after this long (default: until Ctrl-C or the server "
	    "ends)\n"
	    "  --audio auto|sdl|none|off  the audio track: played on the default audio device if "
	    "one\n"
	    "                           opens (auto), on it or fail (sdl), measured but not heard\n"
	    "                           (none), or not asked for (off); default auto\n"
	    "  --audio-wav FILE.wav     write the audio played to a WAV file\n"
	    "  --copies N               the stream on N connections (1-4, default 1): each brings\n"
	    "                           every window, the first to bring a piece decides, so a\n"
	    "                           loss holds up only its own connection; N times the bytes\n"
	    "                           (same as --set client.copies=N)\n"
	    "  --reconnect              reconnect with backoff when the connection ends; gives up\n"
	    "                           after client.reconnect_attempts tries in a row without a "
	    "stream\n"
	    "  -q, --quiet              no status line\n"
	    "  -h, --help               this help\n"
	    "  -V, --version            the version\n");
	pps_config_print_usage(out);
	fprintf(out,
	        "\n"
	        "The window: q, Esc or closing it ends the client as Ctrl-C does (summary "
	        "included); its\n"
	        "bottom line shows the picture's latency, then the layers, fps and bit rate of the "
	        "status line.\n"
	        "\n"
	        "Settings are in config/client.ini (every key, with its default) and\n"
	        "docs/CONFIGURATION.md.\n"
	        "\n"
	        "Exit status: 0 the stream ran and ended (BYE, --duration, Ctrl-C); 1 no stream "
	        "(cannot\n"
	        "connect, refused, handshake timeout, reconnect gave up), the server vanished "
	        "without BYE\n"
	        "or went silent (client.data_timeout_windows), a protocol error, or an output "
	        "that cannot be\n"
	        "written; 2 usage/config.\n");
}

/* An option (or the server argument) that stands for a key: @as names it in
 * the message, as the user typed it ("--policy ", "server address "). */
static int
set_key(client_t *c, const char *section, const char *key, const char *value, const char *as)
{
	char err[512];

	if (pps_config_set_as(c->config, section, key, value, as, err, sizeof(err)) < 0) {
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

/* ---- player -> display ---------------------------------------------------- */

static bool
player_show_cb(const pps_frame_t *picture, const pps_playout_frame_t *m, int64_t now, void *user)
{
	client_t *c = user;
	const pps_wire_stream_info_t *info = pps_player_info(c->player);
	pps_stats_rolling_t *r = &c->last_rolling;

	pps_stats_overlay_text(r, (double)(now - m->capture_us) / 1000.0, c->overlay,
	                       sizeof(c->overlay));
	if (pps_display_show(c->display, picture, c->overlay) < 0 && !c->stopping) {
		fprintf(stderr, "pps-client: cannot show the frame\n");
		stop(c, 1);
	}
	/* Every frame shown goes in, those shown while stopping too, so the file
	 * ends where the log does; after a write error, none. */
	if (c->recorder && !c->recorder_failed) {
		char err[512];

		if (pps_recorder_frame(c->recorder, picture, now, info ? info->fps_num : 30,
		                       info ? info->fps_den : 1, err, sizeof(err)) < 0) {
			fprintf(stderr, "pps-client: %s\n", err);
			c->recorder_failed = true;
			stop(c, 1);
		}
	}
	return true;
}

static void
player_stream_cb(const pps_wire_stream_info_t *info, void *user)
{
	client_t *c = user;

	pps_peer_log_printf(
	    c->peer_log, pps_client_realtime_us(NULL),
	    "pps-client: connected to %s: %ux%u@%u, %u temporal x %u quality layers, "
	    "window %u frames, budget %u ms, %s playout\n",
	    c->server, info->width, info->height, info->fps_num, info->temporal_layers,
	    info->quality_layers, info->window_frames, info->latency_budget_ms,
	    pps_playout_policy_name(c->policy));
}

static void
player_closed_cb(const pps_connection_end_t *end, void *user)
{
	client_t *c = user;

	if (end->retry_in_us > 0) {
		pps_peer_log_printf(c->peer_log, pps_client_realtime_us(NULL),
		                    "pps-client: %s; reconnecting in %.1f s\n", end->why,
		                    (double)end->retry_in_us / 1e6);
		return;
	}
	/* The last word is always said, after what was held back. */
	pps_peer_log_flush(c->peer_log);
	if (end->gave_up)
		fprintf(stderr, "pps-client: %s; giving up after %lld tries without a stream\n",
		        end->why, (long long)c->reconnect_attempts);
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
	const pps_clock_t *clock = pps_player_clock(c->player);
	const pps_playout_t *playout = pps_player_playout(c->player);
	char layers[40];

	(void)fd;
	(void)what;
	pps_stats_rolling(pps_player_stats(c->player), pps_client_realtime_us(NULL), r);
	if (!log_ok(c)) {
		stop(c, 1);
		return;
	}
	if (c->quiet || !pps_player_info(c->player))
		return;
	pps_stats_layers_text(r, layers, sizeof(layers));
	fprintf(stderr,
	        "pps-client: latency p50 %.0f ms p95 %.0f ms | %.1f fps | %s | "
	        "%.2f Mbit/s | windows late %" PRIu64 " dropped %" PRIu64
	        " | freeze longest %.0f ms, %.1f s in all",
	        isnan(r->latency_p50_ms) ? 0 : r->latency_p50_ms,
	        isnan(r->latency_p95_ms) ? 0 : r->latency_p95_ms, r->fps_shown, layers,
	        r->bits_per_second / 1e6, r->windows_late, r->windows_dropped, r->freeze_longest_ms,
	        r->frozen_total_ms / 1000.0);
	if (r->audio_slots)
		fprintf(stderr, " | audio %.0f%% played, mouth-to-ear p95 %.0f ms",
		        100.0 * (double)r->audio_played / (double)r->audio_slots,
		        isnan(r->mouth_to_ear_p95_ms) ? 0 : r->mouth_to_ear_p95_ms);
	if (pps_clock_have_offset(clock))
		fprintf(stderr, " | clock %+.1f ms ±%.1f",
		        (double)pps_clock_offset_us(clock) / 1000.0,
		        (double)pps_clock_best_rtt_us(clock) / 2000.0);
	if (c->policy != PPS_PLAYOUT_ASAP)
		fprintf(stderr, " | playout %.0f ms%s%s",
		        (double)pps_playout_delay_us(playout) / 1000.0,
		        c->policy == PPS_PLAYOUT_ADAPTIVE ? " " : "",
		        c->policy == PPS_PLAYOUT_ADAPTIVE ? pps_playout_mode(playout) : "");
	fputc('\n', stderr);
}

static void
interval_cb(evutil_socket_t fd, short what, void *user)
{
	client_t *c = user;
	const pps_clock_t *clock = pps_player_clock(c->player);
	pps_stats_interval_extra_t extra = {NAN, NAN, NAN};

	(void)fd;
	(void)what;
	if (pps_clock_have_offset(clock)) {
		extra.clock_offset_ms = (double)pps_clock_offset_us(clock) / 1000.0;
		extra.clock_uncertainty_ms = (double)pps_clock_best_rtt_us(clock) / 2000.0;
	}
	if (c->policy != PPS_PLAYOUT_ASAP)
		extra.playout_delay_ms =
		    (double)pps_playout_delay_us(pps_player_playout(c->player)) / 1000.0;
	pps_stats_write_interval(pps_player_stats(c->player), pps_client_realtime_us(NULL), &extra);
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
parse_duration(const char *option, const char *text, double *seconds)
{
	char *end;

	errno = 0;
	*seconds = strtod(text, &end);
	/* inf and nan parse as numbers; neither is a duration. */
	if (end == text || *end || errno || !isfinite(*seconds) || *seconds <= 0 ||
	    *seconds > 1e9) {
		fprintf(stderr, "pps-client: %s %s: expected seconds > 0 (finite)\n", option, text);
		return -EINVAL;
	}
	return 0;
}

/* --stats-json: opened at start, so an unwritable path fails before the run. */
static int
write_stats_json(const char *path, FILE *f, const pps_stats_t *stats,
                 const pps_stats_summary_t *summary)
{
	int ret = pps_stats_write_json(stats, summary, f);

	if (fclose(f) != 0 && ret == 0)
		ret = -errno;
	if (ret < 0)
		fprintf(stderr, "pps-client: --stats-json %s: cannot write: %s\n", path,
		        strerror(-ret));
	return ret;
}

/* Closes --output and says on stderr what it holds. */
static int
finish_recording(client_t *c)
{
	pps_recorder_summary_t sum;
	char err[512];
	int ret = pps_recorder_finish(c->recorder, &sum, err, sizeof(err));

	if (ret < 0) {
		fprintf(stderr, "pps-client: %s\n", err);
		return ret;
	}
	if (sum.frames_shown == 0) {
		fprintf(stderr, "pps-client: --output %s: no frame was shown\n", c->output);
		return 0;
	}
	fprintf(stderr,
	        "pps-client: --output %s: %.3f s, %" PRIu64 " frames shown, %" PRIu64
	        " in the file",
	        c->output, (double)sum.duration_us / 1e6, sum.frames_shown, sum.frames_written);
	if (sum.frames_repeated || sum.frames_replaced)
		fprintf(stderr,
		        " (%" PRIu64 " repeats through freezes, %" PRIu64
		        " shown less than a frame time left out)",
		        sum.frames_repeated, sum.frames_replaced);
	fputc('\n', stderr);
	return 0;
}

int
main(int argc, char **argv)
{
	static const struct option options[] = {
	    {"display", required_argument, NULL, 'D'},
	    {"output", required_argument, NULL, 'o'},
	    {"log", required_argument, NULL, 'L'},
	    {"stats-json", required_argument, NULL, 'j'},
	    {"stats-interval", required_argument, NULL, 'i'},
	    {"policy", required_argument, NULL, 'P'},
	    {"tolerance", required_argument, NULL, 'T'},
	    {"duration", required_argument, NULL, 'd'},
	    {"reconnect", no_argument, NULL, 'r'},
	    {"copies", required_argument, NULL, 'C'},
	    {"audio", required_argument, NULL, 'A'},
	    {"audio-wav", required_argument, NULL, 'W'},
	    {"quiet", no_argument, NULL, 'q'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};
	static const pps_player_callbacks_t player_callbacks = {
	    .stream_cb = player_stream_cb,
	    .show_cb = player_show_cb,
	    .closed_cb = player_closed_cb,
	};
	client_t c = {0};
	pps_player_params_t params = {0};
	pps_client_settings_t settings;
	pps_connection_params_t *conn = &params.connection;
	char err[512];
	double duration_s = 0, interval_s = 0;
	FILE *stats_json_file = NULL;
	const char *stats_json = NULL, *output;
	struct timeval status_tv = {1, 0}, ui_tv = {0, 100000};
	int opt;
	pps_stats_summary_t summary;

	signal(SIGPIPE, SIG_IGN);
	c.config = pps_config_new(pps_client_settings_schema());
	if (!c.config)
		return 1;
	if (pps_cli_help_or_version(argc, argv, "pps-client", usage)) {
		pps_config_free(c.config);
		return 0;
	}
	if (pps_config_parse_args(c.config, &argc, argv, err, sizeof(err)) < 0) {
		fprintf(stderr, "pps-client: %s\n", err);
		pps_config_free(c.config);
		return PPS_EXIT_USAGE;
	}
	if (pps_cli_refuse_abbreviated(argc, argv, options, "pps-client")) {
		pps_config_free(c.config);
		return PPS_EXIT_USAGE;
	}
	while ((opt = getopt_long(argc, argv, "qhV", options, NULL)) != -1) {
		int ret = 0;

		switch (opt) {
		case 'D':
			ret = set_key(&c, "display", "mode", optarg, "--display ");
			break;
		case 'o':
			ret = set_key(&c, "display", "output", optarg, "--output ");
			break;
		case 'L':
			ret = set_key(&c, "log", "file", optarg, "--log ");
			break;
		case 'j':
			stats_json = optarg;
			break;
		case 'P':
			ret = set_key(&c, "playout", "policy", optarg, "--policy ");
			break;
		case 'T':
			ret = set_key(&c, "playout", "tolerance_ms", optarg, "--tolerance ");
			break;
		case 'd':
			ret = parse_duration("--duration", optarg, &duration_s);
			break;
		case 'i':
			ret = parse_duration("--stats-interval", optarg, &interval_s);
			if (ret == 0 && interval_s < 0.01) {
				fprintf(stderr,
				        "pps-client: --stats-interval %s: at least 0.01 s\n",
				        optarg);
				ret = -EINVAL;
			}
			break;
		case 'r':
			ret = set_key(&c, "client", "reconnect", "true", "--reconnect ");
			break;
		case 'C':
			ret = set_key(&c, "client", "copies", optarg, "--copies ");
			break;
		case 'A':
			ret = strcmp(optarg, "off") == 0
			          ? set_key(&c, "audio", "enabled", "false", "--audio ")
			          : set_key(&c, "audio", "output", optarg, "--audio ");
			break;
		case 'W':
			ret = set_key(&c, "audio", "wav", optarg, "--audio-wav ");
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
	if (optind < argc &&
	    set_key(&c, "client", "server", argv[optind++], "server address ") < 0) {
		pps_config_free(c.config);
		return PPS_EXIT_USAGE;
	}
	if (optind < argc) {
		fprintf(stderr, "pps-client: unexpected argument '%s' (see --help)\n",
		        argv[optind]);
		pps_config_free(c.config);
		return PPS_EXIT_USAGE;
	}

	if (pps_client_settings_from_config(c.config, &settings, err, sizeof(err)) < 0) {
		fprintf(stderr, "pps-client: %s\n", err);
		pps_config_free(c.config);
		return PPS_EXIT_USAGE;
	}
	params = settings.player;
	c.server = conn->server;
	c.policy = params.policy;
	c.reconnect_attempts = conn->reconnect_attempts;
	output = settings.output;
	/* Video on stdout: everything else goes to stderr. */
	c.table = strcmp(output, "-") == 0 ? stderr : stdout;
	c.log_path = settings.log_path;
	if (interval_s > 0 && !c.log_path[0]) {
		fprintf(stderr,
		        "pps-client: --stats-interval needs --log (its records go there)\n");
		pps_config_free(c.config);
		return PPS_EXIT_USAGE;
	}
	if (stats_json && !(stats_json_file = fopen(stats_json, "w"))) {
		fprintf(stderr, "pps-client: --stats-json %s: %s\n", stats_json, strerror(errno));
		pps_config_free(c.config);
		return 1;
	}
	if (c.log_path[0]) {
		c.log = fopen(c.log_path, "w");
		if (!c.log) {
			fprintf(stderr, "pps-client: --log %s: %s\n", c.log_path, strerror(errno));
			if (stats_json_file)
				fclose(stats_json_file);
			pps_config_free(c.config);
			return 1;
		}
	}
	c.display = pps_display_new(settings.display_mode, err, sizeof(err));
	if (c.display && output[0]) {
		c.recorder = pps_recorder_new(output, err, sizeof(err));
		if (c.recorder && settings.output_every)
			pps_recorder_keep_every(c.recorder);
	}
	if (!c.display || (output[0] && !c.recorder)) {
		fprintf(stderr, "pps-client: %s\n", err);
		pps_display_free(c.display);
		if (c.log)
			fclose(c.log);
		if (stats_json_file)
			fclose(stats_json_file);
		pps_config_free(c.config);
		return 1;
	}
	c.output = output;
	c.base = event_base_new();
	c.peer_log = pps_peer_log_new(stderr, PPS_PEER_LOG_TEXT, PPS_PEER_LOG_TEXT_BURST,
	                              PPS_PEER_LOG_TEXT_INTERVAL_US);
	params.log = c.log;
	params.program = "pps-client";
	conn->clock_cb = pps_client_realtime_us;
	if (c.base && c.peer_log)
		c.player = pps_player_new(c.base, &params, &player_callbacks, &c);
	if (!c.base || !c.peer_log || !c.player) {
		if (c.base && errno == ENODEV)
			fprintf(stderr, "pps-client: audio.output = sdl, but no audio device opens "
			                "(--audio auto plays without one)\n");
		else if (c.base && errno != ENOMEM)
			fprintf(stderr, "pps-client: cannot start the player: %s\n",
			        strerror(errno));
		else
			fprintf(stderr, "pps-client: out of memory\n");
		return 1;
	}
	c.status_timer = event_new(c.base, -1, EV_PERSIST, status_cb, &c);
	event_add(c.status_timer, &status_tv);
	if (pps_display_has_window(c.display)) {
		c.ui_timer = event_new(c.base, -1, EV_PERSIST, ui_cb, &c);
		event_add(c.ui_timer, &ui_tv);
	}
	if (interval_s > 0) {
		struct timeval tv =
		    pps_time_us_to_timeval((int64_t)(interval_s * PPS_TIME_US_PER_S));

		c.interval_timer = event_new(c.base, -1, EV_PERSIST, interval_cb, &c);
		event_add(c.interval_timer, &tv);
	}
	c.sigint_event = evsignal_new(c.base, SIGINT, stop_cb, &c);
	c.sigterm_event = evsignal_new(c.base, SIGTERM, stop_cb, &c);
	event_add(c.sigint_event, NULL);
	event_add(c.sigterm_event, NULL);
	if (duration_s > 0) {
		struct timeval tv =
		    pps_time_us_to_timeval((int64_t)(duration_s * PPS_TIME_US_PER_S));

		c.duration_timer = evtimer_new(c.base, stop_cb, &c);
		event_add(c.duration_timer, &tv);
	}

	pps_player_start(c.player);
	if (!c.stopping)
		event_base_dispatch(c.base);
	c.stopping = true;

	pps_player_stop(c.player);
	pps_peer_log_flush(c.peer_log);
	if (!pps_player_ever_streamed(c.player) && c.exit_status == 0) {
		fprintf(stderr, "pps-client: no stream from %s\n", c.server);
		c.exit_status = 1;
	}
	if (pps_player_ever_streamed(c.player)) {
		pps_stats_summarize(pps_player_stats(c.player), &summary);
		pps_stats_write_summary(pps_player_stats(c.player), &summary, c.table);
		if (stats_json_file && write_stats_json(stats_json, stats_json_file,
		                                        pps_player_stats(c.player), &summary) < 0)
			c.exit_status = 1;
	} else if (stats_json_file) {
		pps_stats_summarize(pps_player_stats(c.player), &summary);
		if (write_stats_json(stats_json, stats_json_file, pps_player_stats(c.player),
		                     &summary) < 0)
			c.exit_status = 1;
	}
	if (c.recorder && finish_recording(&c) < 0)
		c.exit_status = 1;
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

	pps_player_free(c.player);
	pps_peer_log_free(c.peer_log);
	pps_display_free(c.display);
	pps_recorder_free(c.recorder);
	event_free(c.status_timer);
	if (c.ui_timer)
		event_free(c.ui_timer);
	if (c.duration_timer)
		event_free(c.duration_timer);
	if (c.interval_timer)
		event_free(c.interval_timer);
	event_free(c.sigint_event);
	event_free(c.sigterm_event);
	event_base_free(c.base);
	pps_config_free(c.config);
	return c.exit_status;
}
