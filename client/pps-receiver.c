/* SPDX-License-Identifier: MIT */
/*
 * The receiver: window records -> reassembly -> decode-order cursor ->
 * decoder -> frames, with every frame of the stream accounted exactly once.
 *
 * Accounting rests on three facts of the protocol: window ids increase,
 * window k holds frames (k-1)W+1 .. kW (window 0 holds frame 0), and the
 * decoder outputs frames in display order. So a cursor (next_frame) walks the
 * frames in order, and every frame it passes is either handed to frame_cb
 * (it decoded) or reported once to missing_cb with the reason it never will:
 *
 *   dropped      its window was dropped by the sender (a dropped WINDOW_END,
 *                or a gap in window ids: windows discarded with their END)
 *   lost         its window came, without this frame (the sender cut it at
 *                the deadline, or the decoder could not output it)
 *   undecodable  its ADUs came but something they depend on did not
 *   stopped      its window was still open when the stream ended (the client
 *                stopped, or the connection closed): in flight, not counted
 *
 * Frames before the first window that brought this client anything are not
 * part of its stream (it joined later): dropped windows before that are
 * reported with status "join", not as sender drops, and their frames are not
 * counted; nor are the frames of that first window before its IDR, when
 * no frame was reported yet (they reference pictures from before the join).
 *
 * Nothing the server says is trusted: STREAM_INFO is checked against sane
 * limits before a decoder is sized from it, and a gap in window ids larger
 * than the time since the previous window could hold is a protocol error
 * rather than billions of missing frames. Nor can windows come much faster
 * than the stream announced: a token bucket holds a catch-up's worth of
 * windows (PPS_RECEIVER_CATCH_UP_S of them at the announced rate, plus twice
 * the gap margin) and refills at PPS_RECEIVER_RATE_FACTOR times that rate;
 * each window takes one, and an empty bucket is a protocol error. A
 * legitimate burst after a stall was paid for by the stall (the bucket
 * filled meanwhile); a flood of tiny windows is refused within a few hundred
 * of them, so what the log and the statistics keep of them stays small. The
 * bucket outlives a reconnect: a server that floods every new connection
 * gets the refill since the last one, not a full bucket each time.
 */
#include "pps-client-internal.h"
#include "pps-prioritizer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Windows a copy may bring ahead of their turn and keep (parked): about
 * half a second of 2-frame windows, longer than a stall the copy covers for. */
#define PARKED_WINDOWS 8

struct pps_receiver {
	pps_receiver_callbacks_t callbacks;
	pps_client_clock_cb clock_cb;
	void *user;

	bool have_info;
	pps_wire_stream_info_t info;
	int64_t frame_interval_us;
	/* One reassembler per connection the stream arrives on: [0] the
	 * stream's own, [1..] its copies (pps_receiver_record_copy). */
	pps_reasm_t *reasm[PPS_RECEIVER_MAX_COPIES];
	int64_t begun_window; /* the last window begun on any of them; -1 */
	/* Per connection: the last window it said it rests through (a copy at
	 * rest, PPS_WIRE_WINDOW_END_RESTED: another connection brings it); -1. */
	int64_t rested_through[PPS_RECEIVER_MAX_COPIES];
	/* Windows a copy back from rest brought whole before their turn (the
	 * stream was still in a window that copy rested through), in id order,
	 * each once:
	 * they become the stream's when the windows before them are closed. */
	struct {
		pps_reasm_window_t window;
		pps_adu_t **adus;
		size_t n;
	} parked[PARKED_WINDOWS];
	size_t n_parked;
	pps_decoder_t *decoder;

	/* decode-order cursor: the last ADU id given to the decoder */
	bool have_pushed;
	uint32_t last_pushed_id;
	int64_t push_us; /* client clock of the push in progress */

	/* accounting */
	int64_t next_frame;  /* first frame not yet accounted; -1 before the first window */
	int64_t last_window; /* last window id closed; -1 before the first */
	int64_t last_window_us;
	int64_t open_first, open_last; /* frames of the window begun, not ended; -1 */
	bool finishing;                /* in pps_receiver_finish() */
	int64_t ref_frame;             /* a frame whose capture time (server clock) is known */
	int64_t ref_capture_us;
	bool started;       /* a window brought something */
	bool accounted_any; /* a frame of this client's stream was reported */
	pps_receiver_stats_t stats;

	/* the window rate bound: tokens, refilled since refill_us; kept across
	 * pps_receiver_reset() */
	bool have_credit;
	double windows_per_s; /* announced: fps / window_frames */
	double credit, credit_max;
	int64_t refill_us;
	int64_t burst_since_us; /* the bucket was last full then */
	uint64_t burst_windows; /* windows since */
};

static int64_t
first_frame_of(int64_t window, unsigned w)
{
	return window == 0 ? 0 : (window - 1) * (int64_t)w + 1;
}

static int64_t
last_frame_of(int64_t window, unsigned w)
{
	return window * (int64_t)w;
}

pps_receiver_t *
pps_receiver_new(const pps_receiver_callbacks_t *callbacks, pps_client_clock_cb clock_cb,
                 void *user)
{
	pps_receiver_t *r;

	if (!callbacks || !callbacks->frame_cb || !callbacks->missing_cb || !callbacks->window_cb ||
	    !clock_cb) {
		errno = EINVAL;
		return NULL;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		errno = ENOMEM;
		return NULL;
	}
	r->callbacks = *callbacks;
	r->clock_cb = clock_cb;
	r->user = user;
	pps_receiver_reset(r);
	return r;
}

static void
free_adus(pps_adu_t **adus, size_t n)
{
	for (size_t i = 0; i < n; i++)
		pps_adu_unref(adus[i]);
	free(adus);
}

/* Forgets the oldest parked window. */
static void
unpark_first(pps_receiver_t *r)
{
	memmove(&r->parked[0], &r->parked[1], (r->n_parked - 1) * sizeof(r->parked[0]));
	r->n_parked--;
}

static void
free_reasms(pps_receiver_t *r)
{
	for (unsigned k = 0; k < PPS_RECEIVER_MAX_COPIES; k++) {
		pps_reasm_free(r->reasm[k]);
		r->reasm[k] = NULL;
	}
	while (r->n_parked > 0) {
		free_adus(r->parked[0].adus, r->parked[0].n);
		unpark_first(r);
	}
}

/*
 * @copy's sender dropped window @id whole: each viewer has its own
 * regulator, and another copy may still bring it. The window is dropped only
 * once every other copy still streaming has closed it too (a copy that
 * brought it whole closed it in the receiver already).
 */
static bool
closed_by_all(const pps_receiver_t *r, unsigned copy, int64_t id)
{
	for (unsigned k = 0; k < PPS_RECEIVER_MAX_COPIES; k++)
		if (k != copy && r->reasm[k] && pps_reasm_last_window(r->reasm[k]) < id)
			return false;
	return true;
}

void
pps_receiver_reset(pps_receiver_t *r)
{
	free_reasms(r);
	pps_decoder_free(r->decoder);
	r->decoder = NULL;
	r->have_info = false;
	r->have_pushed = false;
	/* A new server numbers frames and windows from its own start. */
	r->next_frame = -1;
	r->last_window = -1;
	r->begun_window = -1;
	for (unsigned k = 0; k < PPS_RECEIVER_MAX_COPIES; k++)
		r->rested_through[k] = -1;
	r->ref_frame = -1;
	r->open_first = r->open_last = -1;
	r->started = false;
	r->accounted_any = false;
}

void
pps_receiver_free(pps_receiver_t *r)
{
	if (!r)
		return;
	free_reasms(r);
	pps_decoder_free(r->decoder);
	free(r);
}

const pps_wire_stream_info_t *
pps_receiver_info(const pps_receiver_t *r)
{
	return r->have_info ? &r->info : NULL;
}

static int64_t
estimate_capture(const pps_receiver_t *r, int64_t frame)
{
	if (r->ref_frame < 0)
		return 0;
	return r->ref_capture_us + (frame - r->ref_frame) * r->frame_interval_us;
}

/* Frames [next_frame, through] will never be decoded. */
static void
account_missing(pps_receiver_t *r, int64_t through, const char *reason)
{
	pps_receiver_missing_t m;

	if (r->next_frame < 0 || through < r->next_frame)
		return;
	m = (pps_receiver_missing_t){
	    .first_frame = r->next_frame,
	    .count = (uint64_t)(through - r->next_frame + 1),
	    .first_capture_us = estimate_capture(r, r->next_frame),
	    .frame_interval_us = r->frame_interval_us,
	    .reason = reason,
	};
	r->next_frame = through + 1;
	r->accounted_any = true;
	r->callbacks.missing_cb(&m, r->user);
}

static void
decoder_frame_cb(const pps_decoded_frame_t *df, void *user)
{
	pps_receiver_t *r = user;
	int64_t f = df->frame_index;

	if (r->next_frame < 0 || f < r->next_frame) {
		/* Already accounted (the decoder gave up on it earlier). */
		r->stats.frames_duplicate++;
		return;
	}
	/* Display order: frames before this one will never come out. Those of
	 * the window still open when the stream ends were in flight. */
	if (r->finishing && r->open_first >= 0) {
		account_missing(r, f - 1 < r->open_first - 1 ? f - 1 : r->open_first - 1,
		                PPS_FRAME_LOST);
		account_missing(r, f - 1, PPS_FRAME_STOPPED);
	} else {
		account_missing(r, f - 1, PPS_FRAME_LOST);
	}
	r->next_frame = f + 1;
	r->accounted_any = true;
	r->ref_frame = f;
	r->ref_capture_us = df->capture_us;
	if ((df->flags & PPS_DECODER_FRAME_REPEATED) || !df->picture.planes[0]) {
		pps_receiver_missing_t m = {
		    .first_frame = f,
		    .count = 1,
		    .first_capture_us = df->capture_us,
		    .frame_interval_us = r->frame_interval_us,
		    .reason = PPS_FRAME_UNDECODABLE,
		};

		r->callbacks.missing_cb(&m, r->user);
		return;
	}
	{
		pps_receiver_frame_t out = {
		    .decoded = df,
		    .received_us = r->push_us,
		    .decoded_us = r->clock_cb(r->user),
		};

		r->callbacks.frame_cb(&out, r->user);
	}
}

int
pps_receiver_stream_info(pps_receiver_t *r, const pps_wire_stream_info_t *info, char *err,
                         size_t err_size)
{
	pps_stream_params_t params;
	double fps;

	if (r->have_info) {
		snprintf(err, err_size, "second STREAM_INFO");
		return -EPROTO;
	}
	if (info->codec != PPS_CODEC_ID_H264_LAYERED ||
	    info->upscale_filter != PPS_CODEC_UPSCALE_BILINEAR_Q8) {
		snprintf(err, err_size, "STREAM_INFO: codec %u / upscale filter %u not supported",
		         info->codec, info->upscale_filter);
		return -EPROTO;
	}
	if (info->width < 16 || info->height < 16 || info->width % 2 || info->height % 2 ||
	    info->width > PPS_RECEIVER_MAX_SIDE || info->height > PPS_RECEIVER_MAX_SIDE ||
	    (uint64_t)info->width * info->height > PPS_RECEIVER_MAX_PIXELS) {
		snprintf(
		    err, err_size,
		    "STREAM_INFO: %ux%u pictures refused (even sizes from 16x16 up to %u pixels, "
		    "at most %u on a side)",
		    info->width, info->height, PPS_RECEIVER_MAX_PIXELS, PPS_RECEIVER_MAX_SIDE);
		return -EPROTO;
	}
	if (info->base_width < 16 || info->base_height < 16 || info->base_width % 2 ||
	    info->base_height % 2 || info->base_width > info->width ||
	    info->base_height > info->height) {
		snprintf(err, err_size, "STREAM_INFO: base layer %ux%u does not fit %ux%u",
		         info->base_width, info->base_height, info->width, info->height);
		return -EPROTO;
	}
	fps = info->fps_den ? (double)info->fps_num / info->fps_den : 0;
	if (fps < 1 || fps > PPS_RECEIVER_MAX_FPS) {
		snprintf(err, err_size, "STREAM_INFO: frame rate %u/%u refused (1..%u frames/s)",
		         info->fps_num, info->fps_den, PPS_RECEIVER_MAX_FPS);
		return -EPROTO;
	}
	if (info->window_frames < 1 || info->window_frames > PPS_WIRE_MAX_WINDOW_FRAMES ||
	    info->temporal_layers < 1 || info->temporal_layers > PPS_ADU_MAX_TEMPORAL_LAYERS ||
	    info->quality_layers < 1 || info->quality_layers > PPS_ADU_MAX_QUALITY_LAYERS ||
	    info->gop_frames > INT32_MAX || info->latency_budget_ms > 60000) {
		snprintf(err, err_size,
		         "STREAM_INFO: window %u frames, %u temporal x %u quality layers, gop %u, "
		         "budget %u ms: out of range",
		         info->window_frames, info->temporal_layers, info->quality_layers,
		         info->gop_frames, info->latency_budget_ms);
		return -EPROTO;
	}
	/* Checked above: nothing here is refused. */
	if (pps_stream_params_from_wire(info, &params) < 0) {
		snprintf(err, err_size, "STREAM_INFO: no decoder parameters for it");
		return -EPROTO;
	}
	pps_decoder_free(r->decoder);
	r->decoder = pps_decoder_new(&params, decoder_frame_cb, r);
	free_reasms(r);
	r->reasm[0] = pps_reasm_new(info->window_frames);
	if (!r->decoder || !r->reasm[0]) {
		snprintf(err, err_size, "cannot create a decoder for %ux%u: %s", info->width,
		         info->height, strerror(errno));
		return -EIO;
	}
	r->info = *info;
	r->have_info = true;
	r->frame_interval_us = (int64_t)1000000 * info->fps_den / info->fps_num;
	r->windows_per_s = fps / info->window_frames;
	r->credit_max =
	    r->windows_per_s * PPS_RECEIVER_CATCH_UP_S + 2.0 * PPS_RECEIVER_GAP_MARGIN_WINDOWS;
	if (!r->have_credit) {
		r->credit = r->credit_max;
		r->refill_us = r->burst_since_us = r->clock_cb(r->user);
		r->burst_windows = 0;
		r->have_credit = true;
	}
	return 0;
}

/* A new window arrives at @now: one token, or -EPROTO if there is none left. */
static int
take_window_credit(pps_receiver_t *r, int64_t now, char *err, size_t err_size)
{
	/* The clock is the real-time one: after a step back, refill from the
	 * new time on rather than wait for the old one. */
	if (now > r->refill_us)
		r->credit += (double)(now - r->refill_us) / 1e6 * r->windows_per_s *
		             PPS_RECEIVER_RATE_FACTOR;
	r->refill_us = now;
	if (r->credit >= r->credit_max) {
		r->credit = r->credit_max;
		r->burst_since_us = now;
		r->burst_windows = 0;
	}
	if (r->credit < 1) {
		double span_s =
		    (double)(now > r->burst_since_us ? now - r->burst_since_us : 1) / 1e6;

		snprintf(err, err_size,
		         "%llu windows in %.3f s (%.0f windows/s), the stream announced %.1f "
		         "windows/s (%u/%u frames/s, %u a window): more than a catch-up of %.0f "
		         "windows and %u times that rate",
		         (unsigned long long)r->burst_windows + 1, span_s,
		         (double)(r->burst_windows + 1) / span_s, r->windows_per_s, r->info.fps_num,
		         r->info.fps_den, r->info.window_frames, r->credit_max,
		         PPS_RECEIVER_RATE_FACTOR);
		return -EPROTO;
	}
	r->credit -= 1;
	r->burst_windows++;
	return 0;
}

/* ADU ids in serial order (they wrap at 2^32): @a comes after @b. */
static bool
id_after(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) > 0;
}

/* Moves the decode cursor to @id if that is ahead of it: a window that ends
 * or begins on one connection must not take it back over ADUs another
 * connection already brought to the decoder. */
static void
cursor_to(pps_receiver_t *r, uint32_t id)
{
	if (!r->have_pushed || id_after(id, r->last_pushed_id))
		r->last_pushed_id = id;
	r->have_pushed = true;
}

static void
push(pps_receiver_t *r, pps_adu_t *adu)
{
	const pps_adu_info_t *info = pps_adu_info(adu);
	int ret;

	/* Each ADU reaches the decoder once: a picture decoded twice would
	 * break its reference state until the next IDR. */
	if (r->have_pushed && !id_after(info->id, r->last_pushed_id)) {
		pps_adu_unref(adu);
		return;
	}

	/* This client's first IDR, before any frame of its stream was
	 * reported: the frames before it in its window reference pictures this
	 * client never got (the sender cut them), so, like the windows in
	 * flight when it joined, they are not its stream. */
	if (!r->accounted_any && info->frame_type == PPS_ADU_FRAME_IDR && r->next_frame >= 0 &&
	    (int64_t)info->frame_index > r->next_frame)
		r->next_frame = info->frame_index;
	ret = pps_decoder_push(r->decoder, adu);

	r->stats.adus_decoded++;
	if (ret < 0)
		r->stats.decode_errors++;
	r->have_pushed = true;
	r->last_pushed_id = pps_adu_info(adu)->id;
	pps_adu_unref(adu);
}

/* Decodes the ADUs that arrived and are next in decode order, now. */
static void
push_ready(pps_receiver_t *r)
{
	bool more = r->have_pushed;

	/* ADU ids are the stream's, the same on every copy: the next one
	 * comes from whichever connection has it whole first. */
	while (more) {
		more = false;
		for (unsigned k = 0; k < PPS_RECEIVER_MAX_COPIES && !more; k++) {
			pps_adu_t *adu;

			if (r->reasm[k] &&
			    (adu = pps_reasm_take_next(r->reasm[k], r->last_pushed_id + 1))) {
				push(r, adu);
				more = true;
			}
		}
	}
}

/*
 * Window @id is the next one closed or begun: windows between the last one
 * and it were discarded by the sender with their WINDOW_END. Bounded: no more
 * windows can be missing than could have been captured since the last one
 * (twice that, plus a margin for a stalled reader); more is a broken server.
 */
static int
account_gap(pps_receiver_t *r, uint32_t id, int64_t now, char *err, size_t err_size)
{
	uint64_t gap, max_gap;
	int64_t elapsed_us;

	if (r->last_window < 0 || (int64_t)id <= r->last_window + 1)
		return 0;
	gap = (uint64_t)((int64_t)id - r->last_window - 1);
	elapsed_us = now > r->last_window_us ? now - r->last_window_us : 0;
	max_gap = PPS_RECEIVER_GAP_MARGIN_WINDOWS +
	          (uint64_t)(2 * elapsed_us / (r->frame_interval_us * r->info.window_frames));
	if (gap > max_gap) {
		snprintf(err, err_size,
		         "window id jumps from %lld to %u: %llu windows missing, at most %llu "
		         "could have been captured in %.1f s",
		         (long long)r->last_window, id, (unsigned long long)gap,
		         (unsigned long long)max_gap, (double)elapsed_us / 1e6);
		return -EPROTO;
	}
	if (r->next_frame >= 0) {
		pps_receiver_window_t w = {
		    .window_id = (uint32_t)(r->last_window + 1),
		    .windows = gap,
		    .first_capture_us = estimate_capture(
		        r, first_frame_of(r->last_window + 1, r->info.window_frames)),
		    .complete_us = 0,
		    .status = PPS_WINDOW_DROPPED,
		    .gap = true,
		};

		r->callbacks.window_cb(&w, r->user);
		account_missing(r, first_frame_of(id, r->info.window_frames) - 1,
		                PPS_FRAME_DROPPED);
	}
	return 0;
}

/* Window @id, which starts with ADU @first_adu_id and frame @first_capture_us,
 * is the stream's open window now. */
static void
begin_window(pps_receiver_t *r, uint32_t id, uint32_t first_adu_id, int64_t first_capture_us)
{
	/* Earlier windows are all pushed: this one's first ADU is the next in
	 * decode order. */
	r->begun_window = id;
	cursor_to(r, first_adu_id - 1);
	if (r->next_frame < 0)
		r->next_frame = first_frame_of(id, r->info.window_frames);
	r->ref_frame = first_frame_of(id, r->info.window_frames);
	r->ref_capture_us = first_capture_us;
	r->open_first = r->ref_frame;
	r->open_last = last_frame_of(id, r->info.window_frames);
}

/* Closes the stream's window @w (taken from a reassembler) with its ADUs. */
static void
close_window(pps_receiver_t *r, pps_reasm_window_t w, pps_adu_t **adus, size_t n, int64_t now)
{
	int64_t last;
	pps_receiver_window_t out;
	bool join = false;

	last = last_frame_of(w.window_id, r->info.window_frames);
	/* Until a window brings something, dropped windows are the ones in
	 * flight when this client joined (begun before its IDR, so nothing of
	 * them was sendable): not its stream yet, and not the sender's drop. */
	if (w.dropped && !r->started) {
		join = true;
		r->next_frame = -1;
	} else {
		r->started = true;
	}
	/* push() passes over those another copy of the stream brought first. */
	for (size_t i = 0; i < n; i++)
		push(r, adus[i]);
	free(adus);
	/* Every ADU of this window the decoder will ever get has been pushed. */
	if (w.begun)
		cursor_to(r, w.first_adu_id + w.adus_total - 1);
	if (r->decoder && w.begun)
		pps_decoder_settle(r->decoder, (uint32_t)last);
	if (w.begun)
		out = (pps_receiver_window_t){.first_capture_us = w.first_capture_us};
	else
		out = (pps_receiver_window_t){
		    .first_capture_us =
		        estimate_capture(r, first_frame_of(w.window_id, r->info.window_frames)),
		};
	out.window_id = w.window_id;
	out.windows = 1;
	out.complete_us = w.dropped ? 0 : now;
	out.status = join                 ? PPS_WINDOW_JOIN
	             : w.dropped          ? PPS_WINDOW_DROPPED
	             : w.adus_dropped > 0 ? PPS_WINDOW_PARTIAL
	                                  : PPS_WINDOW_COMPLETE;
	out.adus_received = w.adus_received;
	out.adus_sent = w.adus_sent;
	out.adus_total = w.dropped && !w.begun ? w.adus_dropped : w.adus_total;
	out.bytes = w.bytes_received;
	r->callbacks.window_cb(&out, r->user);
	if (!join)
		account_missing(r, last, w.dropped ? PPS_FRAME_DROPPED : PPS_FRAME_LOST);
	r->last_window = w.window_id;
	if (r->begun_window < r->last_window)
		r->begun_window = r->last_window;
	r->last_window_us = now;
	r->open_first = r->open_last = -1;
}

/* The parked windows whose turn came (the windows before them are closed)
 * become the stream's, in order; those closed meanwhile from another
 * connection are forgotten. */
static void
run_parked(pps_receiver_t *r, int64_t now)
{
	while (r->n_parked > 0) {
		pps_reasm_window_t w = r->parked[0].window;
		pps_adu_t **adus = r->parked[0].adus;
		size_t n = r->parked[0].n;

		if ((int64_t)w.window_id > r->last_window + 1 || r->begun_window > r->last_window)
			return;
		unpark_first(r);
		if ((int64_t)w.window_id <= r->last_window) {
			free_adus(adus, n);
			continue;
		}
		begin_window(r, w.window_id, w.first_adu_id, w.first_capture_us);
		close_window(r, w, adus, n, now);
	}
}

/* Closes the stream's window from @reasm, then what was parked behind it.
 * @begin: a copy's window begun before its turn and closed when its turn had
 * come, the stream's from now. */
static void
window_end(pps_receiver_t *r, pps_reasm_t *reasm, bool begin, int64_t now)
{
	pps_reasm_window_t w;
	pps_adu_t **adus;
	size_t n;

	pps_reasm_take(reasm, &w, &adus, &n);
	if (begin)
		begin_window(r, w.window_id, w.first_adu_id, w.first_capture_us);
	close_window(r, w, adus, n, now);
	run_parked(r, now);
}

/*
 * A copy back from rest closed @reasm's window whole before its turn: it is
 * kept for its turn (run_parked), unless as many are kept already. Returns
 * whether it was kept.
 */
static bool
park_window(pps_receiver_t *r, pps_reasm_t *reasm)
{
	pps_reasm_window_t w;
	pps_adu_t **adus;
	size_t n, at = r->n_parked;

	if (r->n_parked == PARKED_WINDOWS)
		return false;
	pps_reasm_take(reasm, &w, &adus, &n);
	/* In id order: copies back from rest may bring theirs in any order. */
	while (at > 0 && r->parked[at - 1].window.window_id >= w.window_id)
		at--;
	if (at < r->n_parked && r->parked[at].window.window_id == w.window_id) {
		free_adus(adus, n); /* another copy's is kept already */
		return true;
	}
	memmove(&r->parked[at + 1], &r->parked[at], (r->n_parked - at) * sizeof(r->parked[0]));
	r->parked[at].window = w;
	r->parked[at].adus = adus;
	r->parked[at].n = n;
	r->n_parked++;
	return true;
}

/* A copy closed a window another copy had not: its ADUs are not wanted. */
static void
discard_window(pps_reasm_t *reasm)
{
	pps_reasm_window_t w;
	pps_adu_t **adus;
	size_t n;

	pps_reasm_take(reasm, &w, &adus, &n);
	free_adus(adus, n);
}

/*
 * A copy moved past the window another one has open (its sender dropped that
 * window for it): the open window's frames that did not come out are lost,
 * and the copies go on from the later window.
 */
static void
abandon_open_window(pps_receiver_t *r, int64_t now)
{
	if (r->begun_window <= r->last_window)
		return;
	if (r->open_last >= 0)
		account_missing(r, r->open_last, PPS_FRAME_LOST);
	r->last_window = r->begun_window;
	r->last_window_us = now;
	r->open_first = r->open_last = -1;
}

int
pps_receiver_record_copy(pps_receiver_t *r, unsigned copy, const pps_wire_record_t *record,
                         char *err, size_t err_size)
{
	pps_reasm_t *reasm;
	bool lead = true;                 /* the record is the stream's, not a later copy's */
	bool early = false, turn = false; /* a copy's window begun before its turn */
	bool dropped = record->kind == PPS_WIRE_WINDOW_END &&
	               (record->u.window_end.flags & PPS_WIRE_WINDOW_END_DROPPED);
	bool rested = record->kind == PPS_WIRE_WINDOW_END &&
	              (record->u.window_end.flags & PPS_WIRE_WINDOW_END_RESTED);
	int64_t now;
	int ret;

	if (!r->have_info) {
		snprintf(err, err_size, "%s before STREAM_INFO", pps_wire_kind_name(record->kind));
		return -EPROTO;
	}
	if (copy >= PPS_RECEIVER_MAX_COPIES) {
		snprintf(err, err_size, "copy %u of the stream: at most %u", copy,
		         PPS_RECEIVER_MAX_COPIES);
		return -EINVAL;
	}
	if (!r->reasm[copy] && !(r->reasm[copy] = pps_reasm_new(r->info.window_frames))) {
		snprintf(err, err_size, "cannot reassemble a copy of the stream: %s",
		         strerror(errno));
		return -ENOMEM;
	}
	reasm = r->reasm[copy];
	now = r->clock_cb(r->user);
	r->push_us = now;
	if (record->kind == PPS_WIRE_WINDOW_BEGIN ||
	    (record->kind == PPS_WIRE_WINDOW_END && !pps_reasm_in_window(reasm))) {
		uint32_t id = record->kind == PPS_WIRE_WINDOW_BEGIN
		                  ? record->u.window_begin.window_id
		                  : record->u.window_end.window_id;

		/* Every copy brings every window, in order; the first to
		 * begin one leads it, and a drop leads once every copy has
		 * dropped it. */
		lead = (int64_t)id > r->begun_window && (!dropped || closed_by_all(r, copy, id));
		/* A copy back from rest begins a later window before the
		 * windows it rested through are closed (another connection
		 * brings the open one, or has not begun the next yet): it has
		 * not moved past them, it never carried them. They go on; the
		 * later one begins when its own turn comes (push_ready() takes
		 * what this copy brought). */
		if (lead && record->kind == PPS_WIRE_WINDOW_BEGIN &&
		    r->rested_through[copy] > r->last_window)
			lead = false;
		if (rested && (int64_t)id > r->rested_through[copy])
			r->rested_through[copy] = id;
		/* The reassembler refuses ids that do not increase; check that
		 * first, so the gap below is never negative. */
		if (lead) {
			abandon_open_window(r, now);
			ret = take_window_credit(r, now, err, err_size);
			if (ret < 0)
				return ret;
			ret = account_gap(r, id, now, err, err_size);
			if (ret < 0)
				return ret;
		}
	} else if (record->kind == PPS_WIRE_WINDOW_END) {
		int64_t id = record->u.window_end.window_id;

		/* Only a window begun: a copy's window whose beginning
		 * waited (above) is not the stream's yet. */
		lead = id > r->last_window && id <= r->begun_window &&
		       (!dropped || closed_by_all(r, copy, id));
		/* Such a window, come whole: if the windows before it are
		 * closed now, it is the stream's; if not, it is kept for its
		 * turn (park_window). Otherwise it is discarded here, as if
		 * this copy had rested through it. Either way its next one
		 * waits too. */
		early = id > r->begun_window && !dropped && record->u.window_end.adus_dropped == 0;
		turn = early && id == r->last_window + 1 && r->begun_window <= r->last_window;
		if (id > r->begun_window && !turn && id > r->rested_through[copy])
			r->rested_through[copy] = id;
	}
	ret = pps_reasm_record(reasm, record, err, err_size);
	if (ret < 0)
		return ret;
	switch (record->kind) {
	case PPS_WIRE_WINDOW_BEGIN: {
		const pps_wire_window_begin_t *b = &record->u.window_begin;

		if (lead)
			begin_window(r, b->window_id, b->first_adu_id, b->first_capture_us);
		break;
	}
	case PPS_WIRE_ADU_FRAGMENT:
		if (r->begun_window > r->last_window)
			push_ready(r);
		break;
	case PPS_WIRE_WINDOW_END: /* accepted: its window is complete */
		if (lead) {
			window_end(r, reasm, false, now);
		} else if (turn) {
			ret = take_window_credit(r, now, err, err_size);
			if (ret < 0)
				return ret;
			window_end(r, reasm, true, now);
		} else if (!early || !park_window(r, reasm)) {
			discard_window(reasm);
		}
		break;
	default:
		break;
	}
	return 0;
}

int
pps_receiver_record(pps_receiver_t *r, const pps_wire_record_t *record, char *err, size_t err_size)
{
	return pps_receiver_record_copy(r, 0, record, err, err_size);
}

void
pps_receiver_drop_copy(pps_receiver_t *r, unsigned copy)
{
	if (copy == 0 || copy >= PPS_RECEIVER_MAX_COPIES)
		return;
	pps_reasm_free(r->reasm[copy]);
	r->reasm[copy] = NULL;
	r->rested_through[copy] = -1;
}

void
pps_receiver_get_stats(const pps_receiver_t *r, pps_receiver_stats_t *out)
{
	*out = r->stats;
}

void
pps_receiver_finish(pps_receiver_t *r)
{
	if (r->decoder) {
		r->push_us = r->clock_cb(r->user);
		/* Its error (libavcodec's at end of stream) changes nothing here:
		 * what it held is out either way, and the decoder is reset. */
		r->finishing = true;
		pps_decoder_drain(r->decoder);
		r->finishing = false;
	}
	/* The open window's frames that did not come out: in flight. */
	if (r->open_last >= 0)
		account_missing(r, r->open_last, PPS_FRAME_STOPPED);
	r->open_first = r->open_last = -1;
}
