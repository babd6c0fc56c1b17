// SPDX-License-Identifier: MIT
// When the viewer tries again after a lost connection: the first retry
// comes quickly (a server restart takes well under a second), each further
// one waits twice as long up to a cap, so that a server that stays away is
// asked every few seconds and not in a tight loop. Each delay is jittered,
// so that the viewers of a restarted server do not all come back in the
// same instant. A connection that streamed for a while, or that the
// server ended in order (BYE normal: "server shutting down", a restart
// most likely), starts the next series from the first delay again; one
// that failed soon after it began streaming (a server that admits and then
// drops the viewer, or crashes over and over) keeps doubling.

export const RETRY_FIRST_MS = 500;
export const RETRY_MAX_MS = 3000;
export const RETRY_JITTER = 0.2; // each delay is scaled by 1 ± this
export const RETRY_RESET_AFTER_MS = 10000;

export class Backoff {
  constructor(random = Math.random) {
    this.random = random;
    this.failures = 0; // in a row, since the last connection that streamed long enough
  }

  // The delay before the next attempt (ms), and one failure more.
  next() {
    const base = Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** Math.min(this.failures, 16));
    this.failures++;
    return base * (1 + RETRY_JITTER * (2 * this.random() - 1));
  }

  // A connection ended after streaming for streamedMs (0: it never
  // streamed); orderly: the server said it was stopping.
  ended(streamedMs, orderly = false) {
    if (orderly || streamedMs >= RETRY_RESET_AFTER_MS) this.failures = 0;
  }
}
