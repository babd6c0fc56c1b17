/* SPDX-License-Identifier: MIT */
/*
 * The ppstream GStreamer plugin (libgstppstream): ppssrc plays a pps-server
 * stream through the client library, ppssink serves raw video through the
 * server's objects. Shared inside gst/ only.
 *
 * Properties come from the programs' key tables (ppssrc: the client's,
 * ppssink: the server's): each key an element exposes is a GObject property
 * named after it, validated by the same loader as `--set`, so
 * gst-inspect-1.0, the INI files and docs/CONFIGURATION.md agree.
 */
#ifndef PPS_GST_H
#define PPS_GST_H

#include <glib-object.h>
#include <gst/gst.h>
#include <stdint.h>

#include "pps-config.h"

G_BEGIN_DECLS

/* A key of the table exposed as a property, or renamed or left out. */
typedef struct {
	const char *section; /* NULL: every key of the section is left out */
	const char *key;     /* NULL with a section: the whole section */
	const char *name;    /* property name; NULL: left out */
	/* The property's text where the key's help speaks of what the element
	 * has not (a source type); NULL: the key's help. */
	const char *help;
} pps_gst_property_rule_t;

/* The properties of one element class: which key each property id is. */
typedef struct {
	const pps_config_schema_t *schema;
	guint first_id; /* property ids below are the element's own */
	guint n_keys;
	const pps_config_key_t **keys;
	const char **names; /* each key's property name (interned), for messages */
} pps_gst_properties_t;

/*
 * Installs a property for every key of @schema that @rules do not leave out,
 * with ids from @first_id on. A key's property is its name with '_' as '-'
 * ("window_frames" -> "window-frames"), prefixed with its section where two
 * sections share the name ("transport-mode"), or as @rules rename it. Ranges,
 * choices (as GEnum types), defaults and help come from the table.
 * @rules ends with an all-NULL entry.
 */
void pps_gst_properties_install(GObjectClass *klass, pps_gst_properties_t *props,
                                const pps_config_schema_t *schema, guint first_id,
                                const pps_gst_property_rule_t *rules);

/* set_property for a key's id: validated like `--set`. A value refused (a
 * warning names the property as typed, "location=nowhere", and what is allowed) is left as it was,
 * and the first such message goes to @error (if it is still "") so that the element refuses to
 * start with it. TRUE if @id is a key's. */
gboolean pps_gst_properties_set(const pps_gst_properties_t *props, pps_config_t *config,
                                GObject *object, guint id, const GValue *value, char *error,
                                size_t error_size);
/* get_property for a key's id; TRUE if @id is one. */
gboolean pps_gst_properties_get(const pps_gst_properties_t *props, const pps_config_t *config,
                                guint id, GValue *value);

/* ---- the mapping between running time and CLOCK_REALTIME (pps-gst-clock.c) */

/* The running time on @element's clock of @when_us (CLOCK_REALTIME
 * microseconds, now or shortly before; a later one counts as now).
 * GST_CLOCK_TIME_NONE when the element has no clock. */
GstClockTime pps_gst_running_time_at(GstElement *element, int64_t when_us);
/* When @running happened, in CLOCK_REALTIME microseconds: now less how long
 * ago it was on @element's clock. Now without a clock, for an invalid
 * @running, or one in the future or over a second ago (no live timeline). */
int64_t pps_gst_realtime_of(GstElement *element, GstClockTime running);

/* ---- ppssrc's audio pad (pps-src-audio.c) ---------------------------------- */

/* A sometimes pad "audio" and the slots the player played, queued for its
 * own task (bounded; past the bound a slot is not taken and counted). */
typedef struct pps_src_audio pps_src_audio_t;

extern GstStaticPadTemplate pps_src_audio_template;

/* For @element (borrowed; it owns the object and frees it in finalize). */
pps_src_audio_t *pps_src_audio_new(GstElement *element);
void pps_src_audio_free(pps_src_audio_t *audio);
/* start(): nothing queued, counters at 0. */
void pps_src_audio_reset(pps_src_audio_t *audio);
/* Loop thread: the stream has an audio track of @frame_us slots: the pad is
 * added (once; a reconnection keeps it) and activated. */
void pps_src_audio_add_pad(pps_src_audio_t *audio, unsigned frame_us);
/* Loop thread: one slot (mono S16, 48 kHz, copied) played at @play_us
 * (CLOCK_REALTIME). FALSE when it was not taken because the queue is full
 * (counted); TRUE otherwise, also when there is no pad to take it. */
gboolean pps_src_audio_push(pps_src_audio_t *audio, const int16_t *pcm, int samples,
                            int64_t play_us);
/* Any thread: end of stream after the slots queued; none is taken after. */
void pps_src_audio_end(pps_src_audio_t *audio);
/* The application thread, once the loop thread is joined: the pad stopped,
 * removed. */
void pps_src_audio_remove_pad(pps_src_audio_t *audio);
/* Slots not taken since the last reset. */
guint64 pps_src_audio_overflow(pps_src_audio_t *audio);

/* ---- ppssink's audio pad (pps-sink-audio.c) -------------------------------- */

/* A request pad "audio" whose 10 ms blocks go to a pushed server's audio
 * track (pps_server_push_audio()); a source that is not live is paced. */
typedef struct pps_sink_audio pps_sink_audio_t;
struct pps_server;

typedef struct {
	guint64 blocks;          /* 10 ms blocks handed to the server */
	guint64 unserved;        /* buffers that came with no server to take them */
	guint64 discontinuities; /* partial blocks dropped at a gap or a DISCONT buffer */
} pps_sink_audio_stats_t;

extern GstStaticPadTemplate pps_sink_audio_template;

/* For @element (borrowed; it owns the object and frees it in finalize). */
pps_sink_audio_t *pps_sink_audio_new(GstElement *element);
void pps_sink_audio_free(pps_sink_audio_t *audio);
/* request_new_pad and release_pad: one pad at most (NULL for a second). */
GstPad *pps_sink_audio_request_pad(pps_sink_audio_t *audio, GstPadTemplate *templ);
void pps_sink_audio_release_pad(pps_sink_audio_t *audio, GstPad *pad);
/* The pad exists: a server made now has an audio track. */
gboolean pps_sink_audio_requested(pps_sink_audio_t *audio);
/* Where the blocks go from now on: a pushed server with an audio track, or
 * NULL (at end of stream, before the server is freed): then counted unserved. */
void pps_sink_audio_serve(pps_sink_audio_t *audio, struct pps_server *server);
/* change_state: a paced buffer waits only while PLAYING. */
void pps_sink_audio_set_playing(pps_sink_audio_t *audio, gboolean playing);
/* Since the element was made. */
void pps_sink_audio_get_stats(pps_sink_audio_t *audio, pps_sink_audio_stats_t *stats);

GType gst_pps_src_get_type(void);
GType gst_pps_sink_get_type(void);

G_END_DECLS

#endif /* PPS_GST_H */
