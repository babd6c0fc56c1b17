/* SPDX-License-Identifier: MIT */
/*
 * pps-peer-score: the quality of the pictures a receiver showed, measured the
 * same way for every system in the peer comparison (docs/PEERS.md).
 *
 * Input: a y4m of the pictures shown, in order (pps-client --output, or
 * pps-peer-recv --output). Reference: the source regenerated, not recorded.
 * ppstream's test source is videotestsrc, whose picture depends only on the
 * buffer number n (the bars scroll by horizontal-speed pixels per buffer; the
 * noise square comes from a generator seeded once per process, and each
 * sender process runs exactly one videotestsrc), so a non-live videotestsrc
 * with the same settings in this process yields the same pictures, numbered
 * from 0. (Checked once by hand: live and non-live outputs are identical.)
 *
 * Mapping a shown picture to n: its pixel timecode gives frame_index and
 * capture_us. frame_index skips the raw frames the capture queue dropped, so
 * n is not frame_index; capture_us is derived from the buffer's running
 * time, so consecutive buffers are one frame period apart and
 * n = n_first + round((capture_us - capture_us_first) / period). n_first is
 * found by search: the candidates frame_index .. frame_index + 32 of the first
 * shown picture, each scored by the mean PSNR of the first ANCHOR_PICTURES
 * shown pictures (those within ANCHOR_SPAN frames of the first) against the
 * buffers the candidate maps them to. One picture is not enough: with ball
 * (no noise square; the next buffers differ from a buffer by only 33, 29,
 * 27 dB) a poor first picture, such as a starved first IDR, can be nearer
 * n + 2 than n, and every picture after it is then scored two buffers off.
 * The capture queue rarely drops raw frames, so frame_index itself wins
 * unless another candidate beats it by ANCHOR_PRIOR_DB on the mean.
 * Every 30th picture is also compared with n - 1 and n + 1, and ref_check
 * says whether n won: the proof that the mapping held; ref_best says which
 * of the three did (-1, 0, 1). When most checks name a neighbour, the
 * caller scores again with --shift (a second reference in this process
 * would not repeat the first: the noise of smpte and snow comes from a
 * generator seeded once per process).
 *
 * Quality: PSNR and SSIM (8x8 windows, step 4) of the luma, leaving out the
 * timecode's blocks in the top-left corner.
 *
 * The frame rate (for the period) comes from the y4m header. pps-client's
 * y4m repeats the picture on screen through a freeze ("FRAME Xrepeat"); the
 * repeats are skipped, so each shown picture is scored once.
 *
 * Output (stdout, TSV): ordinal timecode_ok frame_index capture_us ref_frame
 * psnr_y ssim_y ref_check (1 won, 0 lost, -1 not checked) ref_best (the
 * offset of the best of n - 1, n, n + 1 where checked, else empty); pictures
 * without a timecode have ref_frame -1 and no scores.
 */
#include <errno.h>
#include <getopt.h>
#include <gst/app/gstappsink.h>
#include <gst/gst.h>
#include <gst/video/video.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pps-codec.h"
#include "pps-version.h"

#define RING_FRAMES     96
#define SEARCH_FRAMES   32
#define CHECK_EVERY     30
#define ANCHOR_PICTURES 8
#define ANCHOR_SPAN     48 /* frames: ANCHOR_SPAN + SEARCH_FRAMES must fit the ring */
#define PSNR_MAX_DB     100.0
#define ANCHOR_PRIOR_DB 1.0 /* mean PSNR a candidate must gain over the frame index's */

typedef struct {
	GstElement *pipeline;
	GstElement *sink;
	int width, height;
	uint8_t *ring[RING_FRAMES]; /* luma of buffers next - RING_FRAMES .. next - 1 */
	int64_t next;               /* number of the next buffer videotestsrc makes */
	int skip_x, skip_y;         /* timecode area left out of the scores */
} reference_t;

/* Same rule as pps-capture.c's test source: static patterns scroll. */
static int
reference_open(reference_t *ref, const char *pattern, int width, int height, int fps)
{
	GError *error = NULL;
	int block = 16;
	char *description = g_strdup_printf(
	    "videotestsrc pattern=%s%s ! "
	    "video/x-raw,format=I420,width=%d,height=%d,framerate=%d/1,pixel-aspect-ratio=1/1 ! "
	    "appsink name=sink sync=false max-buffers=4",
	    pattern,
	    strcmp(pattern, "ball") && strcmp(pattern, "snow") ? " horizontal-speed=2" : "", width,
	    height, fps);

	ref->pipeline = gst_parse_launch(description, &error);
	g_free(description);
	if (!ref->pipeline || error) {
		fprintf(stderr, "pps-peer-score: reference pipeline: %s\n",
		        error ? error->message : "unknown error");
		g_clear_error(&error);
		return -EINVAL;
	}
	ref->sink = gst_bin_get_by_name(GST_BIN(ref->pipeline), "sink");
	ref->width = width;
	ref->height = height;
	for (int i = 0; i < RING_FRAMES; i++) {
		ref->ring[i] = malloc((size_t)width * (size_t)height);
		if (!ref->ring[i])
			return -ENOMEM;
	}
	/* The timecode's geometry (pps-timecode.c): 14 x 8 blocks of 16 px,
	 * smaller on small pictures. */
	while (block > 2 && (block * 14 > width || block * 8 > height))
		block -= 2;
	ref->skip_x = 14 * block;
	ref->skip_y = 8 * block;
	if (gst_element_set_state(ref->pipeline, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE)
		return -EIO;
	return 0;
}

static void
reference_close(reference_t *ref)
{
	if (ref->pipeline) {
		gst_element_set_state(ref->pipeline, GST_STATE_NULL);
		gst_object_unref(ref->sink);
		gst_object_unref(ref->pipeline);
	}
	for (int i = 0; i < RING_FRAMES; i++)
		free(ref->ring[i]);
}

/* The luma of buffer @n, or NULL if it has left the ring or cannot be made. */
static const uint8_t *
reference_get(reference_t *ref, int64_t n)
{
	if (n < 0 || n < ref->next - RING_FRAMES)
		return NULL;
	while (ref->next <= n) {
		GstSample *sample = gst_app_sink_pull_sample(GST_APP_SINK(ref->sink));
		GstVideoInfo info;
		GstVideoFrame frame;
		uint8_t *dst = ref->ring[ref->next % RING_FRAMES];

		if (!sample)
			return NULL;
		if (!gst_video_info_from_caps(&info, gst_sample_get_caps(sample)) ||
		    !gst_video_frame_map(&frame, &info, gst_sample_get_buffer(sample),
		                         GST_MAP_READ)) {
			gst_sample_unref(sample);
			return NULL;
		}
		for (int y = 0; y < ref->height; y++)
			memcpy(dst + (size_t)y * ref->width,
			       (const uint8_t *)GST_VIDEO_FRAME_PLANE_DATA(&frame, 0) +
			           (size_t)y * GST_VIDEO_FRAME_PLANE_STRIDE(&frame, 0),
			       (size_t)ref->width);
		gst_video_frame_unmap(&frame);
		gst_sample_unref(sample);
		ref->next++;
	}
	return ref->ring[n % RING_FRAMES];
}

static bool
in_timecode(const reference_t *ref, int x, int y, int w, int h)
{
	return x < ref->skip_x && y < ref->skip_y && x + w > 0 && y + h > 0;
}

static double
psnr_y(const reference_t *ref, const uint8_t *a, const uint8_t *b)
{
	double sse = 0;
	uint64_t n = 0;

	for (int y = 0; y < ref->height; y++) {
		int x0 = y < ref->skip_y ? ref->skip_x : 0;
		const uint8_t *pa = a + (size_t)y * ref->width, *pb = b + (size_t)y * ref->width;
		uint64_t row = 0;

		for (int x = x0; x < ref->width; x++) {
			int d = pa[x] - pb[x];

			row += (uint64_t)(d * d);
		}
		sse += (double)row;
		n += (uint64_t)(ref->width - x0);
	}
	if (sse == 0)
		return PSNR_MAX_DB;
	return fmin(PSNR_MAX_DB, 10.0 * log10(255.0 * 255.0 * (double)n / sse));
}

static double
ssim_y(const reference_t *ref, const uint8_t *a, const uint8_t *b)
{
	const double c1 = (0.01 * 255) * (0.01 * 255), c2 = (0.03 * 255) * (0.03 * 255);
	double total = 0;
	int windows = 0;

	for (int y = 0; y + 8 <= ref->height; y += 4) {
		for (int x = 0; x + 8 <= ref->width; x += 4) {
			int64_t sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0;
			double ma, mb, va, vb, cov;

			if (in_timecode(ref, x, y, 8, 8))
				continue;
			for (int j = 0; j < 8; j++) {
				const uint8_t *pa = a + (size_t)(y + j) * ref->width + x;
				const uint8_t *pb = b + (size_t)(y + j) * ref->width + x;

				for (int i = 0; i < 8; i++) {
					sa += pa[i];
					sb += pb[i];
					saa += pa[i] * pa[i];
					sbb += pb[i] * pb[i];
					sab += pa[i] * pb[i];
				}
			}
			ma = sa / 64.0;
			mb = sb / 64.0;
			va = saa / 64.0 - ma * ma;
			vb = sbb / 64.0 - mb * mb;
			cov = sab / 64.0 - ma * mb;
			total += ((2 * ma * mb + c1) * (2 * cov + c2)) /
			         ((ma * ma + mb * mb + c1) * (va + vb + c2));
			windows++;
		}
	}
	return windows ? total / windows : 0;
}

/* The first buffer number, n_first, for the shown pictures that follow the
 * header at @in's position (left there): the candidate with the best mean
 * PSNR over the first ANCHOR_PICTURES timecoded pictures within ANCHOR_SPAN
 * frames of the first. Returns 0, or -ENOENT if no picture has a timecode. */
static int
anchor(reference_t *ref, FILE *in, size_t picture_bytes, double period_us, int64_t *n_first,
       int64_t *capture_first)
{
	long start = ftell(in);
	uint8_t *pictures[ANCHOR_PICTURES] = {NULL};
	int64_t delta[ANCHOR_PICTURES];
	int count = 0, status = -ENOENT;
	uint32_t first_index = 0;
	char line[64];
	double best = -1, own = 0;

	while (count < ANCHOR_PICTURES && fgets(line, sizeof(line), in)) {
		uint32_t index;
		int64_t capture_us;

		if (strncmp(line, "FRAME", 5))
			break;
		if (!pictures[count] && !(pictures[count] = malloc(picture_bytes))) {
			status = -ENOMEM;
			goto out;
		}
		if (fread(pictures[count], 1, picture_bytes, in) != picture_bytes)
			break;
		if (strstr(line, " Xrepeat") ||
		    pps_timecode_read(pictures[count], ref->width, ref->width, ref->height, &index,
		                      &capture_us) < 0)
			continue;
		if (!count) {
			first_index = index;
			*capture_first = capture_us;
		}
		delta[count] = llround((double)(capture_us - *capture_first) / period_us);
		if (delta[count] < 0 || delta[count] > ANCHOR_SPAN)
			break;
		count++;
	}
	for (int64_t c = first_index; count && c <= (int64_t)first_index + SEARCH_FRAMES; c++) {
		double sum = 0;

		for (int i = 0; i < count; i++) {
			const uint8_t *cand = reference_get(ref, c + delta[i]);

			sum += cand ? psnr_y(ref, cand, pictures[i]) : 0;
		}
		if (c == first_index)
			own = sum;
		if (sum > best) {
			best = sum;
			*n_first = c;
		}
	}
	/* Without dropped raw frames the buffer is the frame index itself: a
	 * later candidate must show it by a clear margin, not by the noise of
	 * pictures that match no buffer well (a starved or broken first
	 * picture once anchored a ball stream 14 buffers late, every picture
	 * then scored at 22 dB). */
	if (count && (best - own) / count < ANCHOR_PRIOR_DB)
		*n_first = first_index;
	status = count ? 0 : -ENOENT;
out:
	for (int i = 0; i < ANCHOR_PICTURES; i++)
		free(pictures[i]);
	if (fseek(in, start, SEEK_SET) < 0)
		return -errno;
	return status;
}

/* Reads "W.. H.. F..:.." from a y4m header line. */
static int
parse_y4m_header(FILE *in, int *width, int *height, int *fps)
{
	char line[512];
	int num = 0, den = 1;

	if (!fgets(line, sizeof(line), in) || strncmp(line, "YUV4MPEG2 ", 10))
		return -EINVAL;
	*width = *height = 0;
	for (char *tok = strtok(line + 10, " \n"); tok; tok = strtok(NULL, " \n")) {
		if (tok[0] == 'W')
			*width = atoi(tok + 1);
		else if (tok[0] == 'H')
			*height = atoi(tok + 1);
		else if (tok[0] == 'F')
			sscanf(tok + 1, "%d:%d", &num, &den);
		else if (tok[0] == 'C' && strncmp(tok, "C420", 4))
			return -ENOTSUP;
	}
	*fps = den > 0 && num > 0 ? (num + den / 2) / den : 0;
	return *width > 0 && *height > 0 && !(*width & 1) && !(*height & 1) ? 0 : -EINVAL;
}

static void
usage(FILE *out)
{
	fprintf(out, "Usage: pps-peer-score [OPTION]... SHOWN.y4m > scores.tsv\n"
	             "PSNR/SSIM of each shown picture against the regenerated test source picture\n"
	             "with the same timecode, one TSV line per picture (docs/PEERS.md).\n"
	             "\n"
	             "  --pattern NAME           the sender's test pattern (default smpte)\n"
	             "  --shift N                score against buffer n + N instead of the\n"
	             "                           anchored n (-32..32: when the checks named a\n"
	             "                           neighbour)\n"
	             "  -h, --help               this help\n"
	             "  -V, --version            the version\n"
	             "\n"
	             "Exit status: 0 done (an empty file is an empty result); 1 runtime error;\n"
	             "2 usage error.\n");
}

int
main(int argc, char **argv)
{
	static const struct option options[] = {
	    {"pattern", required_argument, NULL, 'p'},
	    {"shift", required_argument, NULL, 's'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};
	const char *pattern = "smpte";
	int fps, width, height, opt, status = 0;
	reference_t ref = {0};
	uint8_t *picture;
	size_t picture_bytes;
	FILE *in;
	char line[64];
	int64_t n_first = 0, capture_first = 0, scored = 0, shift = 0;
	double period_us;

	if (pps_cli_refuse_abbreviated(argc, argv, options, "pps-peer-score"))
		return 2;
	while ((opt = getopt_long(argc, argv, "hV", options, NULL)) != -1) {
		switch (opt) {
		case 'p':
			pattern = optarg;
			break;
		case 's': {
			char *end;
			long v = strtol(optarg, &end, 10);

			if (*optarg == '\0' || *end != '\0' || v < -SEARCH_FRAMES ||
			    v > SEARCH_FRAMES) {
				fprintf(
				    stderr,
				    "pps-peer-score: --shift %s: not a whole number in -%d..%d\n",
				    optarg, SEARCH_FRAMES, SEARCH_FRAMES);
				return 2;
			}
			shift = v;
			break;
		}
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("pps-peer-score %s\n", PPS_VERSION);
			return 0;
		default:
			fprintf(stderr, "pps-peer-score: see --help\n");
			return 2;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "Usage: pps-peer-score [--pattern P] SHOWN.y4m (see --help)\n");
		return 2;
	}
	in = fopen(argv[optind], "r");
	if (!in) {
		fprintf(stderr, "pps-peer-score: cannot read %s: %s\n", argv[optind],
		        strerror(errno));
		return 1;
	}
	printf("ordinal\ttimecode_ok\tframe_index\tcapture_us\tref_frame\tpsnr_y\tssim_y\tref_"
	       "check\tref_best\n");
	if (parse_y4m_header(in, &width, &height, &fps) < 0 || fps < 1) {
		/* An empty file (nothing was shown) is a valid, empty result. */
		fclose(in);
		return 0;
	}
	period_us = 1e6 / fps;
	picture_bytes = (size_t)width * (size_t)height * 3 / 2;
	picture = malloc(picture_bytes);
	gst_init(NULL, NULL);
	if (!picture || reference_open(&ref, pattern, width, height, fps) < 0) {
		fprintf(stderr, "pps-peer-score: cannot set up the reference (%s %dx%d)\n", pattern,
		        width, height);
		status = 1;
		goto out;
	}
	/* -ENOENT, no timecode anywhere: every line says so, no anchor needed.
	 * The read-ahead rewinds: SHOWN.y4m must be a file, not a pipe. */
	status = anchor(&ref, in, picture_bytes, period_us, &n_first, &capture_first);
	if (status < 0 && status != -ENOENT) {
		fprintf(stderr, "pps-peer-score: cannot read ahead in %s: %s\n", argv[optind],
		        strerror(-status));
		status = 1;
		goto out;
	}
	status = 0;
	n_first += shift;
	for (int64_t ordinal = 0; fgets(line, sizeof(line), in); ordinal++) {
		uint32_t index;
		int64_t capture_us, n;
		const uint8_t *r;

		if (strncmp(line, "FRAME", 5) ||
		    fread(picture, 1, picture_bytes, in) != picture_bytes)
			break;
		if (strstr(line, " Xrepeat")) {
			ordinal--; /* pps-client's filler through a freeze: shown once */
			continue;
		}
		if (pps_timecode_read(picture, width, width, height, &index, &capture_us) < 0) {
			printf("%" PRId64 "\t0\t0\t0\t-1\t\t\t-1\t\n", ordinal);
			continue;
		}
		n = n_first + llround((double)(capture_us - capture_first) / period_us);
		r = reference_get(&ref, n);
		if (!r) {
			printf("%" PRId64 "\t1\t%u\t%" PRId64 "\t-1\t\t\t-1\t\n", ordinal, index,
			       capture_us);
			continue;
		}
		{
			double p = psnr_y(&ref, r, picture), s = ssim_y(&ref, r, picture);
			int check = -1;
			char best[8] = "";

			if (scored++ % CHECK_EVERY == 0) {
				const uint8_t *before = reference_get(&ref, n - 1);
				const uint8_t *after = reference_get(&ref, n + 1);
				double pb = before ? psnr_y(&ref, before, picture) : -1;
				double pa = after ? psnr_y(&ref, after, picture) : -1;

				/* reference_get(n + 1) may not evict n: the ring holds 96. */
				r = reference_get(&ref, n);
				check = r && pb < p && pa < p;
				snprintf(best, sizeof(best), "%d",
				         check                 ? 0
				         : pb >= pa && pb >= p ? -1
				         : pa >= p             ? 1
				                               : 0);
			}
			printf("%" PRId64 "\t1\t%u\t%" PRId64 "\t%" PRId64 "\t%.3f\t%.5f\t%d\t%s\n",
			       ordinal, index, capture_us, n, p, s, check, best);
		}
	}
out:
	reference_close(&ref);
	free(picture);
	fclose(in);
	return status;
}
