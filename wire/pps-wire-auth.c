/* SPDX-License-Identifier: MIT */
/*
 * Challenge-response for the access token (PROTOCOL.md, "Access control"):
 * the server sends a fresh random nonce, the client answers with
 * HMAC-SHA256(token, context || nonce), so the token itself never crosses
 * the wire and an answer seen once is worth nothing on another connection.
 * The MAC is GLib's GHmac; only the framing is ours.
 */
#include "pps-wire.h"

#include <errno.h>
#include <glib.h>
#include <string.h>
#include <sys/random.h>

/* Binds a MAC to this use of the token (not another protocol's). */
static const char auth_context[] = "ppstream-auth-v1";

_Static_assert(PPS_WIRE_NONCE_BYTES == PPS_WIRE_MAC_BYTES,
               "CHALLENGE and AUTH share one layout in the parser");

int
pps_wire_auth_nonce(uint8_t nonce[PPS_WIRE_NONCE_BYTES])
{
	size_t have = 0;

	while (have < PPS_WIRE_NONCE_BYTES) {
		ssize_t n = getrandom(nonce + have, PPS_WIRE_NONCE_BYTES - have, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		have += (size_t)n;
	}
	return 0;
}

void
pps_wire_auth_mac(const char *token, size_t token_len, const uint8_t nonce[PPS_WIRE_NONCE_BYTES],
                  uint8_t mac[PPS_WIRE_MAC_BYTES])
{
	GHmac *hmac = g_hmac_new(G_CHECKSUM_SHA256, (const guchar *)token, token_len);
	gsize len = PPS_WIRE_MAC_BYTES;

	g_hmac_update(hmac, (const guchar *)auth_context, sizeof(auth_context) - 1);
	g_hmac_update(hmac, nonce, PPS_WIRE_NONCE_BYTES);
	g_hmac_get_digest(hmac, mac, &len);
	g_hmac_unref(hmac);
}

bool
pps_wire_auth_equal(const uint8_t a[PPS_WIRE_MAC_BYTES], const uint8_t b[PPS_WIRE_MAC_BYTES])
{
	volatile uint8_t diff = 0;

	for (size_t i = 0; i < PPS_WIRE_MAC_BYTES; i++)
		diff |= (uint8_t)(a[i] ^ b[i]);
	return diff == 0;
}
