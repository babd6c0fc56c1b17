// SPDX-License-Identifier: MIT
// The audio's adaptive jitter buffer: client/pps-jitter.c's rules, smaller.
// Pure logic: it reads no clock (every call takes the time it is about) and
// does no I/O, so a test drives it with made-up times.
//
// Times are microseconds on the viewer's clock (capture times moved there by
// the clock offset). Frame s plays in its slot, due at capture(s) + D; slots
// come every frame, so D moves in whole frames only.
//
// The estimate (seed 003, Zhang, Wang, Keshav, section 4.1.1, after Ramjee
// et al.): for each frame whose capture time fits the sender's timeline,
// n = arrival - capture and
//   NORMAL: d = a d + (1 - a) n        SPIKE: d = d + (n - n_prev)
//   both:   v = a v + (1 - a) |d - n|
//   target: T = d + max(beta v, min_delay), beta = 4, at most floor + max_delay
// with a = exp(-frame / 10 s) (0.998002 at 20 ms, the seed's), the plain mean
// over the first frames; spike mode entered on a jump of 2 v + 100 ms or a
// slide faster than half a frame per frame, left when var = var / 2 +
// |2 n - n1 - n2| / 8 is under 10 ms and the slide stopped. The floor is the
// least n of the last 1.5-2 s. Left out from pps-jitter.c: Brown's double
// smoothing against drift (clocks kept by NTP drift by a few ppm, a delay
// change of milliseconds a minute that the pauses' steps follow), in-band
// FEC (WebCodecs does not expose it), and the check for a viewer clock
// stepping back.
//
// Playout (pps-jitter.h): D changes only where listeners do not hear it:
//  - in a pause (the frame at the play point is silent, or missing while no
//    talkspurt plays): a silent slot is inserted while T - D > f / 4, silent
//    frames are skipped while D - T >= f;
//  - at a talkspurt start (a speech frame after a silent one) D may grow;
//  - continuous audio (no pause for 2 s) gets one step of a frame toward T
//    at most every second, outside spike mode (else a mic that never pauses
//    would never follow a change of the path).
// A frame missing at its slot is concealed; if it comes later it is late:
// dropped and counted. Bounded: the ring holds max_delay / frame + 2 frames
// (at most 4096); a frame further ahead is refused, counted.

export const JITTER_DEFAULTS = {
  minDelayUs: 20000, // least margin above the delay estimate
  maxDelayUs: 1000000, // most above the delay floor; later frames are late
  memoryUs: 10e6, // the estimates' time constant (the seed's alpha)
  beta: 4,
  spikeEnterUs: 100000,
  spikeExitUs: 10000,
  resyncUs: 100000, // a capture time this far off its sequence number's place is not measured
  idleAfterUs: 1e6, // nothing held this long: stop scheduling until a frame comes
  continuousAfterUs: 2e6, // continuous audio: after this long without a pause,
  continuousStepUs: 1e6, // D steps a frame toward the target at most this often
};
const MAX_FRAMES_LIMIT = 4096;
const FLOOR_BUCKETS = 4;
const FLOOR_BUCKET_US = 500000;

// Slot actions.
export const PLAY = 'played';
export const CONCEAL = 'concealed'; // the frame is missing (or late)
export const INSERT = 'inserted'; // a silent slot added: D grows by a frame
export const SKIP = 'skipped'; // a silent frame dropped: D shrinks by a frame, takes no time

function seqDiff(a, b) { return (a - b) | 0; } // uint32 sequence numbers, wrapping

function median3(a, b, c) { return Math.max(Math.min(a, b), Math.min(Math.max(a, b), c)); }

export class JitterBuffer {
  constructor(frameUs, options = {}) {
    if (!(frameUs >= 2500 && frameUs <= 60000)) throw new RangeError(`frame of ${frameUs} us`);
    this.f = frameUs;
    this.p = { ...JITTER_DEFAULTS, ...options };
    this.maxFrames = Math.min(Math.ceil(this.p.maxDelayUs / frameUs) + 2, MAX_FRAMES_LIMIT);
    this.ring = new Array(this.maxFrames).fill(null);
    this.alpha = Math.exp(-frameUs / this.p.memoryUs);
    this.syncFloorUs = 0;
    this.started = false;
    this.idle = false;
    this.head = 0;
    this.held = 0;
    this.nextSeq = 0;
    this.nextDueUs = 0;
    this.refSeq = 0;
    this.refCaptureUs = 0;
    this.candidate = null; // an off-timeline frame waiting for a second one
    this.samples = 0;
    this.d = 0; this.v = 0; this.n1 = 0; this.n2 = 0; this.var = 0; this.trend = 0;
    this.spike = false;
    this.floor = [];
    this.floorId = -Infinity;
    this.inTalkspurt = false;
    this.changedInPause = false;
    this.boundaryUs = 0; // the slot of the last pause or talkspurt start
    this.lastStepUs = 0; // the slot of the last continuous-audio step
    this.emptySinceUs = null;
    this.delaySumUs = 0; this.delaySum2 = 0;
    this.stats = { received: 0, played: 0, concealed: 0, inserted: 0, skipped: 0, lost: 0,
      late: 0, duplicates: 0, dropped_far: 0, expired: 0, inconsistent: 0, restarts: 0,
      talkspurts: 0, delay_changes: 0 };
  }

  // ---- the sender's timeline and the estimate ------------------------------

  predictedCaptureUs(seq) { return this.refCaptureUs + seqDiff(seq, this.refSeq) * this.f; }
  currentDelayUs() { return this.nextDueUs - this.predictedCaptureUs(this.nextSeq); }

  estimate(n) {
    if (this.samples === 0) {
      this.d = this.n1 = this.n2 = n;
      this.v = 0;
      this.samples = 1;
      return;
    }
    const dn = n - this.n1;
    const a = Math.min(1 - 1 / (this.samples + 1), this.alpha);
    this.trend = (this.trend + dn) / 2;
    if (!this.spike) {
      if (Math.abs(dn) > 2 * this.v + this.p.spikeEnterUs ||
          Math.abs(this.trend) > this.f / 2 + 2 * this.v) {
        this.spike = true;
        this.var = 0;
      }
    } else {
      this.var = this.var / 2 + Math.abs(2 * n - this.n1 - this.n2) / 8;
    }
    if (this.spike) {
      this.d += dn;
      if (this.var <= this.p.spikeExitUs && Math.abs(this.trend) < this.f / 2) {
        this.spike = false;
        this.d = median3(n, this.n1, this.n2);
      }
    } else {
      this.d = a * this.d + (1 - a) * n;
    }
    this.v = a * this.v + (1 - a) * Math.abs(this.d - n);
    this.n2 = this.n1;
    this.n1 = n;
    this.samples++;
  }

  floorAdd(arrivalUs, n) {
    const id = Math.max(Math.floor(arrivalUs / FLOOR_BUCKET_US), this.floorId);
    this.floorId = id;
    const b = this.floor[id % FLOOR_BUCKETS];
    if (!b || b.id !== id) this.floor[id % FLOOR_BUCKETS] = { id, min: n };
    else if (n < b.min) b.min = n;
  }

  floorUs() {
    let m = Infinity;
    for (const b of this.floor) if (b && b.id > this.floorId - FLOOR_BUCKETS && b.min < m) m = b.min;
    return m === Infinity ? this.d : m;
  }

  targetDelayUs() {
    const cap = this.floorUs() + this.p.maxDelayUs;
    let t = Math.min(this.d + Math.max(this.p.beta * this.v, this.p.minDelayUs), cap);
    // Lip sync: another stream to wait for may ask for more, within the cap.
    // (0 is none: a target below 0, from a clock offset off by more than the
    // delay, is no reason to wait.)
    if (this.syncFloorUs > 0 && this.syncFloorUs > t) t = Math.min(this.syncFloorUs, cap);
    return Math.ceil(t);
  }

  // The least playout delay (capture to slot) whatever the estimates say:
  // the picture's latency, for lip sync. Applied where D may change. 0: none.
  setFloor(floorUs) { this.syncFloorUs = floorUs > 0 ? floorUs : 0; }

  // ---- the ring -------------------------------------------------------------

  slotOf(seq) { return (this.head + seqDiff(seq, this.nextSeq)) % this.maxFrames; }

  takeHead() {
    const h = this.ring[this.head];
    this.ring[this.head] = null;
    if (h) this.held--;
    this.head = (this.head + 1) % this.maxFrames;
    this.nextSeq = (this.nextSeq + 1) >>> 0;
    return h;
  }

  // Passes `slots` slots without playing them (D unchanged).
  passSlots(slots, counter) {
    const walk = Math.min(slots, this.maxFrames);
    for (let i = 0; i < walk; i++) {
      if (this.takeHead()) this.stats[counter]++;
      else this.stats.lost++;
    }
    this.nextSeq = (this.nextSeq + slots - walk) >>> 0;
    this.stats.lost += slots - walk;
    this.nextDueUs += slots * this.f;
    this.inTalkspurt = false;
    this.boundaryUs = this.nextDueUs;
    this.emptySinceUs = null;
  }

  start(seq, captureUs, arrivalUs) {
    const n = arrivalUs - captureUs;
    if (this.started) {
      for (let i = 0; i < this.maxFrames; i++) {
        if (this.ring[i]) this.stats.expired++;
        this.ring[i] = null;
      }
      this.held = 0;
      this.stats.restarts++;
      // What was learnt of the variation stays; the delay is measured again.
      this.d = this.n1 = this.n2 = n;
      this.trend = this.var = 0;
      this.spike = false;
    } else {
      this.estimate(n);
    }
    this.floor = [];
    this.floorId = -Infinity;
    this.floorAdd(arrivalUs, n);
    this.refSeq = seq;
    this.refCaptureUs = captureUs;
    this.candidate = null;
    this.head = 0;
    this.nextSeq = seq;
    this.nextDueUs = captureUs + this.targetDelayUs();
    this.started = true;
    this.idle = false;
    this.inTalkspurt = false;
    this.boundaryUs = this.lastStepUs = this.nextDueUs;
    this.emptySinceUs = null;
  }

  store(frame) {
    this.ring[this.slotOf(frame.seq)] = frame;
    this.held++;
    this.emptySinceUs = null;
  }

  // A frame arrived at arrivalUs: frame = {seq, captureUs, speech, ...} (kept
  // as given; the caller may fill it in later, its decoded samples). Returns
  // 'held', 'restart' (held: the stream restarted at it), 'late' (its slot
  // has passed), 'duplicate', or 'far' (further ahead than the ring holds).
  put(frame, arrivalUs) {
    const { seq, captureUs } = frame;
    this.stats.received++;
    if (!this.started) {
      this.start(seq, captureUs, arrivalUs);
      this.store(frame);
      return 'held';
    }
    if (this.idle) {
      // The slots went on silently while idle: pass those due by now.
      if (arrivalUs > this.nextDueUs)
        this.passSlots(Math.ceil((arrivalUs - this.nextDueUs) / this.f), 'expired');
      this.idle = false;
    }
    const dist = seqDiff(seq, this.nextSeq);
    const dueUs = this.nextDueUs + dist * this.f;
    const fits = Math.abs(captureUs - this.predictedCaptureUs(seq)) <= this.p.resyncUs;
    // Past the ring: the oldest slots make room if they are overdue (the
    // caller stopped popping: a hidden tab's timers), else the sender jumped.
    const far = dist >= this.maxFrames && dueUs - this.maxFrames * this.f > arrivalUs;
    if (!fits || far) {
      // Off the stream: a second frame that continues the first means the
      // sender restarted, jumped or stepped its clock (RFC 3550 appendix
      // A.1's probation, by timeline): play restarts there.
      const c = this.candidate;
      const dc = c ? seqDiff(seq, c.seq) : 0;
      if (c && dc > 0 && dc < this.maxFrames &&
          Math.abs(captureUs - (c.captureUs + dc * this.f)) <= this.p.resyncUs) {
        this.start(seq, captureUs, arrivalUs);
        this.store(frame);
        return 'restart';
      }
      this.candidate = { seq, captureUs };
      if (far) {
        this.stats.dropped_far++;
        return 'far';
      }
      this.stats.inconsistent++; // kept for its slot (its sequence number decides), not measured
    } else {
      this.candidate = null;
    }
    frame.fits = fits;
    if (fits) {
      const n = arrivalUs - captureUs;
      this.estimate(n);
      this.floorAdd(arrivalUs, n);
      if (seqDiff(seq, this.refSeq) > 0) {
        this.refSeq = seq;
        this.refCaptureUs = captureUs;
      }
    } else {
      this.stats.inconsistent++; // kept for its slot, not measured
    }
    if (dist < 0) {
      this.stats.late++;
      return 'late';
    }
    if (dist >= this.maxFrames) this.passSlots(dist - this.maxFrames + 1, 'expired');
    const held = this.ring[this.slotOf(seq)];
    if (held && held.seq === seq) {
      this.stats.duplicates++;
      return 'duplicate';
    }
    this.store(frame);
    return 'held';
  }

  // When the next slot is due (viewer's clock), or Infinity when nothing is scheduled.
  nextDue() { return this.started && !this.idle ? this.nextDueUs : Infinity; }

  noteChange() {
    if (!this.changedInPause) this.stats.delay_changes++;
    this.changedInPause = true;
  }

  // D at the play point, adjusted where it may be: a slot, or null.
  adjust() {
    for (let guard = 0; guard <= this.maxFrames; guard++) {
      const h = this.ring[this.head];
      const target = this.targetDelayUs(), delay = this.currentDelayUs();
      const pause = h ? !h.speech : !this.inTalkspurt;
      const spurtStart = !!(h && h.speech && !this.inTalkspurt);
      const continuous = !pause && !spurtStart && !this.spike &&
        this.nextDueUs - this.boundaryUs >= this.p.continuousAfterUs &&
        this.nextDueUs - this.lastStepUs >= this.p.continuousStepUs;
      const grow = target - delay > this.f / 4, shrink = delay - target >= this.f;
      if (!(pause || spurtStart || continuous) || !(grow || (shrink && !spurtStart))) return null;
      if (continuous) this.lastStepUs = this.nextDueUs;
      this.noteChange();
      if (grow) {
        const slot = { action: INSERT, seq: this.nextSeq,
          captureUs: this.predictedCaptureUs(this.nextSeq), dueUs: this.nextDueUs,
          frame: null, speech: false };
        this.stats.inserted++;
        this.nextDueUs += this.f;
        return slot;
      }
      const skipped = this.takeHead();
      if (skipped) {
        this.stats.skipped++;
        return { action: SKIP, seq: skipped.seq, captureUs: skipped.captureUs,
          dueUs: this.nextDueUs, frame: skipped, speech: skipped.speech };
      }
      this.stats.lost++; // a missing frame: skipped as well
      if (continuous) return null; // one step: the next frame plays in this slot
    }
    return null;
  }

  // The slot due at or before nowUs, or null: call until null. A SKIP slot
  // takes no time (nothing to output); the others last one frame from dueUs.
  pop(nowUs) {
    if (!this.started || this.idle || nowUs < this.nextDueUs) return null;
    if (nowUs - this.nextDueUs > this.p.maxDelayUs)
      // Bounded catch-up: the slots the caller missed pass unplayed.
      this.passSlots(Math.floor((nowUs - this.nextDueUs) / this.f), 'expired');
    const adjusted = this.adjust();
    if (adjusted) return adjusted;

    const dueUs = this.nextDueUs;
    const h = this.takeHead();
    let slot;
    if (h) {
      slot = { action: PLAY, seq: h.seq, captureUs: h.captureUs, dueUs, frame: h,
        speech: h.speech };
      this.stats.played++;
      const delay = dueUs - (h.fits === false ? this.predictedCaptureUs(h.seq) : h.captureUs);
      this.delaySumUs += delay;
      this.delaySum2 += delay * delay;
    } else {
      const seq = (this.nextSeq - 1) >>> 0;
      slot = { action: CONCEAL, seq, captureUs: this.predictedCaptureUs(seq), dueUs,
        frame: null, speech: this.inTalkspurt };
      this.stats.concealed++;
      this.stats.lost++;
    }
    if (slot.speech && !this.inTalkspurt) {
      this.stats.talkspurts++;
      this.boundaryUs = dueUs;
    }
    if (!slot.speech) this.boundaryUs = dueUs;
    if (slot.speech && slot.action === PLAY) this.changedInPause = false;
    this.inTalkspurt = slot.speech;
    this.nextDueUs += this.f;
    if (h || this.held > 0) {
      this.emptySinceUs = null;
    } else {
      if (this.emptySinceUs === null) this.emptySinceUs = dueUs;
      if (this.nextDueUs - this.emptySinceUs >= this.p.idleAfterUs) this.idle = true;
    }
    return slot;
  }

  snapshot() {
    const n = this.stats.played;
    const mean = n ? this.delaySumUs / n : 0;
    return { ...this.stats,
      playout_delay_mean_ms: n ? mean / 1000 : null,
      playout_delay_std_ms: n ? Math.sqrt(Math.max(0, this.delaySum2 / n - mean * mean)) / 1000 : null,
      current_delay_ms: this.started ? this.currentDelayUs() / 1000 : null,
      target_delay_ms: this.started ? this.targetDelayUs() / 1000 : null,
      delay_estimate_ms: this.samples ? this.d / 1000 : null,
      delay_variation_ms: this.samples ? this.v / 1000 : null,
      sync_floor_ms: this.syncFloorUs / 1000,
      held: this.held, spike: this.spike, max_frames: this.maxFrames };
  }
}
