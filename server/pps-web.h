/* SPDX-License-Identifier: MIT */
/*
 * The browser side of a session: on the same listener as pps-client, a
 * connection whose first byte is an ASCII capital (an HTTP method; a wire
 * record starts with version 1) is an HTTP/1.1 client. A GET of a file of
 * web/ (embedded at build time, see pps-web-embed.py) is answered and the
 * connection closed; an Upgrade to WebSocket on PPS_WEB_STREAM_PATH turns it
 * into a session like any other: the client's binary messages carry its wire
 * records (HELLO, CLOCK_PING, BYE) to the session's bounds-checked parser, and
 * the session's packets leave as one binary message each, through the same
 * regulator and MIN_BUF writer as a pps-client's. The browser layer of a
 * session's transport (pps-transport.h, pps-transport-web.c) makes that
 * choice on the first bytes and frames the packets; this object is the HTTP
 * server and the WebSocket's reader, writing through the transport under it
 * (the socket's, or TLS for https:// and wss://).
 *
 * Why the same listener: one port to open, forward or put behind a TLS proxy,
 * and the page and its stream share an origin; the two protocols cannot be
 * confused by their first byte.
 *
 * Errors: a malformed request or a bad handshake gets 400 (405 for another
 * method, 404 for an unknown file) and the connection closes; a bad client
 * frame closes the WebSocket with the reader's code (1002 unmasked or
 * malformed, or a close frame with a code no endpoint may send; 1003 text;
 * 1007 a close reason that is not UTF-8; 1009 too big). A valid close frame
 * is answered with its own code. A Ping is answered with a Pong in front of
 * the next packet (pps_web_fill()).
 *
 * Threading: the loop's thread, like the session that owns it.
 */
#ifndef PPS_WEB_H
#define PPS_WEB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pps-log.h"
#include "pps-wire.h"

typedef struct pps_transport pps_transport_t;

/* Where the viewer opens its WebSocket: this path, or a stream's name
 * under it on a relay ("/stream/room/alice"; the relay routes by it). */
#define PPS_WEB_STREAM_PATH "/stream"
/* Largest client message (one wire record of a client, HELLO at most ~140 bytes). */
#define PPS_WEB_MAX_CLIENT_MESSAGE_BYTES 512

/* A file of web/, embedded in the program (generated pps-web-files.c). */
typedef struct {
	const char *name; /* "index.html", "viewer.js", ... */
	const char *content_type;
	const uint8_t *data;
	size_t size;
} pps_web_file_t;

extern const pps_web_file_t pps_web_files[];
extern const size_t pps_web_files_count;

/* The embedded file for a request path ("/" is index.html), or NULL. */
const pps_web_file_t *pps_web_file_find(const char *path);

typedef struct pps_web pps_web_t;
typedef struct pps_ws_request pps_ws_request_t;

/* A page the owner makes on request (GET /metrics). */
typedef struct {
	int status;               /* 200, 401, ... */
	const char *reason;       /* "OK", "Unauthorized", ...: static */
	const char *content_type; /* static; NULL: text/plain */
	char *body;               /* malloc'd, the web object's from now on; NULL: the reason */
	size_t body_len;
	const char *extra_headers; /* static, each line ending "\r\n"; NULL: none */
} pps_web_page_t;

/* Consulted for a GET or HEAD before the embedded files: fills @page and
 * returns true for a path the owner serves, false for any other. On the
 * loop's thread; how much work one page is the owner's bound. */
typedef bool (*pps_web_page_cb)(const pps_ws_request_t *request, pps_web_page_t *page, void *user);

typedef struct {
	pps_web_page_cb page_cb; /* NULL: the embedded files only */
	void *user;
	/* No stream behind this connection (a relay's own exchange): a
	 * WebSocket upgrade is answered 404. */
	bool refuse_upgrades;
} pps_web_pages_t;

/* The HTTP exchange is over (response written, or the socket failed): the
 * owner closes the connection. Never called from inside pps_web_input(). */
typedef void (*pps_web_done_cb)(void *user);

/* True if @path is PPS_WEB_STREAM_PATH or a name under it; *@name (if not
 * NULL) is then the name, "" for none (not checked: pps_stream_name_check()). */
bool pps_web_stream_path(const char *path, const char **name);

/* True if a connection that starts with @buf speaks HTTP. */
bool pps_web_sniff(const uint8_t *buf, size_t len);

/* HTTP over @lower (not owned; it outlives @web), whose socket is the
 * connection's. @peer is for log lines, which go to @log; @pages (copied;
 * NULL: none) are the owner's. NULL + errno. */
pps_web_t *pps_web_new(pps_transport_t *lower, const char *peer, const pps_log_t *log,
                       const pps_web_pages_t *pages, pps_web_done_cb done_cb, void *user);
void pps_web_free(pps_web_t *web);

/*
 * Bytes the connection received (@len in @buf, which holds @capacity).
 * Returns 0 and sets *wire_bytes to how many bytes of wire records it left at
 * the front of @buf (0 while the request head is incomplete or an HTTP answer
 * is being written), or -ECONNRESET when the connection must go now (a bad
 * frame, the peer's close): pps_web_error() says why, pps_web_send_record() of a BYE then
 * sends the close frame.
 */
int pps_web_input(pps_web_t *web, uint8_t *buf, size_t len, size_t capacity, size_t *wire_bytes);

/* Why the connection is going, for the log. */
const char *pps_web_error(const pps_web_t *web);
/* The page ended the connection with a valid close frame (it left, not failed). */
bool pps_web_closed_cleanly(const pps_web_t *web);

/*
 * One record now, between packets (uncorked), in a binary message; nothing
 * before the upgrade. A BYE is the last thing said: in its message (unless
 * the peer closed first), then a close frame whose code says the same (or
 * the frame reader's error code); a failure to send it is logged, not
 * returned. 0 or a negative errno.
 */
int pps_web_send_record(pps_web_t *web, const pps_wire_record_t *record);

/*
 * One packet for the writer, framed (the browser layer's fill, after the
 * upgrade): the Pong owed to the peer if any (RFC 6455 section 5.5.2), a
 * control frame of its own, then one binary message holding the packet that
 * the layers above @layer yield (pps_transport_fill_above()) in the rest of
 * @mss_bytes. Frames are never split and the writer counts one packet as
 * before; with nothing to stream, the Pong is the packet. Only the latest
 * Ping's Pong is owed (section 5.5.3), so a peer that pings and never reads
 * holds one control frame here, whatever it sends. The contract of
 * pps_minbuf_fill_cb.
 */
int pps_web_fill(pps_web_t *web, pps_transport_t *layer, size_t mss_bytes, uint8_t *buf,
                 size_t *len_bytes, bool *push);

/*
 * Independent MIN_BUF check (the one test-minbuf and pps-protolat
 * --check-bound make for TCP sockets), on when the environment has
 * PPS_WEB_CHECK_BOUND=1: before each packet the writer pulls, held =
 * ceil(SIOCOUTQ / mss) + packets already pulled for this write + 1, against
 * A*cwnd + min(B, cwnd) + sacked from a TCP_INFO of our own. The result is
 * logged when the connection ends ("MIN_BUF check: ..."). The browser layer
 * calls pps_web_check_packet() for each packet it frames and
 * pps_web_check_batch() for each of the writer's readings (a new write
 * decision).
 */
void pps_web_check_packet(pps_web_t *web, int fd, size_t mss_bytes, unsigned a, unsigned b);
void pps_web_check_batch(pps_web_t *web);

#endif /* PPS_WEB_H */
