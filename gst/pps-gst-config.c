/* SPDX-License-Identifier: MIT */
/*
 * GObject properties from the configuration key table (config/): one place
 * for every key's name, range, choices, default and help.
 */
#include "pps-gst.h"
#include "pps-names.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The rule that covers a key: its own entry, else its section's, else NULL. */
static const pps_gst_property_rule_t *
find_rule(const pps_gst_property_rule_t *rules, const pps_config_key_t *k)
{
	const pps_gst_property_rule_t *section_rule = NULL;

	for (; rules->section; rules++) {
		if (strcmp(rules->section, k->section) != 0)
			continue;
		if (!rules->key)
			section_rule = rules;
		else if (strcmp(rules->key, k->key) == 0)
			return rules;
	}
	return section_rule;
}

/* Another key of the table in another section has the same name. */
static gboolean
name_shared(const pps_config_key_t *keys, size_t n, const pps_config_key_t *k)
{
	for (size_t i = 0; i < n; i++)
		if (&keys[i] != k && strcmp(keys[i].key, k->key) == 0)
			return TRUE;
	return FALSE;
}

/* A GEnum type for an enum key, its values the key's choices in order. */
static GType
enum_type(const pps_config_key_t *k)
{
	char *type_name = g_strdup_printf("GstPps_%s_%s", k->section, k->key);
	GType type;
	char *c;

	/* "GstPps_playout_policy" -> "GstPpsPlayoutPolicy" */
	for (c = type_name + 6; *c; c++)
		if (*c == '_') {
			memmove(c, c + 1, strlen(c));
			*c = g_ascii_toupper(*c);
		}
	type = g_type_from_name(type_name);
	GEnumValue *values;
	size_t n = 0;

	if (type) {
		g_free(type_name);
		return type;
	}
	while (k->choices[n])
		n++;
	/* Registered once per process and never freed: GType keeps the table. */
	values = g_new0(GEnumValue, n + 1);
	for (size_t i = 0; i < n; i++) {
		values[i].value = (gint)i;
		values[i].value_name = k->choices[i];
		values[i].value_nick = k->choices[i];
	}
	type = g_enum_register_static(g_intern_string(type_name), values);
	g_free(type_name);
	return type;
}

static int
choice_index(const pps_config_key_t *k, const char *value)
{
	int i = pps_names_find(k->choices, value);

	return i < 0 ? 0 : i;
}

void
pps_gst_properties_install(GObjectClass *klass, pps_gst_properties_t *props,
                           const pps_config_schema_t *schema, guint first_id,
                           const pps_gst_property_rule_t *rules)
{
	size_t n_keys = schema->n_keys;
	const pps_config_key_t *keys = schema->keys;
	GParamFlags flags = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY;

	props->schema = schema;
	props->first_id = first_id;
	props->n_keys = 0;
	props->keys = g_new0(const pps_config_key_t *, n_keys);
	props->names = g_new0(const char *, n_keys);
	for (size_t i = 0; i < n_keys; i++) {
		const pps_config_key_t *k = &keys[i];
		const pps_gst_property_rule_t *rule = find_rule(rules, k);
		guint id = first_id + props->n_keys;
		const char *name, *blurb;
		char *text;
		GParamSpec *spec;

		if (rule && !rule->name)
			continue;
		if (rule)
			text = g_strdup(rule->name);
		else if (name_shared(keys, n_keys, k))
			text = g_strdup_printf("%s-%s", k->section, k->key);
		else
			text = g_strdup(k->key);
		g_strdelimit(text, "_", '-');
		/* Interned: a class's names live as long as the process. */
		name = g_intern_string(text);
		g_free(text);
		text = g_strdup_printf("%s ([%s] %s)", rule && rule->help ? rule->help : k->help,
		                       k->section, k->key);
		blurb = g_intern_string(text);
		g_free(text);
		switch (k->type) {
		case PPS_CONFIG_TYPE_INT:
			spec =
			    g_param_spec_int64(name, name, blurb, k->min, k->max,
			                       g_ascii_strtoll(k->default_value, NULL, 10), flags);
			break;
		case PPS_CONFIG_TYPE_BOOL:
			spec = g_param_spec_boolean(name, name, blurb,
			                            strcmp(k->default_value, "true") == 0, flags);
			break;
		case PPS_CONFIG_TYPE_ENUM:
			spec = g_param_spec_enum(name, name, blurb, enum_type(k),
			                         choice_index(k, k->default_value), flags);
			break;
		default:
			spec = g_param_spec_string(name, name, blurb, k->default_value, flags);
		}
		g_object_class_install_property(klass, id, spec);
		props->names[props->n_keys] = name;
		props->keys[props->n_keys++] = k;
	}
}

gboolean
pps_gst_properties_set(const pps_gst_properties_t *props, pps_config_t *config, GObject *object,
                       guint id, const GValue *value, char *error, size_t error_size)
{
	const pps_config_key_t *k;
	const char *name;
	char *text, *as, err[512];

	if (id < props->first_id || id >= props->first_id + props->n_keys)
		return FALSE;
	k = props->keys[id - props->first_id];
	name = props->names[id - props->first_id];
	switch (k->type) {
	case PPS_CONFIG_TYPE_INT:
		text = g_strdup_printf("%" G_GINT64_FORMAT, g_value_get_int64(value));
		break;
	case PPS_CONFIG_TYPE_BOOL:
		text = g_strdup(g_value_get_boolean(value) ? "true" : "false");
		break;
	case PPS_CONFIG_TYPE_ENUM:
		text = g_strdup(k->choices[g_value_get_enum(value)]);
		break;
	default:
		text = g_value_dup_string(value);
		if (!text)
			text = g_strdup("");
	}
	/* The message speaks of the property as a pipeline spells it. */
	as = g_strdup_printf("%s=", name);
	if (pps_config_set_as(config, k->section, k->key, text, as, err, sizeof(err)) < 0) {
		g_warning("%s: %s", GST_OBJECT_NAME(object), err);
		/* The first one explains; the element refuses to start with it. */
		if (!error[0])
			g_strlcpy(error, err, error_size);
	}
	g_free(as);
	g_free(text);
	return TRUE;
}

gboolean
pps_gst_properties_get(const pps_gst_properties_t *props, const pps_config_t *config, guint id,
                       GValue *value)
{
	const pps_config_key_t *k;

	if (id < props->first_id || id >= props->first_id + props->n_keys)
		return FALSE;
	k = props->keys[id - props->first_id];
	switch (k->type) {
	case PPS_CONFIG_TYPE_INT:
		g_value_set_int64(value, pps_config_get_int(config, k->section, k->key));
		break;
	case PPS_CONFIG_TYPE_BOOL:
		g_value_set_boolean(value, pps_config_get_bool(config, k->section, k->key));
		break;
	case PPS_CONFIG_TYPE_ENUM:
		g_value_set_enum(value, pps_config_get_enum(config, k->section, k->key));
		break;
	default:
		g_value_set_string(value, pps_config_get_string(config, k->section, k->key));
	}
	return TRUE;
}
