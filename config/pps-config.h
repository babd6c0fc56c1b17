/* SPDX-License-Identifier: MIT */
/*
 * ppstream configuration: one table of keys, read from INI files with GLib's
 * GKeyFile and overridden with `--set section.key=value`.
 *
 * Precedence: built-in defaults < the `--config` file < each `--set`, in order.
 * Every key is declared once in the table returned by pps_config_keys(); the
 * loader, the validation messages, the shipped example files and the README's
 * option reference all come from that table.
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

/* Which programs read a key. A program refuses keys that are not its own. */
typedef enum {
	PPS_CONFIG_PROGRAM_SERVER = 1u << 0,
	PPS_CONFIG_PROGRAM_CLIENT = 1u << 1,
	PPS_CONFIG_PROGRAM_ALL = PPS_CONFIG_PROGRAM_SERVER | PPS_CONFIG_PROGRAM_CLIENT,
} pps_config_program_t;

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
	const char *const *choices; /* PPS_CONFIG_TYPE_ENUM only, NULL-terminated */
	unsigned programs;          /* pps_config_program_t bits */
	const char *help;           /* one line, no trailing period */
} pps_config_key_t;

/* The table of every key, in documentation order. Never NULL; *n_keys set. */
const pps_config_key_t *pps_config_keys(size_t *n_keys);

/* Looks a key up by section and name; NULL if there is no such key. */
const pps_config_key_t *pps_config_key_find(const char *section, const char *key);

typedef struct pps_config pps_config_t;

/*
 * A configuration holding the built-in defaults for @program's keys.
 * Returns NULL with errno set (ENOMEM) on failure.
 */
pps_config_t *pps_config_new(pps_config_program_t program);
void pps_config_free(pps_config_t *config);

/*
 * Reads an INI file over the current values. Every section and key must be
 * known to the table and to this program, every value of the right type and
 * in range. Returns 0, or a negative errno with a one-line message (naming the
 * file, the key, the value and what is allowed) in @err (size @err_size).
 */
int pps_config_load_file(pps_config_t *config, const char *path, char *err, size_t err_size);

/* Applies one `section.key=value` override. Same validation and errors. */
int pps_config_set(pps_config_t *config, const char *assignment, char *err, size_t err_size);

/*
 * Handles `--config FILE` and every `--set section.key=value` (also the
 * `--config=FILE` / `--set=...` spellings) in argv: the file is applied first
 * whatever its position, then the overrides in order. The options it used are
 * removed from argv and *argc updated, so the program parses the rest.
 * Returns 0 or a negative errno with the message in @err.
 */
int pps_config_parse_args(pps_config_t *config, int *argc, char **argv, char *err, size_t err_size);

/*
 * Typed getters. Asking for a key that does not exist, of the wrong type or
 * not read by this program is a programming error (assert), not an input error.
 * Strings are owned by @config and live as long as it does.
 */
int64_t pps_config_get_int(const pps_config_t *config, const char *section, const char *key);
bool pps_config_get_bool(const pps_config_t *config, const char *section, const char *key);
const char *pps_config_get_string(const pps_config_t *config, const char *section, const char *key);
/* Index of the value in the key's choices list. */
int pps_config_get_enum(const pps_config_t *config, const char *section, const char *key);

/*
 * Splits an address value ("host:port", "[v6addr]:port") into its host
 * (brackets removed; may be empty: any address) and port. Returns 0 or
 * -EINVAL if it is not of that form or a part does not fit its buffer.
 */
int pps_config_split_address(const char *address, char *host, size_t host_size, char *port,
                             size_t port_size);

/* Where a value came from, for logs: "default", the file's path, or "--set". */
const char *pps_config_get_origin(const pps_config_t *config, const char *section, const char *key);

/*
 * Writes the documented INI example for @program: every key with its default
 * and its one-line help, grouped by section. Returns 0 or a negative errno.
 */
int pps_config_write_example(pps_config_program_t program, const char *name, FILE *out);

/* Writes the Markdown option reference (a table per section) for both programs. */
int pps_config_write_reference(FILE *out);

/* Prints `--config` and `--set` usage lines for a program's --help. */
void pps_config_print_usage(FILE *out);

#endif /* PPS_CONFIG_H */
