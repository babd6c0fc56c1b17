/* SPDX-License-Identifier: MIT */
/*
 * HTTP/1.1 and WebSocket on a session's socket: see pps-web.h.
 */
#include "pps-web.h"
#include "pps-minbuf.h"
#include "pps-transport-internal.h"
#include "pps-websocket.h"

#include <errno.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* An answer is written in pieces of at most this (one TLS record each). */
#define ANSWER_CHUNK_BYTES 16384

typedef enum {
	WEB_READING_REQUEST,
	WEB_ANSWERING, /* an HTTP answer is being written; then done_cb */
	WEB_UPGRADED,
	WEB_FAILED,
} web_state_t;

struct pps_web {
	pps_transport_t *lower; /* what it writes through: the socket's, or TLS */
	int fd;
	char peer[160];
	pps_log_t log;
	pps_web_done_cb done_cb;
	void *user;
	pps_web_pages_t pages;
	web_state_t state;
	char request[PPS_WS_MAX_REQUEST_BYTES];
	size_t request_len;
	/* the answer: a head of our own and a body borrowed from pps_web_files */
	char head[512];
	size_t head_len, head_done;
	const uint8_t *body;
	size_t body_len, body_done;
	char *page_body; /* a page's own body (pps_web_page_t), freed with the object */
	size_t page_len;
	const char *page_type;
	struct event *write_event;
	struct event *pong_event; /* a Pong became owed: see that it leaves */
	pps_ws_reader_t *reader;
	bool peer_closed;
	bool closed_cleanly; /* by a valid close frame */
	char error[160];
	/* PPS_WEB_CHECK_BOUND */
	bool check;
	uint32_t batch_fills;
	uint64_t checks, checks_over;
	int max_over;
};

const pps_web_file_t *
pps_web_file_find(const char *path)
{
	if (path[0] != '/')
		return NULL;
	path++;
	if (!path[0])
		path = "index.html";
	for (size_t i = 0; i < pps_web_files_count; i++)
		if (strcmp(pps_web_files[i].name, path) == 0)
			return &pps_web_files[i];
	return NULL;
}

bool
pps_web_stream_path(const char *path, const char **name)
{
	size_t n = strlen(PPS_WEB_STREAM_PATH);

	if (strncmp(path, PPS_WEB_STREAM_PATH, n) != 0 || (path[n] && path[n] != '/'))
		return false;
	if (name)
		*name = path[n] ? path + n + 1 : "";
	return true;
}

bool
pps_web_sniff(const uint8_t *buf, size_t len)
{
	return len > 0 && buf[0] >= 'A' && buf[0] <= 'Z';
}

static void
finish(pps_web_t *w)
{
	event_del(w->write_event);
	shutdown(w->fd, SHUT_WR);
	w->done_cb(w->user);
}

/* Writes the answer, head then body, as far as the socket takes it; once all
 * of it (and anything the layer below kept) is out, the exchange ends. */
static void
write_cb(evutil_socket_t fd, short what, void *user)
{
	pps_web_t *w = user;
	uint8_t chunk[ANSWER_CHUNK_BYTES];
	ssize_t n;

	while (w->head_done < w->head_len || w->body_done < w->body_len) {
		size_t head_part = w->head_len - w->head_done,
		       body_part = w->body_len - w->body_done;

		if (head_part > sizeof(chunk))
			head_part = sizeof(chunk);
		if (body_part > sizeof(chunk) - head_part)
			body_part = sizeof(chunk) - head_part;
		memcpy(chunk, w->head + w->head_done, head_part);
		if (body_part)
			memcpy(chunk + head_part, w->body + w->body_done, body_part);
		n = pps_transport_write(w->lower, chunk, head_part + body_part);
		if (n == -EAGAIN)
			return; /* EV_WRITE calls again */
		if (n < 0) {
			snprintf(w->error, sizeof(w->error), "send: %s", strerror((int)-n));
			finish(w);
			return;
		}
		if ((size_t)n < head_part)
			head_part = (size_t)n;
		w->head_done += head_part;
		w->body_done += (size_t)n - head_part;
	}
	n = pps_transport_flush(w->lower);
	if (n == -EAGAIN)
		return;
	if (n < 0)
		snprintf(w->error, sizeof(w->error), "send: %s", strerror((int)-n));
	finish(w);
}

/* Queues an answer; it is written from the loop, then the exchange ends. */
static void
answer(pps_web_t *w, int status, const char *reason, const pps_web_file_t *file, bool head_only,
       const char *extra_headers)
{
	const char *type = file ? file->content_type : "text/plain; charset=utf-8";
	size_t body_len = file ? file->size : strlen(reason) + 1;
	int n;

	if (!file && w->page_body) {
		type = w->page_type;
		body_len = w->page_len;
	}

	w->state = WEB_ANSWERING;
	n = snprintf(w->head, sizeof(w->head),
	             "HTTP/1.1 %d %s\r\n"
	             "Content-Type: %s\r\n"
	             "Content-Length: %zu\r\n"
	             "Cache-Control: no-store\r\n"
	             "X-Content-Type-Options: nosniff\r\n"
	             "Connection: close\r\n"
	             "%s\r\n",
	             status, reason, type, body_len, extra_headers ? extra_headers : "");
	w->head_len = n > 0 && (size_t)n < sizeof(w->head) ? (size_t)n : 0;
	if (head_only) {
		w->body_len = 0;
	} else if (file) {
		w->body = file->data;
		w->body_len = file->size;
	} else if (w->page_body) {
		w->body = (const uint8_t *)w->page_body;
		w->body_len = w->page_len;
	} else {
		/* The reason as the body, one line: appended to the head buffer. */
		n = snprintf(w->head + w->head_len, sizeof(w->head) - w->head_len, "%s\n", reason);
		if (n > 0 && (size_t)n < sizeof(w->head) - w->head_len)
			w->head_len += (size_t)n;
	}
	pps_log(&w->log, PPS_LOG_INFO, "http %s: %d %s", w->peer, status, reason);
	event_add(w->write_event, NULL);
}

/* Sends the 101 now: nothing else can be queued on a fresh connection. */
static int
upgrade(pps_web_t *w, const char *accept, const char *path)
{
	char head[256];
	int n = snprintf(head, sizeof(head),
	                 "HTTP/1.1 101 Switching Protocols\r\n"
	                 "Upgrade: websocket\r\n"
	                 "Connection: Upgrade\r\n"
	                 "Sec-WebSocket-Accept: %s\r\n\r\n",
	                 accept);

	if (pps_transport_send_now(w->lower, head, (size_t)n) < 0)
		return -EIO;
	w->reader = pps_ws_reader_new(PPS_WEB_MAX_CLIENT_MESSAGE_BYTES);
	if (!w->reader)
		return -ENOMEM;
	w->state = WEB_UPGRADED;
	pps_log(&w->log, PPS_LOG_INFO, "http %s: WebSocket %s", w->peer, path);
	return 0;
}

/*
 * A Pong is owed (RFC 6455 section 5.5.2). While the client streams, the
 * writer carries it: a kick makes the writer pull a packet as soon as the
 * network has room, and pps_web_fill() puts the Pong in front of it, so it
 * never lands inside a frame and stays within the writer's bound. Before
 * admission there is no writer (its counters are -ENOENT) and nothing in
 * flight: it leaves now. Run
 * from the loop, not from inside the read that found the Ping, so the
 * writer never runs inside a read.
 */
static void
pong_cb(evutil_socket_t fd, short what, void *user)
{
	pps_web_t *w = user;
	pps_minbuf_stats_t stats;
	uint8_t frame[PPS_WS_MAX_CONTROL_FRAME_BYTES];
	size_t n;
	int ret;

	if (w->state != WEB_UPGRADED || w->lower->stopped || !pps_ws_reader_pong_bytes(w->reader))
		return;
	if (pps_transport_get_stats(w->lower, &stats) == 0) {
		pps_transport_kick(w->lower);
		return;
	}
	n = pps_ws_reader_pong(w->reader, frame, sizeof(frame));
	ret = pps_transport_send_now(w->lower, frame, n);
	if (ret < 0)
		pps_log(&w->log, PPS_LOG_ERROR, "http %s: pong: %s", w->peer, strerror(-ret));
}

static int
frames(pps_web_t *w, uint8_t *buf, size_t len, size_t *wire_bytes)
{
	int ret = pps_ws_reader_feed(w->reader, buf, len, wire_bytes);

	if (ret == 0) {
		if (pps_ws_reader_pong_bytes(w->reader))
			event_active(w->pong_event, EV_TIMEOUT, 0);
		return 0;
	}
	*wire_bytes = 0;
	/* A peer that sent a close frame, valid or not, is told nothing but
	 * the close frame that answers it. */
	w->peer_closed = pps_ws_reader_close_received(w->reader);
	w->closed_cleanly = ret == -ECONNRESET;
	snprintf(w->error, sizeof(w->error), "WebSocket: %s", pps_ws_reader_error(w->reader));
	w->state = WEB_FAILED;
	return -ECONNRESET;
}

int
pps_web_input(pps_web_t *w, uint8_t *buf, size_t len, size_t capacity, size_t *wire_bytes)
{
	pps_ws_request_t req;
	const pps_web_file_t *file;
	char accept[PPS_WS_ACCEPT_BYTES];
	const char *why = NULL;
	size_t take, rest;
	int ret;

	*wire_bytes = 0;
	switch (w->state) {
	case WEB_UPGRADED:
		return frames(w, buf, len, wire_bytes);
	case WEB_ANSWERING:
		return 0; /* pipelined requests are not served: Connection: close */
	case WEB_FAILED:
		return -ECONNRESET;
	case WEB_READING_REQUEST:
		break;
	}
	take =
	    len < sizeof(w->request) - w->request_len ? len : sizeof(w->request) - w->request_len;
	memcpy(w->request + w->request_len, buf, take);
	w->request_len += take;
	ret = pps_ws_request_parse(w->request, w->request_len, &req);
	if (ret == -EAGAIN)
		return 0;
	if (ret < 0) {
		answer(w, ret == -EMSGSIZE ? 431 : 400,
		       ret == -EMSGSIZE ? "Request Header Fields Too Large" : "Bad Request", NULL,
		       false, NULL);
		return 0;
	}
	if (pps_ws_request_is_upgrade(&req)) {
		if (w->pages.refuse_upgrades || !pps_web_stream_path(req.path, NULL)) {
			answer(w, 404, "Not Found", NULL, false, NULL);
			return 0;
		}
		if (pps_ws_handshake(&req, accept, &why) < 0) {
			/* RFC 6455 section 4.4: say which version we speak. */
			pps_log(&w->log, PPS_LOG_INFO, "http %s: bad WebSocket handshake: %s",
			        w->peer, why);
			answer(w, 400, "Bad Request", NULL, false, "Sec-WebSocket-Version: 13\r\n");
			return 0;
		}
		if (upgrade(w, accept, req.path) < 0) {
			snprintf(w->error, sizeof(w->error), "cannot answer the upgrade");
			w->state = WEB_FAILED;
			return -ECONNRESET;
		}
		/* Frames sent right behind the request: hand them on. */
		rest = w->request_len - req.head_bytes;
		if (rest > capacity)
			rest = capacity;
		memcpy(buf, w->request + req.head_bytes, rest);
		return rest ? frames(w, buf, rest, wire_bytes) : 0;
	}
	if (strcmp(req.method, "GET") != 0 && strcmp(req.method, "HEAD") != 0) {
		answer(w, 405, "Method Not Allowed", NULL, false, "Allow: GET, HEAD\r\n");
		return 0;
	}
	if (w->pages.page_cb) {
		pps_web_page_t page = {0};

		if (w->pages.page_cb(&req, &page, w->pages.user)) {
			w->page_body = page.body;
			w->page_len = page.body ? page.body_len : 0;
			w->page_type =
			    page.content_type ? page.content_type : "text/plain; charset=utf-8";
			answer(w, page.status, page.reason, NULL, strcmp(req.method, "HEAD") == 0,
			       page.extra_headers);
			return 0;
		}
	}
	file = pps_web_file_find(req.path);
	if (!file)
		answer(w, 404, "Not Found", NULL, false, NULL);
	else
		answer(w, 200, "OK", file, strcmp(req.method, "HEAD") == 0, NULL);
	return 0;
}

bool
pps_web_closed_cleanly(const pps_web_t *w)
{
	return w->closed_cleanly;
}

const char *
pps_web_error(const pps_web_t *w)
{
	return w->error[0] ? w->error : "WebSocket closed";
}

static uint16_t
close_code_for(const pps_wire_bye_t *bye)
{
	switch (bye->reason) {
	case PPS_WIRE_BYE_NORMAL:
		return PPS_WS_CLOSE_GOING_AWAY; /* the server goes away */
	case PPS_WIRE_BYE_SERVER_FULL:
		return PPS_WS_CLOSE_TRY_LATER;
	case PPS_WIRE_BYE_INTERNAL:
		return PPS_WS_CLOSE_INTERNAL;
	case PPS_WIRE_BYE_PROTOCOL:
		return PPS_WS_CLOSE_PROTOCOL;
	default:
		return PPS_WS_CLOSE_POLICY; /* version, unauthorized, too slow */
	}
}

static void
say_bye(pps_web_t *w, const pps_wire_record_t *bye)
{
	uint8_t buf[PPS_WS_DATA_HEADER_BYTES + 512], close_frame[10 + 2];
	uint16_t code;
	size_t n = 0, header, rec;

	if (!w->reader)
		return;
	/* A BYE that cannot be encoded (it always can: 512 bytes hold the
	 * longest) leaves the close frame alone to say why. */
	if (!w->peer_closed && pps_wire_encode(bye, buf + PPS_WS_DATA_HEADER_BYTES,
	                                       sizeof(buf) - PPS_WS_DATA_HEADER_BYTES, &rec) == 0)
		n = pps_ws_wrap_binary(buf, rec);
	/* The reader's error, the peer's own code echoed, or the BYE's reason. */
	code = pps_ws_reader_close_code(w->reader);
	if (!code || code == 1005)
		code = w->peer_closed ? PPS_WS_CLOSE_NORMAL : close_code_for(&bye->u.bye);
	header = pps_ws_frame_header(PPS_WS_OP_CLOSE, 2, close_frame);
	close_frame[header] = (uint8_t)(code >> 8);
	close_frame[header + 1] = (uint8_t)code;
	if (n + header + 2 <= sizeof(buf)) {
		memcpy(buf + n, close_frame, header + 2);
		n += header + 2;
	}
	/* Uncorked, so it leaves now: it is the last thing said. */
	int r = pps_transport_send_now(w->lower, buf, n);
	if (r < 0)
		pps_log(&w->log, PPS_LOG_ERROR, "http %s: close frame: %s", w->peer, strerror(-r));
}

int
pps_web_fill(pps_web_t *w, pps_transport_t *layer, size_t mss_bytes, uint8_t *buf,
             size_t *len_bytes, bool *push)
{
	size_t pong = w->reader ? pps_ws_reader_pong_bytes(w->reader) : 0;
	int ret;

	/* A unit too small for the frame stays out of it (the Pong stays
	 * owed); one too small to share with records (under four of the
	 * largest Pongs) carries the Pong alone. Paths' units are larger. */
	if (pong > mss_bytes)
		pong = 0;
	if (pong > mss_bytes / 4) {
		*len_bytes = pps_ws_reader_pong(w->reader, buf, mss_bytes);
		*push = true;
		return 1;
	}
	if (pong > 0)
		pong = pps_ws_reader_pong(w->reader, buf, pong);
	ret = pps_transport_fill_above(layer, mss_bytes - pong - PPS_WS_DATA_HEADER_BYTES,
	                               buf + pong + PPS_WS_DATA_HEADER_BYTES, len_bytes, push);
	if (ret == 1) {
		*len_bytes = pong + pps_ws_wrap_binary(buf + pong, *len_bytes);
	} else if (ret == 0 && pong > 0) {
		/* Nothing to stream now: the Pong is the packet. */
		*len_bytes = pong;
		*push = true;
		ret = 1;
	}
	return ret;
}

int
pps_web_send_record(pps_web_t *w, const pps_wire_record_t *record)
{
	uint8_t buf[PPS_WS_DATA_HEADER_BYTES + 512];
	size_t n;
	int ret;

	if (!w->reader)
		return 0; /* no WebSocket to say it in */
	if (record->kind == PPS_WIRE_BYE) {
		say_bye(w, record);
		return 0;
	}
	ret = pps_wire_encode(record, buf + PPS_WS_DATA_HEADER_BYTES,
	                      sizeof(buf) - PPS_WS_DATA_HEADER_BYTES, &n);
	if (ret < 0)
		return ret;
	return pps_transport_send_now(w->lower, buf, pps_ws_wrap_binary(buf, n));
}

pps_web_t *
pps_web_new(pps_transport_t *lower, const char *peer, const pps_log_t *log,
            const pps_web_pages_t *pages, pps_web_done_cb done_cb, void *user)
{
	pps_web_t *w;

	if (!lower || !peer || !done_cb) {
		errno = EINVAL;
		return NULL;
	}
	w = calloc(1, sizeof(*w));
	if (!w)
		goto err;
	w->lower = lower;
	w->fd = lower->fd;
	w->done_cb = done_cb;
	w->user = user;
	if (log)
		w->log = *log;
	if (pages)
		w->pages = *pages;
	snprintf(w->peer, sizeof(w->peer), "%s", peer);
	w->check = getenv("PPS_WEB_CHECK_BOUND") && strcmp(getenv("PPS_WEB_CHECK_BOUND"), "1") == 0;
	w->write_event = event_new(lower->base, w->fd, EV_WRITE | EV_PERSIST, write_cb, w);
	if (!w->write_event)
		goto err_free;
	w->pong_event = event_new(lower->base, -1, 0, pong_cb, w);
	if (!w->pong_event)
		goto err_free_write;
	return w;

err_free_write:
	event_free(w->write_event);
err_free:
	free(w);
err:
	errno = ENOMEM;
	return NULL;
}

void
pps_web_free(pps_web_t *w)
{
	if (!w)
		return;
	if (w->check && w->checks)
		pps_log(
		    &w->log, PPS_LOG_INFO,
		    "http %s: MIN_BUF check: %llu packets, max held - bound %d packets, %llu over",
		    w->peer, (unsigned long long)w->checks, w->max_over,
		    (unsigned long long)w->checks_over);
	if (w->reader && pps_ws_reader_pings(w->reader))
		pps_log(&w->log, PPS_LOG_INFO,
		        "http %s: %llu WebSocket pings, %llu answered by a later one's pong",
		        w->peer, (unsigned long long)pps_ws_reader_pings(w->reader),
		        (unsigned long long)pps_ws_reader_pings_superseded(w->reader));
	if (w->write_event)
		event_free(w->write_event);
	if (w->pong_event)
		event_free(w->pong_event);
	pps_ws_reader_free(w->reader);
	free(w->page_body);
	free(w);
}

void
pps_web_check_packet(pps_web_t *w, int fd, size_t mss_bytes, unsigned a, unsigned b)
{
	pps_minbuf_check_t c;

	/* A socket error shows on the next write; the check skips this packet. */
	if (!w->check || pps_minbuf_check_packet(fd, mss_bytes, a, b, w->batch_fills, &c) < 0)
		return;
	if (w->checks == 0 || c.over_pkts > w->max_over)
		w->max_over = c.over_pkts;
	w->checks_over += c.over_pkts > 0;
	w->checks++;
	w->batch_fills++;
}

void
pps_web_check_batch(pps_web_t *w)
{
	w->batch_fills = 0;
}
