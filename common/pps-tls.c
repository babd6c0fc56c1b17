/* SPDX-License-Identifier: MIT */
/*
 * TLS 1.3 over OpenSSL 3 with the socket read by OpenSSL and every byte it
 * writes kept in memory (pps-tls.h says why).
 */
#include "pps-tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The TLS 1.3 suites with a 16-byte tag (PPS_TLS_RECORD_OVERHEAD_BYTES);
 * TLS_AES_128_CCM_8_SHA256 (8-byte tag) is left out on purpose. */
#define SUITES "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"
/* Ciphertext kept in user space: handshake flights and a few small records.
 * Past this the peer is not reading; the connection fails. */
#define OUT_MAX_BYTES (256 * 1024)
/* A TLS record's first byte: handshake (22) or alert (21). */
#define CONTENT_HANDSHAKE 22
#define CONTENT_ALERT     21

struct pps_tls_ctx {
	SSL_CTX *ssl_ctx;
	bool server;
};

struct pps_tls {
	SSL *ssl;
	BIO *wbio; /* memory: everything OpenSSL writes */
	int fd;
	bool server;
	bool peeked; /* the peer's first byte was seen to be TLS */
	bool done;
	uint8_t *out; /* ciphertext not yet in the kernel */
	size_t out_off, out_len, out_cap;
	char error[256];
};

/* 0, or -errno with "cannot read the @what @path: reason" in @err: OpenSSL
 * says only "system lib" for a missing file. */
static int
check_readable(const char *what, const char *path, char *err, size_t err_size)
{
	if (access(path, R_OK) == 0)
		return 0;
	snprintf(err, err_size, "cannot read the %s %s: %s", what, path, strerror(errno));
	return -errno;
}

/* OpenSSL's error queue as text ("" if empty), cleared. */
static void
queue_text(char *buf, size_t size)
{
	unsigned long e, last = 0;

	buf[0] = '\0';
	while ((e = ERR_get_error()) != 0)
		last = e; /* the last one is the most specific here */
	if (last)
		ERR_error_string_n(last, buf, size);
}

static pps_tls_ctx_t *
ctx_new(bool server, char *err, size_t err_size)
{
	pps_tls_ctx_t *ctx = calloc(1, sizeof(*ctx));

	if (!ctx) {
		snprintf(err, err_size, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	ctx->server = server;
	ctx->ssl_ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
	if (!ctx->ssl_ctx || !SSL_CTX_set_min_proto_version(ctx->ssl_ctx, TLS1_3_VERSION) ||
	    !SSL_CTX_set_ciphersuites(ctx->ssl_ctx, SUITES)) {
		char why[160];

		queue_text(why, sizeof(why));
		snprintf(err, err_size, "cannot set up TLS 1.3: %s", why);
		pps_tls_ctx_free(ctx);
		errno = ENOMEM;
		return NULL;
	}
	/* A peer that closes the TCP connection without close_notify: the wire
	 * protocol's BYE says whether a stream ended on purpose. */
	SSL_CTX_set_options(ctx->ssl_ctx, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION);
	SSL_CTX_set_mode(ctx->ssl_ctx, SSL_MODE_AUTO_RETRY);
	return ctx;
}

pps_tls_ctx_t *
pps_tls_ctx_new_server(const char *cert_file, const char *key_file, char *err, size_t err_size)
{
	pps_tls_ctx_t *ctx;
	char why[160];

	if (!cert_file || !cert_file[0] || !key_file || !key_file[0]) {
		snprintf(err, err_size, "TLS needs both a certificate and a key");
		errno = EINVAL;
		return NULL;
	}
	if (check_readable("certificate", cert_file, err, err_size) < 0 ||
	    check_readable("private key", key_file, err, err_size) < 0) {
		errno = EINVAL;
		return NULL;
	}
	ctx = ctx_new(true, err, err_size);
	if (!ctx)
		return NULL;
	/* No tickets: nothing is written after the handshake but our records,
	 * so every sealed packet is exactly one record. */
	SSL_CTX_set_num_tickets(ctx->ssl_ctx, 0);
	SSL_CTX_set_session_cache_mode(ctx->ssl_ctx, SSL_SESS_CACHE_OFF);
	if (SSL_CTX_use_certificate_chain_file(ctx->ssl_ctx, cert_file) != 1) {
		queue_text(why, sizeof(why));
		snprintf(err, err_size, "cannot load the certificate %s: %s", cert_file, why);
		goto err_free;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx->ssl_ctx, key_file, SSL_FILETYPE_PEM) != 1) {
		queue_text(why, sizeof(why));
		snprintf(err, err_size, "cannot load the private key %s: %s", key_file, why);
		goto err_free;
	}
	if (SSL_CTX_check_private_key(ctx->ssl_ctx) != 1) {
		queue_text(why, sizeof(why));
		snprintf(err, err_size, "the key %s does not match the certificate %s: %s",
		         key_file, cert_file, why);
		goto err_free;
	}
	return ctx;

err_free:
	pps_tls_ctx_free(ctx);
	errno = EINVAL;
	return NULL;
}

pps_tls_ctx_t *
pps_tls_ctx_new_client(const char *ca_file, char *err, size_t err_size)
{
	pps_tls_ctx_t *ctx;
	char why[160];
	int ok;

	if (ca_file && ca_file[0] && check_readable("CA file", ca_file, err, err_size) < 0) {
		errno = EINVAL;
		return NULL;
	}
	ctx = ctx_new(false, err, err_size);
	if (!ctx)
		return NULL;
	SSL_CTX_set_verify(ctx->ssl_ctx, SSL_VERIFY_PEER, NULL);
	if (ca_file && ca_file[0])
		ok = SSL_CTX_load_verify_locations(ctx->ssl_ctx, ca_file, NULL);
	else
		ok = SSL_CTX_set_default_verify_paths(ctx->ssl_ctx);
	if (ok != 1) {
		queue_text(why, sizeof(why));
		if (ca_file && ca_file[0])
			snprintf(err, err_size, "cannot load the CA file %s: %s", ca_file, why);
		else
			snprintf(err, err_size, "cannot load the system's CA store: %s", why);
		pps_tls_ctx_free(ctx);
		errno = EINVAL;
		return NULL;
	}
	return ctx;
}

void
pps_tls_ctx_free(pps_tls_ctx_t *ctx)
{
	if (!ctx)
		return;
	SSL_CTX_free(ctx->ssl_ctx);
	free(ctx);
}

static bool
is_ip_literal(const char *name)
{
	unsigned char addr[16];

	return inet_pton(AF_INET, name, addr) == 1 || inet_pton(AF_INET6, name, addr) == 1;
}

pps_tls_t *
pps_tls_new(pps_tls_ctx_t *ctx, int fd, const char *server_name)
{
	pps_tls_t *t;
	BIO *rbio;

	if (!ctx || fd < 0 || (!ctx->server && (!server_name || !server_name[0]))) {
		errno = EINVAL;
		return NULL;
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		errno = ENOMEM;
		return NULL;
	}
	t->fd = fd;
	t->server = ctx->server;
	t->ssl = SSL_new(ctx->ssl_ctx);
	rbio = BIO_new_socket(fd, BIO_NOCLOSE);
	t->wbio = BIO_new(BIO_s_mem());
	if (!t->ssl || !rbio || !t->wbio) {
		BIO_free(rbio);
		BIO_free(t->wbio);
		goto err_free;
	}
	SSL_set_bio(t->ssl, rbio, t->wbio); /* the SSL owns both from here */
	if (ctx->server) {
		SSL_set_accept_state(t->ssl);
	} else {
		X509_VERIFY_PARAM *vp = SSL_get0_param(t->ssl);

		/* The certificate must name what the user asked for: the IP
		 * address (subjectAltName IP) or the host name, never skipped. */
		if (is_ip_literal(server_name)) {
			if (X509_VERIFY_PARAM_set1_ip_asc(vp, server_name) != 1)
				goto err_free;
		} else if (SSL_set1_host(t->ssl, server_name) != 1 ||
		           SSL_set_tlsext_host_name(t->ssl, server_name) != 1) {
			goto err_free;
		}
		SSL_set_connect_state(t->ssl);
	}
	return t;

err_free:
	ERR_clear_error();
	pps_tls_free(t);
	errno = ENOMEM;
	return NULL;
}

void
pps_tls_free(pps_tls_t *t)
{
	if (!t)
		return;
	SSL_free(t->ssl);
	free(t->out);
	free(t);
}

bool
pps_tls_handshake_done(const pps_tls_t *t)
{
	return t->done;
}

bool
pps_tls_want_write(const pps_tls_t *t)
{
	return t->out_off < t->out_len;
}

const char *
pps_tls_error(const pps_tls_t *t)
{
	return t->error;
}

/* Moves what OpenSSL wrote to memory behind the bytes already waiting. */
static int
collect(pps_tls_t *t)
{
	size_t n = (size_t)BIO_ctrl_pending(t->wbio);

	if (n == 0)
		return 0;
	if (t->out_off == t->out_len)
		t->out_off = t->out_len = 0;
	if (t->out_len + n > t->out_cap) {
		size_t cap = t->out_len + n;
		uint8_t *nb;

		if (cap > OUT_MAX_BYTES)
			return -ENOBUFS;
		nb = realloc(t->out, cap);
		if (!nb)
			return -ENOMEM;
		t->out = nb;
		t->out_cap = cap;
	}
	if (BIO_read(t->wbio, t->out + t->out_len, (int)n) != (int)n)
		return -EIO;
	t->out_len += n;
	return 0;
}

int
pps_tls_flush(pps_tls_t *t)
{
	int r = collect(t);

	if (r < 0)
		return r;
	while (t->out_off < t->out_len) {
		ssize_t k = send(t->fd, t->out + t->out_off, t->out_len - t->out_off,
		                 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (k < 0) {
			if (errno == EINTR)
				continue;
			return errno == EWOULDBLOCK ? -EAGAIN : -errno;
		}
		t->out_off += (size_t)k;
	}
	t->out_off = t->out_len = 0;
	return 0;
}

/* The reason for a failed SSL call @ret, into t->error; the return code. */
static int
describe(pps_tls_t *t, int ret)
{
	int e = SSL_get_error(t->ssl, ret);
	char why[200];
	long verify;

	if (e == SSL_ERROR_ZERO_RETURN) {
		snprintf(t->error, sizeof(t->error), "the peer closed the TLS session");
		return -ECONNRESET;
	}
	if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
		int saved = errno;

		snprintf(t->error, sizeof(t->error), "connection lost%s%s",
		         saved ? ": " : " (closed by the peer)", saved ? strerror(saved) : "");
		return saved ? -saved : -ECONNRESET;
	}
	queue_text(why, sizeof(why));
	verify = t->done ? X509_V_OK : SSL_get_verify_result(t->ssl);
	if (!t->server && verify != X509_V_OK)
		snprintf(t->error, sizeof(t->error), "certificate verification failed: %s",
		         X509_verify_cert_error_string(verify));
	else
		snprintf(t->error, sizeof(t->error), "TLS error: %s", why[0] ? why : "unknown");
	return -EPROTO;
}

int
pps_tls_handshake(pps_tls_t *t, char *err, size_t err_size)
{
	int ret, r;

	if (t->done)
		return 0;
	/* A plaintext peer is told apart before OpenSSL consumes its bytes, so
	 * that the caller can still read them (a plaintext BYE) or answer. */
	if (!t->peeked) {
		uint8_t first;
		ssize_t n = recv(t->fd, &first, 1, MSG_PEEK | MSG_DONTWAIT);

		if (n == 1) {
			if (first != CONTENT_HANDSHAKE && first != CONTENT_ALERT) {
				snprintf(err, err_size, "the peer does not speak TLS (%s)",
				         t->server ? "a plaintext client" : "a plaintext server");
				return -EPROTONOSUPPORT;
			}
			t->peeked = true;
		} else if (n == 0) {
			snprintf(err, err_size,
			         "the peer closed the connection in the TLS "
			         "handshake");
			return -ECONNRESET;
		}
	}
	ERR_clear_error();
	errno = 0;
	ret = SSL_do_handshake(t->ssl);
	r = pps_tls_flush(t);
	if (ret == 1) {
		if (r == 0)
			t->done = true;
		else if (r != -EAGAIN)
			snprintf(err, err_size, "cannot send the TLS handshake: %s", strerror(-r));
		return r;
	}
	if (SSL_get_error(t->ssl, ret) == SSL_ERROR_WANT_READ) {
		if (r < 0 && r != -EAGAIN)
			snprintf(err, err_size, "cannot send the TLS handshake: %s", strerror(-r));
		return r < 0 && r != -EAGAIN ? r : -EAGAIN;
	}
	r = describe(t, ret);
	snprintf(err, err_size, "%s", t->error);
	(void)pps_tls_flush(t); /* best effort: the alert tells the peer why */
	return r;
}

ssize_t
pps_tls_read(pps_tls_t *t, void *buf, size_t size)
{
	size_t n = 0;
	int ret;

	if (!t->done) {
		snprintf(t->error, sizeof(t->error), "TLS handshake not complete");
		return -EPROTO;
	}
	ERR_clear_error();
	errno = 0;
	ret = SSL_read_ex(t->ssl, buf, size, &n);
	if (ret == 1)
		return (ssize_t)n;
	switch (SSL_get_error(t->ssl, ret)) {
	case SSL_ERROR_WANT_READ:
	case SSL_ERROR_WANT_WRITE: /* our writes go to memory: not seen */
		return -EAGAIN;
	case SSL_ERROR_ZERO_RETURN:
		return 0;
	case SSL_ERROR_SYSCALL:
		if (ERR_peek_error() == 0 && errno == 0)
			return 0;
		/* fall through */
	default:
		return describe(t, ret);
	}
}

bool
pps_tls_has_pending(const pps_tls_t *t)
{
	/* Decrypted bytes: without read-ahead OpenSSL takes from the socket only
	 * the record it decrypts, so anything beyond is still signalled. */
	return t && t->ssl && SSL_pending(t->ssl) > 0;
}

int
pps_tls_seal(pps_tls_t *t, const void *plain, size_t len, uint8_t *out, size_t out_size,
             size_t *out_len)
{
	size_t written = 0, waiting, sealed;
	int r;

	if (!t->done || len == 0 || len > PPS_TLS_MAX_PLAINTEXT_BYTES)
		return t->done ? -EINVAL : -EPROTO;
	ERR_clear_error();
	/* Into memory: always whole, one record for <= 16384 bytes. */
	if (SSL_write_ex(t->ssl, plain, len, &written) != 1 || written != len)
		return describe(t, 0);
	waiting = t->out_len - t->out_off;
	sealed = (size_t)BIO_ctrl_pending(t->wbio);
	if (waiting + sealed > out_size) {
		/* Keep the stream whole for an error path that still flushes. */
		r = collect(t);
		return r < 0 ? r : -EMSGSIZE;
	}
	if (waiting)
		memcpy(out, t->out + t->out_off, waiting);
	t->out_off = t->out_len = 0;
	if (BIO_read(t->wbio, out + waiting, (int)sealed) != (int)sealed)
		return -EIO;
	*out_len = waiting + sealed;
	return 0;
}

int
pps_tls_send(pps_tls_t *t, const void *buf, size_t len)
{
	size_t written = 0;

	if (!t->done || len == 0 || len > PPS_TLS_MAX_PLAINTEXT_BYTES)
		return t->done ? -EINVAL : -EPROTO;
	ERR_clear_error();
	if (SSL_write_ex(t->ssl, buf, len, &written) != 1 || written != len)
		return describe(t, 0);
	return pps_tls_flush(t);
}
