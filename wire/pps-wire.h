/* SPDX-License-Identifier: MIT */
/*
 * The ppstream wire format (see wire/PROTOCOL.md): length-prefixed records
 * over TCP, every record small enough to fit one MSS-sized packet.
 *
 * Record header, 4 bytes, then `length` body bytes (all integers big-endian):
 *
 *   u8 version (PPS_WIRE_VERSION)  u8 kind  u16 length
 *
 * Encoding: pps_wire_encode() writes one record into a caller's buffer.
 * Decoding: a pps_wire_parser_t is fed arbitrary byte chunks (one byte at a
 * time works) and yields whole, validated records. It never holds more than
 * one record and never allocates more than its configured maximum, whatever
 * the peer sends. After an error it stays failed: a byte stream cannot be
 * resynchronised, the connection must go.
 *
 * Threading: none; a parser belongs to one connection.
 */
#ifndef PPS_WIRE_H
#define PPS_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PPS_WIRE_VERSION      1
#define PPS_WIRE_HEADER_BYTES 4
/* Largest record the format can express (header + 65535 body bytes). */
#define PPS_WIRE_MAX_RECORD_BYTES (PPS_WIRE_HEADER_BYTES + 65535)
#define PPS_WIRE_MAX_NAME_BYTES   64
#define PPS_WIRE_MAX_AUTH_BYTES   64
#define PPS_WIRE_MAX_REASON_BYTES 200
#define PPS_WIRE_MAX_DEPS         4
/* Ranges the parser enforces (prioritizer/ asserts its own limits match). */
#define PPS_WIRE_MAX_TEMPORAL_LAYERS 4 /* layer ids 0..3 */
#define PPS_WIRE_MAX_QUALITY_LAYERS  4
#define PPS_WIRE_MAX_FRAME_TYPE      4
#define PPS_WIRE_MAX_WINDOW_FRAMES   64
/* Most payload bytes a WINDOW_BEGIN may announce (receivers refuse more; a
 * sender's bound for a window begun before its last ADUs exist stays under). */
#define PPS_WIRE_MAX_WINDOW_BYTES (64u << 20)
/* Largest record a receiver must accept unless its HELLO asks for less or more. */
#define PPS_WIRE_DEFAULT_MAX_RECORD_BYTES 16384
/* Smallest limit a receiver may ask for: a packet of control records fits. */
#define PPS_WIRE_MIN_MAX_RECORD_BYTES 256

typedef enum {
	PPS_WIRE_HELLO = 1,             /* client -> server, first record */
	PPS_WIRE_STREAM_INFO = 2,       /* server -> client, first record */
	PPS_WIRE_WINDOW_BEGIN = 3,      /* server -> client */
	PPS_WIRE_ADU_FRAGMENT = 4,      /* server -> client */
	PPS_WIRE_WINDOW_END = 5,        /* server -> client */
	PPS_WIRE_CLOCK_PING = 6,        /* client -> server */
	PPS_WIRE_CLOCK_PONG = 7,        /* server -> client */
	PPS_WIRE_BYE = 8,               /* either way, last record */
	PPS_WIRE_CHALLENGE = 9,         /* server -> client, answers a HELLO asking for one */
	PPS_WIRE_AUTH = 10,             /* client -> server, answers CHALLENGE */
	PPS_WIRE_RECOVERY_REQUEST = 11, /* client -> server: lost a layer, asks for an IDR */
	PPS_WIRE_AUDIO_FRAME = 12,      /* server -> client: one frame of the audio track */
	PPS_WIRE_PATH_REPORT = 13,      /* client -> server: a relay's subscribers' paths */
} pps_wire_kind_t;

/* HELLO flags. */
#define PPS_WIRE_HELLO_CHALLENGE  0x0001 /* the client proves a token by challenge-response */
#define PPS_WIRE_HELLO_AUDIO      0x0002 /* the client plays the audio track, if there is one */
#define PPS_WIRE_HELLO_AUDIO_ONLY 0x0004 /* this connection carries the audio track only */
/* The HELLO ends with a stream name (stream_len, stream): which stream of a
 * relay the client asks for, or publishes. */
#define PPS_WIRE_HELLO_STREAM 0x0008
/* The sender publishes a stream to a relay (with PPS_WIRE_HELLO_STREAM): once
 * admitted, the relay answers with a HELLO of its own and the roles turn
 * (PROTOCOL.md, "Publishing to a relay"). */
#define PPS_WIRE_HELLO_PUBLISH 0x0010
/* With PPS_WIRE_HELLO_AUDIO_ONLY: the HELLO ends with audio_pool (after the
 * stream name, when there is one), a number the client picked for all its
 * audio connections. A server whose STREAM_INFO says audio_copies > 0 sends
 * each audio frame on that many of a pool's connections, not on every one
 * (PROTOCOL.md, "Audio connections in a pool"). A client sends it only to
 * such a server. */
#define PPS_WIRE_HELLO_AUDIO_POOL 0x0020
/* This connection is one more copy of a stream the client views on another
 * connection (its client.copies): a viewer like any other, left out of the
 * encoder's sizing, which the client's own connection decides. */
#define PPS_WIRE_HELLO_COPY 0x0040
/* With the copy flag: the client reads a rested WINDOW_END, and the server may
 * let this copy rest where it cannot help (PPS_WIRE_WINDOW_END_RESTED). */
#define PPS_WIRE_HELLO_COPY_REST 0x0080
/* Longest stream name (the HELLO's stream field). */
#define PPS_WIRE_MAX_STREAM_BYTES 64

/* STREAM_INFO's audio track (audio_codec 0: none). */
#define PPS_WIRE_AUDIO_CODEC_OPUS 1
/* Where the audio frames travel (STREAM_INFO's audio_transport). */
#define PPS_WIRE_AUDIO_IN_STREAM      0 /* on this connection, ahead of the video */
#define PPS_WIRE_AUDIO_OWN_CONNECTION 1 /* on a second connection (HELLO_AUDIO_ONLY) */
/* Most copies of an audio frame a pool's connections carry (STREAM_INFO). */
#define PPS_WIRE_MAX_AUDIO_COPIES 4
/* AUDIO_FRAME flags. */
#define PPS_WIRE_AUDIO_SPEECH 0x01 /* voice activity: the frame is not silence */
/* Largest audio payload (Opus's largest packet). */
#define PPS_WIRE_MAX_AUDIO_BYTES 1275
/* An AUDIO_FRAME's bytes besides its payload (header included). */
#define PPS_WIRE_AUDIO_OVERHEAD_BYTES (PPS_WIRE_HEADER_BYTES + 15)

/* PATH_REPORT flags: about the relay's subscribers since its last report. */
#define PPS_WIRE_PATH_SLOWEST_CAPPED 0x01 /* the slowest one's path is shared (its rate capped) */
#define PPS_WIRE_PATH_FASTEST_CAPPED 0x02 /* the fastest one's is */
#define PPS_WIRE_PATH_CUT            0x04 /* a window was cut short for one that still reads */
#define PPS_WIRE_PATH_COMPETING      0x08 /* a path is shared with other flows */
#define PPS_WIRE_PATH_STARTING       0x10 /* a new one's start is not read yet */
#define PPS_WIRE_PATH_START_LOSSY    0x20 /* a new one's start had retransmissions */
#define PPS_WIRE_PATH_FLAGS          0x3f

/* Challenge-response (PROTOCOL.md, "Access control"). */
#define PPS_WIRE_AUTH_HMAC_SHA256 1 /* MAC = HMAC-SHA256(token, context || nonce) */
#define PPS_WIRE_NONCE_BYTES      32
#define PPS_WIRE_MAC_BYTES        32

/* Reasons carried by BYE. */
typedef enum {
	PPS_WIRE_BYE_NORMAL = 0,       /* shutting down */
	PPS_WIRE_BYE_SERVER_FULL = 1,  /* max_clients reached */
	PPS_WIRE_BYE_PROTOCOL = 2,     /* malformed or unexpected record */
	PPS_WIRE_BYE_VERSION = 3,      /* unsupported protocol version */
	PPS_WIRE_BYE_INTERNAL = 4,     /* the sender failed */
	PPS_WIRE_BYE_UNAUTHORIZED = 5, /* HELLO without the server's access token */
	PPS_WIRE_BYE_TOO_SLOW = 6,     /* the client took no data for too long */
	PPS_WIRE_BYE_NO_STREAM = 7,    /* a relay has no stream of the HELLO's name */
	PPS_WIRE_BYE_STREAM_TAKEN = 8, /* a relay's stream of that name has a publisher */
} pps_wire_bye_reason_t;

typedef struct {
	uint16_t protocol_version;
	uint16_t flags;            /* PPS_WIRE_HELLO_*; other bits reserved (0, ignored) */
	uint16_t max_record_bytes; /* largest record the client accepts, header included;
	                            * 0 = PPS_WIRE_DEFAULT_MAX_RECORD_BYTES */
	uint8_t name_len;
	char name[PPS_WIRE_MAX_NAME_BYTES + 1]; /* NUL-terminated copy */
	uint8_t auth_len; /* legacy plaintext token: servers refuse it (use the challenge) */
	uint8_t auth[PPS_WIRE_MAX_AUTH_BYTES];
	/* With flag PPS_WIRE_HELLO_STREAM only (encoded and parsed then, 1..64
	 * bytes, no NUL); else stream_len 0. */
	uint8_t stream_len;
	char stream[PPS_WIRE_MAX_STREAM_BYTES + 1]; /* NUL-terminated copy */
	/* With flag PPS_WIRE_HELLO_AUDIO_POOL only (not 0); else 0. */
	uint32_t audio_pool;
} pps_wire_hello_t;

typedef struct {
	uint16_t protocol_version;
	uint8_t codec;          /* 1 = H.264 layered (base + residual enhancement) */
	uint8_t upscale_filter; /* id of the base-layer upscaler both ends share */
	uint16_t width, height;
	uint16_t base_width, base_height;
	uint16_t fps_num, fps_den;
	uint8_t window_frames;
	uint8_t temporal_layers;
	uint8_t quality_layers;
	uint8_t priority_policy;
	uint32_t latency_budget_ms;
	uint32_t gop_frames;
	/* The audio track, sent only to a client whose HELLO asked for audio
	 * (older clients get the 28-byte record): codec 0 = no audio track. */
	uint8_t audio_codec;     /* PPS_WIRE_AUDIO_CODEC_* */
	uint8_t audio_channels;  /* 1..2 */
	uint8_t audio_transport; /* PPS_WIRE_AUDIO_IN_STREAM or _OWN_CONNECTION */
	uint8_t audio_copies;    /* _OWN_CONNECTION: each frame on this many of a client's
	                          * pooled connections (PPS_WIRE_HELLO_AUDIO_POOL);
	                          * 0 = every audio connection carries every frame;
	                          * at most PPS_WIRE_MAX_AUDIO_COPIES */
	uint16_t audio_frame_us; /* 2500..60000 */
	uint16_t audio_rate_hz;  /* 8000, 12000, 16000, 24000 or 48000 */
} pps_wire_stream_info_t;

typedef struct {
	uint32_t window_id;
	int64_t first_capture_us; /* CLOCK_REALTIME of the window's first frame */
	int64_t deadline_us;      /* the sender drops what is unsent at this time */
	uint16_t frames;
	uint16_t adus;
	uint32_t bytes;
	uint32_t first_adu_id; /* ids of the window's ADUs: first_adu_id .. + adus - 1 */
} pps_wire_window_begin_t;

typedef struct {
	uint32_t window_id;
	uint32_t adu_id;
	uint32_t frame_index;
	int64_t capture_us;
	uint32_t decode_order;
	uint8_t frame_type;
	uint8_t temporal_layer;
	uint8_t quality_layer;
	uint8_t dep_count;
	uint16_t priority; /* 0 = most important, sent first */
	uint32_t deps[PPS_WIRE_MAX_DEPS];
	uint32_t offset;      /* of this fragment's payload in the ADU */
	uint32_t total_bytes; /* of the whole ADU */
	uint16_t payload_len;
	const uint8_t *payload; /* decode: points into the parser, valid until its next call */
} pps_wire_adu_fragment_t;

#define PPS_WIRE_WINDOW_END_DROPPED 0x01 /* nothing of the window was sent */
/* With DROPPED, to a copy whose HELLO has PPS_WIRE_HELLO_COPY_REST: nothing of
 * the window comes on this connection because another of the client's brings
 * it (the copy is at rest), not because its deadline passed. */
#define PPS_WIRE_WINDOW_END_RESTED 0x02

typedef struct {
	uint32_t window_id;
	uint16_t adus_sent;
	uint16_t adus_dropped;
	uint32_t bytes_sent;
	uint32_t bytes_dropped;
	uint8_t flags;
} pps_wire_window_end_t;

typedef struct {
	uint32_t seq;
	int64_t client_send_us;
} pps_wire_clock_ping_t;

typedef struct {
	uint32_t seq;
	int64_t client_send_us; /* echoed */
	int64_t server_recv_us;
	int64_t server_send_us;
} pps_wire_clock_pong_t;

typedef struct {
	uint32_t frame_index;  /* first frame the client could not decode */
	uint8_t quality_layer; /* the layer it lost, 0 = base */
} pps_wire_recovery_request_t;

/* What a relay's subscribers' paths take, the slowest and the fastest (its
 * own subscribers and, folded in, those of the relays below it). */
typedef struct {
	uint32_t subscribers; /* 0: no one watches (the rest is 0) */
	uint64_t slowest_bps;
	uint32_t slowest_min_rtt_us;
	uint64_t fastest_bps; /* >= slowest_bps */
	uint32_t fastest_min_rtt_us;
	uint8_t flags; /* PPS_WIRE_PATH_* */
} pps_wire_path_report_t;

typedef struct {
	uint32_t seq;           /* consecutive at the sender: a gap is a frame it dropped */
	int64_t capture_us;     /* CLOCK_REALTIME of the frame's first sample */
	uint16_t duration_us;   /* 2500..60000 */
	uint8_t flags;          /* PPS_WIRE_AUDIO_SPEECH */
	uint16_t payload_len;   /* 1..PPS_WIRE_MAX_AUDIO_BYTES */
	const uint8_t *payload; /* decode: points into the parser, valid until its next call */
} pps_wire_audio_frame_t;

typedef struct {
	uint16_t reason; /* pps_wire_bye_reason_t */
	uint8_t text_len;
	char text[PPS_WIRE_MAX_REASON_BYTES + 1]; /* NUL-terminated copy */
} pps_wire_bye_t;

typedef struct {
	uint8_t method; /* PPS_WIRE_AUTH_HMAC_SHA256 */
	uint8_t nonce[PPS_WIRE_NONCE_BYTES];
} pps_wire_challenge_t;

typedef struct {
	uint8_t method; /* PPS_WIRE_AUTH_HMAC_SHA256 */
	uint8_t mac[PPS_WIRE_MAC_BYTES];
} pps_wire_auth_t;

typedef struct {
	pps_wire_kind_t kind;
	union {
		pps_wire_hello_t hello;
		pps_wire_stream_info_t stream_info;
		pps_wire_window_begin_t window_begin;
		pps_wire_adu_fragment_t adu_fragment;
		pps_wire_window_end_t window_end;
		pps_wire_clock_ping_t clock_ping;
		pps_wire_clock_pong_t clock_pong;
		pps_wire_bye_t bye;
		pps_wire_challenge_t challenge;
		pps_wire_auth_t auth;
		pps_wire_recovery_request_t recovery_request;
		pps_wire_audio_frame_t audio_frame;
		pps_wire_path_report_t path_report;
	} u;
} pps_wire_record_t;

/* Name of a record kind for logs ("HELLO"), or "unknown". */
const char *pps_wire_kind_name(unsigned kind);

/* Name of a BYE reason ("server-full"), or "unknown". */
const char *pps_wire_bye_reason_name(unsigned reason);

/*
 * Sets *@size to the bytes @record needs on the wire, header included.
 * Returns 0, or -EINVAL if the record cannot be encoded (a length field out
 * of range).
 */
int pps_wire_record_size(const pps_wire_record_t *record, size_t *size);

/* Bytes an ADU_FRAGMENT record needs besides its payload, for @dep_count deps. */
size_t pps_wire_fragment_overhead(unsigned dep_count);

/*
 * Encodes @record into @buf (@capacity bytes) and sets *@written to the bytes
 * written. Returns 0, -ENOSPC if it does not fit (nothing counts as written),
 * or -EINVAL if a field is out of range.
 */
int pps_wire_encode(const pps_wire_record_t *record, uint8_t *buf, size_t capacity,
                    size_t *written);

/*
 * What was wrong with the input, once pps_wire_parser_next() failed
 * (pps_wire_parser_error_code()). The call itself returns an errno:
 * -EMSGSIZE for PPS_WIRE_ERR_TOO_LONG, -EPROTO for the others.
 */
typedef enum {
	PPS_WIRE_OK = 0,
	PPS_WIRE_ERR_VERSION,  /* header version is not PPS_WIRE_VERSION */
	PPS_WIRE_ERR_KIND,     /* unknown record kind */
	PPS_WIRE_ERR_TOO_LONG, /* length over the configured maximum */
	PPS_WIRE_ERR_SHORT,    /* body shorter than its kind's fields */
	PPS_WIRE_ERR_TRAILING, /* body longer than its kind's fields */
	PPS_WIRE_ERR_FIELD,    /* a field out of range (names it in the message) */
} pps_wire_error_t;

typedef struct pps_wire_parser pps_wire_parser_t;

/*
 * A parser that accepts records of at most @max_record_bytes (header
 * included, PPS_WIRE_HEADER_BYTES + 1 .. PPS_WIRE_MAX_RECORD_BYTES). Its
 * buffer is allocated once, here. NULL with errno (EINVAL, ENOMEM).
 */
pps_wire_parser_t *pps_wire_parser_new(size_t max_record_bytes);
void pps_wire_parser_free(pps_wire_parser_t *parser);

/*
 * Consumes bytes from *data (advancing *data and decreasing *len) until one
 * record is complete. Returns 0 with the record in @out (pointers in it valid
 * until the next call); -EAGAIN when all input was consumed without
 * completing a record (feed more); -EPROTO for malformed input, -EMSGSIZE for
 * a record over the parser's maximum. On those two the detail is behind
 * pps_wire_parser_error_code() and pps_wire_parser_error(), and every later
 * call fails the same way.
 */
int pps_wire_parser_next(pps_wire_parser_t *parser, const uint8_t **data, size_t *len,
                         pps_wire_record_t *out);

/* Who sends the records a parser reads. */
typedef enum {
	PPS_WIRE_FROM_ANY = 0, /* every kind (tools, fuzzers) */
	PPS_WIRE_FROM_CLIENT,  /* HELLO, CLOCK_PING, AUTH, RECOVERY_REQUEST, PATH_REPORT, BYE */
	PPS_WIRE_FROM_SERVER,  /* the others, and BYE */
} pps_wire_sender_t;

/* Records of a kind @sender does not send fail at their header, before their
 * body is read (PPS_WIRE_ERR_KIND: "STREAM_INFO is a server record"). */
void pps_wire_parser_set_sender(pps_wire_parser_t *parser, pps_wire_sender_t sender);

/* Whether @sender sends records of @kind. */
bool pps_wire_kind_sent_by(unsigned kind, pps_wire_sender_t sender);

/* What the failure was (PPS_WIRE_OK while the parser has not failed). */
pps_wire_error_t pps_wire_parser_error_code(const pps_wire_parser_t *parser);

/* The failure as one line naming the record and field, or "". */
const char *pps_wire_parser_error(const pps_wire_parser_t *parser);

/* Bytes of a partial record held (0 between records): trailing bytes at EOF. */
size_t pps_wire_parser_pending(const pps_wire_parser_t *parser);

/* ---- challenge-response (pps-wire-auth.c, GLib's GHmac) ---------------- */

/* Fills @nonce with random bytes from the kernel (getrandom). 0 or -errno. */
int pps_wire_auth_nonce(uint8_t nonce[PPS_WIRE_NONCE_BYTES]);

/* @mac = HMAC-SHA256(key @token, "ppstream-auth-v1" || @nonce): what a client
 * that holds @token answers a CHALLENGE with. */
void pps_wire_auth_mac(const char *token, size_t token_len,
                       const uint8_t nonce[PPS_WIRE_NONCE_BYTES], uint8_t mac[PPS_WIRE_MAC_BYTES]);

/* Compares two MACs in time independent of where they differ. */
bool pps_wire_auth_equal(const uint8_t a[PPS_WIRE_MAC_BYTES], const uint8_t b[PPS_WIRE_MAC_BYTES]);

#endif /* PPS_WIRE_H */
