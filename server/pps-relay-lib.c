/* SPDX-License-Identifier: MIT */
/*
 * The relay: the door (accepting, reading each HELLO, routing), the stream
 * table, each stream's publisher (reading its records and rebuilding its
 * windows) and its listener. pps-relay.h says what it does; docs/RELAY.md
 * what it does not do yet.
 */
#include "pps-relay.h"

#include "pps-socket.h"
#include "pps-time.h"
#include "pps-tls.h"
#include "pps-transport.h"
#include "pps-web.h"
#include "pps-websocket.h"

#include <errno.h>
#include <event2/event.h>
#include <stdarg.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define HELLO_TIMEOUT_US PPS_DEFAULT_HELLO_TIMEOUT_US
/* A stream whose publisher left keeps its listener this long, for the BYE
 * to reach its subscribers. */
#define STREAM_LINGER_US 500000
/* Bytes read from a publisher per wake-up. */
#define PUBLISHER_READ_BYTES 65536
/* An upstream (pps_relay_upstream()) that was lost, or could not be
 * reached, is tried again after this, doubling up to the maximum; a stream
 * that lasted UPSTREAM_STABLE_US starts the series again. */
#define UPSTREAM_RETRY_FIRST_US 500000
#define UPSTREAM_RETRY_MAX_US   5000000
#define UPSTREAM_STABLE_US      10000000
/* A browser's HTTP exchange with the relay itself (a page, the stream
 * list): done within this, or closed. */
#define WEB_EXCHANGE_US 10000000

typedef struct relay_stream relay_stream_t;
typedef struct upstream upstream_t;

/* A connection whose HELLO is being read (or, for a publisher, whose AUTH). */
typedef struct door_conn {
	pps_relay_t *relay;
	struct door_conn *next;
	int fd;
	struct sockaddr_storage addr;
	socklen_t addr_len;
	char peer[NI_MAXHOST + NI_MAXSERV + 4];
	struct event *read_event;
	struct event *timer;
	pps_wire_parser_t *parser;
	/* A HELLO (PPS_RELAY_HELLO_BYTES at most) or a browser's request head. */
	uint8_t buf[PPS_WS_MAX_REQUEST_BYTES];
	size_t len;    /* bytes in buf */
	bool http;     /* an HTTP request came first */
	size_t parsed; /* of them, fed to the parser */
	bool await_auth;
	pps_wire_hello_t hello;
	uint8_t nonce[PPS_WIRE_NONCE_BYTES];
	/* TLS (the relay has a certificate and the peer's first byte began a
	 * handshake): the door reads plaintext through it, then hands it on. */
	pps_tls_t *tls;
	struct event *write_event; /* the handshake's, when the socket was full */
} door_conn_t;

/* A browser's HTTP exchange with the relay itself: a page of web/, the
 * stream list, or the error that answers a WebSocket for a stream that is
 * not here. The browser layer over a plain socket transport answers it. */
typedef struct web_conn {
	pps_relay_t *relay;
	struct web_conn *next;
	int fd;
	pps_transport_t *t;
	/* The exchange's bound; made active when the exchange is over, so the
	 * connection is freed from the loop, never inside its own callback. */
	struct event *timer;
} web_conn_t;

/* An ADU whose fragments are coming in. */
typedef struct {
	bool used;
	uint32_t adu_id;
	pps_adu_info_t info;
	uint8_t *data;
	uint32_t total, filled;
} assembling_t;

struct relay_stream {
	pps_relay_t *relay;
	relay_stream_t *next;
	char name[PPS_WIRE_MAX_STREAM_BYTES + 1];
	char peer[NI_MAXHOST + NI_MAXSERV + 4]; /* the publisher's */
	int fd;                                 /* the publisher's; -1 once it left */
	pps_tls_t *tls; /* on that connection (a publisher or an upstream over TLS); NULL: none */
	struct event *read_event;
	struct event *linger;
	struct event *report_timer; /* PATH_REPORT upstream, from STREAM_INFO on */
	pps_wire_parser_t *parser;
	bool have_info;
	/* Subscribed to another relay (pps_relay_upstream()): it may challenge
	 * before STREAM_INFO, answered with its token; when the stream ends
	 * the upstream is tried again. NULL for a publisher's stream. */
	upstream_t *upstream;
	bool answered;
	pps_wire_stream_info_t info;
	pps_listener_t *listener; /* from STREAM_INFO on */
	/* The window being received, forwarded as it comes (cut-through): the
	 * subscribers get it from its first whole ADU on. */
	bool window_open;
	bool any_window;
	uint32_t last_window_id;
	pps_wire_window_begin_t begin;
	pps_window_t *window; /* NULL for a window announcing no ADU */
	bool window_pushed;   /* handed to the listener */
	bool window_grew;     /* ADUs joined it since the viewers were told */
	size_t window_bytes;
	assembling_t assembling[PPS_RELAY_ASSEMBLING_ADUS];
	uint32_t last_frame_index;
	/* The publisher's host, for its audio connection (the same host only). */
	struct sockaddr_storage addr;
	socklen_t addr_len;
	/* The publisher's audio on a connection of its own (a thin stream on
	 * its side): AUDIO_FRAMEs only, pushed as the stream's own are; -1
	 * while there is none. */
	int audio_fd;
	pps_tls_t *audio_tls;
	struct event *audio_event;
	pps_wire_parser_t *audio_parser;
};

/* A stream this relay takes from another (--upstream): connected from the
 * loop, tried again with a backoff whenever it is lost or unreachable; its
 * name is kept for it meanwhile (a publisher cannot take it). */
struct upstream {
	pps_relay_t *relay;
	upstream_t *next;
	char location[320]; /* HOST:PORT/NAME, for the log */
	char name[PPS_WIRE_MAX_STREAM_BYTES + 1];
	const char *token;
	struct sockaddr_storage addr; /* resolved once, at start */
	socklen_t addr_len;
	char host[256];          /* the certificate must be valid for it (relay_tls) */
	int fd;                  /* while connecting; the stream's once it is up */
	pps_tls_t *tls;          /* while its handshake runs; then the stream's */
	struct event *connected; /* the connecting socket's EV_WRITE */
	struct event *timer;     /* the next try, or the connect's bound */
	relay_stream_t *stream;  /* up: the stream; NULL while down */
	int64_t retry_us;        /* the next delay */
	int64_t began_us;        /* when the current stream began */
	unsigned tries;          /* failed in a row */
	bool was_up;             /* a stream came at least once */
	char last_why[160];      /* why it is down */
};

struct pps_relay {
	struct event_base *base;
	pps_relay_params_t params;
	pps_tls_ctx_t *tls_ctx;          /* listener.tls_cert and tls_key; NULL: plaintext only */
	pps_tls_ctx_t *upstream_tls_ctx; /* params.relay_tls: the client side, upstream */
	int listen_fd;
	struct event *accept_event;
	door_conn_t *door;
	unsigned n_door;
	web_conn_t *web; /* HTTP exchanges with the relay itself */
	unsigned n_web;
	upstream_t *upstreams;
	relay_stream_t *streams; /* published (a publisher connected) */
	relay_stream_t *dying;   /* publisher gone, lingering for the BYEs */
	pps_relay_stats_t stats;
	pps_log_limit_t peer_log_limit;
	pps_log_t peer_log;
};

static int64_t
limit_clock_cb(void *user)
{
	(void)user;
	return pps_time_monotonic_us();
}

/* A record now on a connection that is TLS (@tls) or plaintext: 0, or a
 * negative errno. Over TLS a tail the socket did not take is kept and goes
 * with the next record (pps_tls_send()). */
static int
say_record(int fd, pps_tls_t *tls, const pps_wire_record_t *rec)
{
	uint8_t buf[PPS_WIRE_HEADER_BYTES + 512];
	size_t n;
	int ret;

	if (!tls)
		return pps_server_write_record_now(fd, rec);
	if (pps_wire_encode(rec, buf, sizeof(buf), &n) < 0)
		return -EINVAL;
	ret = pps_tls_send(tls, buf, n);
	return ret == -EAGAIN ? 0 : ret;
}

static void
send_bye(int fd, pps_tls_t *tls, pps_wire_bye_reason_t reason, const char *text)
{
	pps_wire_record_t bye = {.kind = PPS_WIRE_BYE};

	bye.u.bye.reason = (uint16_t)reason;
	bye.u.bye.text_len =
	    (uint8_t)snprintf(bye.u.bye.text, sizeof(bye.u.bye.text), "%.200s", text);
	(void)say_record(fd, tls, &bye);
}

static void
format_peer(const struct sockaddr *addr, socklen_t len, char *out, size_t size)
{
	char host[NI_MAXHOST] = "?", port[NI_MAXSERV] = "?";

	if (len)
		getnameinfo(addr, len, host, sizeof(host), port, sizeof(port),
		            NI_NUMERICHOST | NI_NUMERICSERV);
	snprintf(out, size, "%s%s%s:%s", strchr(host, ':') ? "[" : "", host,
	         strchr(host, ':') ? "]" : "", port);
}

/* ---- the stream table ---------------------------------------------------- */

static relay_stream_t *
find_stream(pps_relay_t *r, const char *name)
{
	for (relay_stream_t *s = r->streams; s; s = s->next)
		if (strcmp(s->name, name) == 0)
			return s;
	return NULL;
}

static unsigned
count_streams(const pps_relay_t *r)
{
	unsigned n = 0;

	for (const relay_stream_t *s = r->streams; s; s = s->next)
		n++;
	return n;
}

static void
drop_window(relay_stream_t *s)
{
	if (s->window)
		pps_window_relayed_close(s->window);
	pps_window_unref(s->window);
	s->window = NULL;
	s->window_pushed = false;
	s->window_grew = false;
	for (size_t i = 0; i < PPS_RELAY_ASSEMBLING_ADUS; i++) {
		free(s->assembling[i].data);
		s->assembling[i] = (assembling_t){0};
	}
	s->window_open = false;
	s->window_bytes = 0;
}

/* The publisher's audio connection goes; the stream (and its audio in
 * the windows, if the publisher falls back to that) stays. */
static void
stream_audio_close(relay_stream_t *s)
{
	if (s->audio_event) {
		event_free(s->audio_event);
		s->audio_event = NULL;
	}
	pps_tls_free(s->audio_tls);
	s->audio_tls = NULL;
	if (s->audio_fd >= 0)
		close(s->audio_fd);
	s->audio_fd = -1;
	pps_wire_parser_free(s->audio_parser);
	s->audio_parser = NULL;
}

static void
stream_free(relay_stream_t *s)
{
	if (!s)
		return;
	stream_audio_close(s);
	drop_window(s);
	if (s->read_event)
		event_free(s->read_event);
	if (s->linger)
		event_free(s->linger);
	if (s->report_timer)
		event_free(s->report_timer);
	pps_tls_free(s->tls);
	if (s->fd >= 0)
		close(s->fd);
	pps_wire_parser_free(s->parser);
	pps_listener_free(s->listener);
	free(s);
}

static void
linger_cb(evutil_socket_t fd, short what, void *user)
{
	relay_stream_t *s = user;
	pps_relay_t *r = s->relay;

	for (relay_stream_t **p = &r->dying; *p; p = &(*p)->next) {
		if (*p == s) {
			*p = s->next;
			break;
		}
	}
	stream_free(s);
}

static void upstream_lost(upstream_t *u, const char *why);
static void upstream_free(upstream_t *u);
static void upstream_up(upstream_t *u);

/*
 * The publisher is gone (it left, or it was dropped for @why with a BYE of
 * @reason): the name is free at once, the subscribers are told, and the
 * listener goes after STREAM_LINGER_US.
 */
static void
stream_end(relay_stream_t *s, bool dropped, pps_wire_bye_reason_t reason, const char *why)
{
	pps_relay_t *r = s->relay;
	struct timeval tv = pps_time_us_to_timeval(STREAM_LINGER_US);
	char text[PPS_WIRE_MAX_REASON_BYTES + 1];

	for (relay_stream_t **p = &r->streams; *p; p = &(*p)->next) {
		if (*p == s) {
			*p = s->next;
			break;
		}
	}
	if (s->upstream) {
		/* Not a publisher: the stream this relay takes from another. */
		if (dropped)
			send_bye(s->fd, s->tls, reason, why);
	} else if (dropped) {
		send_bye(s->fd, s->tls, reason, why);
		r->stats.publishers_dropped++;
		pps_log(&r->peer_log, PPS_LOG_WARNING, "publisher %s of stream %s dropped: %s",
		        s->peer, s->name, why);
	} else {
		pps_log(&r->params.log, PPS_LOG_INFO, "publisher %s of stream %s left (%s)",
		        s->peer, s->name, why);
	}
	if (s->read_event)
		event_del(s->read_event);
	if (s->report_timer)
		event_del(s->report_timer);
	close(s->fd);
	s->fd = -1;
	stream_audio_close(s);
	drop_window(s);
	if (s->listener) {
		snprintf(text, sizeof(text), "stream %s ended: its %s", s->name,
		         s->upstream ? "upstream was lost; the relay takes it again when it can"
		                     : "publisher left");
		pps_listener_say_bye_all(s->listener, PPS_WIRE_BYE_NORMAL, text);
	}
	if (s->upstream) {
		upstream_t *u = s->upstream;

		s->upstream = NULL;
		upstream_lost(u, why);
	}
	s->next = r->dying;
	r->dying = s;
	s->linger = evtimer_new(r->base, linger_cb, s);
	if (s->linger)
		event_add(s->linger, &tv);
}

/* Says @rec to the publisher. The relay says a few bytes a second upstream:
 * its send buffer is empty, and a record that does not go whole cannot go
 * at all (-EAGAIN, logged). */
static int
stream_say(relay_stream_t *s, const pps_wire_record_t *rec, const char *what)
{
	uint8_t buf[64];
	size_t n;
	int ret;

	if (s->fd < 0 || pps_wire_encode(rec, buf, sizeof(buf), &n) < 0)
		return -EINVAL;
	if (s->tls) {
		/* A tail the socket did not take goes with the next record. */
		ret = pps_tls_send(s->tls, buf, n);
		ret = ret == -EAGAIN ? 0 : ret;
	} else {
		ret = send(s->fd, buf, n, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)n ? 0 : -EIO;
	}
	if (ret < 0) {
		pps_log(&s->relay->peer_log, PPS_LOG_WARNING, "stream %s: cannot %s", s->name,
		        what);
		return -EAGAIN;
	}
	return 0;
}

/* The stream's listener asks for an IDR (a subscriber joined or lost its
 * base layer, within the listener's recovery bounds): one RECOVERY_REQUEST
 * to the publisher, whose own bounds decide. */
static void
stream_idr_cb(void *user)
{
	relay_stream_t *s = user;
	pps_wire_record_t req = {.kind = PPS_WIRE_RECOVERY_REQUEST};

	req.u.recovery_request.frame_index = s->last_frame_index;
	req.u.recovery_request.quality_layer = 0;
	if (stream_say(s, &req, "ask the publisher for an IDR") == 0)
		s->relay->stats.recovery_requests_sent++;
}

/* One subscriber's part of the stream's PATH_REPORT: its path (a relay's:
 * its subscribers' behind it) and what its regulator saw since the last one. */
static void
report_collect_cb(pps_session_t *session, void *user)
{
	pps_wire_path_report_t *q = user;
	pps_ratealloc_client_t span[2];
	uint32_t viewers;
	size_t n;

	if (pps_session_state(session) != PPS_SESSION_STREAMING || pps_session_audio_only(session))
		return;
	q->flags |= pps_session_take_report_flags(session, NULL) &
	            (PPS_WIRE_PATH_CUT | PPS_WIRE_PATH_COMPETING | PPS_WIRE_PATH_STARTING |
	             PPS_WIRE_PATH_START_LOSSY);
	if (pps_session_take_cut_windows(session) > 0)
		q->flags |= PPS_WIRE_PATH_CUT;
	if (pps_session_take_competing(session))
		q->flags |= PPS_WIRE_PATH_COMPETING;
	switch (pps_session_take_start(session)) {
	case PPS_SESSION_START_UNREAD:
		q->flags |= PPS_WIRE_PATH_STARTING;
		break;
	case PPS_SESSION_START_LOSSY:
		q->flags |= PPS_WIRE_PATH_START_LOSSY;
		break;
	default:
		break;
	}
	n = pps_session_path_span(session, span, &viewers);
	if (n == 0 || viewers == 0)
		return;
	if (q->subscribers == 0 || span[0].estimate_bps < q->slowest_bps) {
		q->slowest_bps = span[0].estimate_bps;
		q->slowest_min_rtt_us = span[0].min_rtt_us;
		q->flags = (uint8_t)((q->flags & ~PPS_WIRE_PATH_SLOWEST_CAPPED) |
		                     (span[0].rate_capped ? PPS_WIRE_PATH_SLOWEST_CAPPED : 0));
	}
	if (q->subscribers == 0 || span[n - 1].estimate_bps > q->fastest_bps) {
		q->fastest_bps = span[n - 1].estimate_bps;
		q->fastest_min_rtt_us = span[n - 1].min_rtt_us;
		q->flags = (uint8_t)((q->flags & ~PPS_WIRE_PATH_FASTEST_CAPPED) |
		                     (span[n - 1].rate_capped ? PPS_WIRE_PATH_FASTEST_CAPPED : 0));
	}
	q->subscribers =
	    viewers > UINT32_MAX - q->subscribers ? UINT32_MAX : q->subscribers + viewers;
}

/* Every PPS_RELAY_REPORT_US: the subscribers' paths go upstream, so that the
 * publisher's closed loop sizes the layers to the viewers behind the relay,
 * not to the relay's own path. */
static void
stream_report_cb(evutil_socket_t fd, short what, void *user)
{
	relay_stream_t *s = user;
	pps_wire_record_t rec = {.kind = PPS_WIRE_PATH_REPORT};

	(void)fd;
	(void)what;
	if (!s->listener)
		return;
	pps_listener_foreach(s->listener, report_collect_cb, &rec.u.path_report);
	if (stream_say(s, &rec, "report its subscribers' paths") == 0)
		s->relay->stats.path_reports_sent++;
}

static int
stream_start_listener(relay_stream_t *s, char *why, size_t why_size)
{
	pps_relay_t *r = s->relay;
	pps_listener_params_t lp = r->params.listener;
	struct timeval report_tv = pps_time_us_to_timeval(PPS_RELAY_REPORT_US);

	lp.session.stream_info = s->info;
	/* Audio (if any) goes to the viewers as the relay's [audio] transport
	 * says, whatever way it came from the publisher: on connections of its
	 * own, a viewer's thin audio stream does not share the video's
	 * congestion window (each 20 ms frame is a packet of its own). */
	if (lp.session.stream_info.audio_codec) {
		lp.session.stream_info.audio_transport = (uint8_t)r->params.audio_transport;
		lp.session.stream_info.audio_copies =
		    r->params.audio_transport == PPS_WIRE_AUDIO_OWN_CONNECTION
		        ? (uint8_t)r->params.audio_copies
		        : 0;
	}
	lp.session.sched.latency_budget_us = (int64_t)s->info.latency_budget_ms * 1000;
	lp.frame_duration_us = (int64_t)s->info.fps_den * 1000000 / s->info.fps_num;
	lp.tls_cert = lp.tls_key = NULL;
	lp.log = r->params.log;
	s->listener =
	    pps_listener_new(r->base, &lp, &(pps_listener_callbacks_t){.idr_cb = stream_idr_cb}, s);
	if (!s->listener) {
		snprintf(why, why_size, "cannot make the stream's listener: %s", strerror(errno));
		return -errno;
	}
	s->report_timer = event_new(r->base, -1, EV_PERSIST, stream_report_cb, s);
	if (!s->report_timer || event_add(s->report_timer, &report_tv) < 0) {
		snprintf(why, why_size, "cannot start the stream's path reports");
		return -ENOMEM;
	}
	/* One report now, before any viewer: the publisher knows this is a
	 * relay by the time a viewer's join asks it for an IDR. */
	stream_report_cb(-1, 0, s);
	return 0;
}

static assembling_t *
find_assembling(relay_stream_t *s, uint32_t adu_id, bool create)
{
	assembling_t *spare = NULL;

	for (size_t i = 0; i < PPS_RELAY_ASSEMBLING_ADUS; i++) {
		if (s->assembling[i].used && s->assembling[i].adu_id == adu_id)
			return &s->assembling[i];
		if (!s->assembling[i].used && !spare)
			spare = &s->assembling[i];
	}
	return create ? spare : NULL;
}

/* One fragment: 0, or -EPROTO with @why. */
static int
stream_fragment(relay_stream_t *s, const pps_wire_adu_fragment_t *f, char *why, size_t why_size)
{
	assembling_t *a;

	if (!s->window_open || f->window_id != s->begin.window_id) {
		snprintf(why, why_size, "ADU_FRAGMENT of window %u outside its window",
		         f->window_id);
		return -EPROTO;
	}
	if (f->adu_id < s->begin.first_adu_id ||
	    f->adu_id - s->begin.first_adu_id >= s->begin.adus) {
		snprintf(why, why_size, "ADU %u outside window %u's ids", f->adu_id, f->window_id);
		return -EPROTO;
	}
	a = find_assembling(s, f->adu_id, f->offset == 0);
	if (!a) {
		snprintf(why, why_size,
		         f->offset ? "ADU %u: a fragment at offset %u, its start never came"
		                   : "ADU %u: more than %d ADUs under way at once",
		         f->adu_id, f->offset ? f->offset : PPS_RELAY_ASSEMBLING_ADUS);
		return -EPROTO;
	}
	if (!a->used) {
		if (s->window_bytes + f->total_bytes > PPS_RELAY_MAX_WINDOW_BYTES ||
		    s->window_bytes + f->total_bytes > s->begin.bytes) {
			snprintf(why, why_size, "window %u: more ADUs or bytes than announced",
			         f->window_id);
			return -EPROTO;
		}
		a->data = malloc(f->total_bytes);
		if (!a->data) {
			snprintf(why, why_size, "out of memory");
			return -ENOMEM;
		}
		a->used = true;
		a->adu_id = f->adu_id;
		a->total = f->total_bytes;
		a->filled = 0;
		pps_adu_info_from_wire(f, &a->info);
		s->window_bytes += f->total_bytes;
	}
	/* Fragments of an ADU come in order of offset (PROTOCOL.md). */
	if (f->offset != a->filled || f->total_bytes != a->total ||
	    (uint64_t)f->offset + f->payload_len > a->total) {
		snprintf(why, why_size, "ADU %u: fragment at %u, expected %u of %u", f->adu_id,
		         f->offset, a->filled, a->total);
		return -EPROTO;
	}
	memcpy(a->data + a->filled, f->payload, f->payload_len);
	a->filled += f->payload_len;
	if (a->filled == a->total) {
		pps_adu_t *adu = pps_adu_new_take(&a->info, a->data, a->total);

		if (!adu) {
			snprintf(why, why_size, "ADU %u: %s", f->adu_id, strerror(errno));
			return -EPROTO;
		}
		a->data = NULL;
		a->used = false;
		if (a->info.frame_index > s->last_frame_index)
			s->last_frame_index = a->info.frame_index;
		if (!s->window || pps_window_relayed_add(s->window, adu) < 0) {
			snprintf(why, why_size, "ADU %u of window %u came twice", f->adu_id,
			         f->window_id);
			return -EPROTO;
		}
		/* The viewers hear of it once this read is parsed (stream_flush). */
		s->window_grew = true;
	}
	return 0;
}

/*
 * After each read from the publisher: the viewers' regulators hear of the
 * ADUs that read brought in one go. The publisher writes a window in a burst;
 * telling the regulators of each ADU as it is parsed would have each write
 * the one ADU at once, a packet per ADU where the burst fills MSS-sized ones
 * (on a path of a small fair share, a congestion window of a few packets
 * then carries a fraction of the bytes).
 */
static void
stream_flush(relay_stream_t *s)
{
	if (!s->window || !s->window_grew || !s->listener)
		return;
	s->window_grew = false;
	if (!s->window_pushed) {
		s->window_pushed = true;
		pps_listener_push_window(s->listener, s->window);
	} else {
		pps_listener_window_grew(s->listener, s->window);
	}
}

/* WINDOW_END: the window closes with what came of it (a window none of whose
 * ADUs came goes to the subscribers now, for its WINDOW_END). */
static int
stream_window_end(relay_stream_t *s, const pps_wire_window_end_t *e, char *why, size_t why_size)
{
	pps_window_t *window;

	if (!s->window_open) {
		/* A lone dropped window: the subscribers see the gap in ids. */
		if (!(e->flags & PPS_WIRE_WINDOW_END_DROPPED) ||
		    (s->any_window && e->window_id <= s->last_window_id)) {
			snprintf(why, why_size, "WINDOW_END of window %u, which is not open",
			         e->window_id);
			return -EPROTO;
		}
		s->any_window = true;
		s->last_window_id = e->window_id;
		return 0;
	}
	if (e->window_id != s->begin.window_id) {
		snprintf(why, why_size, "WINDOW_END of window %u inside window %u", e->window_id,
		         s->begin.window_id);
		return -EPROTO;
	}
	/* ADUs still in pieces never came whole: they count as dropped. */
	for (size_t i = 0; i < PPS_RELAY_ASSEMBLING_ADUS; i++) {
		free(s->assembling[i].data);
		s->assembling[i] = (assembling_t){0};
	}
	window = s->window;
	s->window = NULL;
	s->window_open = false;
	s->window_bytes = 0;
	if (!window) {
		window = pps_window_new_relayed(s->begin.window_id, s->begin.first_capture_us,
		                                s->begin.frames ? s->begin.frames : 1,
		                                s->begin.first_adu_id, 0, NULL, 0,
		                                (pps_priority_policy_t)s->info.priority_policy);
		if (!window) {
			snprintf(why, why_size, "window %u: %s", e->window_id, strerror(errno));
			return -ENOMEM;
		}
	}
	pps_window_relayed_close(window);
	if (s->window_pushed)
		pps_listener_window_grew(s->listener, window);
	else
		pps_listener_push_window(s->listener, window);
	s->window_pushed = false;
	s->window_grew = false;
	pps_window_unref(window);
	s->relay->stats.windows_relayed++;
	return 0;
}

/* One record from the publisher: 0, or a negative errno with @why (the
 * publisher is dropped), or 1 when it said BYE. */
static int
stream_record(relay_stream_t *s, const pps_wire_record_t *rec, char *why, size_t why_size)
{
	if (s->upstream && !s->have_info && !s->answered && rec->kind == PPS_WIRE_CHALLENGE) {
		pps_wire_record_t auth = {.kind = PPS_WIRE_AUTH};
		const char *token = s->upstream->token;

		if (!token || !token[0]) {
			snprintf(why, why_size, "the upstream wants an access token");
			return -EPERM;
		}
		auth.u.auth.method = PPS_WIRE_AUTH_HMAC_SHA256;
		pps_wire_auth_mac(token, strlen(token), rec->u.challenge.nonce, auth.u.auth.mac);
		s->answered = true;
		if (say_record(s->fd, s->tls, &auth) < 0) {
			snprintf(why, why_size, "cannot answer the upstream's CHALLENGE");
			return -EIO;
		}
		return 0;
	}
	if (!s->have_info && rec->kind != PPS_WIRE_STREAM_INFO && rec->kind != PPS_WIRE_BYE) {
		snprintf(why, why_size, "%s before STREAM_INFO", pps_wire_kind_name(rec->kind));
		return -EPROTO;
	}
	switch (rec->kind) {
	case PPS_WIRE_STREAM_INFO:
		if (s->have_info) {
			snprintf(why, why_size, "a second STREAM_INFO");
			return -EPROTO;
		}
		if (rec->u.stream_info.fps_num == 0 || rec->u.stream_info.fps_den == 0) {
			snprintf(why, why_size, "STREAM_INFO without a frame rate");
			return -EPROTO;
		}
		s->info = rec->u.stream_info;
		s->have_info = true;
		if (s->upstream)
			upstream_up(s->upstream);
		if (stream_start_listener(s, why, why_size) < 0)
			return -ENOMEM;
		pps_log(&s->relay->params.log, PPS_LOG_INFO,
		        "stream %s: %ux%u@%.4g from %s, %u temporal x %u quality layers%s", s->name,
		        s->info.width, s->info.height, (double)s->info.fps_num / s->info.fps_den,
		        s->peer, s->info.temporal_layers, s->info.quality_layers,
		        s->info.audio_codec ? ", audio" : "");
		return 0;
	case PPS_WIRE_WINDOW_BEGIN:
		if (s->window_open ||
		    (s->any_window && rec->u.window_begin.window_id <= s->last_window_id)) {
			snprintf(why, why_size, "WINDOW_BEGIN %u out of order",
			         rec->u.window_begin.window_id);
			return -EPROTO;
		}
		if (rec->u.window_begin.adus > PPS_WINDOW_MAX_ADUS ||
		    rec->u.window_begin.frames > PPS_WIRE_MAX_WINDOW_FRAMES) {
			snprintf(why, why_size, "WINDOW_BEGIN %u: %u ADUs, %u frames",
			         rec->u.window_begin.window_id, rec->u.window_begin.adus,
			         rec->u.window_begin.frames);
			return -EPROTO;
		}
		s->begin = rec->u.window_begin;
		s->window = NULL;
		if (s->begin.adus > 0) {
			s->window = pps_window_new_relayed_open(
			    s->begin.window_id, s->begin.first_capture_us,
			    s->begin.frames ? s->begin.frames : 1, s->begin.first_adu_id,
			    s->begin.adus, s->begin.bytes);
			if (!s->window) {
				snprintf(why, why_size, "WINDOW_BEGIN %u: %s", s->begin.window_id,
				         strerror(errno));
				return errno == ENOMEM ? -ENOMEM : -EPROTO;
			}
		}
		s->window_pushed = false;
		s->window_open = true;
		s->any_window = true;
		s->last_window_id = s->begin.window_id;
		return 0;
	case PPS_WIRE_ADU_FRAGMENT:
		return stream_fragment(s, &rec->u.adu_fragment, why, why_size);
	case PPS_WIRE_WINDOW_END:
		return stream_window_end(s, &rec->u.window_end, why, why_size);
	case PPS_WIRE_AUDIO_FRAME:
		pps_listener_push_audio(s->listener, &rec->u.audio_frame);
		return 0;
	case PPS_WIRE_CLOCK_PONG:
		return 0;
	case PPS_WIRE_BYE:
		snprintf(why, why_size, "%s%s%.160s", pps_wire_bye_reason_name(rec->u.bye.reason),
		         rec->u.bye.text_len ? ": " : "", rec->u.bye.text);
		return 1;
	default:
		snprintf(why, why_size, "unexpected %s", pps_wire_kind_name(rec->kind));
		return -EPROTO;
	}
}

static void
stream_input(relay_stream_t *s, const uint8_t *data, size_t len)
{
	char why[PPS_WIRE_MAX_REASON_BYTES + 1];

	while (s->fd >= 0) {
		pps_wire_record_t rec;
		int ret = pps_wire_parser_next(s->parser, &data, &len, &rec);

		if (ret == -EAGAIN) {
			stream_flush(s);
			return;
		}
		if (ret < 0) {
			snprintf(why, sizeof(why), "protocol error: %s",
			         pps_wire_parser_error(s->parser));
			stream_end(s, true, PPS_WIRE_BYE_PROTOCOL, why);
			return;
		}
		ret = stream_record(s, &rec, why, sizeof(why));
		if (ret > 0) {
			stream_end(s, false, PPS_WIRE_BYE_NORMAL, why);
			return;
		}
		if (ret < 0) {
			stream_end(s, true,
			           ret == -ENOMEM || ret == -EIO ? PPS_WIRE_BYE_INTERNAL
			           : ret == -EPERM               ? PPS_WIRE_BYE_UNAUTHORIZED
			                                         : PPS_WIRE_BYE_PROTOCOL,
			           why);
			return;
		}
	}
}

/* One read of @fd, through @tls when there is one: bytes, 0 when the peer
 * closed, -EAGAIN, or another negative errno (with TLS, pps_tls_error()
 * says why). */
static ssize_t
conn_read(int fd, pps_tls_t *tls, uint8_t *buf, size_t size)
{
	ssize_t n;

	if (tls)
		return pps_tls_read(tls, buf, size);
	n = recv(fd, buf, size, 0);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? -EAGAIN : -errno;
	return n;
}

/* Why conn_read() returned @n <= 0 (not -EAGAIN). */
static const char *
conn_read_error(ssize_t n, pps_tls_t *tls)
{
	return n == 0 ? "connection closed" : tls ? pps_tls_error(tls) : strerror((int)-n);
}

/* A publisher's (or upstream's) connection readable. OpenSSL may hold
 * records the socket will not signal again: read while it has some, a few
 * times, then come back from the loop behind the other connections. */
static void
stream_read_cb(evutil_socket_t fd, short what, void *user)
{
	relay_stream_t *s = user;
	uint8_t buf[PUBLISHER_READ_BYTES];

	(void)what;
	for (int reads = 0; reads < PPS_TRANSPORT_READS_PER_WAKEUP; reads++) {
		ssize_t n = conn_read(fd, s->tls, buf, sizeof(buf));

		if (n == -EAGAIN)
			return;
		if (n <= 0) {
			stream_end(s, false, PPS_WIRE_BYE_NORMAL, conn_read_error(n, s->tls));
			return;
		}
		stream_input(s, buf, (size_t)n);
		if (s->fd < 0 || !s->tls || !pps_tls_has_pending(s->tls))
			return;
	}
	event_active(s->read_event, EV_READ, 0);
}

/* The publisher's audio connection: its STREAM_INFO (the stream's already
 * came on the first), AUDIO_FRAMEs, its BYE; anything else, or a broken
 * connection, closes it alone. */
static void
stream_audio_input(relay_stream_t *s, const uint8_t *data, size_t len)
{
	while (s->audio_fd >= 0) {
		pps_wire_record_t rec;
		int ret = pps_wire_parser_next(s->audio_parser, &data, &len, &rec);
		const char *why = NULL;

		if (ret == -EAGAIN)
			return;
		if (ret < 0)
			why = pps_wire_parser_error(s->audio_parser);
		else if (rec.kind == PPS_WIRE_AUDIO_FRAME && s->listener)
			pps_listener_push_audio(s->listener, &rec.u.audio_frame);
		else if (rec.kind == PPS_WIRE_BYE) {
			pps_log(&s->relay->params.log, PPS_LOG_INFO,
			        "stream %s: the publisher's audio connection ended (%s)", s->name,
			        pps_wire_bye_reason_name(rec.u.bye.reason));
			stream_audio_close(s);
			return;
		} else if (rec.kind != PPS_WIRE_STREAM_INFO && rec.kind != PPS_WIRE_AUDIO_FRAME)
			why = pps_wire_kind_name(rec.kind);
		if (why) {
			pps_log(&s->relay->peer_log, PPS_LOG_WARNING,
			        "stream %s: the publisher's audio connection closed: %s", s->name,
			        why);
			stream_audio_close(s);
			return;
		}
	}
}

/* The publisher's audio connection readable: as stream_read_cb(). */
static void
stream_audio_read_cb(evutil_socket_t fd, short what, void *user)
{
	relay_stream_t *s = user;
	uint8_t buf[PUBLISHER_READ_BYTES];

	(void)what;
	for (int reads = 0; reads < PPS_TRANSPORT_READS_PER_WAKEUP; reads++) {
		ssize_t n = conn_read(fd, s->audio_tls, buf, sizeof(buf));

		if (n == -EAGAIN)
			return;
		if (n <= 0) {
			pps_log(&s->relay->params.log, PPS_LOG_INFO,
			        "stream %s: the publisher's audio connection closed (%s)", s->name,
			        conn_read_error(n, s->audio_tls));
			stream_audio_close(s);
			return;
		}
		stream_audio_input(s, buf, (size_t)n);
		if (s->audio_fd < 0 || !s->audio_tls || !pps_tls_has_pending(s->audio_tls))
			return;
	}
	event_active(s->audio_event, EV_READ, 0);
}

/* ---- the door ------------------------------------------------------------ */

static void
door_free(door_conn_t *c, bool close_fd)
{
	pps_relay_t *r = c->relay;

	for (door_conn_t **p = &r->door; *p; p = &(*p)->next) {
		if (*p == c) {
			*p = c->next;
			r->n_door--;
			break;
		}
	}
	if (c->read_event)
		event_free(c->read_event);
	if (c->write_event)
		event_free(c->write_event);
	if (c->timer)
		event_free(c->timer);
	pps_tls_free(c->tls);
	pps_wire_parser_free(c->parser);
	if (close_fd && c->fd >= 0)
		close(c->fd);
	free(c);
}

static void
door_refuse(door_conn_t *c, pps_wire_bye_reason_t reason, const char *why)
{
	pps_relay_t *r = c->relay;

	send_bye(c->fd, c->tls, reason, why);
	pps_log(&r->peer_log, PPS_LOG_INFO, "refused %s: %s", c->peer, why);
	door_free(c, true);
}

/* True if a publisher cannot have @name: an upstream holds it (up or
 * reconnecting) or another publisher has it; why in @why. */
static bool
name_taken(pps_relay_t *r, const char *name, char *why, size_t why_size)
{
	for (const upstream_t *u = r->upstreams; u; u = u->next) {
		if (strcmp(u->name, name) == 0) {
			snprintf(why, why_size, "stream %s comes from another relay here", name);
			return true;
		}
	}
	if (find_stream(r, name)) {
		snprintf(why, why_size, "stream %s already has a publisher", name);
		return true;
	}
	return false;
}

/* Same host (the ports differ): a stream's audio connection comes from
 * where its publisher is. */
static bool
same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	if (a->ss_family == AF_INET6)
		return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
		              &((const struct sockaddr_in6 *)b)->sin6_addr,
		              sizeof(struct in6_addr)) == 0;
	return false;
}

/* A publisher's audio connection (HELLO with PUBLISH and AUDIO_ONLY, after
 * its stream's): checked against the stream, answered as an audio-only
 * client would, then read beside the stream. */
static void
door_admit_audio(door_conn_t *c)
{
	pps_relay_t *r = c->relay;
	relay_stream_t *s = find_stream(r, c->hello.stream);
	pps_wire_record_t hello = {.kind = PPS_WIRE_HELLO};
	char why[160];

	if (!s || s->upstream || !same_host(&s->addr, &c->addr)) {
		snprintf(why, sizeof(why), "no stream %.64s published from this host",
		         c->hello.stream);
		r->stats.publishers_refused++;
		door_refuse(c, PPS_WIRE_BYE_NO_STREAM, why);
		return;
	}
	if (s->audio_fd >= 0) {
		snprintf(why, sizeof(why), "stream %.64s has its audio connection", s->name);
		r->stats.publishers_refused++;
		door_refuse(c, PPS_WIRE_BYE_STREAM_TAKEN, why);
		return;
	}
	if (c->len > c->parsed) {
		door_refuse(c, PPS_WIRE_BYE_PROTOCOL, "audio before the relay's HELLO");
		return;
	}
	s->audio_parser = pps_wire_parser_new(PPS_WIRE_DEFAULT_MAX_RECORD_BYTES);
	if (s->audio_parser)
		pps_wire_parser_set_sender(s->audio_parser, PPS_WIRE_FROM_SERVER);
	s->audio_event = event_new(r->base, c->fd, EV_READ | EV_PERSIST, stream_audio_read_cb, s);
	hello.u.hello.protocol_version = PPS_WIRE_VERSION;
	hello.u.hello.flags = PPS_WIRE_HELLO_AUDIO | PPS_WIRE_HELLO_AUDIO_ONLY;
	hello.u.hello.name_len =
	    (uint8_t)snprintf(hello.u.hello.name, sizeof(hello.u.hello.name), "pps-relay");
	s->audio_fd = c->fd;
	s->audio_tls = c->tls;
	c->fd = -1;
	c->tls = NULL;
	if (!s->audio_parser || !s->audio_event || event_add(s->audio_event, NULL) < 0 ||
	    say_record(s->audio_fd, s->audio_tls, &hello) < 0) {
		send_bye(s->audio_fd, s->audio_tls, PPS_WIRE_BYE_INTERNAL,
		         "cannot take the audio connection");
		stream_audio_close(s);
		door_free(c, false);
		return;
	}
	pps_log(&r->params.log, PPS_LOG_INFO,
	        "stream %s: the publisher's audio on a connection of its own%s", s->name,
	        s->audio_tls ? " (TLS)" : "");
	door_free(c, false);
	if (s->audio_tls && pps_tls_has_pending(s->audio_tls))
		event_active(s->audio_event, EV_READ, 0);
}

/* The publisher proved itself (or needed not): its stream begins. */
static void
door_admit_publisher(door_conn_t *c)
{
	pps_relay_t *r = c->relay;
	relay_stream_t *s;
	pps_wire_record_t hello = {.kind = PPS_WIRE_HELLO};
	char why[160];
	size_t rest = c->len - c->parsed;

	if (c->hello.flags & PPS_WIRE_HELLO_AUDIO_ONLY) {
		door_admit_audio(c);
		return;
	}
	/* Checked again: another publisher may have taken the name meanwhile. */
	if (name_taken(r, c->hello.stream, why, sizeof(why))) {
		r->stats.publishers_refused++;
		door_refuse(c, PPS_WIRE_BYE_STREAM_TAKEN, why);
		return;
	}
	if (count_streams(r) >= r->params.max_streams) {
		snprintf(why, sizeof(why), "relay full (%u streams)", r->params.max_streams);
		r->stats.publishers_refused++;
		door_refuse(c, PPS_WIRE_BYE_SERVER_FULL, why);
		return;
	}
	s = calloc(1, sizeof(*s));
	if (!s || !(s->parser = pps_wire_parser_new(PPS_WIRE_DEFAULT_MAX_RECORD_BYTES))) {
		free(s);
		door_refuse(c, PPS_WIRE_BYE_INTERNAL, "out of memory");
		return;
	}
	pps_wire_parser_set_sender(s->parser, PPS_WIRE_FROM_SERVER);
	s->relay = r;
	s->audio_fd = -1;
	s->fd = c->fd;
	s->addr = c->addr;
	s->addr_len = c->addr_len;
	s->tls = c->tls;
	c->tls = NULL; /* the stream's */
	snprintf(s->name, sizeof(s->name), "%s", c->hello.stream);
	snprintf(s->peer, sizeof(s->peer), "%s", c->peer);
	s->read_event = event_new(r->base, s->fd, EV_READ | EV_PERSIST, stream_read_cb, s);
	/* The relay's HELLO: from here on it is the publisher's client. */
	hello.u.hello.protocol_version = PPS_WIRE_VERSION;
	hello.u.hello.flags = PPS_WIRE_HELLO_AUDIO;
	hello.u.hello.name_len =
	    (uint8_t)snprintf(hello.u.hello.name, sizeof(hello.u.hello.name), "pps-relay");
	if (!s->read_event || event_add(s->read_event, NULL) < 0 ||
	    say_record(s->fd, s->tls, &hello) < 0) {
		c->fd = -1; /* the stream owns it now */
		door_free(c, false);
		send_bye(s->fd, s->tls, PPS_WIRE_BYE_INTERNAL, "cannot start the stream");
		stream_free(s);
		return;
	}
	s->next = r->streams;
	r->streams = s;
	r->stats.publishers_total++;
	pps_log(&r->params.log, PPS_LOG_INFO, "publisher %s admitted for stream %s%s", s->peer,
	        s->name, s->tls ? " (TLS)" : "");
	/* Anything the publisher sent past its HELLO or AUTH is its stream's. */
	if (rest) {
		uint8_t tail[PPS_RELAY_HELLO_BYTES];

		memcpy(tail, c->buf + c->parsed, rest);
		c->fd = -1;
		door_free(c, false);
		stream_input(s, tail, rest);
		return;
	}
	c->fd = -1;
	door_free(c, false);
	/* What OpenSSL read past the HELLO the socket will not signal again. */
	if (s->tls && pps_tls_has_pending(s->tls))
		event_active(s->read_event, EV_READ, 0);
}

static bool
door_hello_publisher(door_conn_t *c)
{
	pps_relay_t *r = c->relay;
	const char *token = r->params.listener.session.access_token;
	char why[224], name_why[160];

	if (!(c->hello.flags & PPS_WIRE_HELLO_STREAM)) {
		r->stats.publishers_refused++;
		door_refuse(c, PPS_WIRE_BYE_PROTOCOL, "a publisher must name its stream");
		return false;
	}
	if (pps_stream_name_check(c->hello.stream, name_why, sizeof(name_why)) < 0) {
		r->stats.publishers_refused++;
		door_refuse(c, PPS_WIRE_BYE_PROTOCOL, name_why);
		return false;
	}
	if (!(c->hello.flags & PPS_WIRE_HELLO_AUDIO_ONLY) &&
	    name_taken(r, c->hello.stream, why, sizeof(why))) {
		r->stats.publishers_refused++;
		door_refuse(c, PPS_WIRE_BYE_STREAM_TAKEN, why);
		return false;
	}
	if (token && token[0]) {
		pps_wire_record_t challenge = {.kind = PPS_WIRE_CHALLENGE};

		if (!(c->hello.flags & PPS_WIRE_HELLO_CHALLENGE)) {
			r->stats.publishers_refused++;
			door_refuse(c, PPS_WIRE_BYE_UNAUTHORIZED, "access token required");
			return false;
		}
		if (pps_wire_auth_nonce(c->nonce) < 0) {
			door_refuse(c, PPS_WIRE_BYE_INTERNAL, "no random nonce");
			return false;
		}
		challenge.u.challenge.method = PPS_WIRE_AUTH_HMAC_SHA256;
		memcpy(challenge.u.challenge.nonce, c->nonce, PPS_WIRE_NONCE_BYTES);
		if (say_record(c->fd, c->tls, &challenge) < 0) {
			door_free(c, true);
			return false;
		}
		c->await_auth = true;
		return true;
	}
	door_admit_publisher(c);
	return false;
}

/* A viewer's connection goes to its stream's listener with what the door
 * read (its HELLO, or a browser's request, read there again) and its TLS
 * endpoint if any; the door forgets it. */
static void
door_route(door_conn_t *c, relay_stream_t *s)
{
	int fd = c->fd;

	c->relay->stats.subscribers_routed++;
	c->fd = -1;
	pps_listener_add_routed(s->listener, fd, (struct sockaddr *)&c->addr, c->addr_len, c->tls,
	                        c->buf, c->len);
	c->tls = NULL; /* the session's */
	door_free(c, false);
}

static void
door_hello_subscriber(door_conn_t *c)
{
	pps_relay_t *r = c->relay;
	relay_stream_t *s;
	char why[224];

	if (!(c->hello.flags & PPS_WIRE_HELLO_STREAM)) {
		r->stats.subscribers_no_stream++;
		door_refuse(c, PPS_WIRE_BYE_NO_STREAM,
		            "this is a relay: ask for a stream by name (HOST:PORT/NAME)");
		return;
	}
	s = find_stream(r, c->hello.stream);
	if (!s || !s->listener) {
		snprintf(why, sizeof(why), "no stream named %.64s on this relay", c->hello.stream);
		r->stats.subscribers_no_stream++;
		door_refuse(c, PPS_WIRE_BYE_NO_STREAM, why);
		return;
	}
	door_route(c, s);
}

/* True while @c stays at the door (a publisher challenged, its AUTH to
 * come); false once it was handed on or refused (freed). */
static bool
door_record(door_conn_t *c, const pps_wire_record_t *rec)
{
	pps_relay_t *r = c->relay;

	if (c->await_auth) {
		const char *token = r->params.listener.session.access_token;
		uint8_t want[PPS_WIRE_MAC_BYTES];

		if (rec->kind != PPS_WIRE_AUTH) {
			door_refuse(c, PPS_WIRE_BYE_PROTOCOL, "expected AUTH");
			return false;
		}
		pps_wire_auth_mac(token, strlen(token), c->nonce, want);
		if (!pps_wire_auth_equal(want, rec->u.auth.mac)) {
			r->stats.publishers_refused++;
			door_refuse(c, PPS_WIRE_BYE_UNAUTHORIZED, "wrong access token");
			return false;
		}
		door_admit_publisher(c);
		return false;
	}
	if (rec->kind != PPS_WIRE_HELLO) {
		door_refuse(c, PPS_WIRE_BYE_PROTOCOL,
		            "protocol error: the first record is not HELLO");
		return false;
	}
	c->hello = rec->u.hello;
	if (c->hello.protocol_version != PPS_WIRE_VERSION) {
		door_refuse(c, PPS_WIRE_BYE_VERSION, "protocol version not supported");
		return false;
	}
	if (c->hello.flags & PPS_WIRE_HELLO_PUBLISH)
		return door_hello_publisher(c);
	door_hello_subscriber(c);
	return false;
}

/* ---- the relay's own pages ------------------------------------------------- */

/* Appends to @b (of @size, at *@len); false once it is full. */
static bool json_add(char *b, size_t size, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static bool
json_add(char *b, size_t size, size_t *len, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(b + *len, size - *len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= size - *len)
		return false;
	*len += (size_t)n;
	return true;
}

static void
count_viewer_cb(pps_session_t *session, void *user)
{
	if (pps_session_state(session) == PPS_SESSION_STREAMING && !pps_session_audio_only(session))
		(*(unsigned *)user)++;
}

/*
 * GET /streams: the streams this relay hosts now, for the browser's stream
 * list and room page. Names are checked at publish (letters, digits, '.',
 * '_', '-', '/'): nothing in them needs escaping. At most max_streams
 * entries of ~200 bytes.
 */
static char *
streams_json(pps_relay_t *r, size_t *len_out)
{
	const char *token = r->params.listener.session.access_token;
	size_t size = 256 + (size_t)r->params.max_streams * 256, len = 0;
	char *b = malloc(size);
	bool first = true;

	if (!b)
		return NULL;
	json_add(b, size, &len, "{\"relay\": true, \"access_token\": %s, \"streams\": [",
	         token && token[0] ? "true" : "false");
	for (relay_stream_t *s = r->streams; s; s = s->next) {
		const pps_wire_stream_info_t *i = &s->info;
		unsigned viewers = 0;

		if (!s->have_info || !s->listener)
			continue; /* not streaming yet */
		pps_listener_foreach(s->listener, count_viewer_cb, &viewers);
		if (!json_add(
		        b, size, &len,
		        "%s\n  {\"name\": \"%s\", \"width\": %u, \"height\": %u, \"fps\": %.3f, "
		        "\"layers\": %u, \"audio\": %s, \"viewers\": %u, \"upstream\": %s}",
		        first ? "" : ",", s->name, i->width, i->height,
		        i->fps_den ? (double)i->fps_num / i->fps_den : 0.0,
		        (unsigned)i->quality_layers, i->audio_codec ? "true" : "false", viewers,
		        s->upstream ? "true" : "false"))
			break;
		first = false;
	}
	json_add(b, size, &len, "\n]}\n");
	*len_out = len;
	return b;
}

static bool
relay_page_cb(const pps_ws_request_t *req, pps_web_page_t *page, void *user)
{
	pps_relay_t *r = user;

	if (strcmp(req->path, "/streams") == 0) {
		*page = (pps_web_page_t){.status = 200, .reason = "OK"};
		page->body = streams_json(r, &page->body_len);
		page->content_type = "application/json";
		if (!page->body)
			*page = (pps_web_page_t){.status = 503, .reason = "Service Unavailable"};
		return true;
	}
	if (strcmp(req->path, "/") == 0) {
		/* A relay's front page is its stream list (web/relay.html), not
		 * the one-stream viewer a pps-server's is. */
		const pps_web_file_t *f = pps_web_file_find("/relay.html");

		*page = (pps_web_page_t){.status = 404, .reason = "Not Found"};
		if (f && (page->body = malloc(f->size))) {
			memcpy(page->body, f->data, f->size);
			*page = (pps_web_page_t){.status = 200,
			                         .reason = "OK",
			                         .content_type = f->content_type,
			                         .body = page->body,
			                         .body_len = f->size};
		}
		return true;
	}
	return false;
}

static void
web_free(web_conn_t *w)
{
	pps_relay_t *r = w->relay;

	for (web_conn_t **p = &r->web; *p; p = &(*p)->next) {
		if (*p == w) {
			*p = w->next;
			r->n_web--;
			break;
		}
	}
	pps_transport_free(w->t);
	if (w->timer)
		event_free(w->timer);
	if (w->fd >= 0)
		close(w->fd);
	free(w);
}

static void
web_timer_cb(evutil_socket_t fd, short what, void *user)
{
	web_free(user);
}

static void
web_input_cb(const uint8_t *buf, size_t len, void *user)
{
	/* Wire records after an upgrade: none, upgrades are refused here. */
}

static void
web_ended_cb(pps_transport_end_t how, const char *why, void *user)
{
	web_conn_t *w = user;

	if (why)
		pps_log(&w->relay->peer_log, PPS_LOG_INFO, "http: %s", why);
	event_active(w->timer, EV_TIMEOUT, 0);
}

/* The door's connection @c becomes an HTTP exchange with the relay itself;
 * the bytes it read are the request. */
static void
web_open(door_conn_t *c)
{
	pps_relay_t *r = c->relay;
	const pps_web_pages_t pages = {
	    .page_cb = relay_page_cb, .user = r, .refuse_upgrades = true};
	const pps_transport_events_t events = {.input_cb = web_input_cb, .ended_cb = web_ended_cb};
	struct timeval tv = pps_time_us_to_timeval(WEB_EXCHANGE_US);
	web_conn_t *w;

	if (r->n_web >= PPS_RELAY_MAX_PENDING || !(w = calloc(1, sizeof(*w)))) {
		r->stats.handshakes_dropped++;
		door_free(c, true);
		return;
	}
	w->relay = r;
	w->fd = c->fd;
	c->fd = -1;
	w->next = r->web;
	r->web = w;
	r->n_web++;
	r->stats.web_requests++;
	w->timer = evtimer_new(r->base, web_timer_cb, w);
	w->t = pps_transport_tcp_open(r->base, w->fd, &r->params.listener.session.transport);
	if (c->tls) {
		/* The layer takes the endpoint, or frees it if it cannot be made. */
		if (w->t)
			w->t = pps_transport_tls_over(w->t, c->tls);
		else
			pps_tls_free(c->tls);
		c->tls = NULL;
	}
	w->t = pps_transport_web_over(w->t, c->peer, NULL, &r->peer_log, &pages);
	if (!w->timer || !w->t || event_add(w->timer, &tv) < 0 ||
	    pps_transport_set_events(w->t, &events, w) < 0 ||
	    pps_transport_replay(w->t, c->buf, c->len) < 0) {
		door_free(c, false);
		web_free(w);
		return;
	}
	door_free(c, false);
}

/* An HTTP request came to the door: a WebSocket for a stream here goes to
 * that stream's listener (its session's browser layer reads the request
 * again); anything else is the relay's own exchange. True while the head
 * is not whole (the connection stays at the door). */
static bool
door_http(door_conn_t *c)
{
	pps_relay_t *r = c->relay;
	pps_ws_request_t req;
	const char *name = "";
	relay_stream_t *s = NULL;
	int ret = pps_ws_request_parse((const char *)c->buf, c->len, &req);
	bool stream_upgrade;

	if (ret == -EAGAIN && c->len < sizeof(c->buf))
		return true; /* more of the head to come */
	stream_upgrade =
	    ret == 0 && pps_ws_request_is_upgrade(&req) && pps_web_stream_path(req.path, &name);
	if (stream_upgrade)
		s = find_stream(r, name);
	if (!s || !s->listener) {
		if (stream_upgrade) {
			r->stats.subscribers_no_stream++;
			pps_log(&r->peer_log, PPS_LOG_INFO, "refused %s: no stream named %.64s",
			        c->peer, name);
		}
		web_open(c);
		return false;
	}
	door_route(c, s);
	return false;
}

/* The bytes in c->buf so far: a browser's request, or records up to the
 * HELLO (and a publisher's AUTH). False once the connection left the door
 * (handed on, refused, freed). */
static bool
door_input(door_conn_t *c, size_t n)
{
	pps_relay_t *r = c->relay;

	if (c->len == 0)
		c->http = pps_web_sniff(c->buf, n);
	c->len += n;
	if (c->http)
		return door_http(c);
	/* Records are handled one at a time: a HELLO hands the connection on,
	 * and what follows it is the new owner's. */
	for (;;) {
		const uint8_t *data = c->buf + c->parsed;
		size_t len = c->len - c->parsed;
		size_t before = len;
		pps_wire_record_t rec;
		int ret;

		/* Feed one byte at a time up to a record's end, so that
		 * c->parsed ends exactly there. */
		ret = -EAGAIN;
		while (len > 0 && ret == -EAGAIN) {
			size_t one = 1;
			const uint8_t *p = data + (before - len);

			ret = pps_wire_parser_next(c->parser, &p, &one, &rec);
			len--;
		}
		c->parsed += before - len;
		if (ret == -EAGAIN)
			return true;
		if (ret < 0) {
			char why[224];

			snprintf(why, sizeof(why), "protocol error: %s",
			         pps_wire_parser_error(c->parser));
			r->stats.handshakes_dropped++;
			door_refuse(c,
			            pps_wire_parser_error_code(c->parser) == PPS_WIRE_ERR_VERSION
			                ? PPS_WIRE_BYE_VERSION
			                : PPS_WIRE_BYE_PROTOCOL,
			            why);
			return false;
		}
		/* Only a publisher's CHALLENGE keeps the connection here. */
		if (!door_record(c, &rec))
			return false;
	}
}

/* A TLS connection at the door: the handshake, then its plaintext. */
static void
door_tls(door_conn_t *c)
{
	pps_relay_t *r = c->relay;
	char why[160];

	if (!pps_tls_handshake_done(c->tls)) {
		int ret = pps_tls_handshake(c->tls, why, sizeof(why));

		if (ret == -EAGAIN) {
			if (pps_tls_want_write(c->tls))
				event_add(c->write_event, NULL);
			return;
		}
		if (ret < 0) {
			r->stats.handshakes_dropped++;
			pps_log(&r->peer_log, PPS_LOG_INFO, "TLS handshake with %s failed: %s",
			        c->peer, why);
			door_free(c, true);
			return;
		}
	}
	/* OpenSSL may hold records the socket will not signal again: read
	 * while it has some, a few times at most (a HELLO is one record). */
	for (int reads = 0; reads < PPS_TRANSPORT_READS_PER_WAKEUP; reads++) {
		size_t limit = c->http ? sizeof(c->buf) : PPS_RELAY_HELLO_BYTES;
		ssize_t n;

		if (c->len >= limit) {
			r->stats.handshakes_dropped++;
			door_refuse(c, PPS_WIRE_BYE_PROTOCOL, "protocol error: HELLO too long");
			return;
		}
		n = pps_tls_read(c->tls, c->buf + c->len, limit - c->len);
		if (n == -EAGAIN)
			return;
		if (n <= 0) {
			r->stats.handshakes_dropped++;
			door_free(c, true);
			return;
		}
		if (!door_input(c, (size_t)n) || !pps_tls_has_pending(c->tls))
			return;
	}
}

static void
door_write_cb(evutil_socket_t fd, short what, void *user)
{
	door_tls(user);
}

static void
door_read_cb(evutil_socket_t fd, short what, void *user)
{
	door_conn_t *c = user;
	pps_relay_t *r = c->relay;
	size_t limit = c->http ? sizeof(c->buf) : PPS_RELAY_HELLO_BYTES;
	ssize_t n;

	if (!c->tls && c->len == 0 && r->tls_ctx) {
		uint8_t first;

		/* A TLS handshake record first: TLS; else plaintext, as without
		 * a certificate (publishers and upstream relays speak it). */
		n = recv(fd, &first, 1, MSG_PEEK);
		if (n == 1 && first == 0x16) {
			c->tls = pps_tls_new(r->tls_ctx, fd, NULL);
			c->write_event = event_new(r->base, fd, EV_WRITE, door_write_cb, c);
			if (!c->tls || !c->write_event) {
				r->stats.handshakes_dropped++;
				door_free(c, true);
				return;
			}
		}
	}
	if (c->tls) {
		door_tls(c);
		return;
	}
	if (c->len >= limit) {
		r->stats.handshakes_dropped++;
		door_refuse(c, PPS_WIRE_BYE_PROTOCOL, "protocol error: HELLO too long");
		return;
	}
	/* A HELLO is at most PPS_RELAY_HELLO_BYTES; a browser's request head
	 * (the first byte says which) may be longer. */
	n = recv(fd, c->buf + c->len, limit - c->len, 0);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n <= 0) {
		r->stats.handshakes_dropped++;
		door_free(c, true);
		return;
	}
	door_input(c, (size_t)n);
}

static void
door_timeout_cb(evutil_socket_t fd, short what, void *user)
{
	door_conn_t *c = user;

	c->relay->stats.handshakes_dropped++;
	door_refuse(c, PPS_WIRE_BYE_PROTOCOL, "handshake timeout");
}

static void
accept_cb(evutil_socket_t lfd, short what, void *user)
{
	pps_relay_t *r = user;

	for (unsigned i = 0; i < PPS_LISTENER_ACCEPTS_PER_WAKEUP; i++) {
		struct sockaddr_storage addr;
		socklen_t len = sizeof(addr);
		int fd = accept4(lfd, (struct sockaddr *)&addr, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct timeval tv = pps_time_us_to_timeval(HELLO_TIMEOUT_US);
		door_conn_t *c;

		if (fd < 0)
			return;
		if (r->n_door >= PPS_RELAY_MAX_PENDING) {
			send_bye(fd, NULL, PPS_WIRE_BYE_SERVER_FULL, "too many handshakes at once");
			r->stats.handshakes_dropped++;
			close(fd);
			continue;
		}
		c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		c->relay = r;
		c->fd = fd;
		c->addr = addr;
		c->addr_len = len;
		format_peer((struct sockaddr *)&addr, len, c->peer, sizeof(c->peer));
		c->next = r->door;
		r->door = c;
		r->n_door++;
		c->parser = pps_wire_parser_new(PPS_RELAY_HELLO_BYTES);
		c->read_event = event_new(r->base, fd, EV_READ | EV_PERSIST, door_read_cb, c);
		c->timer = evtimer_new(r->base, door_timeout_cb, c);
		if (!c->parser || !c->read_event || !c->timer ||
		    event_add(c->read_event, NULL) < 0 || event_add(c->timer, &tv) < 0) {
			door_free(c, true);
			continue;
		}
		pps_wire_parser_set_sender(c->parser, PPS_WIRE_FROM_CLIENT);
	}
}

/* ---- the relay ------------------------------------------------------------- */

pps_relay_t *
pps_relay_new(struct event_base *base, const pps_relay_params_t *params, char *err, size_t err_size)
{
	pps_relay_t *r;

	if (!base || !params || params->listener.max_clients == 0) {
		snprintf(err, err_size, "relay: no event loop, or max_clients 0");
		errno = EINVAL;
		return NULL;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		snprintf(err, err_size, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	if (params->listener.tls_cert && params->listener.tls_cert[0]) {
		char why[256];

		r->tls_ctx = pps_tls_ctx_new_server(params->listener.tls_cert,
		                                    params->listener.tls_key, why, sizeof(why));
		if (!r->tls_ctx) {
			snprintf(err, err_size, "[server] tls_cert/tls_key: %s", why);
			free(r);
			errno = EINVAL;
			return NULL;
		}
	}
	if (params->relay_tls) {
		char why[256];

		r->upstream_tls_ctx =
		    pps_tls_ctx_new_client(params->relay_tls_ca, why, sizeof(why));
		if (!r->upstream_tls_ctx) {
			snprintf(err, err_size, "[server] relay_tls_ca: %s", why);
			pps_tls_ctx_free(r->tls_ctx);
			free(r);
			errno = EINVAL;
			return NULL;
		}
	}
	r->base = base;
	r->params = *params;
	if (!r->params.max_streams)
		r->params.max_streams = PPS_RELAY_DEFAULT_MAX_STREAMS;
	r->listen_fd = -1;
	r->peer_log_limit.clock_cb = limit_clock_cb;
	pps_log_limit_init(&r->peer_log_limit, &params->log, PPS_LOG_LIMIT_LINES_PER_S,
	                   PPS_LOG_LIMIT_BURST);
	r->peer_log = pps_log_limit_log(&r->peer_log_limit);
	return r;
}

int
pps_relay_listen(pps_relay_t *r, const char *listen_at, unsigned *port_out, char *err,
                 size_t err_size)
{
	char bhost[NI_MAXHOST], bport[NI_MAXSERV];
	struct sockaddr_storage bound;
	socklen_t bound_len = sizeof(bound);
	int fd = pps_socket_listen_tcp(listen_at, PPS_LISTENER_BACKLOG, err, err_size);

	if (fd < 0)
		return fd;
	r->listen_fd = fd;
	r->accept_event = event_new(r->base, r->listen_fd, EV_READ | EV_PERSIST, accept_cb, r);
	if (!r->accept_event || event_add(r->accept_event, NULL) < 0) {
		snprintf(err, err_size, "out of memory");
		return -ENOMEM;
	}
	getsockname(r->listen_fd, (struct sockaddr *)&bound, &bound_len);
	getnameinfo((struct sockaddr *)&bound, bound_len, bhost, sizeof(bhost), bport,
	            sizeof(bport), NI_NUMERICHOST | NI_NUMERICSERV);
	*port_out = (unsigned)strtoul(bport, NULL, 10);
	pps_log(&r->params.log, PPS_LOG_INFO, "relay listening on %s%s%s:%s (at most %u streams)",
	        strchr(bhost, ':') ? "[" : "", bhost, strchr(bhost, ':') ? "]" : "", bport,
	        r->params.max_streams);
	pps_log(&r->params.log, PPS_LOG_INFO, "streams and rooms in a browser: %s://%s%s%s:%s/",
	        r->tls_ctx ? "https" : "http", strchr(bhost, ':') ? "[" : "", bhost,
	        strchr(bhost, ':') ? "]" : "", bport);
	return 0;
}

void
pps_relay_say_bye(pps_relay_t *r, const char *text)
{
	for (relay_stream_t *s = r->streams; s; s = s->next) {
		if (s->listener)
			pps_listener_say_bye_all(s->listener, PPS_WIRE_BYE_NORMAL, text);
		if (s->fd >= 0)
			send_bye(s->fd, s->tls, PPS_WIRE_BYE_NORMAL, text);
	}
}

void
pps_relay_get_stats(const pps_relay_t *r, pps_relay_stats_t *stats)
{
	*stats = r->stats;
	stats->streams = count_streams(r);
	stats->viewers = 0;
	for (const relay_stream_t *s = r->streams; s; s = s->next) {
		pps_listener_stats_t ls;

		if (!s->listener)
			continue;
		pps_listener_get_stats(s->listener, &ls);
		stats->viewers += ls.streaming;
	}
}

void
pps_relay_free(pps_relay_t *r)
{
	if (!r)
		return;
	while (r->door)
		door_free(r->door, true);
	while (r->web)
		web_free(r->web);
	while (r->upstreams) {
		upstream_t *u = r->upstreams;

		r->upstreams = u->next;
		upstream_free(u);
	}
	while (r->streams) {
		relay_stream_t *s = r->streams;

		r->streams = s->next;
		stream_free(s);
	}
	while (r->dying) {
		relay_stream_t *s = r->dying;

		r->dying = s->next;
		stream_free(s);
	}
	if (r->accept_event)
		event_free(r->accept_event);
	if (r->listen_fd >= 0)
		close(r->listen_fd);
	pps_tls_ctx_free(r->tls_ctx);
	pps_tls_ctx_free(r->upstream_tls_ctx);
	pps_log_limit_flush(&r->peer_log_limit);
	free(r);
}

/* ---- outbound connections ------------------------------------------------- */

/* The HELLO a relay or a publisher opens an outbound connection with: @flags
 * and the stream flag, the challenge flag when it holds a @token, the program
 * @name, the @stream's name. */
static pps_wire_record_t
outbound_hello(uint16_t flags, const char *token, const char *name, const char *stream)
{
	pps_wire_record_t hello = {.kind = PPS_WIRE_HELLO};

	hello.u.hello.protocol_version = PPS_WIRE_VERSION;
	hello.u.hello.flags = flags | PPS_WIRE_HELLO_STREAM;
	if (token && token[0])
		hello.u.hello.flags |= PPS_WIRE_HELLO_CHALLENGE;
	hello.u.hello.name_len =
	    (uint8_t)snprintf(hello.u.hello.name, sizeof(hello.u.hello.name), "%s", name);
	hello.u.hello.stream_len =
	    (uint8_t)snprintf(hello.u.hello.stream, sizeof(hello.u.hello.stream), "%s", stream);
	return hello;
}

/* A blocking TCP connection to @address (HOST:PORT), the connect and every
 * later send and receive bounded by @timeout_us; @what names the peer in
 * errors ("the relay"). Its address into @addr (may be NULL). The
 * descriptor, or a negative errno with @err. */
static int
connect_bounded(const char *address, const char *what, int64_t timeout_us,
                struct sockaddr_storage *addr, socklen_t *addr_len, char *err, size_t err_size)
{
	char host[256], port[16];
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
	struct addrinfo *res = NULL;
	struct timeval tv = pps_time_us_to_timeval(timeout_us);
	int fd, ret;

	if (pps_socket_split_address(address, host, sizeof(host), port, sizeof(port)) < 0) {
		snprintf(err, err_size, "%s: not HOST:PORT", address);
		return -EINVAL;
	}
	ret = getaddrinfo(host, port, &hints, &res);
	if (ret != 0) {
		snprintf(err, err_size, "cannot resolve %s: %s", address, gai_strerror(ret));
		return -EINVAL;
	}
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0 ||
	    connect(fd, res->ai_addr, res->ai_addrlen) < 0) {
		ret = -errno;
		snprintf(err, err_size, "cannot connect to %s %s: %s", what, address,
		         strerror(errno));
		freeaddrinfo(res);
		if (fd >= 0)
			close(fd);
		return ret;
	}
	if (addr) {
		memcpy(addr, res->ai_addr, res->ai_addrlen);
		*addr_len = res->ai_addrlen;
	}
	freeaddrinfo(res);
	return fd;
}

/* ---- a stream from another relay ------------------------------------------ */

static void upstream_try(upstream_t *u);

static void
upstream_timer_cb(evutil_socket_t fd, short what, void *user)
{
	upstream_t *u = user;

	if (u->fd >= 0 && !u->stream) {
		/* The connect's bound passed. */
		upstream_lost(u,
		              u->tls ? "no TLS handshake in time" : "no answer to connect in time");
		return;
	}
	upstream_try(u);
}

/* Not connected, or the stream ended: the next try after the backoff. */
static void
upstream_lost(upstream_t *u, const char *why)
{
	pps_relay_t *r = u->relay;
	int64_t now = pps_time_monotonic_us();
	struct timeval tv;

	if (u->connected)
		event_del(u->connected);
	pps_tls_free(u->tls);
	u->tls = NULL;
	if (!u->stream && u->fd >= 0)
		close(u->fd); /* a stream's socket is the stream's to close */
	u->fd = -1;
	u->stream = NULL;
	if (u->began_us && now - u->began_us >= UPSTREAM_STABLE_US)
		u->retry_us = UPSTREAM_RETRY_FIRST_US;
	u->began_us = 0;
	snprintf(u->last_why, sizeof(u->last_why), "%s", why);
	/* The first failure of a series is said; the next are the rate-limited
	 * log's (at most one a UPSTREAM_RETRY_MAX_US each once the backoff is
	 * at its maximum). */
	pps_log(u->tries == 0 ? &r->params.log : &r->peer_log, PPS_LOG_WARNING,
	        "upstream %s: %s; trying again in %.1f s", u->location, why,
	        (double)u->retry_us / 1e6);
	u->tries++;
	tv = pps_time_us_to_timeval(u->retry_us);
	event_add(u->timer, &tv);
	u->retry_us =
	    u->retry_us * 2 > UPSTREAM_RETRY_MAX_US ? UPSTREAM_RETRY_MAX_US : u->retry_us * 2;
}

/* Connected (and TLS done, if any): subscribe as a viewer would, and host
 * the stream. */
static void
upstream_subscribe(upstream_t *u)
{
	pps_relay_t *r = u->relay;
	pps_wire_record_t hello;
	relay_stream_t *s;

	event_del(u->timer);
	if (find_stream(r, u->name) || count_streams(r) >= r->params.max_streams) {
		upstream_lost(u, "the relay is full");
		return;
	}
	s = calloc(1, sizeof(*s));
	if (!s || !(s->parser = pps_wire_parser_new(PPS_WIRE_DEFAULT_MAX_RECORD_BYTES))) {
		free(s);
		upstream_lost(u, "out of memory");
		return;
	}
	pps_wire_parser_set_sender(s->parser, PPS_WIRE_FROM_SERVER);
	s->relay = r;
	s->audio_fd = -1;
	s->fd = u->fd;
	snprintf(s->name, sizeof(s->name), "%s", u->name);
	snprintf(s->peer, sizeof(s->peer), "upstream %s", u->location);
	/* A viewer's HELLO: the upstream serves this relay as any viewer. */
	hello = outbound_hello(PPS_WIRE_HELLO_AUDIO, u->token, "pps-relay", u->name);
	s->read_event = event_new(r->base, s->fd, EV_READ | EV_PERSIST, stream_read_cb, s);
	if (!s->read_event || event_add(s->read_event, NULL) < 0 ||
	    say_record(s->fd, u->tls, &hello) < 0) {
		s->fd = -1; /* still the upstream's */
		stream_free(s);
		upstream_lost(u, "cannot send HELLO");
		return;
	}
	s->tls = u->tls;
	u->tls = NULL; /* the stream's */
	s->upstream = u;
	u->stream = s;
	u->began_us = pps_time_monotonic_us();
	s->next = r->streams;
	r->streams = s;
}

/* One step of the TLS handshake with the upstream, from the socket's events
 * (the connect's bound still runs). */
static void
upstream_handshake_cb(evutil_socket_t fd, short what, void *user)
{
	upstream_t *u = user;
	char why[160], msg[200];
	int ret = pps_tls_handshake(u->tls, why, sizeof(why));

	if (ret == -EAGAIN) {
		event_free(u->connected);
		u->connected = event_new(u->relay->base, u->fd,
		                         pps_tls_want_write(u->tls) ? EV_WRITE : EV_READ,
		                         upstream_handshake_cb, u);
		if (!u->connected || event_add(u->connected, NULL) < 0)
			upstream_lost(u, "out of memory");
		return;
	}
	if (ret < 0) {
		snprintf(msg, sizeof(msg), "TLS: %s", why);
		upstream_lost(u, msg);
		return;
	}
	upstream_subscribe(u);
}

/* The connect finished: TLS first if the relay speaks it upstream. */
static void
upstream_connected_cb(evutil_socket_t fd, short what, void *user)
{
	upstream_t *u = user;
	pps_relay_t *r = u->relay;
	int soerr = 0;
	socklen_t len = sizeof(soerr);
	char why[160];

	if (getsockopt(u->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
		soerr = errno;
	if (soerr) {
		event_del(u->timer);
		snprintf(why, sizeof(why), "cannot connect: %s", strerror(soerr));
		upstream_lost(u, why);
		return;
	}
	if (!r->upstream_tls_ctx) {
		upstream_subscribe(u);
		return;
	}
	u->tls = pps_tls_new(r->upstream_tls_ctx, u->fd, u->host);
	if (!u->tls) {
		upstream_lost(u, "out of memory");
		return;
	}
	upstream_handshake_cb(fd, what, u);
}

/* The upstream's STREAM_INFO came: the stream is up (again). */
static void
upstream_up(upstream_t *u)
{
	pps_relay_t *r = u->relay;

	if (u->was_up)
		r->stats.upstream_reconnects++;
	if (u->tries)
		pps_log(&r->params.log, PPS_LOG_INFO,
		        "subscribed to %s as stream %s (%safter %u %s: %s)", u->location, u->name,
		        u->was_up ? "again, " : "", u->tries, u->tries == 1 ? "try" : "tries",
		        u->last_why);
	else
		pps_log(&r->params.log, PPS_LOG_INFO, "subscribed to %s as stream %s", u->location,
		        u->name);
	u->was_up = true;
	u->tries = 0;
}

/* One try: a non-blocking connect, bounded by the handshake timeout. */
static void
upstream_try(upstream_t *u)
{
	struct timeval tv = pps_time_us_to_timeval(PPS_DEFAULT_HELLO_TIMEOUT_US);
	char why[160];

	u->fd = socket(u->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (u->fd < 0 || (connect(u->fd, (struct sockaddr *)&u->addr, u->addr_len) < 0 &&
	                  errno != EINPROGRESS)) {
		snprintf(why, sizeof(why), "cannot connect: %s", strerror(errno));
		upstream_lost(u, why);
		return;
	}
	if (u->connected)
		event_free(u->connected);
	u->connected = event_new(u->relay->base, u->fd, EV_WRITE, upstream_connected_cb, u);
	if (!u->connected || event_add(u->connected, NULL) < 0 || event_add(u->timer, &tv) < 0) {
		upstream_lost(u, "out of memory");
		return;
	}
}

static void
upstream_free(upstream_t *u)
{
	if (u->connected)
		event_free(u->connected);
	if (u->timer)
		event_free(u->timer);
	pps_tls_free(u->tls);
	if (!u->stream && u->fd >= 0)
		close(u->fd);
	if (u->stream)
		u->stream->upstream = NULL;
	free(u);
}

int
pps_relay_upstream(pps_relay_t *r, const char *location, const char *token, char *err,
                   size_t err_size)
{
	char address[300], stream[PPS_WIRE_MAX_STREAM_BYTES + 1];
	char host[256], port[16];
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
	struct addrinfo *res = NULL;
	unsigned n = 0;
	upstream_t *u;
	int ret;

	if (pps_stream_location_split(location, address, sizeof(address), stream, sizeof(stream),
	                              err, err_size) < 0)
		return -EINVAL;
	if (!stream[0]) {
		snprintf(err, err_size, "--upstream %s: not HOST:PORT/NAME", location);
		return -EINVAL;
	}
	/* Upstreams that are down hold their names too. */
	for (u = r->upstreams; u; u = u->next) {
		if (strcmp(u->name, stream) == 0)
			break;
		if (!u->stream)
			n++;
	}
	if (u || find_stream(r, stream) || n + count_streams(r) >= r->params.max_streams) {
		snprintf(err, err_size, "--upstream %s: the name is taken or the relay is full",
		         location);
		return -EBUSY;
	}
	/* Resolved once, at start (a name that does not resolve is a usage
	 * error); connecting is the loop's, now and after every loss. */
	if (pps_socket_split_address(address, host, sizeof(host), port, sizeof(port)) < 0) {
		snprintf(err, err_size, "--upstream %s: not HOST:PORT/NAME", location);
		return -EINVAL;
	}
	ret = getaddrinfo(host, port, &hints, &res);
	if (ret != 0) {
		snprintf(err, err_size, "--upstream %s: cannot resolve %s: %s", location, host,
		         gai_strerror(ret));
		return -EINVAL;
	}
	u = calloc(1, sizeof(*u));
	if (!u || res->ai_addrlen > sizeof(u->addr)) {
		freeaddrinfo(res);
		free(u);
		snprintf(err, err_size, "out of memory");
		return -ENOMEM;
	}
	memcpy(&u->addr, res->ai_addr, res->ai_addrlen);
	u->addr_len = res->ai_addrlen;
	freeaddrinfo(res);
	u->relay = r;
	u->fd = -1;
	u->token = token;
	u->retry_us = UPSTREAM_RETRY_FIRST_US;
	snprintf(u->location, sizeof(u->location), "%s", location);
	snprintf(u->name, sizeof(u->name), "%s", stream);
	snprintf(u->host, sizeof(u->host), "%s", host);
	u->timer = evtimer_new(r->base, upstream_timer_cb, u);
	if (!u->timer) {
		free(u);
		snprintf(err, err_size, "out of memory");
		return -ENOMEM;
	}
	u->next = r->upstreams;
	r->upstreams = u;
	upstream_try(u);
	return 0;
}

/* ---- the publisher's side -------------------------------------------------- */

/* The publisher's connection before the loop has it: a non-blocking socket,
 * TLS over it or not, every wait bounded by one deadline. */
typedef struct {
	int fd;
	pps_tls_t *tls;
	int64_t deadline_us;
} outbound_t;

/* Waits until @c's socket is readable (or writable, @write) or the deadline
 * passes: 0, or -ETIMEDOUT. */
static int
outbound_wait(const outbound_t *c, bool write)
{
	struct pollfd p = {.fd = c->fd, .events = write ? POLLOUT : POLLIN};
	int64_t left = c->deadline_us - pps_time_monotonic_us();
	int ret;

	if (left <= 0)
		return -ETIMEDOUT;
	ret = poll(&p, 1, (int)(left / 1000) + 1);
	if (ret < 0)
		return errno == EINTR ? 0 : -errno;
	return ret == 0 ? -ETIMEDOUT : 0;
}

/* Some bytes into @buf (> 0), or a negative errno (-ECONNRESET: closed). */
static ssize_t
outbound_recv(outbound_t *c, uint8_t *buf, size_t size)
{
	for (;;) {
		ssize_t n = c->tls ? pps_tls_read(c->tls, buf, size) : recv(c->fd, buf, size, 0);
		int ret;

		if (n > 0)
			return n;
		if (n == 0)
			return -ECONNRESET;
		if (!c->tls && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		if (c->tls && n != -EAGAIN)
			return n;
		ret = outbound_wait(c, c->tls && pps_tls_want_write(c->tls));
		if (ret < 0)
			return ret;
	}
}

/* All of @len bytes out: 0, or a negative errno. */
static int
outbound_send(outbound_t *c, const uint8_t *buf, size_t len)
{
	int ret;

	if (c->tls) {
		ret = pps_tls_send(c->tls, buf, len);
		while (ret == -EAGAIN) {
			ret = outbound_wait(c, true);
			if (ret == 0)
				ret = pps_tls_flush(c->tls);
		}
		return ret;
	}
	while (len > 0) {
		ssize_t n = send(c->fd, buf, len, MSG_NOSIGNAL);

		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
			ret = outbound_wait(c, true);
			if (ret < 0)
				return ret;
			continue;
		}
		if (n < 0)
			return -errno;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Reads one whole record into @buf and parses it. 0, or a negative errno. */
static int
read_record(outbound_t *c, pps_wire_parser_t *parser, uint8_t *buf, size_t size, size_t *len,
            pps_wire_record_t *rec)
{
	size_t have = 0, want = PPS_WIRE_HEADER_BYTES;
	const uint8_t *p;
	size_t n;
	int ret;

	while (have < want) {
		ssize_t got = outbound_recv(c, buf + have, want - have);

		if (got < 0)
			return (int)got;
		have += (size_t)got;
		if (have == PPS_WIRE_HEADER_BYTES && want == PPS_WIRE_HEADER_BYTES) {
			want += (size_t)buf[2] << 8 | buf[3];
			if (want > size)
				return -EMSGSIZE;
		}
	}
	p = buf;
	n = have;
	ret = pps_wire_parser_next(parser, &p, &n, rec);
	*len = have;
	return ret == -EAGAIN ? -EPROTO : ret;
}

int
pps_relay_publish_connect(const char *location, bool audio, const char *token,
                          pps_tls_ctx_t *tls_ctx, int64_t timeout_us, int *fd_out,
                          pps_tls_t **tls_out, struct sockaddr_storage *addr, socklen_t *addr_len,
                          uint8_t *hello_out, size_t hello_size, size_t *hello_len, char *err,
                          size_t err_size)
{
	char address[300], stream[PPS_WIRE_MAX_STREAM_BYTES + 1], host[256], port[16];
	pps_wire_record_t hello, rec;
	pps_wire_parser_t *parser = NULL;
	outbound_t c = {.fd = -1, .deadline_us = pps_time_monotonic_us() + timeout_us};
	uint8_t buf[512];
	size_t n;
	int ret;

	*tls_out = NULL;
	if (pps_stream_location_split(location, address, sizeof(address), stream, sizeof(stream),
	                              err, err_size) < 0)
		return -EINVAL;
	if (!stream[0]) {
		snprintf(err, err_size, "--publish %s: name the stream (HOST:PORT/NAME)", location);
		return -EINVAL;
	}
	c.fd = connect_bounded(address, "the relay", timeout_us, addr, addr_len, err, err_size);
	if (c.fd < 0)
		return c.fd;
	/* From here on non-blocking, every wait bounded by the deadline. */
	(void)setsockopt(c.fd, SOL_SOCKET, SO_RCVTIMEO, &(struct timeval){0, 0},
	                 sizeof(struct timeval));
	(void)setsockopt(c.fd, SOL_SOCKET, SO_SNDTIMEO, &(struct timeval){0, 0},
	                 sizeof(struct timeval));
	if (fcntl(c.fd, F_SETFL, fcntl(c.fd, F_GETFL) | O_NONBLOCK) < 0) {
		ret = -errno;
		snprintf(err, err_size, "relay socket: %s", strerror(errno));
		goto fail;
	}
	if (tls_ctx) {
		char why[200];

		/* The certificate must be valid for the host named. */
		(void)pps_socket_split_address(address, host, sizeof(host), port, sizeof(port));
		c.tls = pps_tls_new(tls_ctx, c.fd, host);
		if (!c.tls) {
			ret = -ENOMEM;
			snprintf(err, err_size, "out of memory");
			goto fail;
		}
		while ((ret = pps_tls_handshake(c.tls, why, sizeof(why))) == -EAGAIN) {
			ret = outbound_wait(&c, pps_tls_want_write(c.tls));
			if (ret < 0) {
				snprintf(err, err_size, "relay %s: no TLS handshake in time",
				         address);
				goto fail;
			}
		}
		if (ret < 0) {
			snprintf(err, err_size, "relay %s: TLS: %s", address, why);
			goto fail;
		}
	}
	parser = pps_wire_parser_new(sizeof(buf));
	if (!parser) {
		ret = -ENOMEM;
		snprintf(err, err_size, "out of memory");
		goto fail;
	}
	hello = outbound_hello(PPS_WIRE_HELLO_PUBLISH | (audio ? PPS_WIRE_HELLO_AUDIO_ONLY : 0),
	                       token, "pps-server", stream);
	if (pps_wire_encode(&hello, buf, sizeof(buf), &n) < 0 || outbound_send(&c, buf, n) < 0) {
		ret = -EIO;
		snprintf(err, err_size, "cannot send HELLO to the relay %s", address);
		goto fail;
	}
	for (;;) {
		ret = read_record(&c, parser, buf, sizeof(buf), &n, &rec);
		if (ret < 0) {
			snprintf(err, err_size, "relay %s: %s", address,
			         ret == -EPROTO      ? pps_wire_parser_error(parser)
			         : ret == -ETIMEDOUT ? "no answer to HELLO in time"
			                             : strerror(-ret));
			goto fail;
		}
		if (rec.kind == PPS_WIRE_BYE) {
			ret = -EPERM;
			snprintf(err, err_size, "relay %s refused stream %s: %s%s%s", address,
			         stream, pps_wire_bye_reason_name(rec.u.bye.reason),
			         rec.u.bye.text_len ? ": " : "", rec.u.bye.text);
			goto fail;
		}
		if (rec.kind == PPS_WIRE_CHALLENGE) {
			pps_wire_record_t auth = {.kind = PPS_WIRE_AUTH};
			uint8_t out[64];
			size_t m;

			if (!token || !token[0]) {
				ret = -EPERM;
				snprintf(err, err_size,
				         "relay %s wants an access token (server.access_token)",
				         address);
				goto fail;
			}
			auth.u.auth.method = PPS_WIRE_AUTH_HMAC_SHA256;
			pps_wire_auth_mac(token, strlen(token), rec.u.challenge.nonce,
			                  auth.u.auth.mac);
			if (pps_wire_encode(&auth, out, sizeof(out), &m) < 0 ||
			    outbound_send(&c, out, m) < 0) {
				ret = -EIO;
				snprintf(err, err_size, "cannot send AUTH to the relay %s",
				         address);
				goto fail;
			}
			continue;
		}
		if (rec.kind != PPS_WIRE_HELLO || n > hello_size) {
			ret = -EPROTO;
			snprintf(err, err_size, "relay %s: %s instead of its HELLO", address,
			         pps_wire_kind_name(rec.kind));
			goto fail;
		}
		break;
	}
	memcpy(hello_out, buf, n);
	*hello_len = n;
	pps_wire_parser_free(parser);
	*fd_out = c.fd;
	*tls_out = c.tls;
	return 0;

fail:
	pps_wire_parser_free(parser);
	pps_tls_free(c.tls);
	if (c.fd >= 0)
		close(c.fd);
	return ret;
}
