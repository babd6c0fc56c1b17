/* SPDX-License-Identifier: MIT */
/*
 * WebSocket (RFC 6455) for the browser viewer, pure functions only: the
 * HTTP/1.1 request parser, the handshake's accept key, server frame headers
 * and a reader of client frames. No I/O, no clock; server/pps-web.c applies
 * them to a session's socket.
 *
 * Why our own: libevent 2.1 has no WebSocket and libwebsockets has no libevent
 * loop. Writing the framing on our loop keeps the browser's socket under the
 * same MIN_BUF writer as a pps-client's: every MSS-sized packet the regulator
 * makes becomes exactly one binary WebSocket message (one frame, FIN set), so
 * a frame never straddles two packets and a packet holds whole records only.
 *
 * Limits: a request head of at most PPS_WS_MAX_REQUEST_BYTES; client frames
 * are masked (else close 1002), control frames at most 125 bytes, a data
 * message at most the reader's limit (else close 1009), binary only (text:
 * close 1003); a close frame of 1 byte or with a code no endpoint may send
 * is a close 1002, one whose reason is not UTF-8 a close 1007 (RFC 6455
 * sections 5.5.1, 7.4). One Pong owed at most: the latest Ping's.
 *
 * Threading: none; a reader belongs to one connection.
 */
#ifndef PPS_WEBSOCKET_H
#define PPS_WEBSOCKET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Largest HTTP request head (request line + headers + blank line) accepted. */
#define PPS_WS_MAX_REQUEST_BYTES 4096
/* Room a server frame header needs in front of a payload of up to 65535 bytes. */
#define PPS_WS_DATA_HEADER_BYTES 4
/* Largest payload of a control frame (RFC 6455 section 5.5). */
#define PPS_WS_MAX_CONTROL_BYTES 125
/* Largest server control frame: its 2-byte header and that payload. */
#define PPS_WS_MAX_CONTROL_FRAME_BYTES (2 + PPS_WS_MAX_CONTROL_BYTES)
/* Sec-WebSocket-Accept: base64 of a SHA-1, 28 characters + NUL. */
#define PPS_WS_ACCEPT_BYTES 29

/* Opcodes (RFC 6455 section 5.2). */
#define PPS_WS_OP_CONTINUATION 0x0
#define PPS_WS_OP_TEXT         0x1
#define PPS_WS_OP_BINARY       0x2
#define PPS_WS_OP_CLOSE        0x8
#define PPS_WS_OP_PING         0x9
#define PPS_WS_OP_PONG         0xa

/* Close codes (RFC 6455 section 7.4.1). */
#define PPS_WS_CLOSE_NORMAL       1000
#define PPS_WS_CLOSE_GOING_AWAY   1001
#define PPS_WS_CLOSE_PROTOCOL     1002
#define PPS_WS_CLOSE_UNSUPPORTED  1003
#define PPS_WS_CLOSE_INVALID_DATA 1007
#define PPS_WS_CLOSE_POLICY       1008
#define PPS_WS_CLOSE_TOO_BIG      1009
#define PPS_WS_CLOSE_INTERNAL     1011
#define PPS_WS_CLOSE_TRY_LATER    1013

typedef struct pps_ws_request {
	char method[8];
	char path[256];          /* without the query string */
	char query[256];         /* after '?', "" if none or longer than this holds */
	char authorization[256]; /* Authorization, "" if absent or longer than this holds */
	int minor_version;       /* HTTP/1.x */
	bool upgrade_websocket;  /* Upgrade: websocket */
	bool connection_upgrade; /* Connection: ..., upgrade, ... */
	char key[32];            /* Sec-WebSocket-Key, "" if absent */
	int version;             /* Sec-WebSocket-Version, -1 if absent */
	size_t head_bytes;       /* length of the head, blank line included */
} pps_ws_request_t;

/*
 * Parses an HTTP/1.x request head from @buf (@len bytes so far). Returns 0
 * with @out filled once the blank line is there, -EAGAIN if more bytes are needed,
 * -EMSGSIZE if the head is longer than PPS_WS_MAX_REQUEST_BYTES, -EINVAL for
 * a malformed head (bad request line, header without a colon, a NUL byte,
 * an over-long path or key).
 */
int pps_ws_request_parse(const char *buf, size_t len, pps_ws_request_t *out);

/* True if @request asks for a WebSocket upgrade at all (Upgrade: websocket). */
bool pps_ws_request_is_upgrade(const pps_ws_request_t *request);

/*
 * Checks an upgrade request (GET, HTTP/1.1, Connection: upgrade, version 13,
 * a key that is the base64 of 16 bytes) and computes Sec-WebSocket-Accept
 * into @accept. 0, or -EINVAL with a one-line reason in @why.
 */
int pps_ws_handshake(const pps_ws_request_t *request, char accept[PPS_WS_ACCEPT_BYTES],
                     const char **why);

/* Sec-WebSocket-Accept for @key: base64(SHA-1(key + RFC 6455 GUID)). */
void pps_ws_accept_key(const char *key, char accept[PPS_WS_ACCEPT_BYTES]);

/*
 * Writes the header of one unmasked server frame (FIN set) with @opcode and
 * @payload_bytes into @out (up to 10 bytes). Returns the header's length.
 */
size_t pps_ws_frame_header(uint8_t opcode, uint64_t payload_bytes, uint8_t out[10]);

/*
 * Frames a packet in place: @buf holds PPS_WS_DATA_HEADER_BYTES of room, then
 * @payload_bytes (at most 65535) of records. Writes the shortest header the
 * RFC allows and moves the payload behind it if that header is shorter than
 * the room. Returns the frame's total length.
 */
size_t pps_ws_wrap_binary(uint8_t *buf, size_t payload_bytes);

/* ---- client frames ---------------------------------------------------- */

typedef struct pps_ws_reader pps_ws_reader_t;

/* A reader accepting data messages of at most @max_message_bytes. NULL + errno. */
pps_ws_reader_t *pps_ws_reader_new(size_t max_message_bytes);
void pps_ws_reader_free(pps_ws_reader_t *reader);

/*
 * Decodes client frames from @buf (@len bytes, any split) in place: the
 * unmasked payload bytes of binary messages are moved to the front of @buf
 * and *data_bytes says how many (never more than @len: a payload byte always
 * comes after its frame's header). Pongs are consumed; a Ping leaves a Pong
 * owed (pps_ws_reader_pong()). Returns 0, -ECONNRESET if the peer sent a valid
 * close frame (answer it and close; bytes after it are ignored), or -EPROTO /
 * -EMSGSIZE / -ENOTSUP: the connection must be closed with
 * pps_ws_reader_close_code(); pps_ws_reader_error() says why. A close frame
 * that breaks the rules is such an error (1002; 1007 for a reason that is not
 * UTF-8), and pps_ws_reader_close_received() then says the peer closed. After
 * an error or a close every call fails the same way.
 */
int pps_ws_reader_feed(pps_ws_reader_t *reader, uint8_t *buf, size_t len, size_t *data_bytes);

/* The code to close with after an error; the peer's code after a close (1005 if none). */
uint16_t pps_ws_reader_close_code(const pps_ws_reader_t *reader);
const char *pps_ws_reader_error(const pps_ws_reader_t *reader);
/* True once a close frame came in, valid or not: the peer reads no more data. */
bool pps_ws_reader_close_received(const pps_ws_reader_t *reader);

/*
 * The Pong owed to the peer (RFC 6455 section 5.5.2): one at most, carrying
 * the application data of the latest Ping not answered yet (section 5.5.3
 * allows answering only the most recent of several), so a peer that pings
 * faster than it reads holds one frame here and no more. None once the reader
 * failed or the peer closed.
 *
 * pps_ws_reader_pong_bytes() is the owed frame's length (2 + the Ping's
 * payload), 0 when none is owed. pps_ws_reader_pong() writes that frame
 * (unmasked, FIN set) at @out if it fits @room bytes and counts the Ping
 * answered; it returns the frame's length, 0 when none is owed or it does not
 * fit (it stays owed).
 */
size_t pps_ws_reader_pong_bytes(const pps_ws_reader_t *reader);
size_t pps_ws_reader_pong(pps_ws_reader_t *reader, uint8_t *out, size_t room);

/* Pings received; those whose Pong was replaced by a later Ping's before it
 * was written (the bound above at work). */
uint64_t pps_ws_reader_pings(const pps_ws_reader_t *reader);
uint64_t pps_ws_reader_pings_superseded(const pps_ws_reader_t *reader);

#endif /* PPS_WEBSOCKET_H */
