/* SPDX-License-Identifier: MIT */
/*
 * The player: the client's objects wired into one stream, on the caller's
 * libevent loop (pps-client-internal.h):
 *
 *   connection --record--> receiver --frame--> playout --due--> show_cb
 *        |                     |  \--missing/window--> stats (log, summary)
 *        \--pong--> clock -----/ (server capture times -> client clock)
 *
 * pps-client and the GStreamer source (gst/) both play through it, so the
 * playout, the accounting of every frame and the log are the same in both.
 * Frames are shown from a one-shot timer armed at the next frame's display
 * time; nothing polls.
 */
#include "pps-client-internal.h"
#include "pps-prioritizer.h"
#include "pps-time.h"

#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

typedef struct {
	pps_player_t *player;
	pps_connection_t *connection;
	bool ended;
} audio_link_t;

/* One more connection to the same stream, carrying every window again. */
typedef struct {
	pps_player_t *player;
	pps_connection_t *connection;
	unsigned copy; /* the receiver's copy index, 1.. */
} video_link_t;

struct pps_player {
	pps_player_callbacks_t callbacks;
	void *user;
	bool ever_streamed;
	bool stopped;

	pps_connection_t *connection;
	pps_clock_t *clock;
	pps_receiver_t *receiver;
	pps_playout_t *playout;
	pps_stats_t *stats;
	struct event *play_timer;

	/* The audio track (params.audio): its player, and its own connection
	 * when the server sends audio on one. */
	struct event_base *base;
	pps_connection_params_t connection_params;
	pps_audio_player_t *audio;
	audio_link_t audio_links[PPS_AUDIO_MAX_CONNECTIONS];
	unsigned n_audio_links, audio_connections;
	bool audio_lip_sync; /* [audio] lip_sync: decides, by default, whether to pool */
	int audio_pool;      /* PPS_AUDIO_POOL_* */
	int64_t window_us;   /* the stream's window length, from its STREAM_INFO */

	/* [client] copies: the stream's windows arrive on this many
	 * connections; links to the copies beyond the first. */
	unsigned video_copies;
	video_link_t video_links[PPS_RECEIVER_MAX_COPIES - 1];
};

static uint32_t
window_frames(const pps_player_t *p)
{
	const pps_wire_stream_info_t *info = pps_receiver_info(p->receiver);

	return info ? info->window_frames : 1;
}

/* ---- playout -> show_cb ----------------------------------------------------- */

/* One frame's log record: shown at @display_us if @reason is NULL, else
 * not shown for @reason. */
static void
log_frame(pps_player_t *p, const pps_playout_frame_t *m, int64_t display_us, const char *reason)
{
	pps_stats_frame_t f = {
	    .window = m->window,
	    .frame = m->frame,
	    .capture_us = m->capture_us,
	    .display_us = reason ? 0 : display_us,
	    .temporal_layers = m->temporal_layers,
	    .quality_layers = m->quality_layers,
	    .shown = !reason,
	    .reason = reason,
	    .received_us = m->received_us,
	    .decoded_us = m->decoded_us,
	};

	pps_stats_frame(p->stats, &f);
}

static void
log_not_shown(pps_player_t *p, const pps_playout_frame_t *m, const char *reason)
{
	log_frame(p, m, 0, reason);
}

static void
playout_discard_cb(const pps_playout_frame_t *frame, const char *reason, void *user)
{
	log_not_shown(user, frame, reason);
}

static void
show(pps_player_t *p, pps_frame_t *picture, const pps_playout_frame_t *m)
{
	int64_t now = pps_time_realtime_us();

	if (!p->callbacks.show_cb(picture, m, now, p->user)) {
		log_not_shown(p, m, PPS_FRAME_OVERFLOW);
		return;
	}
	log_frame(p, m, now, NULL);
}

static void
arm_play_timer(pps_player_t *p)
{
	int64_t due = pps_playout_next_due_us(p->playout), wait;
	struct timeval tv;

	if (p->stopped)
		return;
	if (due == INT64_MAX) {
		event_del(p->play_timer);
		return;
	}
	wait = due - pps_time_realtime_us();
	tv = pps_time_us_to_timeval(wait);
	event_add(p->play_timer, &tv);
}

/* Shows every frame that is due, then waits for the next one. */
static void
play_due(pps_player_t *p)
{
	pps_playout_frame_t meta;
	pps_frame_t *picture;

	while (!p->stopped &&
	       (picture = pps_playout_pop_due(p->playout, pps_time_realtime_us(), &meta))) {
		show(p, picture, &meta);
		pps_frame_free(picture);
	}
	arm_play_timer(p);
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
	pps_player_t *p = user;
	const pps_decoded_frame_t *df = rf->decoded;
	int64_t now = pps_time_realtime_us();
	pps_playout_frame_t m = {
	    .window = pps_window_index_of_frame(df->frame_index, window_frames(p)),
	    .frame = df->frame_index,
	    .capture_us = pps_clock_to_client(p->clock, df->capture_us),
	    .received_us = rf->received_us,
	    .decoded_us = rf->decoded_us,
	    /* Layers counted from 1 in logs: "temporal_layers":3 = all three. */
	    .temporal_layers = df->temporal_layer + 1u,
	    .quality_layers = df->quality_layers,
	};
	int ret = pps_playout_push(p->playout, &df->picture, &m, now);

	if (ret == -ETIME)
		log_not_shown(p, &m, PPS_FRAME_LATE);
	else if (ret < 0)
		log_not_shown(p, &m, "out-of-memory");
	else if (pps_playout_next_due_us(p->playout) <= now)
		play_due(p); /* due already (asap): no trip through a timer */
	else
		arm_play_timer(p);
}

static void
receiver_missing_cb(const pps_receiver_missing_t *m, void *user)
{
	pps_player_t *p = user;

	pps_stats_missing(p->stats, window_frames(p), m->first_frame, m->count,
	                  m->first_capture_us ? pps_clock_to_client(p->clock, m->first_capture_us)
	                                      : 0,
	                  m->frame_interval_us, m->reason);
}

static void
receiver_window_cb(const pps_receiver_window_t *w, void *user)
{
	pps_player_t *p = user;
	int64_t first_capture =
	    w->first_capture_us ? pps_clock_to_client(p->clock, w->first_capture_us) : 0;
	pps_stats_window_t sw;

	pps_stats_window_from_receiver(w, &sw);
	sw.first_capture_us = first_capture;

	if (w->complete_us && strcmp(w->status, PPS_WINDOW_JOIN) != 0) {
		int64_t latency_us = w->complete_us - first_capture;
		int64_t delay_us = pps_playout_delay_us(p->playout);

		if (delay_us > 0 && latency_us > delay_us && pps_playout_drops_late(p->playout))
			sw.status = PPS_WINDOW_LATE;
		pps_playout_window(p->playout, latency_us);
	}
	pps_stats_window(p->stats, &sw);
}

/* ---- connection -> receiver / clock ---------------------------------------- */

/* ---- the audio connections ------------------------------------------------- */

static int
audio_record_cb(const pps_wire_record_t *r, char *err, size_t size, void *user)
{
	audio_link_t *l = user;
	pps_player_t *p = l->player;

	switch (r->kind) {
	case PPS_WIRE_STREAM_INFO:
		if (!r->u.stream_info.audio_codec) {
			snprintf(err, size,
			         "the audio connection's STREAM_INFO has no audio track");
			return -EPROTO;
		}
		/* The video's STREAM_INFO, checked, set the window length:
		 * an audio connection goes silent on the same terms. */
		pps_connection_stream_started(l->connection, p->window_us);
		return 0;
	case PPS_WIRE_AUDIO_FRAME:
		/* With several connections the first copy of a frame counts. */
		pps_audio_player_frame(p->audio, &r->u.audio_frame, pps_time_realtime_us(),
		                       (unsigned)(l - p->audio_links) + 1);
		return 0;
	case PPS_WIRE_CLOCK_PONG:
		/* The same server clock: one more sample for the offset. */
		(void)pps_clock_pong(p->clock, &r->u.clock_pong, pps_time_realtime_us());
		return 0;
	default:
		snprintf(err, size, "%s on the audio connection", pps_wire_kind_name(r->kind));
		return -EPROTO;
	}
}

static void
audio_closed_cb(const pps_connection_end_t *end, void *user)
{
	audio_link_t *l = user;
	pps_player_t *p = l->player;
	char event[320], why[256];
	bool any = false;

	/* The video goes on; the audio goes on while another of its
	 * connections does, else it is over until the next stream. */
	pps_stats_json_text(why, sizeof(why), end->why);
	snprintf(event, sizeof(event), "\"type\":\"audio_connection_ended\",\"why\":\"%s\"", why);
	pps_stats_event(p->stats, event);
	l->ended = true;
	for (unsigned i = 0; i < p->n_audio_links; i++)
		any |= !p->audio_links[i].ended;
	if (!any)
		pps_audio_player_reset(p->audio);
}

static void
stop_audio_connections(pps_player_t *p)
{
	for (unsigned i = 0; i < p->n_audio_links; i++) {
		if (!p->audio_links[i].connection)
			continue;
		pps_connection_stop(p->audio_links[i].connection);
		pps_connection_free(p->audio_links[i].connection);
		p->audio_links[i].connection = NULL;
	}
	p->n_audio_links = 0;
}

/* A pool's number: random, so that clients behind one address differ. */
static uint32_t
pps_random_u32(void)
{
	uint32_t v = 0;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v))
		v = (uint32_t)pps_time_monotonic_us() ^ ((uint32_t)getpid() << 16);
	return v;
}

/*
 * The stream's audio travels on connections of its own: open them. A loss
 * holds up the frames behind it on its own connection only (TCP delivers in
 * order), and the first copy of a frame to arrive is played. A server that
 * pools (STREAM_INFO's audio_copies) sends each frame on that many of the
 * pool's connections, those with nothing unacknowledged first; one that does
 * not sends every frame on each (and admits three). By default
 * (PPS_AUDIO_POOL_AUTO) the client pools only with lip sync off: with it on,
 * the audio waits for the picture anyway, and a pool's earlier audio then
 * follows the picture's latency up and down (its playout delay moved more in
 * the 20-flow runs, AUDIO.md).
 */
static int
start_audio_connections(pps_player_t *p, const pps_wire_stream_info_t *info, char *err, size_t size)
{
	static const pps_connection_callbacks_t callbacks = {
	    .record_cb = audio_record_cb,
	    .closed_cb = audio_closed_cb,
	};
	pps_connection_params_t cp = p->connection_params;
	unsigned n = p->audio_connections;

	stop_audio_connections(p);
	cp.hello_flags = PPS_WIRE_HELLO_AUDIO | PPS_WIRE_HELLO_AUDIO_ONLY;
	cp.reconnect = false;
	cp.audio_pool = 0;
	if (info->audio_copies && p->audio_pool != PPS_AUDIO_POOL_OFF &&
	    (p->audio_pool == PPS_AUDIO_POOL_ON || !p->audio_lip_sync)) {
		if (!n)
			n = PPS_AUDIO_POOL_CONNECTIONS;
		while (!cp.audio_pool)
			cp.audio_pool = pps_random_u32();
	} else {
		if (!n)
			n = PPS_AUDIO_COPY_CONNECTIONS;
		if (n > PPS_AUDIO_COPY_CONNECTIONS_MAX)
			n = PPS_AUDIO_COPY_CONNECTIONS_MAX;
	}
	for (unsigned i = 0; i < n; i++) {
		audio_link_t *l = &p->audio_links[i];

		l->player = p;
		l->ended = false;
		l->connection = pps_connection_new(p->base, &cp, &callbacks, l);
		if (!l->connection) {
			snprintf(err, size, "cannot open an audio connection: %s", strerror(errno));
			return -errno;
		}
		p->n_audio_links = i + 1;
		pps_connection_start(l->connection);
	}
	return 0;
}

/* ---- copies of the stream --------------------------------------------------- */

static int
copy_record_cb(const pps_wire_record_t *r, char *err, size_t size, void *user)
{
	video_link_t *l = user;
	pps_player_t *p = l->player;
	const pps_wire_stream_info_t *own = pps_receiver_info(p->receiver);

	switch (r->kind) {
	case PPS_WIRE_STREAM_INFO: {
		const pps_wire_stream_info_t *info = &r->u.stream_info;

		/* Another server behind the same address would number its
		 * windows its own way. */
		if (!own || info->width != own->width || info->height != own->height ||
		    info->fps_num != own->fps_num || info->fps_den != own->fps_den ||
		    info->window_frames != own->window_frames ||
		    info->quality_layers != own->quality_layers ||
		    info->temporal_layers != own->temporal_layers) {
			snprintf(err, size, "copy %u: STREAM_INFO differs from the stream's",
			         l->copy);
			return -EPROTO;
		}
		pps_connection_stream_started(l->connection, p->window_us);
		return 0;
	}
	case PPS_WIRE_WINDOW_BEGIN:
	case PPS_WIRE_ADU_FRAGMENT:
	case PPS_WIRE_WINDOW_END:
		return pps_receiver_record_copy(p->receiver, l->copy, r, err, size);
	case PPS_WIRE_CLOCK_PONG:
		(void)pps_clock_pong(p->clock, &r->u.clock_pong, pps_time_realtime_us());
		return 0;
	default:
		snprintf(err, size, "%s on a copy of the stream", pps_wire_kind_name(r->kind));
		return -EPROTO;
	}
}

static void
copy_bytes_cb(size_t bytes, void *user)
{
	video_link_t *l = user;

	pps_stats_bytes(l->player->stats, bytes, pps_time_realtime_us());
}

static void
copy_closed_cb(const pps_connection_end_t *end, void *user)
{
	video_link_t *l = user;
	pps_player_t *p = l->player;
	char event[320], why[256];

	/* The stream goes on over its own connection and the other copies. */
	pps_stats_json_text(why, sizeof(why), end->why);
	snprintf(event, sizeof(event),
	         "\"type\":\"copy_connection_ended\",\"copy\":%u,\"why\":\"%s\"", l->copy, why);
	pps_stats_event(p->stats, event);
	pps_receiver_drop_copy(p->receiver, l->copy);
}

static void
stop_copies(pps_player_t *p)
{
	for (unsigned i = 0; i + 1 < PPS_RECEIVER_MAX_COPIES; i++) {
		video_link_t *l = &p->video_links[i];

		if (!l->connection)
			continue;
		pps_connection_stop(l->connection);
		pps_connection_free(l->connection);
		l->connection = NULL;
		pps_receiver_drop_copy(p->receiver, l->copy);
	}
}

/*
 * More connections to the stream ([client] copies), each a viewer of its
 * own at the server, video only: every window arrives on each, and the first
 * to bring an ADU or end a window decides (pps_receiver_record_copy). TCP
 * delivers in order, so a loss holds up what follows it on its own
 * connection only.
 */
static int
start_copies(pps_player_t *p, char *err, size_t size)
{
	/* The copies' bytes count in the received rate: what the stream takes
	 * of the path. */
	static const pps_connection_callbacks_t callbacks = {
	    .record_cb = copy_record_cb,
	    .bytes_cb = copy_bytes_cb,
	    .closed_cb = copy_closed_cb,
	};
	pps_connection_params_t cp = p->connection_params;

	stop_copies(p);
	cp.hello_flags &= (uint16_t)~PPS_WIRE_HELLO_AUDIO;
	cp.hello_flags |= PPS_WIRE_HELLO_COPY | PPS_WIRE_HELLO_COPY_REST;
	cp.reconnect = false;
	cp.audio_pool = 0;
	for (unsigned i = 0; i + 1 < p->video_copies && i + 1 < PPS_RECEIVER_MAX_COPIES; i++) {
		video_link_t *l = &p->video_links[i];

		l->player = p;
		l->copy = i + 1;
		l->connection = pps_connection_new(p->base, &cp, &callbacks, l);
		if (!l->connection) {
			int e = errno;

			snprintf(err, size, "cannot open copy %u of the stream: %s", l->copy,
			         strerror(e));
			return -e;
		}
		pps_connection_start(l->connection);
	}
	return 0;
}

static int
handle_stream_info(pps_player_t *p, const pps_wire_stream_info_t *info, char *err, size_t size)
{
	int ret = pps_receiver_stream_info(p->receiver, info, err, size);

	if (ret < 0)
		return ret;
	/* The receiver checked the frame rate: fps_num is not 0. */
	p->window_us = (int64_t)1000000 * info->fps_den * info->window_frames / info->fps_num;
	if (p->audio && info->audio_codec) {
		ret = pps_audio_player_stream(p->audio, info, err, size);
		if (ret < 0)
			return ret;
		if (info->audio_transport == PPS_WIRE_AUDIO_OWN_CONNECTION &&
		    (ret = start_audio_connections(p, info, err, size)) < 0)
			return ret;
	}
	if (p->video_copies > 1 && (ret = start_copies(p, err, size)) < 0)
		return ret;
	pps_playout_set_stream(p->playout, (int64_t)info->latency_budget_ms * 1000, p->window_us);
	p->ever_streamed = true;
	pps_connection_stream_started(p->connection, p->window_us);
	pps_stats_stream(p->stats, info);
	if (p->callbacks.stream_cb)
		p->callbacks.stream_cb(info, p->user);
	return 0;
}

static void
handle_pong(pps_player_t *p, const pps_wire_clock_pong_t *pong)
{
	char event[256];

	if (pps_clock_pong(p->clock, pong, pps_time_realtime_us()) < 0)
		return;
	pps_playout_set_rtt(p->playout, pps_clock_best_rtt_us(p->clock));
	snprintf(event, sizeof(event),
	         "\"type\":\"clock\",\"seq\":%" PRIu32 ",\"rtt_us\":%" PRId64
	         ",\"offset_us\":%" PRId64 ",\"best_offset_us\":%" PRId64
	         ",\"uncertainty_us\":%" PRId64,
	         pong->seq, pps_clock_last_rtt_us(p->clock),
	         ((pong->server_recv_us - pong->client_send_us) +
	          (pong->server_send_us - pps_time_realtime_us())) /
	             2,
	         pps_clock_offset_us(p->clock), pps_clock_best_rtt_us(p->clock) / 2);
	pps_stats_event(p->stats, event);
}

static int
connection_record_cb(const pps_wire_record_t *r, char *err, size_t size, void *user)
{
	pps_player_t *p = user;

	if (!pps_receiver_info(p->receiver) && r->kind != PPS_WIRE_STREAM_INFO) {
		snprintf(err, size, "%s before STREAM_INFO", pps_wire_kind_name(r->kind));
		return -EPROTO;
	}
	switch (r->kind) {
	case PPS_WIRE_STREAM_INFO:
		return handle_stream_info(p, &r->u.stream_info, err, size);
	case PPS_WIRE_WINDOW_BEGIN:
	case PPS_WIRE_ADU_FRAGMENT:
	case PPS_WIRE_WINDOW_END:
		return pps_receiver_record(p->receiver, r, err, size);
	case PPS_WIRE_CLOCK_PONG:
		handle_pong(p, &r->u.clock_pong);
		return 0;
	case PPS_WIRE_AUDIO_FRAME:
		if (!p->audio || !pps_receiver_info(p->receiver)->audio_codec) {
			snprintf(err, size, "AUDIO_FRAME in a stream without an audio track");
			return -EPROTO;
		}
		pps_audio_player_frame(p->audio, &r->u.audio_frame, pps_time_realtime_us(), 0);
		return 0;
	default:
		snprintf(err, size, "%s is a client record", pps_wire_kind_name(r->kind));
		return -EPROTO;
	}
}

static void
connection_bytes_cb(size_t bytes, void *user)
{
	pps_player_t *p = user;

	pps_stats_bytes(p->stats, bytes, pps_time_realtime_us());
}

static void
connection_closed_cb(const pps_connection_end_t *end, void *user)
{
	pps_player_t *p = user;

	/* What the decoder holds comes out; the frames waiting for their
	 * display time still get it. */
	pps_receiver_finish(p->receiver);
	stop_audio_connections(p);
	stop_copies(p);
	if (p->audio)
		pps_audio_player_reset(p->audio);
	if (end->retry_in_us > 0) {
		pps_receiver_reset(p->receiver);
		pps_clock_reset(p->clock);
	}
	p->callbacks.closed_cb(end, p->user);
}

/* ---- the object ------------------------------------------------------------- */

pps_player_t *
pps_player_new(struct event_base *base, const pps_player_params_t *params,
               const pps_player_callbacks_t *callbacks, void *user)
{
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
	pps_player_t *p;

	if (!base || !params || !callbacks || !callbacks->show_cb || !callbacks->closed_cb) {
		errno = EINVAL;
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		errno = ENOMEM;
		return NULL;
	}
	p->callbacks = *callbacks;
	p->user = user;
	p->base = base;
	p->connection_params = params->connection;
	p->audio_connections = params->audio_params.connections; /* 0: the default */
	p->audio_lip_sync = params->audio_params.lip_sync;
	p->audio_pool = params->audio_params.pool;
	p->video_copies = params->copies;
	if (p->audio_connections > PPS_AUDIO_MAX_CONNECTIONS)
		p->audio_connections = PPS_AUDIO_MAX_CONNECTIONS;
	if (params->audio)
		p->connection_params.hello_flags |= PPS_WIRE_HELLO_AUDIO;
	/* Each part sets errno when it fails (EINVAL for a policy, clock mode or
	 * connection parameter out of range, ENOMEM): that is the player's. */
	if (!(p->playout =
	          pps_playout_new(params->policy, params->tolerance_us, playout_discard_cb, p)) ||
	    !(p->stats = pps_stats_new(params->log, 30)) ||
	    !(p->clock = pps_clock_new(params->clock_mode)) ||
	    !(p->receiver = pps_receiver_new(&receiver_callbacks, pps_client_realtime_us, p)) ||
	    !(p->connection =
	          pps_connection_new(base, &p->connection_params, &connection_callbacks, p)))
		goto err_free;
	if (params->audio) {
		char why[256];

		p->audio =
		    pps_audio_player_new(base, &params->audio_params, p->clock, p->stats,
		                         &(pps_audio_callbacks_t){.pcm_cb = params->audio_pcm_cb},
		                         user, why, sizeof(why));
		if (!p->audio)
			goto err_free;
	}
	pps_stats_start(p->stats, &(pps_stats_start_t){
	                              .program = params->program ? params->program : "pps_player",
	                              .server = params->connection.server,
	                              .policy = pps_playout_policy_name(params->policy),
	                          });
	if (!(p->play_timer = evtimer_new(base, play_timer_cb, p))) {
		errno = ENOMEM;
		goto err_free;
	}
	return p;

err_free : {
	int saved = errno;

	pps_player_free(p);
	errno = saved;
	return NULL;
}
}

void
pps_player_free(pps_player_t *p)
{
	if (!p)
		return;
	stop_audio_connections(p);
	stop_copies(p);
	pps_audio_player_free(p->audio);
	pps_connection_free(p->connection);
	pps_receiver_free(p->receiver);
	pps_clock_free(p->clock);
	pps_stats_free(p->stats);
	pps_playout_free(p->playout);
	if (p->play_timer)
		event_free(p->play_timer);
	free(p);
}

void
pps_player_start(pps_player_t *p)
{
	pps_connection_start(p->connection);
}

void
pps_player_stop(pps_player_t *p)
{
	if (p->stopped)
		return;
	pps_connection_stop(p->connection);
	stop_audio_connections(p);
	stop_copies(p);
	if (p->audio)
		pps_audio_player_reset(p->audio);
	/* The decoder's last frames come out: shown if due already (asap), as
	 * pps-client always did; the rest are logged stopped. */
	pps_receiver_finish(p->receiver);
	p->stopped = true;
	event_del(p->play_timer);
	pps_playout_flush(p->playout);
}

bool
pps_player_ever_streamed(const pps_player_t *p)
{
	return p->ever_streamed;
}

const pps_wire_stream_info_t *
pps_player_info(const pps_player_t *p)
{
	return pps_receiver_info(p->receiver);
}

pps_stats_t *
pps_player_stats(pps_player_t *p)
{
	return p->stats;
}

const pps_clock_t *
pps_player_clock(const pps_player_t *p)
{
	return p->clock;
}

const pps_playout_t *
pps_player_playout(const pps_player_t *p)
{
	return p->playout;
}

const pps_audio_player_t *
pps_player_audio(const pps_player_t *p)
{
	return p->audio;
}
