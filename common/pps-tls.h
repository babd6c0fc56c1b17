/* SPDX-License-Identifier: MIT */
/*
 * TLS 1.3 on a non-blocking TCP socket, for the server's sessions and the
 * client's connection (OpenSSL 3, in user space: this kernel has no TLS ULP,
 * and kTLS could not honour the rule below anyway, see pps-minbuf.h).
 *
 * Why the shape: MIN_BUF (server/pps-minbuf.h) counts what it hands to the
 * kernel in whole MSS-sized packets, and each packet must leave as one TCP
 * segment. So the server never lets OpenSSL write to the socket: incoming
 * bytes are read by OpenSSL from the socket, but every byte it produces goes
 * to a memory BIO, and
 *  - pps_tls_seal() turns one packet of plaintext into exactly one TLS record
 *    in the caller's buffer (the server's TLS layer, server/pps-transport.h,
 *    seals each packet the MIN_BUF writer pulls into the writer's batch); the
 *    writer then writes those bytes like plain ones (its partial-write
 *    handling is unchanged: a record is never re-encrypted, the writer keeps
 *    the unsent ciphertext);
 *  - pps_tls_send() seals one small message and sends it now, keeping the
 *    unsent tail of the ciphertext for the next pps_tls_flush()/send/seal, so
 *    the byte stream stays whole (OpenSSL's "retry with the same buffer" rule
 *    never applies: its writes to memory always complete).
 * A record costs PPS_TLS_RECORD_OVERHEAD_BYTES on the wire: 5 bytes of header,
 * 1 of inner content type and the AEAD's 16-byte tag. Only TLS 1.3 with the
 * three AEAD suites whose tag is 16 bytes is offered, record padding is off
 * and no session tickets are sent, so the figure is exact.
 *
 * Threading: a pps_tls_t belongs to the thread of its socket's event loop.
 * Errors: 0 / negative errno; where a user must read the reason, it is in
 * @err (or pps_tls_error()).
 */
#ifndef PPS_TLS_H
#define PPS_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* TLS 1.3 record: 5 header + 1 content type + 16 AEAD tag. */
#define PPS_TLS_RECORD_OVERHEAD_BYTES 22
/* Largest plaintext in one record (RFC 8446 section 5.1). */
#define PPS_TLS_MAX_PLAINTEXT_BYTES 16384
/* Largest record the writer produces: one packet's worth on paths whose MSS
 * exceeds it (loopback) are cut to this. */
#define PPS_TLS_MAX_RECORD_BYTES (PPS_TLS_MAX_PLAINTEXT_BYTES + PPS_TLS_RECORD_OVERHEAD_BYTES)

typedef struct pps_tls_ctx pps_tls_ctx_t;
typedef struct pps_tls pps_tls_t;

/* A server context from PEM files: @cert_file (the certificate chain) and
 * @key_file (its private key). NULL with errno (EINVAL: unreadable or
 * mismatched files, ENOMEM) and the reason, naming the file, in @err. */
pps_tls_ctx_t *pps_tls_ctx_new_server(const char *cert_file, const char *key_file, char *err,
                                      size_t err_size);
/* A client context that verifies the server against the CAs or certificates
 * in the PEM file @ca_file, or the system's store when @ca_file is NULL or "".
 * Verification is never skipped. NULL with errno and the reason in @err. */
pps_tls_ctx_t *pps_tls_ctx_new_client(const char *ca_file, char *err, size_t err_size);
void pps_tls_ctx_free(pps_tls_ctx_t *ctx);

/*
 * A TLS endpoint on the connected non-blocking socket @fd (not owned: the
 * caller closes it after pps_tls_free()). A client context needs @server_name:
 * the host name or IP address literal the certificate must be valid for (sent
 * as SNI when it is a name). NULL with errno (EINVAL, ENOMEM).
 */
pps_tls_t *pps_tls_new(pps_tls_ctx_t *ctx, int fd, const char *server_name);
void pps_tls_free(pps_tls_t *tls);

/*
 * One step of the handshake, non-blocking. 0 once it is complete and all of
 * its bytes are in the kernel; -EAGAIN to be called again when the socket is
 * readable, or writable if pps_tls_want_write(); -EPROTONOSUPPORT when the
 * peer's first byte is not a TLS record (a plaintext peer: its bytes are still
 * unread in the socket); -EPROTO for a failed handshake (verification
 * included), -ECONNRESET when the peer closed; the reason in @err.
 */
int pps_tls_handshake(pps_tls_t *tls, char *err, size_t err_size);
bool pps_tls_handshake_done(const pps_tls_t *tls);
/* Ciphertext is waiting in user space for the socket to take it. */
bool pps_tls_want_write(const pps_tls_t *tls);

/* Decrypted bytes into @buf: > 0 their count, 0 when the peer closed, -EAGAIN
 * when no whole record is in yet, -EPROTO (reason in pps_tls_error()) or the
 * socket's -errno. Records of any length are returned over several calls:
 * call again until -EAGAIN (the socket will not signal what OpenSSL already
 * read from it). */
ssize_t pps_tls_read(pps_tls_t *tls, void *buf, size_t size);
/* OpenSSL holds decrypted bytes not read yet (the socket will not signal them). */
bool pps_tls_has_pending(const pps_tls_t *tls);
const char *pps_tls_error(const pps_tls_t *tls);

/*
 * Seals @len bytes (1 .. PPS_TLS_MAX_PLAINTEXT_BYTES) as one record into
 * @out: *out_len = len + PPS_TLS_RECORD_OVERHEAD_BYTES, preceded by any
 * ciphertext still waiting in user space (normally none). -EMSGSIZE when that
 * does not fit @out_size (nothing is lost: the caller fails the connection),
 * -EPROTO when the handshake is not done or OpenSSL fails.
 */
int pps_tls_seal(pps_tls_t *tls, const void *plain, size_t len, uint8_t *out, size_t out_size,
                 size_t *out_len);
/* Seals @len bytes as one record and sends it now with everything waiting:
 * 0 when all is in the kernel, -EAGAIN when a tail waits (kept, sent by the
 * next flush, send or seal), or a negative errno. */
int pps_tls_send(pps_tls_t *tls, const void *buf, size_t len);
/* Sends what waits: 0, -EAGAIN or a negative errno. */
int pps_tls_flush(pps_tls_t *tls);

#endif /* PPS_TLS_H */
