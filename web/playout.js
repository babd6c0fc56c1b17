// SPDX-License-Identifier: MIT
// Playout policies, the same as pps-client's (client/pps-playout.c, where the
// reasons are): fixed, asap, adaptive (the default; Zhang, Wang, Keshav,
// section 4.1, alpha from a 1 s time constant, beta = 4, spike mode).
// Times are client-clock microseconds.

export const POLICIES = ['fixed', 'asap', 'adaptive'];
export const DEFAULT_POLICY = 'adaptive';
export const MAX_QUEUE_FRAMES = 48; // PPS_PLAYOUT_MAX_FRAMES

const BETA = 4;
const SETTLE_MS = 1000;
const SPIKE_ENTER_US = 100000;
const SPIKE_EXIT_US = 10000;
const DECODE_MARGIN_US = 10000;
const UNKNOWN_RTT_US = 100000;

export class Playout {
  constructor(policy = DEFAULT_POLICY, toleranceUs = 0) {
    if (!POLICIES.includes(policy)) throw new Error(`unknown playout policy ${policy}`);
    this.policy = policy;
    this.toleranceUs = toleranceUs;
    this.budgetUs = 200000;
    this.windowUs = 66667;
    this.rttUs = 0;
    this.have = false;
    this.spike = false;
    this.u = 0; this.v = 0; this.d1 = 0; this.d2 = 0; this.spikeVar = 0;
    this.delayUs = this.streamDelayUs();
  }

  streamDelayUs() {
    if (this.toleranceUs > 0) return this.toleranceUs;
    return this.budgetUs + (this.rttUs || UNKNOWN_RTT_US) + DECODE_MARGIN_US;
  }

  setStream(budgetUs, windowUs) {
    this.budgetUs = budgetUs;
    this.windowUs = windowUs > 0 ? windowUs : 1;
    if (!this.have) this.delayUs = this.streamDelayUs();
  }

  setRtt(rttUs) {
    this.rttUs = rttUs > 0 ? rttUs : 1;
    if (!this.have) this.delayUs = this.streamDelayUs();
  }

  // A window arrived: delayUs = arrival of its last byte - capture of its first frame.
  window(delayUs) {
    const d = delayUs;
    const alpha = Math.exp(-this.windowUs / (SETTLE_MS * 1000));
    if (this.policy !== 'adaptive') return;
    if (!this.have) {
      const start = this.streamDelayUs();
      this.u = d;
      this.v = start > d ? (start - d) / BETA : d / 8;
      this.d1 = this.d2 = d;
      this.have = true;
    } else {
      if (!this.spike && d - this.d1 > Math.max(2 * this.v + SPIKE_ENTER_US, SPIKE_ENTER_US)) {
        this.spike = true;
        this.spikeVar = 0;
      }
      if (this.spike) {
        this.spikeVar = this.spikeVar / 2 + Math.abs(2 * d - this.d1 - this.d2) / 8;
        this.u += d - this.d1;
        if (this.spikeVar < SPIKE_EXIT_US) this.spike = false;
      } else {
        this.u = alpha * this.u + (1 - alpha) * d;
      }
      this.v = alpha * this.v + (1 - alpha) * Math.abs(this.u - d);
      this.d2 = this.d1;
      this.d1 = d;
    }
    this.delayUs = Math.max(0, Math.trunc(this.u + BETA * this.v));
  }

  displayTimeUs(captureUs, nowUs) {
    switch (this.policy) {
      case 'asap': return nowUs;
      case 'adaptive': return captureUs + this.delayUs;
      default: return captureUs + this.streamDelayUs();
    }
  }

  currentDelayUs() {
    return this.policy === 'fixed' ? this.streamDelayUs() : this.delayUs;
  }

  mode() { return this.spike ? 'spike' : 'normal'; }
}
