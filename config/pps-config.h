/* SPDX-License-Identifier: MIT */
/*
 * ppstream configuration: a generic loader for a program's table of keys,
 * read from INI files with GLib's GKeyFile and overridden with
 * `--set section.key=value`.
 *
 * Precedence: built-in defaults < the `--config` file < each `--set`, in order.
 * Every key is declared once, in its program's schema; the loader, the
 * validation messages, the shipped example files, the option reference
 * (docs/CONFIGURATION.md) and the GStreamer elements' properties all come
 * from that table. This library includes no module of ppstream: the programs
 * own their tables and turn them into typed parameter structs.
 *
 * Threading: a pps_config_t is built and validated at program start-up on the
 * main thread, then only read. It is not safe to mutate from several threads.
 */
#ifndef PPS_CONFIG_H
#define PPS_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit status for usage and configuration errors, shared by every program. */
#define PPS_EXIT_USAGE 2

typedef enum {
	PPS_CONFIG_TYPE_INT,     /* 64-bit signed integer, range [min, max] */
	PPS_CONFIG_TYPE_BOOL,    /* true/false (GKeyFile spelling) */
	PPS_CONFIG_TYPE_STRING,  /* free text; may be empty */
	PPS_CONFIG_TYPE_ENUM,    /* one of a NULL-terminated list of names */
	PPS_CONFIG_TYPE_ADDRESS, /* HOST:PORT or [V6ADDR]:PORT, port 0..65535 */
} pps_config_type_t;

/* One key of the table. Public so that tools can print references from it. */
typedef struct {
	const char *section;
	const char *key;
	pps_config_type_t type;
	const char *default_value; /* as it would be written in the INI file */
	int64_t min;               /* PPS_CONFIG_TYPE_INT only */
	int64_t max;
	int64_t multiple; /* PPS_CONFIG_TYPE_INT: > 1, the value is a multiple of it; 0: any */
	const char *const *choices; /* PPS_CONFIG_TYPE_ENUM only, NULL-terminated */
	const char *help;           /* one line, no trailing period */
} pps_config_key_t;

/*
 * One program's keys, in documentation order. The program owns its table
 * (server/pps-server-settings.c, client/pps-client-settings.c) and turns the
 * values into the parameter structs of its libraries; this loader knows no
 * key of its own.
 */
typedef struct {
	const char *program; /* "server", "client": pps-<program>, <program>.ini */
	const pps_config_key_t *keys;
	size_t n_keys;
} pps_config_schema_t;

/* Looks a key up by section and name; NULL if there is no such key. */
const pps_config_key_t *pps_config_schema_find(const pps_config_schema_t *schema,
                                               const char *section, const char *key);

/* Entries of a key table. An enum key's choices are the owning module's name
 * table (indexed by its enum, NULL-terminated), so the index
 * pps_config_get_enum() returns is the enum value. */
#define PPS_CONFIG_INT(sec, name, def, lo, hi, text)                                               \
	{                                                                                          \
		.section = sec, .key = name, .type = PPS_CONFIG_TYPE_INT, .default_value = def,    \
		.min = lo, .max = hi, .help = text                                                 \
	}
/* An integer that must also be a multiple of @step (2: even; a picture's size in 4:2:0). */
#define PPS_CONFIG_INT_MULTIPLE(sec, name, def, lo, hi, step, text)                                \
	{                                                                                          \
		.section = sec, .key = name, .type = PPS_CONFIG_TYPE_INT, .default_value = def,    \
		.min = lo, .max = hi, .multiple = step, .help = text                               \
	}
#define PPS_CONFIG_BOOL(sec, name, def, text)                                                      \
	{                                                                                          \
		.section = sec, .key = name, .type = PPS_CONFIG_TYPE_BOOL, .default_value = def,   \
		.help = text                                                                       \
	}
#define PPS_CONFIG_STRING(sec, name, def, text)                                                    \
	{                                                                                          \
		.section = sec, .key = name, .type = PPS_CONFIG_TYPE_STRING, .default_value = def, \
		.help = text                                                                       \
	}
#define PPS_CONFIG_ADDRESS(sec, name, def, text)                                                   \
	{                                                                                          \
		.section = sec, .key = name, .type = PPS_CONFIG_TYPE_ADDRESS,                      \
		.default_value = def, .help = text                                                 \
	}
#define PPS_CONFIG_ENUM(sec, name, def, list, text)                                                \
	{                                                                                          \
		.section = sec, .key = name, .type = PPS_CONFIG_TYPE_ENUM, .default_value = def,   \
		.choices = list, .help = text                                                      \
	}

typedef struct pps_config pps_config_t;

/*
 * A configuration holding the built-in defaults of @schema's keys (the
 * schema must outlive it). Returns NULL with errno set (ENOMEM) on failure.
 */
pps_config_t *pps_config_new(const pps_config_schema_t *schema);
const pps_config_schema_t *pps_config_schema(const pps_config_t *config);
void pps_config_free(pps_config_t *config);

/*
 * Reads an INI file over the current values. Every section and key must be
 * in the schema, every value of the right type and
 * in range. Returns 0, or a negative errno with a one-line message (naming the
 * file, the key, the value and what is allowed) in @err (size @err_size).
 */
int pps_config_load_file(pps_config_t *config, const char *path, char *err, size_t err_size);

/* Applies one `section.key=value` override. Same validation and errors. */
int pps_config_set(pps_config_t *config, const char *assignment, char *err, size_t err_size);

/*
 * Applies @value to @section.@key for an option, argument or property that
 * stands for the key under a name of its own (`--listen`, a program's
 * positional argument, an element's property). Same validation; the message
 * speaks of what the user typed: @as, then the value ("--listen 7400: must
 * be HOST:PORT or [V6ADDR]:PORT", "location=nowhere: ..."), so @as carries
 * its own separator. The value's origin is @as without that separator.
 */
int pps_config_set_as(pps_config_t *config, const char *section, const char *key, const char *value,
                      const char *as, char *err, size_t err_size);

/*
 * Handles `--config FILE` and every `--set section.key=value` (also the
 * `--config=FILE` / `--set=...` spellings) in argv: the file is applied first
 * whatever its position, then the overrides in order. The options it used are
 * removed from argv and *argc updated, so the program parses the rest.
 * Returns 0 or a negative errno with the message in @err.
 */
int pps_config_parse_args(pps_config_t *config, int *argc, char **argv, char *err, size_t err_size);

/*
 * Typed getters, for the programs' settings layers only (libraries take
 * parameter structs). Asking for a key that is not in the schema or of the
 * wrong type is a programming error (assert), not an input error. Strings
 * are owned by @config and live as long as it does.
 */
int64_t pps_config_get_int(const pps_config_t *config, const char *section, const char *key);
bool pps_config_get_bool(const pps_config_t *config, const char *section, const char *key);
const char *pps_config_get_string(const pps_config_t *config, const char *section, const char *key);
/* Index of the value in the key's choices list. */
int pps_config_get_enum(const pps_config_t *config, const char *section, const char *key);

/* Where a value came from, for logs: "default", the file's path, or "--set". */
const char *pps_config_get_origin(const pps_config_t *config, const char *section, const char *key);

/*
 * Writes the documented INI example of @schema: every key with its default
 * and its one-line help, grouped by section. Returns 0 or a negative errno.
 */
int pps_config_write_example(const pps_config_schema_t *schema, FILE *out);

/* Writes the Markdown option reference of @schema (a table per section). */
int pps_config_write_reference(const pps_config_schema_t *schema, FILE *out);

/* Prints `--config` and `--set` usage lines for a program's --help. */
void pps_config_print_usage(FILE *out);

#endif /* PPS_CONFIG_H */
