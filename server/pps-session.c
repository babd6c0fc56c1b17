/* SPDX-License-Identifier: MIT */
/*
 * One client of pps-server: HELLO handshake, CLOCK_PING answers, and its own
 * progress regulator feeding its own transport (pps-transport.h: the MIN_BUF
 * or tcp writer, under TLS and the browser's WebSocket when the connection
 * has them). A session only ever touches its own state: a client that stops
 * reading loses its own windows at their deadlines (bounded by [pps]
 * max_windows) and nothing else.
 */
#include "pps-server-internal.h"
#include "pps-socket.h"
#include "pps-time.h"
#include "pps-tls.h"
#include "pps-transport.h"

#include <errno.h>
#include <event2/event.h>
#include <limits.h>
#include <linux/sockios.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

/* Records a client may send are small; anything longer is refused. */
#define CLIENT_MAX_RECORD_BYTES 512
/* Audio frames one session holds back for a later copy at once (a pool's
 * later copies are a few ms apart: one or two wait at a time). */
#define PPS_SESSION_DELAYED_AUDIO 4
/* Audio pushes whose times a session keeps (pps_session_audio_state()). */
#define PPS_SESSION_PUSH_TIMES 8
/* What a copy held back for later counts as in pps_session_audio_state()'s
 * backlog: enough to rank its connection busy, not idle. */
#define PPS_SESSION_DELAYED_BYTES 64

/* Windows one session holds back for a later copy at once (a few ms each,
 * windows 33-67 ms apart: one waits at a time; more only with spacings
 * far longer than a window). */
#define PPS_SESSION_DELAYED_WINDOWS 4

struct delayed_window {
	int64_t due_us; /* monotonic */
	pps_window_t *window;
};

struct delayed_audio {
	int64_t due_us; /* monotonic */
	pps_wire_audio_frame_t frame;
	uint8_t data[PPS_WIRE_MAX_AUDIO_BYTES];
};

struct pps_session {
	int fd;
	unsigned id;
	char peer[160];
	char address[64];                       /* "addr:port", the peer without its name */
	char name[PPS_WIRE_MAX_NAME_BYTES + 1]; /* from HELLO, printable ASCII; "" none */
	int64_t joined_us;                      /* admitted (0: not yet) */
	pps_session_params_t params;
	pps_session_state_t state;
	pps_wire_parser_t *parser;
	struct event *deadline_timer;
	struct event *hello_timer;
	pps_transport_t *transport;
	pps_path_t *path; /* fed by the writer's TCP_INFO readings */
	pps_sched_t *sched;
	pps_session_ready_cb ready_cb;
	pps_session_closed_cb closed_cb;
	void *user;
	bool closing;
	bool rate_cap_warned; /* said once that SO_MAX_PACING_RATE failed */
	bool
	    congestion_switch_failed; /* a TCP_CONGESTION switch failed: said once, no more tries */
	uint64_t pings;
	/* PONGs owed: a token bucket (PPS_SESSION_PONG_BURST, then
	 * PPS_SESSION_PONGS_PER_S); a PING past it is not answered. */
	double pong_tokens;
	int64_t pong_refill_us;
	uint64_t pings_unanswered;
	uint64_t base_dropped;    /* base-layer ADUs dropped for this client so far */
	int64_t last_progress_us; /* last time the writer took a packet */
	/* Windows cut short, as pps_session_take_cut_windows() has seen them:
	 * how many so far, how many not yet counted, and the bytes acknowledged
	 * and in flight when they were seen (the client counts as reading once
	 * it has acknowledged more than both). */
	uint64_t cut_seen, cut_pending;
	uint64_t cut_seen_acked;
	/* pps_session_take_competing(): the path was shared at the last call,
	 * and the bytes acknowledged and in flight then. */
	bool competing_seen;
	uint64_t competing_seen_acked;
	bool starting; /* a video client whose path pps_session_take_start() has not read */
	/* The last PATH_REPORT of a relay client, when it came, and the flags of
	 * every report since pps_session_take_report_flags(). */
	pps_wire_path_report_t report;
	int64_t report_us;
	uint8_t report_flags;
	bool report_start_read;    /* a report without STARTING after one with it */
	int64_t accepted_us;       /* for the handshake timeout */
	int bye_reason;            /* the BYE reason we refused with, or -1 */
	uint16_t max_record_bytes; /* from HELLO, applied at admission */
	uint16_t hello_flags;      /* PPS_WIRE_HELLO_*, applied at admission */
	bool audio;                /* audio frames go to this connection */
	uint32_t audio_pool;       /* from an audio-only HELLO; 0: none */
	/* When the last PPS_SESSION_PUSH_TIMES audio frames were pushed
	 * (monotonic), the newest at audio_push_next - 1: how long a pool's
	 * connection has had its oldest frame unacknowledged. */
	int64_t audio_push_us[PPS_SESSION_PUSH_TIMES];
	unsigned audio_push_next;
	/* Audio frames to push later (pps_session_push_audio_later()), oldest
	 * first: a ring of PPS_SESSION_DELAYED_AUDIO, allocated on first use. */
	struct delayed_audio *delayed;
	unsigned delayed_head, delayed_count;
	struct event *delay_timer;
	struct delayed_window delayed_windows[PPS_SESSION_DELAYED_WINDOWS];
	unsigned window_head, window_count;
	struct event *window_timer;
	int64_t window_delay_us; /* the last pps_session_push_window_later()'s */
	bool resting;            /* a copy whose last window was rested */
	struct event_base *base;
	uint8_t nonce[PPS_WIRE_NONCE_BYTES]; /* of our CHALLENGE */
};

int
pps_server_write_record_now(int fd, const pps_wire_record_t *record)
{
	uint8_t buf[512];
	size_t n;
	int ret = pps_wire_encode(record, buf, sizeof(buf), &n);

	if (ret < 0)
		return ret;
	return pps_socket_send_now(fd, buf, n); /* the last thing we say */
}

/* The params' clock (tests inject one), else the real one. */
static int64_t
session_now(const pps_session_t *s)
{
	return s->params.clock_cb ? s->params.clock_cb(s->params.clock_user)
	                          : pps_time_realtime_us();
}

static void
session_close(pps_session_t *s)
{
	if (s->closing)
		return;
	/* The server frees the session later, from the loop: we may be deep in
	 * one of its callbacks now. Until then it stays silent. */
	s->closing = true;
	pps_transport_stop(s->transport);
	event_del(s->deadline_timer);
	event_del(s->hello_timer);
	if (s->window_timer)
		event_del(s->window_timer);
	s->closed_cb(s, s->user);
}

static void
refuse(pps_session_t *s, pps_wire_bye_reason_t reason, const char *why)
{
	pps_log(&s->params.log, PPS_LOG_INFO, "client %s: %s; disconnecting", s->peer, why);
	s->bye_reason = (int)reason;
	if (pps_transport_input_seen(s->transport))
		pps_session_say_bye(s, reason, why);
	session_close(s);
}

/*
 * A dropped base-layer ADU breaks this client's reference chain: everything
 * until the next IDR is undecodable for it (and the regulator will not send
 * it). Rather than lose the rest of the GOP, ask for an IDR now; the
 * listener's recovery bounds (per client, in time, in bits) decide when.
 */
static void
check_base_loss(pps_session_t *s)
{
	pps_sched_stats_t st;

	pps_sched_get_stats(s->sched, &st);
	if (st.layer[0][0].adus_dropped > s->base_dropped) {
		s->base_dropped = st.layer[0][0].adus_dropped;
		s->ready_cb(s, s->user);
	}
}

static void
arm_deadline_timer(pps_session_t *s)
{
	int64_t deadline = pps_sched_next_deadline_us(s->sched);
	int64_t wait_us;
	struct timeval tv;

	if (deadline == INT64_MAX) {
		event_del(s->deadline_timer);
		return;
	}
	wait_us = deadline - session_now(s);
	tv = pps_time_us_to_timeval(wait_us);
	event_add(s->deadline_timer, &tv);
}

/* A window's deadline passed: account the drop now, even if the socket is
 * blocked, and let the writer send the WINDOW_END when it can. */
static void
deadline_cb(evutil_socket_t fd, short what, void *user)
{
	pps_session_t *s = user;

	if (pps_sched_expire(s->sched, session_now(s)) > 0) {
		check_base_loss(s);
		pps_transport_kick(s->transport);
	}
	pps_session_check_timeouts(s);
	if (!s->closing)
		arm_deadline_timer(s);
}

static int
fill_cb(size_t mss_bytes, uint8_t *buf, size_t *len_bytes, bool *push, void *user)
{
	pps_session_t *s = user;
	int ret;

	if (s->closing)
		return 0;
	ret = pps_sched_next_packet(s->sched, session_now(s), mss_bytes, buf, len_bytes, push);
	if (ret == 1)
		s->last_progress_us = session_now(s);
	check_base_loss(s);
	return ret;
}

/* Every TCP_INFO reading of the writer: the path estimate, and the latency
 * cap it implies for the next write decision. */
static void
sample_cb(const pps_minbuf_sample_t *ms, void *user)
{
	pps_session_t *s = user;
	unsigned caps = pps_transport_caps(s->transport);
	pps_path_estimate_t est;
	int err;
	if (pps_session_audio_only(s))
		return; /* a thin stream: no path estimate, nothing to steer */
	pps_path_sample_t sample = {
	    .now_us = session_now(s),
	    .delivery_rate_bps = ms->delivery_rate_bps,
	    .delivery_app_limited = ms->delivery_app_limited,
	    .min_rtt_us = ms->min_rtt_us,
	    .srtt_us = ms->srtt_us,
	    .bytes_acked = ms->bytes_acked,
	    .total_retrans_pkts = ms->total_retrans_pkts,
	    .lost_pkts = ms->lost_pkts,
	    .cwnd_pkts = ms->cwnd_pkts,
	    .unacked_pkts = ms->unacked_pkts,
	    .mss_bytes = ms->mss_bytes,
	    .behind = pps_sched_behind(s->sched),
	};

	pps_path_add_sample(s->path, &sample);
	pps_path_get_estimate(s->path, &est);
	pps_sched_set_path(s->sched, &(pps_sched_path_t){
	                                 .rate_bps = est.valid ? est.estimate_bps : 0,
	                                 .queued_bytes = ms->notsent_bytes,
	                                 .one_way_us = ms->srtt_us / 2,
	                             });
	if (caps & PPS_TRANSPORT_CAP_LATENCY_CAP)
		pps_transport_set_latency_cap(s->transport, pps_path_inflight_cap_pkts(s->path));
	if ((caps & PPS_TRANSPORT_CAP_CONGESTION) &&
	    s->params.transport.congestion_alone != PPS_MINBUF_CONGESTION_DEFAULT &&
	    !s->congestion_switch_failed &&
	    (err = pps_transport_set_congestion(
	         s->transport, pps_path_shared(s->path) ? s->params.transport.congestion
	                                                : s->params.transport.congestion_alone)) <
	        0) {
		/* The one in force stays and the stream goes on; no system call
		 * per reading to try again. */
		pps_log(&s->params.log, PPS_LOG_WARNING,
		        "client %s: cannot switch the congestion control: %s; "
		        "it keeps the one in force",
		        s->peer, strerror(-err));
		s->congestion_switch_failed = true;
	}
	if ((caps & PPS_TRANSPORT_CAP_RATE_CAP) &&
	    s->params.path.rate_control == PPS_RATE_CONTROL_TCP_FRIENDLY &&
	    (err = pps_transport_set_rate_cap(s->transport, pps_path_rate_cap_bps(s->path))) < 0 &&
	    !s->rate_cap_warned) {
		/* The path estimate still holds the encoder within the rate. */
		pps_log(&s->params.log, PPS_LOG_WARNING,
		        "client %s: cannot cap the pacing rate: %s", s->peer, strerror(-err));
		s->rate_cap_warned = true;
	}
}

/* The writer's parameters: a new connection is alone until its path says
 * otherwise. */
static pps_minbuf_params_t
writer_params(const pps_session_params_t *params)
{
	pps_minbuf_params_t tp = params->transport;

	if (tp.congestion_alone != PPS_MINBUF_CONGESTION_DEFAULT)
		tp.congestion = tp.congestion_alone;
	return tp;
}

/* The client is who it must be: admit it and start streaming. */
static void
admit(pps_session_t *s)
{
	pps_wire_record_t info = {.kind = PPS_WIRE_STREAM_INFO};
	pps_minbuf_stats_t ts;
	char name[64];
	int ret;

	if (s->params.admit_cb && !s->params.admit_cb(s, s->user)) {
		/* The callback may have refused it already, with its own reason. */
		if (!s->closing)
			refuse(s, PPS_WIRE_BYE_SERVER_FULL, "server full");
		return;
	}
	/* Where the audio goes (PROTOCOL.md, "Audio"): to an audio-only
	 * connection, or to one that asked for it when the stream sends audio
	 * on the video's connection. */
	if (s->hello_flags & PPS_WIRE_HELLO_AUDIO_ONLY) {
		pps_minbuf_params_t thin = writer_params(&s->params);

		if (!s->params.stream_info.audio_codec) {
			refuse(s, PPS_WIRE_BYE_PROTOCOL,
			       "an audio-only connection, but this stream has no audio track");
			return;
		}
		s->audio = true;
		thin.mode = PPS_MINBUF_MODE_TCP;
		thin.thin = s->params.audio_thin;
		thin.rto_min_us = s->params.audio_thin ? s->params.audio_rto_min_us : 0;
		ret = pps_transport_set_writer(s->transport, &thin);
		if (ret < 0) {
			refuse(s, PPS_WIRE_BYE_INTERNAL, "cannot set up the audio connection");
			return;
		}
	} else {
		s->audio = (s->hello_flags & PPS_WIRE_HELLO_AUDIO) &&
		           s->params.stream_info.audio_codec &&
		           s->params.stream_info.audio_transport == PPS_WIRE_AUDIO_IN_STREAM;
	}
	/* Never send the client a record longer than it said it accepts. */
	s->params.sched.max_record_bytes =
	    s->max_record_bytes ? s->max_record_bytes : PPS_WIRE_DEFAULT_MAX_RECORD_BYTES;
	s->sched = pps_sched_new(&s->params.sched);
	if (!s->sched) {
		refuse(s, PPS_WIRE_BYE_INTERNAL, "out of memory");
		return;
	}
	pps_transport_describe(s->transport, name, sizeof(name));
	ret = pps_transport_start(s->transport);
	if (ret < 0) {
		char msg[128];

		snprintf(msg, sizeof(msg), "cannot set up the %s transport: %s", name,
		         strerror(-ret));
		refuse(s, PPS_WIRE_BYE_INTERNAL, msg);
		return;
	}
	if (pps_transport_get_stats(s->transport, &ts) == 0 && ts.congestion_refused)
		pps_log(&s->params.log, PPS_LOG_WARNING,
		        "client %s: the kernel refused congestion control %s (%s); the system's "
		        "default runs instead",
		        s->peer, pps_minbuf_congestion_names[writer_params(&s->params).congestion],
		        strerror(ts.congestion_refused));
	info.u.stream_info = s->params.stream_info;
	if (!(s->hello_flags & (PPS_WIRE_HELLO_AUDIO | PPS_WIRE_HELLO_AUDIO_ONLY))) {
		/* A client that did not ask for audio gets the first revision's
		 * record, 28 bytes. */
		info.u.stream_info.audio_codec = 0;
		info.u.stream_info.audio_channels = 0;
		info.u.stream_info.audio_transport = 0;
		info.u.stream_info.audio_frame_us = 0;
		info.u.stream_info.audio_rate_hz = 0;
	}
	pps_sched_push_control(s->sched, &info);
	s->state = PPS_SESSION_STREAMING;
	s->last_progress_us = s->joined_us = session_now(s);
	event_del(s->hello_timer);
	pps_log(&s->params.log, PPS_LOG_INFO, "client %s joined (%s%s)", s->peer, name,
	        pps_session_audio_only(s) ? ", audio only"
	        : s->audio                ? ", with audio"
	                                  : "");
	pps_transport_kick(s->transport);
	/* A video client wants an IDR to start from; an audio-only one does not. */
	if (!pps_session_audio_only(s)) {
		s->starting = true;
		s->ready_cb(s, s->user);
	}
}

/* Whether the peer may try a token now (@take: spending a try); if not, it
 * is refused, told when it may try again. */
static bool
auth_may_try(pps_session_t *s, bool take)
{
	int64_t wait_us = 0;
	char why[96];

	if (!s->params.auth_try_cb || s->params.auth_try_cb(s, take, &wait_us, s->user))
		return true;
	snprintf(why, sizeof(why),
	         "too many wrong access tokens from this address: next try in %lld ms",
	         (long long)(wait_us + 999) / 1000);
	refuse(s, PPS_WIRE_BYE_UNAUTHORIZED, why);
	return false;
}

static void
handle_hello(pps_session_t *s, const pps_wire_hello_t *hello)
{
	char why[96];

	if (hello->protocol_version != PPS_WIRE_VERSION) {
		snprintf(why, sizeof(why),
		         "protocol version %u not supported (this server speaks %d)",
		         hello->protocol_version, PPS_WIRE_VERSION);
		refuse(s, PPS_WIRE_BYE_VERSION, why);
		return;
	}
	if (hello->name_len) {
		size_t len = strlen(s->peer);

		/* Names go to logs: keep printable ASCII only. */
		snprintf(s->peer + len, sizeof(s->peer) - len, " \"");
		len = strlen(s->peer);
		for (unsigned i = 0; i < hello->name_len && len + 2 < sizeof(s->peer); i++)
			s->peer[len++] = (hello->name[i] >= 0x20 && hello->name[i] < 0x7f)
			                     ? hello->name[i]
			                     : '?';
		s->peer[len++] = '"';
		s->peer[len] = '\0';
		for (len = 0; len < hello->name_len && len + 1 < sizeof(s->name); len++)
			s->name[len] = (hello->name[len] >= 0x20 && hello->name[len] < 0x7f)
			                   ? hello->name[len]
			                   : '?';
		s->name[len] = '\0';
	}
	s->max_record_bytes = hello->max_record_bytes;
	s->hello_flags = hello->flags;
	if (hello->flags & PPS_WIRE_HELLO_AUDIO_ONLY)
		s->audio_pool = hello->audio_pool;
	if (s->params.access_token && s->params.access_token[0]) {
		pps_wire_record_t challenge = {.kind = PPS_WIRE_CHALLENGE};
		int ret;

		/* The token itself must never cross the wire: a HELLO carrying
		 * one in the clear, or not asking for a challenge, is refused. */
		if (!(hello->flags & PPS_WIRE_HELLO_CHALLENGE)) {
			refuse(s, PPS_WIRE_BYE_UNAUTHORIZED,
			       hello->auth_len ? "plaintext tokens are refused: a client with "
			                         "challenge-response is needed"
			                       : "access token required");
			return;
		}
		if (!auth_may_try(s, false))
			return;
		ret = pps_wire_auth_nonce(s->nonce);
		if (ret < 0) {
			snprintf(why, sizeof(why), "no random nonce: %s", strerror(-ret));
			refuse(s, PPS_WIRE_BYE_INTERNAL, why);
			return;
		}
		challenge.u.challenge.method = PPS_WIRE_AUTH_HMAC_SHA256;
		memcpy(challenge.u.challenge.nonce, s->nonce, PPS_WIRE_NONCE_BYTES);
		/* Nothing else is queued yet: the record goes out whole. */
		if (pps_transport_send_record(s->transport, &challenge) < 0) {
			refuse(s, PPS_WIRE_BYE_INTERNAL, "cannot send CHALLENGE");
			return;
		}
		s->state = PPS_SESSION_AWAIT_AUTH;
		return;
	}
	admit(s);
}

static void
handle_auth(pps_session_t *s, const pps_wire_auth_t *auth)
{
	uint8_t want[PPS_WIRE_MAC_BYTES];
	bool ok;

	if (!auth_may_try(s, true))
		return;
	pps_wire_auth_mac(s->params.access_token, strlen(s->params.access_token), s->nonce, want);
	ok = pps_wire_auth_equal(want, auth->mac);
	if (s->params.auth_result_cb)
		s->params.auth_result_cb(s, ok, s->user);
	if (!ok) {
		refuse(s, PPS_WIRE_BYE_UNAUTHORIZED, "wrong access token");
		return;
	}
	admit(s);
}

static void
handle_record(pps_session_t *s, const pps_wire_record_t *r)
{
	char why[128];

	switch (r->kind) {
	case PPS_WIRE_HELLO:
		if (s->state != PPS_SESSION_AWAIT_HELLO) {
			refuse(s, PPS_WIRE_BYE_PROTOCOL, "second HELLO");
			return;
		}
		handle_hello(s, &r->u.hello);
		return;
	case PPS_WIRE_AUTH:
		if (s->state != PPS_SESSION_AWAIT_AUTH) {
			refuse(s, PPS_WIRE_BYE_PROTOCOL, "AUTH without a CHALLENGE");
			return;
		}
		handle_auth(s, &r->u.auth);
		return;
	case PPS_WIRE_CLOCK_PING: {
		pps_wire_record_t pong = {.kind = PPS_WIRE_CLOCK_PONG};
		int64_t now = session_now(s);

		if (s->state != PPS_SESSION_STREAMING) {
			refuse(s, PPS_WIRE_BYE_PROTOCOL, "CLOCK_PING before HELLO");
			return;
		}
		/* A client pings at most 10 times a second (its clock needs a
		 * sample a second); a flood of PINGs is not a flood of PONGs. */
		if (now > s->pong_refill_us) {
			s->pong_tokens +=
			    (double)(now - s->pong_refill_us) * PPS_SESSION_PONGS_PER_S / 1e6;
			if (s->pong_tokens > PPS_SESSION_PONG_BURST)
				s->pong_tokens = PPS_SESSION_PONG_BURST;
			s->pong_refill_us = now;
		}
		if (s->pong_tokens < 1.0) {
			s->pings_unanswered++;
			return;
		}
		s->pong_tokens -= 1.0;
		pong.u.clock_pong.seq = r->u.clock_ping.seq;
		pong.u.clock_pong.client_send_us = r->u.clock_ping.client_send_us;
		pong.u.clock_pong.server_recv_us = now;
		pong.u.clock_pong.server_send_us = now;
		s->pings++;
		/* A full control queue means the client pings faster than it reads:
		 * dropping a PONG only costs it one clock sample. */
		if (pps_sched_push_control(s->sched, &pong) == 0)
			pps_transport_kick(s->transport);
		return;
	}
	case PPS_WIRE_RECOVERY_REQUEST:
		if (s->state != PPS_SESSION_STREAMING) {
			refuse(s, PPS_WIRE_BYE_PROTOCOL, "RECOVERY_REQUEST before HELLO");
			return;
		}
		/* The client lost a layer it was sent (its own decoder failed): ask
		 * for an IDR as for a base-layer loss seen here; the listener's
		 * recovery bounds (per client, in time, in bits) decide when. */
		pps_log(&s->params.log, PPS_LOG_INFO,
		        "client %s lost layer %u at frame %u; asking for an IDR", s->peer,
		        r->u.recovery_request.quality_layer, r->u.recovery_request.frame_index);
		s->ready_cb(s, s->user);
		return;
	case PPS_WIRE_PATH_REPORT:
		if (s->state != PPS_SESSION_STREAMING) {
			refuse(s, PPS_WIRE_BYE_PROTOCOL, "PATH_REPORT before HELLO");
			return;
		}
		if (s->report_us == 0)
			pps_log(&s->params.log, PPS_LOG_INFO,
			        "client %s is a relay: %u subscriber(s), %.2f..%.2f Mbit/s",
			        s->peer, r->u.path_report.subscribers,
			        r->u.path_report.slowest_bps / 1e6,
			        r->u.path_report.fastest_bps / 1e6);
		if ((s->report.flags & PPS_WIRE_PATH_STARTING) &&
		    !(r->u.path_report.flags & PPS_WIRE_PATH_STARTING))
			s->report_start_read = true;
		s->report = r->u.path_report;
		s->report_us = session_now(s);
		s->report_flags |= r->u.path_report.flags;
		return;
	case PPS_WIRE_BYE:
		pps_log(&s->params.log, PPS_LOG_INFO, "client %s left (%s%s%s)", s->peer,
		        pps_wire_bye_reason_name(r->u.bye.reason), r->u.bye.text_len ? ": " : "",
		        r->u.bye.text);
		session_close(s);
		return;
	default:
		snprintf(why, sizeof(why), "protocol error: %s is a server record",
		         pps_wire_kind_name(r->kind));
		refuse(s, PPS_WIRE_BYE_PROTOCOL, why);
		return;
	}
}

/* Wire records' bytes from the transport (decrypted, unframed). */
static void
input_cb(const uint8_t *buf, size_t len, void *user)
{
	pps_session_t *s = user;
	const uint8_t *data = buf;

	while (!s->closing) {
		pps_wire_record_t record;
		int ret = pps_wire_parser_next(s->parser, &data, &len, &record);

		if (ret == -EAGAIN)
			break;
		if (ret < 0) {
			char why[224];

			snprintf(why, sizeof(why), "protocol error: %s",
			         pps_wire_parser_error(s->parser));
			refuse(s,
			       pps_wire_parser_error_code(s->parser) == PPS_WIRE_ERR_VERSION
			           ? PPS_WIRE_BYE_VERSION
			           : PPS_WIRE_BYE_PROTOCOL,
			       why);
			return;
		}
		handle_record(s, &record);
	}
}

void
pps_session_input(pps_session_t *s, const uint8_t *buf, size_t len)
{
	int ret;

	/* An HTTP request (a browser routed by its path) is the browser
	 * layer's to read: it goes through the stack from the loop. */
	if (pps_web_sniff(buf, len)) {
		ret = pps_transport_replay(s->transport, buf, len);
		if (ret < 0)
			refuse(s, PPS_WIRE_BYE_INTERNAL, "cannot take the routed request");
		return;
	}
	pps_transport_note_input(s->transport);
	input_cb(buf, len, s);
}

static void
ended_cb(pps_transport_end_t how, const char *why, void *user)
{
	pps_session_t *s = user;

	switch (how) {
	case PPS_TRANSPORT_END_CLOSED:
		pps_log(&s->params.log, PPS_LOG_INFO, "client %s closed the connection", s->peer);
		break;
	case PPS_TRANSPORT_END_FINISHED:
		break;
	case PPS_TRANSPORT_END_RECEIVE:
		pps_log(&s->params.log, PPS_LOG_ERROR, "client %s: receive error: %s; removed",
		        s->peer, why);
		break;
	case PPS_TRANSPORT_END_SEND:
		pps_log(&s->params.log, PPS_LOG_ERROR, "client %s: socket error: %s; removed",
		        s->peer, why);
		break;
	case PPS_TRANSPORT_END_REFUSED:
		/* The transport said why to the peer itself. */
		pps_log(&s->params.log, PPS_LOG_INFO, "client %s: %s; disconnecting", s->peer, why);
		s->bye_reason = PPS_WIRE_BYE_PROTOCOL;
		break;
	case PPS_TRANSPORT_END_PROTOCOL:
		refuse(s, PPS_WIRE_BYE_PROTOCOL, why);
		return;
	}
	session_close(s);
}

static void
hello_timeout_cb(evutil_socket_t fd, short what, void *user)
{
	pps_session_t *s = user;
	int64_t left_us = s->accepted_us + s->params.hello_timeout_us - session_now(s);

	pps_session_check_timeouts(s);
	if (!s->closing && s->state != PPS_SESSION_STREAMING && left_us > 0) {
		/* An injected clock behind the loop's: wait for the rest. */
		struct timeval tv = pps_time_us_to_timeval(left_us);

		event_add(s->hello_timer, &tv);
	}
}

void
pps_session_check_timeouts(pps_session_t *s)
{
	int64_t now = session_now(s);

	if (s->closing)
		return;
	if (s->state != PPS_SESSION_STREAMING) {
		const char *handshake = pps_transport_handshake_pending(s->transport);
		char why[64];

		if (now - s->accepted_us < s->params.hello_timeout_us)
			return;
		if (handshake)
			snprintf(why, sizeof(why), "no %s handshake in time", handshake);
		else
			snprintf(why, sizeof(why), "%s",
			         s->state == PPS_SESSION_AWAIT_HELLO ? "no HELLO in time"
			                                             : "no AUTH in time");
		refuse(s, PPS_WIRE_BYE_PROTOCOL, why);
		return;
	}
	/* A client that stopped reading only loses its own windows, but it
	 * holds a slot and a socket: after evict_after_us without taking any
	 * data it goes. */
	if (s->params.evict_after_us > 0 && now - s->last_progress_us > s->params.evict_after_us) {
		char why[96];

		snprintf(why, sizeof(why), "too slow: took no data for %lld s",
		         (long long)(s->params.evict_after_us / 1000000));
		refuse(s, PPS_WIRE_BYE_TOO_SLOW, why);
	}
}

static void
format_peer(const struct sockaddr *addr, socklen_t len, char *out, size_t size)
{
	char host[NI_MAXHOST], port[NI_MAXSERV];

	if (getnameinfo(addr, len, host, sizeof(host), port, sizeof(port),
	                NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
		snprintf(out, size, "?");
		return;
	}
	snprintf(out, size, addr->sa_family == AF_INET6 ? "[%s]:%s" : "%s:%s", host, port);
}

pps_session_t *
pps_session_new(struct event_base *base, int fd, const struct sockaddr *addr, socklen_t addr_len,
                unsigned id, const pps_session_params_t *params, pps_tls_t *tls,
                pps_session_ready_cb ready_cb, pps_session_closed_cb closed_cb, void *user)
{
	pps_session_t *s;
	struct timeval hello_tv;
	int saved_errno;

	if (!base || fd < 0 || !params || !ready_cb || !closed_cb) {
		pps_tls_free(tls);
		errno = EINVAL;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		pps_tls_free(tls);
		return NULL; /* errno: ENOMEM */
	}
	s->fd = fd;
	s->id = id;
	s->base = base;
	s->params = *params;
	s->ready_cb = ready_cb;
	s->closed_cb = closed_cb;
	s->user = user;
	s->state = PPS_SESSION_AWAIT_HELLO;
	s->bye_reason = -1;
	s->accepted_us = session_now(s);
	s->pong_tokens = PPS_SESSION_PONG_BURST;
	s->pong_refill_us = s->accepted_us;
	format_peer(addr, addr_len, s->peer, sizeof(s->peer));
	snprintf(s->address, sizeof(s->address), "%.63s", s->peer);
	/* The constructors set errno (EINVAL for bad parameters, ENOMEM);
	 * libevent's do not, and fail only for memory. */
	s->parser = pps_wire_parser_new(CLIENT_MAX_RECORD_BYTES);
	if (!s->parser)
		goto err_free;
	pps_wire_parser_set_sender(s->parser, PPS_WIRE_FROM_CLIENT);
	s->path = pps_path_new(&params->path);
	if (!s->path)
		goto err_free; /* errno: EINVAL for the path parameters, ENOMEM */
	s->deadline_timer = evtimer_new(base, deadline_cb, s);
	s->hello_timer = evtimer_new(base, hello_timeout_cb, s);
	if (!s->deadline_timer || !s->hello_timer) {
		errno = ENOMEM;
		goto err_free;
	}
	/* Reading starts here; the stack owns @tls from now on. */
	s->transport = pps_transport_open(base, fd,
	                                  &(pps_transport_params_t){
	                                      .writer = writer_params(params),
	                                      .tls_ctx = params->tls_ctx,
	                                      .tls = tls,
	                                      .peer = s->peer,
	                                      .log = params->log,
	                                      .pages = params->web_pages,
	                                  },
	                                  &(pps_transport_events_t){
	                                      .fill_cb = fill_cb,
	                                      .sample_cb = sample_cb,
	                                      .input_cb = input_cb,
	                                      .ended_cb = ended_cb,
	                                  },
	                                  s);
	tls = NULL;
	if (!s->transport)
		goto err_free; /* errno: ENOMEM, EIO */
	hello_tv = pps_time_us_to_timeval(params->hello_timeout_us);
	if (event_add(s->hello_timer, &hello_tv) < 0) {
		errno = EIO; /* the loop's backend refused the timer */
		goto err_free;
	}
	return s;

err_free:
	saved_errno = errno;
	pps_tls_free(tls);
	s->fd = -1; /* the caller keeps its socket when there is no session */
	pps_session_free(s);
	errno = saved_errno;
	return NULL;
}

void
pps_session_free(pps_session_t *s)
{
	if (!s)
		return;
	pps_transport_free(s->transport);
	if (s->deadline_timer)
		event_free(s->deadline_timer);
	if (s->hello_timer)
		event_free(s->hello_timer);
	if (s->delay_timer)
		event_free(s->delay_timer);
	free(s->delayed);
	if (s->window_timer)
		event_free(s->window_timer);
	for (; s->window_count > 0; s->window_count--) {
		pps_window_unref(s->delayed_windows[s->window_head].window);
		s->window_head = (s->window_head + 1) % PPS_SESSION_DELAYED_WINDOWS;
	}
	pps_sched_free(s->sched);
	pps_path_free(s->path);
	pps_wire_parser_free(s->parser);
	if (s->fd >= 0)
		close(s->fd);
	free(s);
}

pps_session_state_t
pps_session_state(const pps_session_t *s)
{
	return s->state;
}

void
pps_session_push_window(pps_session_t *s, pps_window_t *window)
{
	if (s->state != PPS_SESSION_STREAMING || s->closing || pps_session_audio_only(s))
		return;
	pps_sched_push_window(s->sched, window);
	pps_transport_kick(s->transport);
	if (!s->closing)
		arm_deadline_timer(s);
}

/* The oldest held window goes to the scheduler now. */
static void
release_window(pps_session_t *s)
{
	pps_window_t *w = s->delayed_windows[s->window_head].window;

	s->window_head = (s->window_head + 1) % PPS_SESSION_DELAYED_WINDOWS;
	s->window_count--;
	pps_session_push_window(s, w);
	pps_window_unref(w);
}

static void
window_delay_cb(evutil_socket_t fd, short what, void *user)
{
	pps_session_t *s = user;
	int64_t now = pps_time_monotonic_us();

	(void)fd;
	(void)what;
	while (s->window_count > 0 && s->delayed_windows[s->window_head].due_us <= now)
		release_window(s);
	if (s->window_count > 0) {
		struct timeval tv =
		    pps_time_us_to_timeval(s->delayed_windows[s->window_head].due_us - now);

		event_add(s->window_timer, &tv);
	}
}

void
pps_session_rest_window(pps_session_t *s, pps_window_t *window)
{
	if (s->state != PPS_SESSION_STREAMING || s->closing || pps_session_audio_only(s))
		return;
	/* In order: what still waits for its spacing goes first. */
	while (s->window_count > 0 && !s->closing)
		release_window(s);
	if (s->closing)
		return;
	s->resting = true;
	pps_sched_rest_window(s->sched, window);
	pps_transport_kick(s->transport);
}

void
pps_session_push_window_later(pps_session_t *s, pps_window_t *window, int64_t delay_us)
{
	struct delayed_window *d;

	if (s->state != PPS_SESSION_STREAMING || s->closing || pps_session_audio_only(s))
		return;
	s->resting = false;
	s->window_delay_us = delay_us > 0 ? delay_us : 0;
	if (delay_us <= 0) {
		pps_session_push_window(s, window);
		return;
	}
	if (!s->window_timer) {
		s->window_timer = evtimer_new(s->base, window_delay_cb, s);
		if (!s->window_timer) {
			/* Without a timer, the copy goes now. */
			pps_session_push_window(s, window);
			return;
		}
	}
	if (s->window_count == PPS_SESSION_DELAYED_WINDOWS) {
		/* Full (a spacing far longer than a window): the oldest goes now. */
		release_window(s);
		if (s->closing)
			return;
	}
	d = &s->delayed_windows[(s->window_head + s->window_count) % PPS_SESSION_DELAYED_WINDOWS];
	d->due_us = pps_time_monotonic_us() + delay_us;
	d->window = pps_window_ref(window);
	s->window_count++;
	if (s->window_count == 1) {
		struct timeval tv = pps_time_us_to_timeval(delay_us);

		event_add(s->window_timer, &tv);
	}
}

void
pps_session_push_audio(pps_session_t *s, const pps_wire_audio_frame_t *frame)
{
	if (s->state != PPS_SESSION_STREAMING || s->closing || !s->audio)
		return;
	/* A refused or overflowing frame is counted in the scheduler's stats. */
	(void)pps_sched_push_audio(s->sched, frame);
	s->audio_push_us[s->audio_push_next++ % PPS_SESSION_PUSH_TIMES] = pps_time_monotonic_us();
	pps_transport_kick(s->transport);
}

/* The delayed frames that are due go out; the timer waits for the next. */
static void
delay_cb(evutil_socket_t fd, short what, void *user)
{
	pps_session_t *s = user;
	int64_t now = pps_time_monotonic_us();

	(void)fd;
	(void)what;
	while (s->delayed_count > 0 && s->delayed[s->delayed_head].due_us <= now) {
		struct delayed_audio *d = &s->delayed[s->delayed_head];

		s->delayed_head = (s->delayed_head + 1) % PPS_SESSION_DELAYED_AUDIO;
		s->delayed_count--;
		pps_session_push_audio(s, &d->frame);
	}
	if (s->delayed_count > 0) {
		struct timeval tv =
		    pps_time_us_to_timeval(s->delayed[s->delayed_head].due_us - now);

		event_add(s->delay_timer, &tv);
	}
}

void
pps_session_push_audio_later(pps_session_t *s, const pps_wire_audio_frame_t *frame,
                             int64_t delay_us)
{
	struct delayed_audio *d;

	if (s->state != PPS_SESSION_STREAMING || s->closing || !s->audio)
		return;
	if (delay_us <= 0) {
		pps_session_push_audio(s, frame);
		return;
	}
	if (!s->delayed) {
		s->delayed = calloc(PPS_SESSION_DELAYED_AUDIO, sizeof(*s->delayed));
		s->delay_timer = evtimer_new(s->base, delay_cb, s);
		if (!s->delayed || !s->delay_timer) {
			/* Without memory for the wait, the copy goes now. */
			free(s->delayed);
			s->delayed = NULL;
			if (s->delay_timer)
				event_free(s->delay_timer);
			s->delay_timer = NULL;
			pps_session_push_audio(s, frame);
			return;
		}
	}
	if (s->delayed_count == PPS_SESSION_DELAYED_AUDIO) {
		/* Full (delays far longer than a frame): the oldest goes now. */
		d = &s->delayed[s->delayed_head];
		s->delayed_head = (s->delayed_head + 1) % PPS_SESSION_DELAYED_AUDIO;
		s->delayed_count--;
		pps_session_push_audio(s, &d->frame);
		if (s->closing)
			return;
	}
	d = &s->delayed[(s->delayed_head + s->delayed_count) % PPS_SESSION_DELAYED_AUDIO];
	d->due_us = pps_time_monotonic_us() + delay_us;
	d->frame = *frame;
	memcpy(d->data, frame->payload, frame->payload_len);
	d->frame.payload = d->data;
	s->delayed_count++;
	if (s->delayed_count == 1) {
		struct timeval tv = pps_time_us_to_timeval(delay_us);

		event_add(s->delay_timer, &tv);
	}
}

void
pps_session_audio_state(const pps_session_t *s, int64_t now_us, pps_session_audio_state_t *out)
{
	int queued = 0;
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	memset(out, 0, sizeof(*out));
	/* SIOCOUTQ: bytes written and not yet acknowledged (sent or not). */
	if (ioctl(s->fd, SIOCOUTQ, &queued) < 0 || queued < 0)
		queued = INT_MAX / 2;
	out->backlog_bytes = (size_t)queued + pps_transport_pending_bytes(s->transport) +
	                     (size_t)s->delayed_count * PPS_SESSION_DELAYED_BYTES;
	if (out->backlog_bytes == 0)
		return;
	memset(&ti, 0, sizeof(ti));
	if (getsockopt(s->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0) {
		out->overdue = true;
		return;
	}
	/* One frame a packet on a thin stream: the oldest of the unacknowledged
	 * packets is the push that many back. Pushed longer ago than a round
	 * trip and a margin, it has most likely been lost, and what is written
	 * behind it waits for its retransmission. */
	if (ti.tcpi_unacked > 0 && s->audio_push_next > 0) {
		unsigned back = ti.tcpi_unacked < PPS_SESSION_PUSH_TIMES ? ti.tcpi_unacked
		                                                         : PPS_SESSION_PUSH_TIMES;
		unsigned i;

		if (back > s->audio_push_next)
			back = s->audio_push_next;
		i = (s->audio_push_next - back) % PPS_SESSION_PUSH_TIMES;
		out->oldest_age_us = now_us - s->audio_push_us[i];
		out->overdue =
		    out->oldest_age_us > (int64_t)ti.tcpi_rtt + 2 * (int64_t)ti.tcpi_rttvar + 5000;
	}
}

uint32_t
pps_session_audio_pool(const pps_session_t *s)
{
	return s->audio_pool;
}

bool
pps_session_copy_may_rest(const pps_session_t *s)
{
	return pps_session_copy(s) && (s->hello_flags & PPS_WIRE_HELLO_COPY_REST) != 0;
}

bool
pps_session_resting(const pps_session_t *s)
{
	return s->resting;
}

int64_t
pps_session_window_delay_us(const pps_session_t *s)
{
	return s->window_delay_us;
}

bool
pps_session_copy(const pps_session_t *s)
{
	return (s->hello_flags & PPS_WIRE_HELLO_COPY) != 0;
}

bool
pps_session_audio_only(const pps_session_t *s)
{
	/* Known from HELLO on, so that admission can tell. */
	return (s->hello_flags & PPS_WIRE_HELLO_AUDIO_ONLY) != 0;
}

void
pps_session_window_grew(pps_session_t *s)
{
	if (s->state != PPS_SESSION_STREAMING || s->closing)
		return;
	pps_transport_kick(s->transport);
}

void
pps_session_refuse(pps_session_t *s, pps_wire_bye_reason_t reason, const char *text)
{
	refuse(s, reason, text);
}

void
pps_session_say_bye(pps_session_t *s, pps_wire_bye_reason_t reason, const char *text)
{
	pps_wire_record_t bye = {.kind = PPS_WIRE_BYE};
	size_t len = strlen(text);

	if (len > PPS_WIRE_MAX_REASON_BYTES)
		len = PPS_WIRE_MAX_REASON_BYTES;
	bye.u.bye.reason = (uint16_t)reason;
	bye.u.bye.text_len = (uint8_t)len;
	memcpy(bye.u.bye.text, text, len);
	/* Only between records: a batch the kernel took in part would have the
	 * BYE land inside a record. */
	if (pps_transport_pending_bytes(s->transport) == 0)
		pps_transport_send_record(s->transport, &bye);
	shutdown(s->fd, SHUT_WR);
	/* Closing a socket with unread input (a CLOCK_PING in flight) makes the
	 * kernel answer with a reset, which can overtake the data still queued
	 * for the client: read what is there first. */
	for (;;) {
		uint8_t sink[4096];

		if (recv(s->fd, sink, sizeof(sink), MSG_DONTWAIT) <= 0)
			break;
	}
}

unsigned
pps_session_progress(const pps_session_t *s)
{
	switch (s->state) {
	case PPS_SESSION_STREAMING:
		return 3;
	case PPS_SESSION_AWAIT_AUTH:
		return 2;
	default:
		return pps_transport_input_seen(s->transport) ? 1 : 0;
	}
}

int
pps_session_fd(const pps_session_t *s)
{
	return s->fd;
}

const char *
pps_session_peer(const pps_session_t *s)
{
	return s->peer;
}

const char *
pps_session_address(const pps_session_t *s)
{
	return s->address;
}

const char *
pps_session_name(const pps_session_t *s)
{
	return s->name;
}

int64_t
pps_session_joined_us(const pps_session_t *s)
{
	return s->joined_us;
}

unsigned
pps_session_id(const pps_session_t *s)
{
	return s->id;
}

int64_t
pps_session_stalled_us(const pps_session_t *s)
{
	if (s->state != PPS_SESSION_STREAMING || s->closing)
		return 0;
	return session_now(s) - s->last_progress_us;
}

int64_t
pps_session_unsent_since_us(const pps_session_t *s)
{
	if (s->state != PPS_SESSION_STREAMING || s->closing || pps_session_audio_only(s))
		return INT64_MAX;
	return pps_sched_unsent_since_us(s->sched);
}

int
pps_session_bye_reason(const pps_session_t *s)
{
	return s->bye_reason;
}

uint64_t
pps_session_take_cut_windows(pps_session_t *s)
{
	pps_sched_stats_t st;
	pps_path_estimate_t e;
	uint64_t counted = 0;

	pps_session_get_path(s, &e);
	if (s->cut_pending && e.bytes_acked > s->cut_seen_acked) {
		counted = s->cut_pending;
		s->cut_pending = 0;
	}
	pps_session_get_sched_stats(s, &st);
	if (st.windows_short > s->cut_seen) {
		s->cut_pending += st.windows_short - s->cut_seen;
		s->cut_seen_acked = e.bytes_acked + e.inflight_bytes;
	}
	s->cut_seen = st.windows_short;
	return counted;
}

pps_session_start_t
pps_session_take_start(pps_session_t *s)
{
	pps_path_estimate_t e;
	int64_t since;

	if (!s->starting || s->state != PPS_SESSION_STREAMING || s->closing)
		return PPS_SESSION_START_OVER;
	since = session_now(s) - s->joined_us;
	pps_session_get_path(s, &e);
	if (!e.valid || e.bytes_acked == 0 || since < PPS_SESSION_START_READ_US ||
	    since < PPS_SESSION_START_ROUND_TRIPS * (int64_t)e.srtt_us) {
		if (since < PPS_SESSION_START_MAX_US)
			return PPS_SESSION_START_UNREAD;
		s->starting = false; /* it took nothing: not a path B frames help */
		return PPS_SESSION_START_OVER;
	}
	s->starting = false;
	if (e.retrans_pkts > 0 || e.cap_state == PPS_PATH_CAP_COMPETING)
		return PPS_SESSION_START_LOSSY;
	return PPS_SESSION_START_CLEAN;
}

bool
pps_session_take_competing(pps_session_t *s)
{
	pps_path_estimate_t e;
	bool counted;

	pps_session_get_path(s, &e);
	if (e.cap_state != PPS_PATH_CAP_COMPETING) {
		s->competing_seen = false;
		return false;
	}
	counted = s->competing_seen && e.bytes_acked > s->competing_seen_acked;
	s->competing_seen = true;
	s->competing_seen_acked = e.bytes_acked + e.inflight_bytes;
	return counted;
}

void
pps_session_get_sched_stats(const pps_session_t *s, pps_sched_stats_t *stats)
{
	if (s->sched)
		pps_sched_get_stats(s->sched, stats);
	else
		memset(stats, 0, sizeof(*stats));
}

int
pps_session_get_transport_stats(const pps_session_t *s, pps_minbuf_stats_t *stats)
{
	return pps_transport_get_stats(s->transport, stats);
}

void
pps_session_get_path(const pps_session_t *s, pps_path_estimate_t *estimate)
{
	pps_path_get_estimate(s->path, estimate);
}

static uint32_t
add_rtt(uint32_t a, uint32_t b)
{
	return a > UINT32_MAX - b ? UINT32_MAX : a + b;
}

size_t
pps_session_path_span(const pps_session_t *s, pps_ratealloc_client_t out[2], uint32_t *subscribers)
{
	const pps_wire_path_report_t *q = &s->report;
	pps_path_estimate_t e;

	*subscribers = 0;
	pps_path_get_estimate(s->path, &e);
	/* A copy of another connection's stream: that one speaks for the path. */
	if (!e.valid || pps_session_copy(s))
		return 0;
	out[0] = (pps_ratealloc_client_t){.estimate_bps = e.estimate_bps,
	                                  .min_rtt_us = e.min_rtt_us,
	                                  .rate_capped = e.fair_rate_bps != 0};
	if (s->report_us == 0 || session_now(s) - s->report_us > PPS_SESSION_REPORT_FRESH_US) {
		*subscribers = 1;
		return 1;
	}
	/* A relay: what its subscribers take, through its own path. */
	*subscribers = q->subscribers;
	if (q->subscribers == 0)
		return 1;
	out[1] = out[0];
	if (q->slowest_bps < out[0].estimate_bps) {
		out[0].estimate_bps = (int64_t)q->slowest_bps;
		out[0].rate_capped = (q->flags & PPS_WIRE_PATH_SLOWEST_CAPPED) != 0;
	}
	out[0].min_rtt_us = add_rtt(out[0].min_rtt_us, q->slowest_min_rtt_us);
	if (q->fastest_bps < out[1].estimate_bps) {
		out[1].estimate_bps = (int64_t)q->fastest_bps;
		out[1].rate_capped = (q->flags & PPS_WIRE_PATH_FASTEST_CAPPED) != 0;
	}
	out[1].min_rtt_us = add_rtt(out[1].min_rtt_us, q->fastest_min_rtt_us);
	return 2;
}

bool
pps_session_is_relay(const pps_session_t *s)
{
	return s->report_us != 0;
}

uint8_t
pps_session_take_report_flags(pps_session_t *s, bool *start_read)
{
	uint8_t flags = s->report_flags;

	s->report_flags = 0;
	if (start_read)
		*start_read = s->report_start_read;
	s->report_start_read = false;
	return flags;
}
