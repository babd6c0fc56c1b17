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

#include "pps-config.h"

G_BEGIN_DECLS

/* A key of the table exposed as a property, or renamed or left out. */
typedef struct {
	const char *section; /* NULL: every key of the section is left out */
	const char *key;     /* NULL with a section: the whole section */
	const char *name;    /* property name; NULL: left out */
} pps_gst_property_rule_t;

/* The properties of one element class: which key each property id is. */
typedef struct {
	const pps_config_schema_t *schema;
	guint first_id; /* property ids below are the element's own */
	guint n_keys;
	const pps_config_key_t **keys;
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
 * warning names the key and what is allowed) is left as it was, and the
 * first such message goes to @error (if it is still "") so that the element
 * refuses to start with it. TRUE if @id is a key's. */
gboolean pps_gst_properties_set(const pps_gst_properties_t *props, pps_config_t *config,
                                GObject *object, guint id, const GValue *value, char *error,
                                size_t error_size);
/* get_property for a key's id; TRUE if @id is one. */
gboolean pps_gst_properties_get(const pps_gst_properties_t *props, const pps_config_t *config,
                                guint id, GValue *value);

GType gst_pps_src_get_type(void);
GType gst_pps_sink_get_type(void);

G_END_DECLS

#endif /* PPS_GST_H */
