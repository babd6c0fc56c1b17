/* SPDX-License-Identifier: MIT */
#include "pps-config.h"
#include "pps-names.h"
#include "pps-socket.h"

#include <assert.h>
#include <errno.h>
#include <glib.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
	const pps_config_key_t *key;
	char *text;     /* the value as written, normalized */
	int64_t number; /* INT, BOOL (0/1), ENUM (index) */
	char *origin;
} pps_config_value_t;

struct pps_config {
	const pps_config_schema_t *schema;
	size_t n_values;
	pps_config_value_t *values; /* parallel to the key table */
};

static void
set_error(char *err, size_t err_size, const char *fmt, ...)
{
	va_list ap;

	if (!err || err_size == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, err_size, fmt, ap);
	va_end(ap);
}

static const char *
base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* "64..3840", "an even number 64..3840", "a multiple of 16 in 16..4096". */
static void
describe_range(const pps_config_key_t *key, char *buf, size_t size)
{
	if (key->multiple == 2)
		snprintf(buf, size, "an even number %" PRId64 "..%" PRId64, key->min, key->max);
	else if (key->multiple > 2)
		snprintf(buf, size, "a multiple of %" PRId64 " in %" PRId64 "..%" PRId64,
		         key->multiple, key->min, key->max);
	else
		snprintf(buf, size, "%" PRId64 "..%" PRId64, key->min, key->max);
}

static void
describe_allowed(const pps_config_key_t *key, char *buf, size_t size)
{
	char range[96];
	size_t used;

	switch (key->type) {
	case PPS_CONFIG_TYPE_INT:
		describe_range(key, range, sizeof(range));
		snprintf(buf, size, "must be %s", range);
		break;
	case PPS_CONFIG_TYPE_BOOL:
		snprintf(buf, size, "must be true or false");
		break;
	case PPS_CONFIG_TYPE_STRING:
		snprintf(buf, size, "must be text");
		break;
	case PPS_CONFIG_TYPE_ADDRESS:
		snprintf(buf, size, "must be HOST:PORT or [V6ADDR]:PORT");
		break;
	case PPS_CONFIG_TYPE_ENUM:
		used = (size_t)snprintf(buf, size, "must be one of");
		for (size_t i = 0; key->choices[i] && used < size; i++)
			used += (size_t)snprintf(buf + used, size - used, "%s %s", i ? "," : "",
			                         key->choices[i]);
		break;
	}
}

/* Parses @text for @key; on success stores the typed value in *number. */
static int
parse_value(const pps_config_key_t *key, const char *text, int64_t *number)
{
	char *end;
	long long v;

	switch (key->type) {
	case PPS_CONFIG_TYPE_INT:
		if (*text == '\0')
			return -EINVAL;
		errno = 0;
		v = strtoll(text, &end, 10);
		if (errno || *end != '\0' || v < key->min || v > key->max)
			return -ERANGE;
		if (key->multiple > 1 && v % key->multiple != 0)
			return -EINVAL;
		*number = v;
		return 0;
	case PPS_CONFIG_TYPE_BOOL:
		if (strcmp(text, "true") == 0 || strcmp(text, "1") == 0) {
			*number = 1;
			return 0;
		}
		if (strcmp(text, "false") == 0 || strcmp(text, "0") == 0) {
			*number = 0;
			return 0;
		}
		return -EINVAL;
	case PPS_CONFIG_TYPE_STRING:
		*number = 0;
		return 0;
	case PPS_CONFIG_TYPE_ADDRESS: {
		char host[256], port[16], address[300], stream[PPS_STREAM_NAME_MAX_BYTES + 1];
		char why[8];

		*number = 0;
		/* HOST:PORT, or HOST:PORT/STREAM: a relay's named stream. */
		if (pps_stream_location_split(text, address, sizeof(address), stream,
		                              sizeof(stream), why, sizeof(why)) < 0)
			return -EINVAL;
		return pps_socket_split_address(address, host, sizeof(host), port, sizeof(port));
	}
	case PPS_CONFIG_TYPE_ENUM: {
		int i = pps_names_find(key->choices, text);

		if (i < 0)
			return i;
		*number = i;
		return 0;
	}
	}
	return -EINVAL;
}

const pps_config_key_t *
pps_config_schema_find(const pps_config_schema_t *schema, const char *section, const char *key)
{
	for (size_t i = 0; i < schema->n_keys; i++)
		if (strcmp(schema->keys[i].section, section) == 0 &&
		    strcmp(schema->keys[i].key, key) == 0)
			return &schema->keys[i];
	return NULL;
}

static bool
section_known(const pps_config_schema_t *schema, const char *section)
{
	for (size_t i = 0; i < schema->n_keys; i++)
		if (strcmp(schema->keys[i].section, section) == 0)
			return true;
	return false;
}

/* "[source] [encoder] ...": the schema's sections, for an unknown one. */
static void
list_sections(const pps_config_schema_t *schema, char *buf, size_t size)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < schema->n_keys && used < size; i++)
		if (i == 0 || strcmp(schema->keys[i].section, schema->keys[i - 1].section) != 0)
			used += (size_t)snprintf(buf + used, size - used, "%s[%s]", used ? " " : "",
			                         schema->keys[i].section);
}

static void
unknown_section_error(const pps_config_schema_t *schema, const char *where, const char *section,
                      char *err, size_t err_size)
{
	char sections[256];

	list_sections(schema, sections, sizeof(sections));
	set_error(err, err_size, "%s: [%s]: unknown section (pps-%s reads %s)", where, section,
	          schema->program, sections);
}

static pps_config_value_t *
find_value(const pps_config_t *config, const char *section, const char *key)
{
	for (size_t i = 0; i < config->n_values; i++) {
		const pps_config_key_t *k = config->values[i].key;

		if (strcmp(k->section, section) == 0 && strcmp(k->key, key) == 0)
			return &config->values[i];
	}
	return NULL;
}

static int
store(pps_config_value_t *value, const char *text, int64_t number, const char *origin)
{
	char *text_copy = strdup(text);
	char *origin_copy = strdup(origin);

	if (!text_copy || !origin_copy) {
		free(text_copy);
		free(origin_copy);
		return -ENOMEM;
	}
	free(value->text);
	free(value->origin);
	value->text = text_copy;
	value->origin = origin_copy;
	value->number = number;
	return 0;
}

/*
 * Validates and stores one value. @where names the source in messages: the
 * file's base name, or "--set". @as (NULL: none) is what the user typed
 * instead of the key, which the message then names in its place.
 */
static int
assign(pps_config_t *config, const char *where, const char *origin, const char *as,
       const char *section, const char *key, const char *text, char *err, size_t err_size)
{
	const pps_config_key_t *k = pps_config_schema_find(config->schema, section, key);
	pps_config_value_t *value;
	char allowed[256];
	int64_t number;
	int ret;

	if (!k) {
		if (section_known(config->schema, section))
			set_error(err, err_size, "%s: [%s] %s: unknown key", where, section, key);
		else
			unknown_section_error(config->schema, where, section, err, err_size);
		return -ENOENT;
	}
	ret = parse_value(k, text, &number);
	if (ret < 0) {
		describe_allowed(k, allowed, sizeof(allowed));
		if (as)
			set_error(err, err_size, "%s%s: %s", as, *text ? text : "(empty)", allowed);
		else
			set_error(err, err_size, "%s: [%s] %s = %s: %s", where, section, key,
			          *text ? text : "(empty)", allowed);
		return ret;
	}
	value = find_value(config, section, key);
	assert(value);
	ret = store(value, text, number, origin);
	if (ret < 0)
		set_error(err, err_size, "%s: out of memory", where);
	return ret;
}

pps_config_t *
pps_config_new(const pps_config_schema_t *schema)
{
	size_t n_keys = schema->n_keys, n = 0;
	const pps_config_key_t *keys = schema->keys;
	pps_config_t *config = calloc(1, sizeof(*config));

	if (!config)
		goto err_alloc;
	config->schema = schema;
	config->values = calloc(n_keys, sizeof(*config->values));
	if (!config->values)
		goto err_values;
	for (size_t i = 0; i < n_keys; i++) {
		int64_t number = 0;
		int ret;

		ret = parse_value(&keys[i], keys[i].default_value, &number);
		/* A default that fails its own validation is a bug in the table. */
		assert(ret == 0);
		(void)ret;
		config->values[n].key = &keys[i];
		config->n_values = n + 1;
		if (store(&config->values[n], keys[i].default_value, number, "default") < 0)
			goto err_store;
		n++;
	}
	return config;

err_store:
	pps_config_free(config);
	errno = ENOMEM;
	return NULL;
err_values:
	free(config);
err_alloc:
	errno = ENOMEM;
	return NULL;
}

const pps_config_schema_t *
pps_config_schema(const pps_config_t *config)
{
	return config->schema;
}

void
pps_config_free(pps_config_t *config)
{
	if (!config)
		return;
	for (size_t i = 0; i < config->n_values; i++) {
		free(config->values[i].text);
		free(config->values[i].origin);
	}
	free(config->values);
	free(config);
}

int
pps_config_load_file(pps_config_t *config, const char *path, char *err, size_t err_size)
{
	GKeyFile *file = g_key_file_new();
	GError *gerr = NULL;
	gchar **groups = NULL;
	const char *where = base_name(path);
	int ret = 0;

	if (!g_key_file_load_from_file(file, path, G_KEY_FILE_NONE, &gerr)) {
		set_error(err, err_size, "%s: %s", path, gerr->message);
		ret = gerr->domain == G_FILE_ERROR ? -ENOENT : -EINVAL;
		g_error_free(gerr);
		goto out;
	}
	groups = g_key_file_get_groups(file, NULL);
	for (size_t g = 0; groups[g] && ret == 0; g++) {
		gchar **names = g_key_file_get_keys(file, groups[g], NULL, NULL);

		for (size_t k = 0; names && names[k] && ret == 0; k++) {
			/* get_value keeps the raw text; strings are unescaped below. */
			gchar *raw = g_key_file_get_value(file, groups[g], names[k], NULL);
			gchar *text = NULL;
			const pps_config_key_t *def =
			    pps_config_schema_find(config->schema, groups[g], names[k]);

			if (def && (def->type == PPS_CONFIG_TYPE_STRING ||
			            def->type == PPS_CONFIG_TYPE_ADDRESS))
				text = g_key_file_get_string(file, groups[g], names[k], NULL);
			ret = assign(config, where, path, NULL, groups[g], names[k],
			             text ? text : (raw ? raw : ""), err, err_size);
			g_free(text);
			g_free(raw);
		}
		if (names && !names[0]) {
			/* An empty section is still checked for being known. */
			if (!section_known(config->schema, groups[g])) {
				unknown_section_error(config->schema, where, groups[g], err,
				                      err_size);
				ret = -ENOENT;
			}
		}
		g_strfreev(names);
	}
out:
	g_strfreev(groups);
	g_key_file_free(file);
	return ret;
}

int
pps_config_set(pps_config_t *config, const char *assignment, char *err, size_t err_size)
{
	const char *eq = strchr(assignment, '=');
	const char *dot = strchr(assignment, '.');
	char section[64], key[64];
	size_t section_len, key_len;

	if (!eq || !dot || dot > eq || dot == assignment || dot + 1 == eq) {
		set_error(err, err_size, "--set %s: expected section.key=value", assignment);
		return -EINVAL;
	}
	section_len = (size_t)(dot - assignment);
	key_len = (size_t)(eq - dot - 1);
	if (section_len >= sizeof(section) || key_len >= sizeof(key)) {
		set_error(err, err_size, "--set %s: section or key name too long", assignment);
		return -EINVAL;
	}
	memcpy(section, assignment, section_len);
	section[section_len] = '\0';
	memcpy(key, dot + 1, key_len);
	key[key_len] = '\0';
	return assign(config, "--set", "--set", NULL, section, key, eq + 1, err, err_size);
}

int
pps_config_set_as(pps_config_t *config, const char *section, const char *key, const char *value,
                  const char *as, char *err, size_t err_size)
{
	char origin[64];
	size_t len = strlen(as);

	/* The origin is the name alone: "--listen ", "location=" -> "--listen", "location". */
	while (len > 0 && (as[len - 1] == ' ' || as[len - 1] == '='))
		len--;
	snprintf(origin, sizeof(origin), "%.*s", (int)len, as);
	return assign(config, as, origin, as, section, key, value, err, err_size);
}

/* Matches `--name VALUE` or `--name=VALUE` at argv[*i]; advances *i past it. */
static int
match_option(int argc, char **argv, int *i, const char *name, const char **value, char *err,
             size_t err_size)
{
	size_t len = strlen(name);
	const char *arg = argv[*i];

	if (strncmp(arg, name, len) != 0)
		return 0;
	if (arg[len] == '=') {
		*value = arg + len + 1;
		*i += 1;
		return 1;
	}
	if (arg[len] != '\0')
		return 0;
	if (*i + 1 >= argc) {
		set_error(err, err_size, "%s: missing value", name);
		return -EINVAL;
	}
	*value = argv[*i + 1];
	*i += 2;
	return 1;
}

int
pps_config_parse_args(pps_config_t *config, int *argc, char **argv, char *err, size_t err_size)
{
	const char *file = NULL;
	const char **sets = calloc((size_t)*argc + 1, sizeof(*sets));
	int n_sets = 0, out = 1, ret = 0;

	if (!sets) {
		set_error(err, err_size, "out of memory");
		return -ENOMEM;
	}
	for (int i = 1; i < *argc;) {
		const char *value;
		int m;

		if (strcmp(argv[i], "--") == 0) {
			while (i < *argc)
				argv[out++] = argv[i++];
			break;
		}
		m = match_option(*argc, argv, &i, "--config", &value, err, err_size);
		if (m == 1) {
			if (file) {
				set_error(err, err_size, "--config given twice (%s and %s)", file,
				          value);
				ret = -EINVAL;
				goto out;
			}
			file = value;
			continue;
		}
		if (m == 0)
			m = match_option(*argc, argv, &i, "--set", &value, err, err_size);
		if (m == 1) {
			sets[n_sets++] = value;
			continue;
		}
		if (m < 0) {
			ret = m;
			goto out;
		}
		argv[out++] = argv[i++];
	}
	if (file) {
		ret = pps_config_load_file(config, file, err, err_size);
		if (ret < 0)
			goto out;
	}
	for (int s = 0; s < n_sets && ret == 0; s++)
		ret = pps_config_set(config, sets[s], err, err_size);
out:
	if (ret == 0) {
		argv[out] = NULL;
		*argc = out;
	}
	free(sets);
	return ret;
}

static const pps_config_value_t *
get_checked(const pps_config_t *config, const char *section, const char *key,
            pps_config_type_t type)
{
	const pps_config_value_t *value = find_value(config, section, key);

	assert(value && "configuration key not in this program's schema");
	assert(value->key->type == type && "configuration key read with the wrong type");
	(void)type;
	return value;
}

int64_t
pps_config_get_int(const pps_config_t *config, const char *section, const char *key)
{
	return get_checked(config, section, key, PPS_CONFIG_TYPE_INT)->number;
}

bool
pps_config_get_bool(const pps_config_t *config, const char *section, const char *key)
{
	return get_checked(config, section, key, PPS_CONFIG_TYPE_BOOL)->number != 0;
}

const char *
pps_config_get_string(const pps_config_t *config, const char *section, const char *key)
{
	const pps_config_value_t *value = find_value(config, section, key);

	/* Addresses are strings that were validated on the way in. */
	assert(value && (value->key->type == PPS_CONFIG_TYPE_STRING ||
	                 value->key->type == PPS_CONFIG_TYPE_ADDRESS));
	return value->text;
}

int
pps_config_get_enum(const pps_config_t *config, const char *section, const char *key)
{
	return (int)get_checked(config, section, key, PPS_CONFIG_TYPE_ENUM)->number;
}

const char *
pps_config_get_origin(const pps_config_t *config, const char *section, const char *key)
{
	const pps_config_value_t *value = find_value(config, section, key);

	return value ? value->origin : NULL;
}

static const char *
type_name(const pps_config_key_t *key, char *buf, size_t size)
{
	switch (key->type) {
	case PPS_CONFIG_TYPE_INT: {
		char range[96];

		describe_range(key, range, sizeof(range));
		snprintf(buf, size, "%s%s", key->multiple > 1 ? "" : "integer ", range);
		return buf;
	}
	case PPS_CONFIG_TYPE_BOOL:
		return "true/false";
	case PPS_CONFIG_TYPE_STRING:
		return "text";
	case PPS_CONFIG_TYPE_ADDRESS:
		return "HOST:PORT";
	case PPS_CONFIG_TYPE_ENUM: {
		size_t used = 0;

		buf[0] = '\0';
		for (size_t i = 0; key->choices[i] && used < size; i++)
			used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? " \\| " : "",
			                         key->choices[i]);
		return buf;
	}
	}
	return "?";
}

int
pps_config_write_example(const pps_config_schema_t *schema, FILE *out)
{
	size_t n = schema->n_keys;
	const pps_config_key_t *keys = schema->keys;
	const char *name = schema->program;
	const char *section = NULL;

	fprintf(out, "# ppstream %s configuration: every key with its default.\n", name);
	fprintf(out,
	        "# Generated by `pps-config-doc`; a test checks it against the loader's table.\n");
	fprintf(out, "# Use: pps-%s --config %s.ini [--set section.key=value ...]\n", name, name);
	for (size_t i = 0; i < n; i++) {
		char allowed[256];

		if (!section || strcmp(section, keys[i].section) != 0) {
			section = keys[i].section;
			fprintf(out, "\n[%s]\n", section);
		}
		describe_allowed(&keys[i], allowed, sizeof(allowed));
		fprintf(out, "# %s (%s)\n%s = %s\n", keys[i].help, allowed + strlen("must be "),
		        keys[i].key, keys[i].default_value);
	}
	return ferror(out) ? -EIO : 0;
}

int
pps_config_write_reference(const pps_config_schema_t *schema, FILE *out)
{
	size_t n = schema->n_keys;
	const pps_config_key_t *keys = schema->keys;
	const char *section = NULL;

	for (size_t i = 0; i < n; i++) {
		char type_buf[256];

		if (!section || strcmp(section, keys[i].section) != 0) {
			section = keys[i].section;
			fprintf(out, "%s#### `[%s]` (%s.ini)\n\n", i ? "\n" : "", section,
			        schema->program);
			fprintf(out, "| key | default | allowed | meaning |\n|---|---|---|---|\n");
		}
		fprintf(out, "| `%s` | `%s` | %s | %s |\n", keys[i].key,
		        keys[i].default_value[0] ? keys[i].default_value : "\"\"",
		        type_name(&keys[i], type_buf, sizeof(type_buf)), keys[i].help);
	}
	return ferror(out) ? -EIO : 0;
}

void
pps_config_print_usage(FILE *out)
{
	fprintf(out,
	        "  --config FILE            read settings from an INI file (see config/*.ini)\n"
	        "  --set SECTION.KEY=VALUE  override one setting; repeatable; applied after "
	        "--config\n");
}
