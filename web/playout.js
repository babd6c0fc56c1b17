// SPDX-License-Identifier: MIT
// Playout policies, the same as pps-client's (client/pps-playout.c, where the
// reasons are): fixed, asap (the default, as pps-client's: frames decoded
// together keep their capture spacing, and catching up after a stall runs at
// most twice as fast as real time), adaptive (Zhang, Wang, Keshav,
// section 4.1, alpha from a 1 s time constant, beta = 4, spike mode), smooth
// (90th percentile of the last 2 s of window delays + 10 ms, falling by 1/8
// per window). Times are client-clock microseconds.

export const POLICIES = ['fixed', 'asap', 'adaptive', 'smooth'];
export const DEFAULT_POLICY = 'asap';
const SMOOTH_PERCENTILE = 90;
const SMOOTH_HORIZON_MS = 2000;
const SMOOTH_WINDOWS = 128;
const SMOOTH_FALL = 8;
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
    this.recent = []; // smooth: the last window delays
    this.haveSmooth = false;
    this.anchor = null; // asap: {window, capture, display} of the window being paced
    this.lastDisplayUs = null;
    this.shown = null; // asap: {at, capture} of the last frame shown
  }

  streamDelayUs() {
    if (this.toleranceUs > 0) return this.toleranceUs;
    return this.budgetUs + (this.rttUs || UNKNOWN_RTT_US) + DECODE_MARGIN_US;
  }

  setStream(budgetUs, windowUs) {
    this.budgetUs = budgetUs;
    this.windowUs = windowUs > 0 ? windowUs : 1;
    if (this.policy === 'adaptive' && !this.have) this.delayUs = this.streamDelayUs();
  }

  setRtt(rttUs) {
    this.rttUs = rttUs > 0 ? rttUs : 1;
    if (this.policy === 'adaptive' && !this.have) this.delayUs = this.streamDelayUs();
  }

  smoothWindow(delayUs) {
    this.recent.push(Math.max(0, delayUs));
    if (this.recent.length > SMOOTH_WINDOWS) this.recent.shift();
    const horizon = Math.min(Math.floor(SMOOTH_HORIZON_MS * 1000 / this.windowUs) + 1,
      SMOOTH_WINDOWS);
    const last = this.recent.slice(-horizon).sort((a, b) => a - b);
    const rank = Math.ceil(last.length * SMOOTH_PERCENTILE / 100);
    const target = last[Math.max(rank, 1) - 1] + DECODE_MARGIN_US;
    if (!this.haveSmooth || target >= this.delayUs) this.delayUs = target;
    else this.delayUs -= Math.ceil((this.delayUs - target) / SMOOTH_FALL);
    this.haveSmooth = true;
  }

  // A window arrived: delayUs = arrival of its last byte - capture of its first frame.
  window(delayUs) {
    const d = delayUs;
    const alpha = Math.exp(-this.windowUs / (SETTLE_MS * 1000));
    if (this.policy === 'smooth') {
      this.smoothWindow(d);
      return;
    }
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
      case 'smooth': return this.haveSmooth ? captureUs + this.delayUs : nowUs;
      default: return captureUs + this.streamDelayUs();
    }
  }

  currentDelayUs() {
    if (this.policy === 'fixed') return this.streamDelayUs();
    if (this.policy === 'asap') return 0;
    if (this.policy === 'smooth') return this.haveSmooth ? this.delayUs : 0;
    return this.delayUs;
  }

  // Display time of a decoded frame of window `window` (pps_playout_push()):
  // null if it is late and the policy drops late frames (fixed, adaptive).
  // `queue` holds the frames waiting ({due_us}), whose times asap may bring
  // forward. Display order is capture order: never before the last one.
  place(window, captureUs, nowUs, queue) {
    let display = this.displayTimeUs(captureUs, nowUs);
    if (this.policy === 'asap') {
      const a = this.anchor;
      if (a && window === a.window && captureUs > a.capture) {
        display = Math.max(display, a.display + (captureUs - a.capture));
      } else if (!a || window !== a.window) {
        // A new window starts when decoded; older ones waiting become due.
        for (const f of queue) if (f.due_us > display) f.due_us = display;
        if (this.lastDisplayUs !== null && this.lastDisplayUs > display) this.lastDisplayUs = display;
        this.anchor = { window, capture: captureUs, display };
      }
    } else if (display < nowUs - 1000) {
      if (this.policy !== 'smooth') return null;
      display = nowUs; // smooth: late is shown at once
    }
    if (this.lastDisplayUs !== null && display < this.lastDisplayUs) display = this.lastDisplayUs;
    this.lastDisplayUs = display;
    return display;
  }

  // When the head of the queue may be shown: its display time, and with asap
  // no sooner than half its capture spacing after the frame shown before it
  // (catching up at most twice as fast as real time; pps-playout.c's
  // head_due_us). `frame`: {due_us, capture_client_us}.
  dueUs(frame) {
    let due = frame.due_us;
    if (this.policy === 'asap' && this.shown && frame.capture_client_us > this.shown.capture) {
      due = Math.max(due, this.shown.at + (frame.capture_client_us - this.shown.capture) / 2);
    }
    return due;
  }

  // `frame` went on screen at `nowUs`.
  markShown(frame, nowUs) {
    this.shown = { at: nowUs, capture: frame.capture_client_us };
  }

  mode() { return this.spike ? 'spike' : 'normal'; }
}
