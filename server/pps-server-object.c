/* SPDX-License-Identifier: MIT */
/*
 * The server as one object: the media's windows go to every client through
 * the listener, the clients' IDR requests (within the recovery bounds) to the
 * encoder, their path estimates to the closed loop. A failed source is
 * announced by the media's own event, as soon as the loop runs.
 */
#include "pps-server-lib.h"
#include "pps-relay.h"

#include <errno.h>
#include <glib.h>
#include <event2/event.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct pps_server {
	struct event_base *base;
	pps_server_params_t params;
	pps_server_events_t events;
	void *user;
	pps_server_state_t state;
	pps_media_t *media;
	pps_listener_t *listener;
	pps_adapt_loop_t *adapt; /* NULL without the closed loop */
	pps_server_log_t *log;   /* NULL without a log file */
	pps_server_report_t *report;
	pps_server_metrics_t *metrics; /* NULL: GET /metrics is off */
	pps_record_t *record;          /* NULL without --record */
	int record_failed;             /* the recorder's write error, said at finish */
	char record_error[512];        /* ... in words */
	pps_wire_stream_info_t info;
	unsigned port;
	char listen[80];              /* as bound */
	bool publishing;              /* params.publish: the relay is the one client */
	pps_tls_ctx_t *relay_tls_ctx; /* params.relay_tls: the client side, to the relay */
	const char *publish_token;    /* answers the relay's challenge */
};

const char *
pps_server_state_name(pps_server_state_t state)
{
	switch (state) {
	case PPS_SERVER_STATE_READY:
		return "ready";
	case PPS_SERVER_STATE_STREAMING:
		return "streaming";
	case PPS_SERVER_STATE_STOPPED:
		return "stopped";
	case PPS_SERVER_STATE_FAILED:
		return "failed";
	}
	return "?";
}

static void
set_state(pps_server_t *s, pps_server_state_t state, const char *error)
{
	pps_server_state_t old = s->state;

	if (old == state || old == PPS_SERVER_STATE_FAILED)
		return;
	s->state = state;
	if (s->events.state_cb)
		s->events.state_cb(old, state, error, s->user);
}

static void
window_cb(pps_window_t *window, void *user)
{
	pps_server_t *s = user;

	if (s->log && !pps_window_is_open(window))
		pps_server_log_window(s->log, window);
	pps_adapt_loop_window_ready(s->adapt);
	pps_listener_push_window(s->listener, window);
	pps_window_unref(window);
}

static void
window_grew_cb(pps_window_t *window, void *user)
{
	pps_server_t *s = user;

	if (s->log && !pps_window_is_open(window))
		pps_server_log_window(s->log, window);
	pps_listener_window_grew(s->listener, window);
}

static void
audio_cb(const pps_wire_audio_frame_t *frame, void *user)
{
	pps_server_t *s = user;

	pps_listener_push_audio(s->listener, frame);
}

static void
adu_cb(const pps_adu_t *adu, void *user)
{
	pps_server_t *s = user;
	int ret;

	if (!s->record)
		return;
	ret = pps_record_adu(s->record, adu, s->record_error, sizeof(s->record_error));
	if (ret < 0) {
		/* Said once; the stream goes on without the recording. */
		pps_log(&s->params.log, PPS_LOG_ERROR, "%s; recording stopped", s->record_error);
		s->record_failed = ret;
		pps_record_free(s->record);
		s->record = NULL;
	}
}

static void
media_failed_cb(const char *error, void *user)
{
	pps_server_t *s = user;

	pps_log(&s->params.log, PPS_LOG_ERROR, "source failed: %s", error);
	set_state(s, PPS_SERVER_STATE_FAILED, error);
}

static void
idr_cb(void *user)
{
	pps_server_t *s = user;

	pps_media_request_idr(s->media);
}

static void
joined_cb(pps_session_t *session, void *user)
{
	pps_server_t *s = user;

	pps_adapt_loop_joined(s->adapt, session);
}

static void
left_cb(pps_session_t *session, void *user)
{
	pps_server_t *s = user;

	if (s->report)
		pps_server_report_client_left(s->report, session);
	if (s->publishing) {
		char why[160];

		snprintf(why, sizeof(why), "the connection to the relay %s ended",
		         s->params.publish);
		pps_log(&s->params.log, PPS_LOG_ERROR, "%s", why);
		set_state(s, PPS_SERVER_STATE_FAILED, why);
	}
}

/* The sessions are made before the metrics object (at start). */
static bool
metrics_page_cb(const pps_ws_request_t *request, pps_web_page_t *page, void *user)
{
	pps_server_t *s = user;

	return s->metrics && pps_server_metrics_page_cb(request, page, s->metrics);
}

pps_server_t *
pps_server_new(struct event_base *base, const pps_server_params_t *params,
               const pps_server_events_t *events, void *user, char *err, size_t err_size)
{
	static const pps_media_events_t media_events = {
	    .window_cb = window_cb,
	    .window_grew_cb = window_grew_cb,
	    .failed_cb = media_failed_cb,
	    .audio_cb = audio_cb,
	    .adu_cb = adu_cb,
	};
	pps_server_t *s = calloc(1, sizeof(*s));
	pps_listener_params_t *lp;
	int saved;

	if (!s) {
		snprintf(err, err_size, "out of memory");
		return NULL;
	}
	s->base = base;
	s->params = *params;
	s->params.media.log = params->log;
	s->params.listener.log = params->log;
	s->params.adapt.log = params->log;
	if (events)
		s->events = *events;
	s->user = user;
	s->state = PPS_SERVER_STATE_READY;
	if (params->publish && params->publish[0]) {
		/* The relay takes the audio in the windows of the one connection,
		 * or (publish_audio_own) on a connection of its own. */
		s->publishing = true;
		s->publish_token = params->listener.session.access_token;
		s->params.listener.session.access_token = NULL;
		s->params.media.audio.transport = params->publish_audio_own
		                                      ? PPS_WIRE_AUDIO_OWN_CONNECTION
		                                      : PPS_WIRE_AUDIO_IN_STREAM;
	}
	s->media =
	    params->pushed
	        ? pps_media_new_pushed(base, &s->params.media, &media_events, s, err, err_size)
	        : pps_media_new(base, &s->params.media, &media_events, s, err, err_size);
	if (!s->media)
		goto err;
	pps_media_stream_info(s->media, &s->info);
	if (params->record_path && params->record_path[0]) {
		s->record = pps_record_new(params->record_path, &s->info, err, err_size);
		if (!s->record)
			goto err;
	}
	lp = &s->params.listener;
	lp->session.stream_info = s->info;
	lp->frame_duration_us = (int64_t)s->info.fps_den * 1000000 / s->info.fps_num;
	if (params->metrics != PPS_SERVER_METRICS_OFF)
		lp->session.web_pages = (pps_web_pages_t){.page_cb = metrics_page_cb, .user = s};
	s->listener =
	    pps_listener_new(base, lp,
	                     &(pps_listener_callbacks_t){
	                         .idr_cb = idr_cb, .left_cb = left_cb, .joined_cb = joined_cb},
	                     s);
	if (!s->listener) {
		snprintf(err, err_size, "cannot create the listener: %s", strerror(errno));
		goto err;
	}
	if (params->log_path && params->log_path[0]) {
		s->log = pps_server_log_new(base, params->log_path, s->info.quality_layers,
		                            s->media, s->listener, err, err_size);
		if (!s->log)
			goto err;
	}
	if (params->closed_loop || params->adapt.b_frames.policy != PPS_B_FRAMES_ALWAYS) {
		s->adapt = pps_adapt_loop_new(base, &s->params.adapt, &s->info,
		                              lp->session.sched.latency_budget_us, s->media,
		                              s->listener, err, err_size);
		if (!s->adapt)
			goto err;
	}
	return s;

err:
	saved = errno ? errno : EINVAL;
	pps_server_free(s);
	errno = saved;
	return NULL;
}

/* The relay's side of a connection to it, between its connect and its
 * session. */
typedef struct {
	int fd; /* -1: none */
	pps_tls_t *tls;
	struct sockaddr_storage addr;
	socklen_t addr_len;
	uint8_t hello[PPS_RELAY_HELLO_BYTES]; /* the relay's HELLO, the session's first record */
	size_t hello_len;
} relay_conn_t;

/* The stream's connection to the relay (@audio: its audio's, after the
 * stream's own; a thin stream of its own). 0, or a negative errno with
 * @err. */
static int
relay_connect(pps_server_t *s, bool audio, relay_conn_t *c, char *err, size_t err_size)
{
	c->fd = -1;
	c->tls = NULL;
	return pps_relay_publish_connect(s->params.publish, audio, s->publish_token,
	                                 s->relay_tls_ctx, PPS_DEFAULT_HELLO_TIMEOUT_US, &c->fd,
	                                 &c->tls, &c->addr, &c->addr_len, c->hello,
	                                 sizeof(c->hello), &c->hello_len, err, err_size);
}

/* Hands @c to the listener, which owns it from then on, or frees it. */
static int
relay_serve(pps_server_t *s, relay_conn_t *c)
{
	int ret = pps_listener_add_routed(s->listener, c->fd, (struct sockaddr *)&c->addr,
	                                  c->addr_len, c->tls, c->hello, c->hello_len);

	c->fd = -1;
	c->tls = NULL;
	return ret;
}

int
pps_server_start(pps_server_t *s, char *err, size_t err_size)
{
	int ret;

	if (s->state != PPS_SERVER_STATE_READY) {
		snprintf(err, err_size, "the server is %s", pps_server_state_name(s->state));
		return -EINVAL;
	}
	/* The source first: one that cannot start is the only thing said, and
	 * nothing has announced an address that would serve nothing. */
	ret = pps_media_start(s->media, err, err_size);
	if (ret < 0)
		return ret;
	if (s->publishing) {
		relay_conn_t stream, audio = {.fd = -1};
		bool stream_tls, audio_own;
		char why[256];

		if (s->params.relay_tls && !s->relay_tls_ctx) {
			s->relay_tls_ctx =
			    pps_tls_ctx_new_client(s->params.relay_tls_ca, why, sizeof(why));
			if (!s->relay_tls_ctx) {
				snprintf(err, err_size, "[server] relay_tls_ca: %s", why);
				return -EINVAL;
			}
		}
		ret = relay_connect(s, false, &stream, err, err_size);
		if (ret < 0)
			return ret;
		stream_tls = stream.tls != NULL;
		/* The audio on a connection of its own, if asked for: a relay
		 * that does not take it (one before this connection existed
		 * refuses the name as taken) gets it in the windows. */
		if (s->info.audio_codec &&
		    s->info.audio_transport == PPS_WIRE_AUDIO_OWN_CONNECTION &&
		    relay_connect(s, true, &audio, why, sizeof(why)) < 0) {
			pps_log(
			    &s->params.log, PPS_LOG_WARNING,
			    "the relay did not take an audio connection (%s): the audio goes in "
			    "the windows",
			    why);
			pps_listener_set_audio_transport(s->listener, PPS_WIRE_AUDIO_IN_STREAM);
		}
		audio_own = audio.fd >= 0;
		ret = relay_serve(s, &stream);
		if (ret < 0) {
			snprintf(err, err_size, "cannot serve the relay: %s", strerror(-ret));
			pps_tls_free(audio.tls);
			if (audio.fd >= 0)
				close(audio.fd);
			return ret;
		}
		if (audio_own && (ret = relay_serve(s, &audio)) < 0)
			pps_log(&s->params.log, PPS_LOG_WARNING,
			        "the relay's audio connection could not be served (%s): no audio",
			        strerror(-ret));
		pps_log(&s->params.log, PPS_LOG_INFO, "publishing to %s%s%s", s->params.publish,
		        stream_tls ? " over TLS" : "",
		        !s->info.audio_codec ? ""
		        : audio_own          ? ", the audio on a connection of its own"
		                             : ", the audio in the windows");
	} else {
		ret = pps_listener_listen(s->listener, s->params.listen, &s->port, err, err_size);
		if (ret < 0)
			return ret;
	}
	{
		const char *colon = strrchr(s->params.listen, ':');
		int host_len = colon ? (int)(colon - s->params.listen) : 0;
		pps_server_report_start_t start = {
		    .listen = s->listen,
		    .source = s->params.pushed
		                  ? "pushed"
		                  : pps_capture_source_names[s->params.media.capture.type],
		    .transport = pps_minbuf_mode_name(s->params.listener.session.transport.mode),
		    .tls = s->params.listener.tls_cert && s->params.listener.tls_cert[0],
		    .audio = pps_media_has_audio(s->media),
		    .info = s->info,
		    .metrics = pps_server_metrics_mode_names[s->params.metrics],
		};

		snprintf(s->listen, sizeof(s->listen), "%.*s:%u", host_len, s->params.listen,
		         s->port);
		s->report = pps_server_report_new(s->media, s->listener, s->info.quality_layers,
		                                  s->adapt != NULL, &start);
	}
	if (!s->report) {
		snprintf(err, err_size, "out of memory");
		return -ENOMEM;
	}
	if (s->params.metrics != PPS_SERVER_METRICS_OFF) {
		s->metrics = pps_server_metrics_new(s->report, s->params.metrics,
		                                    s->params.listener.session.access_token);
		if (!s->metrics) {
			snprintf(err, err_size,
			         errno == EINVAL ? "[server] metrics = token needs an access_token"
			                         : "out of memory");
			return -errno;
		}
	}
	if (s->log) {
		char *start = pps_server_report_start_json(s->report);

		pps_server_log_record(s->log, start);
		g_free(start);
	}
	set_state(s, PPS_SERVER_STATE_STREAMING, NULL);
	return 0;
}

void
pps_server_stop(pps_server_t *s)
{
	pps_media_stop(s->media);
	set_state(s, PPS_SERVER_STATE_STOPPED, NULL);
}

void
pps_server_say_bye(pps_server_t *s, const char *text)
{
	pps_listener_say_bye_all(s->listener, PPS_WIRE_BYE_NORMAL, text);
}

int
pps_server_push_frame(pps_server_t *s, const pps_frame_t *frame)
{
	return pps_media_push_frame(s->media, frame);
}

int
pps_server_push_audio(pps_server_t *s, const int16_t *pcm, size_t samples, int64_t capture_us)
{
	return pps_media_push_audio(s->media, pcm, samples, capture_us);
}

pps_server_state_t
pps_server_state(const pps_server_t *s)
{
	return s->state;
}

unsigned
pps_server_port(const pps_server_t *s)
{
	return s->port;
}

const pps_wire_stream_info_t *
pps_server_stream_info(const pps_server_t *s)
{
	return &s->info;
}

void
pps_server_describe(const pps_server_t *s, char *buf, size_t size)
{
	const pps_wire_stream_info_t *si = &s->info;

	snprintf(buf, size,
	         "%s source %ux%u@%u, %u temporal x %u quality layers, window %u frames, "
	         "budget %u ms, %s transport",
	         s->params.pushed ? "pushed"
	                          : pps_capture_source_names[s->params.media.capture.type],
	         si->width, si->height, si->fps_num, si->temporal_layers, si->quality_layers,
	         si->window_frames, si->latency_budget_ms,
	         pps_minbuf_mode_name(s->params.listener.session.transport.mode));
}

void
pps_server_get_stats(const pps_server_t *s, pps_media_stats_t *media,
                     pps_listener_stats_t *listener)
{
	if (media)
		pps_media_get_stats(s->media, media);
	if (listener)
		pps_listener_get_stats(s->listener, listener);
}

void
pps_server_write_status(pps_server_t *s, FILE *out)
{
	if (s->report)
		pps_server_report_status(s->report, out);
}

int
pps_server_finish(pps_server_t *s, FILE *out, FILE *stats_json, const char *stats_json_name,
                  char *err, size_t err_size)
{
	int ret = 0, log_ret;

	if (s->report)
		ret = pps_server_report_final(s->report, out, stats_json, stats_json_name,
		                              s->log ? pps_server_log_file(s->log) : NULL, err,
		                              err_size);
	if (s->record_failed && ret == 0) {
		snprintf(err, err_size, "%s", s->record_error);
		ret = s->record_failed;
	}
	if (s->record) {
		pps_record_stats_t rs;
		char record_err[512];
		int record_ret = pps_record_finish(s->record, &rs, record_err, sizeof(record_err));

		if (record_ret < 0 && ret == 0) {
			snprintf(err, err_size, "%s", record_err);
			ret = record_ret;
		} else if (record_ret == 0 && out) {
			fprintf(out,
			        "pps-server: --record %s: %.3f s, %" PRIu64
			        " pictures in %u H.264 tracks (one per quality layer)",
			        s->params.record_path, (double)rs.duration_us / 1e6, rs.pictures,
			        s->info.quality_layers);
			if (rs.pictures_retimed)
				fprintf(out, ", %" PRIu64 " capture times that went back moved up",
				        rs.pictures_retimed);
			fputc('\n', out);
		}
		pps_record_free(s->record);
		s->record = NULL;
	}
	if (s->log) {
		const char *path = pps_server_log_path(s->log);
		char line[512];

		snprintf(line, sizeof(line), "%s", path);
		log_ret = pps_server_log_close(s->log);
		s->log = NULL;
		if (log_ret < 0 && ret == 0) {
			snprintf(err, err_size, "--log %s: %s", line, strerror(-log_ret));
			ret = log_ret;
		}
	}
	return ret;
}

void
pps_server_free(pps_server_t *s)
{
	if (!s)
		return;
	if (s->media)
		pps_media_stop(s->media);
	pps_server_metrics_free(s->metrics);
	pps_server_report_free(s->report);
	pps_record_free(s->record);
	pps_listener_free(s->listener);
	pps_adapt_loop_free(s->adapt);
	(void)pps_server_log_close(s->log);
	pps_media_free(s->media);
	pps_tls_ctx_free(s->relay_tls_ctx);
	free(s);
}
