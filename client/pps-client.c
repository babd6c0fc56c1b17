/* SPDX-License-Identifier: MIT */
/*
 * pps-client: connects to pps-server, reassembles each adaptation window,
 * decodes what arrived, shows it on time under a playout policy, and reports
 * how late everything was (status line, JSON Lines log, summary table).
 *
 * One libevent loop on the main thread owns the socket, the timers and the
 * display. Frames are shown from a one-shot timer armed at the next frame's
 * display time; nothing polls.
 */
#include "pps-client-internal.h"
#include "pps-config.h"
#include "pps-prioritizer.h"

#include <errno.h>
#include <event2/event.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_QUEUED_FRAMES 48
#define RECONNECT_MIN_US 500000
#define RECONNECT_MAX_US 8000000

typedef struct {
	pps_frame_t *picture;
	uint32_t window;
	uint32_t frame;
	int64_t capture_us; /* client clock */
	int64_t display_us;
	unsigned temporal_layers, quality_layers;
} queued_frame_t;

typedef enum {
	CLOCK_AUTO = 0,
	CLOCK_SHARED = 1,
	CLOCK_ESTIMATE = 2,
} clock_mode_t;

typedef struct {
	pps_config_t *config;
	struct event_base *base;
	const char *server;
	bool reconnect;
	bool quiet;
	int exit_status;
	bool stopping;

	/* connection */
	int fd;
	bool connected;
	struct event *read_event, *connect_event;
	struct event *reconnect_timer, *ping_timer;
	int64_t backoff_us;
	pps_wire_parser_t *parser;
	size_t max_record_bytes;
	bool have_info;
	pps_wire_stream_info_t info;
	uint32_t ping_seq;
	unsigned connections;

	/* media */
	pps_reasm_t *reasm;
	pps_decoder_t *decoder;
	pps_playout_t *playout;
	int64_t tolerance_us;
	int64_t last_window_id; /* -1 before the first */
	bool have_pushed;
	uint32_t last_pushed_id; /* last ADU given to the decoder */
	uint32_t current_window;
	int64_t next_frame;     /* display-order frame not yet accounted, -1 = none yet */
	int64_t ref_frame_capture_us;
	uint32_t ref_frame;
	bool have_ref_frame;
	queued_frame_t queue[MAX_QUEUED_FRAMES];
	size_t q_head, q_count;
	uint64_t queue_overflow;
	struct event *play_timer;

	/* clock */
	clock_mode_t clock_mode;
	bool have_offset;
	int64_t offset_us, best_rtt_us; /* server clock - client clock */

	/* output */
	pps_display_t *display;
	pps_stats_t *stats;
	FILE *log;
	struct event *status_timer, *ui_timer, *duration_timer;
	struct event *sigint_event, *sigterm_event;
	char overlay[96];
	pps_stats_rolling_t last_rolling;
} client_t;

static int64_t
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void
usage(FILE *out)
{
	fprintf(out,
		"Usage: pps-client [OPTION]... [HOST:PORT]\n"
		"Receive a pps-server stream, show it on time, and report its latency.\n"
		"\n"
		"  HOST:PORT                server (default 127.0.0.1:7400; same as --set client.server=...)\n"
		"  --display auto|sdl|none  SDL window, or headless (default auto: a window if there is a display)\n"
		"  --output FILE.y4m        write the frames shown to a y4m file\n"
		"  --log FILE               JSON Lines events: frames, windows, clock, summary\n"
		"  --policy fixed|asap|adaptive   playout policy (same as --set playout.policy=...)\n"
		"  --tolerance MS           fixed policy: show at capture time + MS\n"
		"  --duration SECONDS       stop after this long (default: until Ctrl-C or the server ends)\n"
		"  --reconnect              reconnect with backoff when the server goes away\n"
		"  -q, --quiet              no status line\n"
		"  -h, --help               this help\n");
	pps_config_print_usage(out);
	fprintf(out,
		"\n"
		"Settings are in config/client.ini (every key, with its default) and the README.\n"
		"Exit status: 0 done, 1 could not connect / refused / protocol error, 2 usage/config.\n");
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

/* ---- output side: frames and windows ------------------------------------ */

static int64_t
to_client_clock(const client_t *c, int64_t server_us)
{
	if (!c->have_offset || c->clock_mode == CLOCK_SHARED)
		return server_us;
	if (c->clock_mode == CLOCK_AUTO && llabs(c->offset_us) <= c->best_rtt_us / 2)
		return server_us; /* indistinguishable from a shared clock */
	return server_us - c->offset_us;
}

static void
log_frame(client_t *c, uint32_t frame, int64_t capture_us, int64_t display_us, unsigned t,
	  unsigned q, const char *reason)
{
	pps_stats_frame_t f = {
		.window = pps_window_index_of_frame(frame, c->info.window_frames),
		.frame = frame,
		.capture_us = capture_us,
		.display_us = display_us,
		.temporal_layers = t,
		.quality_layers = q,
		.shown = reason == NULL,
		.reason = reason,
	};

	pps_stats_frame(c->stats, &f);
}

/* Capture time of a frame never seen, from a frame that was. */
static int64_t
estimate_capture(const client_t *c, uint32_t frame)
{
	if (!c->have_ref_frame)
		return 0;
	return c->ref_frame_capture_us +
	       ((int64_t)frame - (int64_t)c->ref_frame) * 1000000 * c->info.fps_den /
		       (c->info.fps_num ? c->info.fps_num : 30);
}

/* First capture time of a window that never began, estimated; 0 if unknown. */
static int64_t
window_capture_estimate(const client_t *c, uint32_t window)
{
	uint32_t first_frame = window == 0 ? 0 : (window - 1) * c->info.window_frames + 1;

	return estimate_capture(c, first_frame);
}

/* Frames before @frame that never came out of the decoder were not shown:
 * their window was dropped, or their ADUs were. */
static void
account_missing(client_t *c, uint32_t frame)
{
	if (c->next_frame < 0) {
		c->next_frame = frame;
		return;
	}
	for (int64_t f = c->next_frame; f < (int64_t)frame; f++)
		log_frame(c, (uint32_t)f, estimate_capture(c, (uint32_t)f), 0, 0, 0, "dropped");
	if ((int64_t)frame + 1 > c->next_frame)
		c->next_frame = (int64_t)frame + 1;
}

static void arm_play_timer(client_t *c);

static void
show_frame(client_t *c, queued_frame_t *qf)
{
	int64_t now = now_us();
	pps_stats_rolling_t *r = &c->last_rolling;

	snprintf(c->overlay, sizeof(c->overlay), "%4.0f ms  t%u q%u  %4.1f fps  %.2f mbit/s",
		 (double)(now - qf->capture_us) / 1000.0, qf->temporal_layers, qf->quality_layers,
		 r->fps_shown, r->bits_per_second / 1e6);
	if (pps_display_show(c->display, qf->picture, c->info.fps_num, c->overlay) < 0 &&
	    !c->stopping) {
		fprintf(stderr, "pps-client: cannot write the output file: %s\n", strerror(errno));
		c->exit_status = 1;
		c->stopping = true;
		event_base_loopbreak(c->base);
	}
	log_frame(c, qf->frame, qf->capture_us, now, qf->temporal_layers, qf->quality_layers,
		  NULL);
}

static void
play_timer_cb(evutil_socket_t fd, short what, void *user)
{
	client_t *c = user;
	int64_t now = now_us();

	while (c->q_count > 0) {
		queued_frame_t *qf = &c->queue[c->q_head];

		if (qf->display_us > now + 1000)
			break;
		show_frame(c, qf);
		pps_frame_free(qf->picture);
		qf->picture = NULL;
		c->q_head = (c->q_head + 1) % MAX_QUEUED_FRAMES;
		c->q_count--;
	}
	if (pps_display_poll_quit(c->display)) {
		c->stopping = true;
		event_base_loopbreak(c->base);
		return;
	}
	arm_play_timer(c);
}

static void
arm_play_timer(client_t *c)
{
	int64_t wait;
	struct timeval tv;

	if (c->q_count == 0) {
		event_del(c->play_timer);
		return;
	}
	wait = c->queue[c->q_head].display_us - now_us();
	if (wait < 0)
		wait = 0;
	tv.tv_sec = (time_t)(wait / 1000000);
	tv.tv_usec = (suseconds_t)(wait % 1000000);
	event_add(c->play_timer, &tv);
}

static void
decoder_frame_cb(const pps_decoded_frame_t *df, void *user)
{
	client_t *c = user;
	int64_t now = now_us();
	int64_t capture = to_client_clock(c, df->capture_us);
	int64_t display;
	queued_frame_t *qf;

	c->ref_frame = df->frame_index;
	c->ref_frame_capture_us = capture;
	c->have_ref_frame = true;
	if (c->next_frame >= 0 && (int64_t)df->frame_index < c->next_frame)
		return; /* already accounted (came out of order) */
	account_missing(c, df->frame_index);
	if ((df->flags & PPS_DECODER_FRAME_REPEATED) || !df->picture.planes[0]) {
		log_frame(c, df->frame_index, capture, 0, df->temporal_layer + 1u,
			  df->quality_layers, "undecodable");
		return;
	}
	display = pps_playout_display_time(c->playout, capture, now);
	if (display < now - 1000) {
		log_frame(c, df->frame_index, capture, 0, df->temporal_layer + 1u,
			  df->quality_layers, "late");
		return;
	}
	if (c->q_count == MAX_QUEUED_FRAMES) {
		/* Bounded: the oldest waiting frame goes (it is the most overdue). */
		queued_frame_t *old = &c->queue[c->q_head];

		log_frame(c, old->frame, old->capture_us, 0, old->temporal_layers,
			  old->quality_layers, "overflow");
		pps_frame_free(old->picture);
		c->q_head = (c->q_head + 1) % MAX_QUEUED_FRAMES;
		c->q_count--;
		c->queue_overflow++;
	}
	qf = &c->queue[(c->q_head + c->q_count) % MAX_QUEUED_FRAMES];
	qf->picture = pps_frame_new(df->picture.width, df->picture.height);
	if (!qf->picture) {
		log_frame(c, df->frame_index, capture, 0, 0, 0, "out-of-memory");
		return;
	}
	pps_frame_copy(qf->picture, &df->picture);
	qf->window = pps_window_index_of_frame(df->frame_index, c->info.window_frames);
	qf->frame = df->frame_index;
	qf->capture_us = capture;
	qf->display_us = display;
	/* Layers counted from 1 in logs: "temporal_layers":3 = all three. */
	qf->temporal_layers = df->temporal_layer + 1u;
	qf->quality_layers = df->quality_layers;
	c->q_count++;
	arm_play_timer(c);
}

static void
decode_adu(client_t *c, pps_adu_t *adu)
{
	int ret = pps_decoder_push(c->decoder, adu);

	if (ret < 0 && ret != -EINVAL)
		fprintf(stderr, "pps-client: decoder: ADU %u of frame %u: %s\n",
			pps_adu_info(adu)->id, pps_adu_info(adu)->frame_index, strerror(-ret));
	c->have_pushed = true;
	c->last_pushed_id = pps_adu_info(adu)->id;
	pps_adu_unref(adu);
}

static const char *
window_status(client_t *c, const pps_reasm_window_t *w, int64_t latency_us)
{
	if (w->dropped)
		return "dropped";
	if (pps_playout_delay_us(c->playout) > 0 && latency_us > pps_playout_delay_us(c->playout))
		return "late";
	if (w->adus_dropped > 0)
		return "partial";
	return "complete";
}

static void
window_done(client_t *c)
{
	pps_reasm_window_t w;
	pps_adu_t **adus;
	size_t n;
	int64_t now = now_us();
	int64_t first_capture;
	int64_t latency_us;
	pps_stats_window_t sw;

	pps_reasm_take(c->reasm, &w, &adus, &n);
	/* Windows the sender discarded with their WINDOW_END leave a gap. */
	for (int64_t id = c->last_window_id + 1; c->last_window_id >= 0 && id < w.window_id;
	     id++) {
		sw = (pps_stats_window_t){ .window = (uint32_t)id, .status = "dropped",
					   .first_capture_us = window_capture_estimate(c, (uint32_t)id) };
		pps_stats_window(c->stats, &sw);
	}
	c->last_window_id = w.window_id;
	first_capture = to_client_clock(c, w.first_capture_us);
	latency_us = now - first_capture;
	sw = (pps_stats_window_t){
		.window = w.window_id,
		/* A dropped window's capture time is estimated from the frame rate,
		 * so logs and plots can place it in time. */
		.first_capture_us = w.dropped ? window_capture_estimate(c, w.window_id) : first_capture,
		.complete_us = w.dropped ? 0 : now,
		.adus_received = w.adus_received,
		.adus_sent = w.adus_sent,
		.adus_total = w.dropped ? w.adus_dropped : w.adus_total,
		.bytes = w.bytes_received,
	};
	sw.status = window_status(c, &w, latency_us);
	pps_stats_window(c->stats, &sw);
	if (!w.dropped)
		pps_playout_window(c->playout, latency_us);
	for (size_t i = 0; i < n; i++)
		decode_adu(c, adus[i]);
	free(adus);
	/* Every ADU of this window the decoder will ever get has been pushed. */
	if (w.begun) {
		c->have_pushed = true;
		c->last_pushed_id = w.first_adu_id + w.adus_total - 1;
	}
}

/* Decodes the ADUs that arrived and are next in decode order, now. */
static void
decode_ready(client_t *c)
{
	pps_adu_t *adu;

	while (c->have_pushed &&
	       (adu = pps_reasm_take_next(c->reasm, c->last_pushed_id + 1)) != NULL)
		decode_adu(c, adu);
}

/* ---- connection ---------------------------------------------------------- */

static void start_connect(client_t *c);
static void disconnect(client_t *c, const char *why, bool failure);

static int
send_record(client_t *c, const pps_wire_record_t *r)
{
	uint8_t buf[256];
	long n = pps_wire_encode(r, buf, sizeof(buf));

	if (n < 0)
		return (int)n;
	/* Our records are tiny and rare; a full send buffer means the server
	 * is not reading, and a lost PING costs one clock sample. */
	if (send(c->fd, buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) != n)
		return -errno;
	return 0;
}

static void
ping_cb(evutil_socket_t fd, short what, void *user)
{
	client_t *c = user;
	pps_wire_record_t ping = { .kind = PPS_WIRE_CLOCK_PING };

	if (!c->connected || !c->have_info)
		return;
	ping.u.clock_ping.seq = ++c->ping_seq;
	ping.u.clock_ping.client_send_us = now_us();
	send_record(c, &ping);
}

static void
handle_pong(client_t *c, const pps_wire_clock_pong_t *p)
{
	int64_t now = now_us();
	int64_t rtt = (now - p->client_send_us) - (p->server_send_us - p->server_recv_us);
	int64_t offset = ((p->server_recv_us - p->client_send_us) +
			  (p->server_send_us - now)) / 2;
	char event[256];

	if (rtt < 0)
		return; /* not a sample we can trust */
	if (!c->have_offset || rtt < c->best_rtt_us) {
		c->have_offset = true;
		c->best_rtt_us = rtt;
		c->offset_us = offset;
	}
	snprintf(event, sizeof(event),
		 "\"type\":\"clock\",\"seq\":%" PRIu32 ",\"rtt_us\":%" PRId64
		 ",\"offset_us\":%" PRId64 ",\"best_offset_us\":%" PRId64
		 ",\"uncertainty_us\":%" PRId64,
		 p->seq, rtt, offset, c->offset_us, c->best_rtt_us / 2);
	pps_stats_event(c->stats, event);
}

static int
handle_stream_info(client_t *c, const pps_wire_stream_info_t *info, char *err, size_t size)
{
	pps_stream_params_t params;

	if (c->have_info) {
		snprintf(err, size, "second STREAM_INFO");
		return -EPROTO;
	}
	if (info->codec != 1 || info->upscale_filter != PPS_CODEC_UPSCALE_BILINEAR_Q8) {
		snprintf(err, size, "STREAM_INFO: codec %u / upscale filter %u not supported",
			 info->codec, info->upscale_filter);
		return -EPROTO;
	}
	c->info = *info;
	c->have_info = true;
	memset(&params, 0, sizeof(params));
	params.width = info->width;
	params.height = info->height;
	params.fps = info->fps_num / (info->fps_den ? info->fps_den : 1);
	params.base_width = info->base_width;
	params.base_height = info->base_height;
	params.temporal_layers = info->temporal_layers;
	params.quality_layers = info->quality_layers;
	params.minigop_frames = info->temporal_layers >= 3 ? 4 : info->temporal_layers == 2 ? 2 : 1;
	while (params.minigop_frames > 1 && info->window_frames % params.minigop_frames)
		params.minigop_frames /= 2;
	params.window_frames = info->window_frames;
	params.gop_frames = (int)info->gop_frames;
	params.upscale_filter = info->upscale_filter;
	pps_decoder_free(c->decoder);
	c->decoder = pps_decoder_new(&params, decoder_frame_cb, c);
	if (!c->decoder) {
		snprintf(err, size, "cannot create a decoder for %ux%u: %s", info->width,
			 info->height, strerror(errno));
		return -EIO;
	}
	if (!c->quiet)
		fprintf(stderr,
			"pps-client: connected to %s: %ux%u@%u, %u temporal x %u quality layers, "
			"window %u frames, %s playout\n",
			c->server, info->width, info->height, info->fps_num, info->temporal_layers,
			info->quality_layers, info->window_frames,
			pps_playout_policy_name(
				(pps_playout_policy_t)pps_config_get_enum(c->config, "playout", "policy")));
	c->backoff_us = 0;
	ping_cb(-1, 0, c); /* a first clock sample right away */
	return 0;
}

static int
handle_record(client_t *c, const pps_wire_record_t *r, char *err, size_t size)
{
	int ret;

	if (!c->have_info && r->kind != PPS_WIRE_STREAM_INFO && r->kind != PPS_WIRE_BYE) {
		snprintf(err, size, "%s before STREAM_INFO", pps_wire_kind_name(r->kind));
		return -EPROTO;
	}
	switch (r->kind) {
	case PPS_WIRE_STREAM_INFO:
		return handle_stream_info(c, &r->u.stream_info, err, size);
	case PPS_WIRE_WINDOW_BEGIN:
	case PPS_WIRE_ADU_FRAGMENT:
	case PPS_WIRE_WINDOW_END:
		ret = pps_reasm_record(c->reasm, r, err, size);
		if (ret == 0 && r->kind == PPS_WIRE_WINDOW_BEGIN) {
			/* Earlier windows are all pushed: this one's first ADU is
			 * the next in decode order. */
			c->have_pushed = true;
			c->last_pushed_id = r->u.window_begin.first_adu_id - 1;
		}
		if (ret == 1)
			window_done(c);
		else if (ret == 0 && r->kind == PPS_WIRE_ADU_FRAGMENT)
			decode_ready(c);
		return ret < 0 ? ret : 0;
	case PPS_WIRE_CLOCK_PONG:
		handle_pong(c, &r->u.clock_pong);
		return 0;
	case PPS_WIRE_BYE: {
		char why[300];

		snprintf(why, sizeof(why), "server said BYE (%s%s%s)",
			 pps_wire_bye_reason_name(r->u.bye.reason), r->u.bye.text_len ? ": " : "",
			 r->u.bye.text);
		disconnect(c, why, r->u.bye.reason != PPS_WIRE_BYE_NORMAL);
		return 1;
	}
	default:
		snprintf(err, size, "%s is a client record", pps_wire_kind_name(r->kind));
		return -EPROTO;
	}
}

static void
read_cb(evutil_socket_t fd, short what, void *user)
{
	client_t *c = user;
	uint8_t buf[65536];
	ssize_t n = recv(fd, buf, sizeof(buf), 0);
	const uint8_t *data = buf;
	size_t len;

	if (n == 0) {
		disconnect(c, "the server closed the connection", !c->have_info);
		return;
	}
	if (n < 0) {
		char why[128];

		if (errno == EAGAIN || errno == EINTR)
			return;
		/* A server that stops (its --duration, a crash) while our pings are
		 * in flight answers them with a reset: after a stream that is the
		 * end of it, not a failure of this client. */
		snprintf(why, sizeof(why), "connection to the server lost: %s", strerror(errno));
		disconnect(c, why, !c->have_info);
		return;
	}
	pps_stats_bytes(c->stats, (size_t)n, now_us());
	len = (size_t)n;
	while (c->connected) {
		pps_wire_record_t record;
		char err[256];
		int ret = pps_wire_parser_next(c->parser, &data, &len, &record);

		if (ret == 0)
			break;
		if (ret < 0) {
			char why[300];

			snprintf(why, sizeof(why), "protocol error from the server: %s",
				 pps_wire_parser_error(c->parser));
			disconnect(c, why, true);
			return;
		}
		ret = handle_record(c, &record, err, sizeof(err));
		if (ret < 0) {
			char why[300];
			pps_wire_record_t bye = { .kind = PPS_WIRE_BYE };

			bye.u.bye.reason = PPS_WIRE_BYE_PROTOCOL;
			bye.u.bye.text_len = (uint8_t)snprintf(bye.u.bye.text,
							       sizeof(bye.u.bye.text), "%.190s", err);
			send_record(c, &bye);
			snprintf(why, sizeof(why), "protocol error from the server: %s", err);
			disconnect(c, why, true);
			return;
		}
		if (ret == 1)
			return; /* disconnected */
	}
}

static void
reset_session(client_t *c)
{
	pps_reasm_free(c->reasm);
	c->reasm = pps_reasm_new();
	pps_wire_parser_free(c->parser);
	c->parser = pps_wire_parser_new(c->max_record_bytes);
	c->have_info = false;
	c->have_pushed = false;
	c->last_window_id = -1;
	/* A new server numbers frames and windows from its own start. */
	c->next_frame = -1;
	c->have_ref_frame = false;
	c->have_offset = false;
}

static void
reconnect_cb(evutil_socket_t fd, short what, void *user)
{
	start_connect(user);
}

static void
disconnect(client_t *c, const char *why, bool failure)
{
	if (c->fd >= 0) {
		if (c->read_event) {
			event_free(c->read_event);
			c->read_event = NULL;
		}
		if (c->connect_event) {
			event_free(c->connect_event);
			c->connect_event = NULL;
		}
		close(c->fd);
		c->fd = -1;
	}
	c->connected = false;
	event_del(c->ping_timer);
	if (c->decoder)
		pps_decoder_drain(c->decoder);
	if (c->stopping)
		return;
	if (c->reconnect) {
		struct timeval tv;

		c->backoff_us = c->backoff_us ? c->backoff_us * 2 : RECONNECT_MIN_US;
		if (c->backoff_us > RECONNECT_MAX_US)
			c->backoff_us = RECONNECT_MAX_US;
		fprintf(stderr, "pps-client: %s; reconnecting in %.1f s\n", why,
			(double)c->backoff_us / 1e6);
		reset_session(c);
		tv.tv_sec = (time_t)(c->backoff_us / 1000000);
		tv.tv_usec = (suseconds_t)(c->backoff_us % 1000000);
		event_add(c->reconnect_timer, &tv);
		return;
	}
	fprintf(stderr, "pps-client: %s\n", why);
	if (failure)
		c->exit_status = 1;
	c->stopping = true;
	event_base_loopbreak(c->base);
}

static void
connected(client_t *c)
{
	pps_wire_record_t hello = { .kind = PPS_WIRE_HELLO };
	const char *name = pps_config_get_string(c->config, "client", "name");
	struct timeval ping_tv;
	int64_t interval_ms = pps_config_get_int(c->config, "client", "clock_ping_interval_ms");

	c->connected = true;
	c->connections++;
	hello.u.hello.protocol_version = PPS_WIRE_VERSION;
	hello.u.hello.max_record_bytes = (uint16_t)c->max_record_bytes;
	hello.u.hello.name_len = (uint8_t)snprintf(hello.u.hello.name, sizeof(hello.u.hello.name),
						   "%.64s", name);
	if (send_record(c, &hello) < 0) {
		disconnect(c, "cannot send HELLO", true);
		return;
	}
	c->read_event = event_new(c->base, c->fd, EV_READ | EV_PERSIST, read_cb, c);
	event_add(c->read_event, NULL);
	ping_tv.tv_sec = (time_t)(interval_ms / 1000);
	ping_tv.tv_usec = (suseconds_t)(interval_ms % 1000 * 1000);
	event_add(c->ping_timer, &ping_tv);
}

static void
connect_done_cb(evutil_socket_t fd, short what, void *user)
{
	client_t *c = user;
	int err = 0;
	socklen_t len = sizeof(err);
	char why[300];

	event_free(c->connect_event);
	c->connect_event = NULL;
	getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
	if (err) {
		snprintf(why, sizeof(why), "cannot connect to %s: %s", c->server, strerror(err));
		disconnect(c, why, true);
		return;
	}
	connected(c);
}

static void
start_connect(client_t *c)
{
	char host[256], port[16], why[300];
	const char *server = c->server;
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res = NULL;
	int ret;

	/* Validated by the configuration loader already. */
	if (pps_config_split_address(server, host, sizeof(host), port, sizeof(port)) < 0)
		return;
	ret = getaddrinfo(host, port, &hints, &res);
	if (ret != 0) {
		snprintf(why, sizeof(why), "cannot resolve %s: %s", server, gai_strerror(ret));
		disconnect(c, why, true);
		return;
	}
	c->fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		freeaddrinfo(res);
		disconnect(c, strerror(errno), true);
		return;
	}
	ret = connect(c->fd, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	if (ret == 0) {
		connected(c);
		return;
	}
	if (errno != EINPROGRESS) {
		snprintf(why, sizeof(why), "cannot connect to %s: %s", server, strerror(errno));
		disconnect(c, why, true);
		return;
	}
	c->connect_event = event_new(c->base, c->fd, EV_WRITE, connect_done_cb, c);
	event_add(c->connect_event, NULL);
}

/* ---- timers and signals --------------------------------------------------- */

static void
status_cb(evutil_socket_t fd, short what, void *user)
{
	client_t *c = user;
	pps_stats_rolling_t *r = &c->last_rolling;

	pps_stats_rolling(c->stats, now_us(), r);
	if (c->quiet || !c->have_info)
		return;
	fprintf(stderr,
		"pps-client: latency p50 %s%.0f ms p95 %.0f ms | %.1f fps | layers t%u q%u | "
		"%.2f Mbit/s | windows late %" PRIu64 " dropped %" PRIu64,
		"", isnan(r->latency_p50_ms) ? 0 : r->latency_p50_ms,
		isnan(r->latency_p95_ms) ? 0 : r->latency_p95_ms, r->fps_shown,
		r->max_temporal_layers, r->max_quality_layers, r->bits_per_second / 1e6,
		r->windows_late, r->windows_dropped);
	if (c->have_offset)
		fprintf(stderr, " | clock %+.1f ms ±%.1f", (double)c->offset_us / 1000.0,
			(double)c->best_rtt_us / 2000.0);
	if (pps_config_get_enum(c->config, "playout", "policy") == PPS_PLAYOUT_ADAPTIVE)
		fprintf(stderr, " | playout %.0f ms %s",
			(double)pps_playout_delay_us(c->playout) / 1000.0,
			pps_playout_mode(c->playout));
	fputc('\n', stderr);
}

static void
ui_cb(evutil_socket_t fd, short what, void *user)
{
	client_t *c = user;

	/* The window's close button must work even when no frame arrives. */
	if (pps_display_poll_quit(c->display)) {
		c->stopping = true;
		event_base_loopbreak(c->base);
	}
}

static void
stop_cb(evutil_socket_t sig, short what, void *user)
{
	client_t *c = user;

	c->stopping = true;
	event_base_loopbreak(c->base);
}

/* Frames decoded but not yet due, and frames never output, at exit. */
static void
account_leftovers(client_t *c)
{
	if (c->decoder)
		pps_decoder_drain(c->decoder);
	while (c->q_count > 0) {
		queued_frame_t *qf = &c->queue[c->q_head];

		log_frame(c, qf->frame, qf->capture_us, 0, qf->temporal_layers, qf->quality_layers,
			  "stopped");
		pps_frame_free(qf->picture);
		c->q_head = (c->q_head + 1) % MAX_QUEUED_FRAMES;
		c->q_count--;
	}
}

int
main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "display", required_argument, NULL, 'D' },
		{ "output", required_argument, NULL, 'o' },
		{ "log", required_argument, NULL, 'L' },
		{ "policy", required_argument, NULL, 'P' },
		{ "tolerance", required_argument, NULL, 'T' },
		{ "duration", required_argument, NULL, 'd' },
		{ "reconnect", no_argument, NULL, 'r' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	client_t c = { .fd = -1, .last_window_id = -1, .next_frame = -1 };
	char err[512];
	double duration_s = 0;
	const char *log_path;
	struct timeval status_tv = { 1, 0 }, ui_tv = { 0, 100000 };
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
		char *end;
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
		case 'P':
			ret = set_key(&c, "playout.policy", optarg);
			break;
		case 'T':
			ret = set_key(&c, "playout.tolerance_ms", optarg);
			break;
		case 'd':
			duration_s = strtod(optarg, &end);
			if (*end || duration_s <= 0) {
				fprintf(stderr, "pps-client: --duration %s: expected seconds > 0\n",
					optarg);
				ret = -EINVAL;
			}
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
	if (optind < argc && set_key(&c, "client.server", argv[optind++]) < 0)
		return PPS_EXIT_USAGE;
	if (optind < argc) {
		fprintf(stderr, "pps-client: unexpected argument '%s' (see --help)\n", argv[optind]);
		return PPS_EXIT_USAGE;
	}

	c.server = pps_config_get_string(c.config, "client", "server");
	c.reconnect = pps_config_get_bool(c.config, "client", "reconnect");
	c.max_record_bytes = (size_t)pps_config_get_int(c.config, "client", "max_record_bytes");
	c.clock_mode = (clock_mode_t)pps_config_get_enum(c.config, "client", "clock");
	c.tolerance_us = pps_config_get_int(c.config, "playout", "tolerance_ms") * 1000;
	log_path = pps_config_get_string(c.config, "log", "file");
	if (log_path[0]) {
		c.log = fopen(log_path, "w");
		if (!c.log) {
			fprintf(stderr, "pps-client: --log %s: %s\n", log_path, strerror(errno));
			return 1;
		}
	}
	c.display = pps_display_new(
		(pps_display_mode_t)pps_config_get_enum(c.config, "display", "mode"),
		pps_config_get_string(c.config, "display", "output"), err, sizeof(err));
	if (!c.display) {
		fprintf(stderr, "pps-client: %s\n", err);
		return 1;
	}
	c.playout = pps_playout_new(
		(pps_playout_policy_t)pps_config_get_enum(c.config, "playout", "policy"),
		c.tolerance_us);
	c.stats = pps_stats_new(c.log, 30);
	c.base = event_base_new();
	c.reasm = pps_reasm_new();
	c.parser = pps_wire_parser_new(c.max_record_bytes);
	if (!c.playout || !c.stats || !c.base || !c.reasm || !c.parser) {
		fprintf(stderr, "pps-client: out of memory\n");
		return 1;
	}
	c.play_timer = evtimer_new(c.base, play_timer_cb, &c);
	c.reconnect_timer = evtimer_new(c.base, reconnect_cb, &c);
	c.ping_timer = event_new(c.base, -1, EV_PERSIST, ping_cb, &c);
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
		struct timeval tv = { .tv_sec = (time_t)duration_s,
				      .tv_usec = (suseconds_t)((duration_s -
								(double)(time_t)duration_s) * 1e6) };

		c.duration_timer = evtimer_new(c.base, stop_cb, &c);
		event_add(c.duration_timer, &tv);
	}

	start_connect(&c);
	if (!c.stopping)
		event_base_dispatch(c.base);
	c.stopping = true;

	account_leftovers(&c);
	if (c.connected) {
		pps_wire_record_t bye = { .kind = PPS_WIRE_BYE };

		bye.u.bye.reason = PPS_WIRE_BYE_NORMAL;
		send_record(&c, &bye);
	}
	disconnect(&c, "", false);
	if (c.connections > 0 || c.exit_status == 0) {
		pps_stats_summarize(c.stats, &summary);
		pps_stats_write_summary(c.stats, &summary, c.quiet ? NULL : stdout);
	}

	if (c.log)
		fclose(c.log);
	pps_stats_free(c.stats);
	pps_decoder_free(c.decoder);
	pps_reasm_free(c.reasm);
	pps_wire_parser_free(c.parser);
	pps_playout_free(c.playout);
	pps_display_free(c.display);
	event_free(c.play_timer);
	event_free(c.reconnect_timer);
	event_free(c.ping_timer);
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
