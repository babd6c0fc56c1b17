# SPDX-License-Identifier: MIT
"""Reading and writing the files the programs and the reports leave: JSON,
JSON Lines, tab-separated tables."""
import contextlib
import json
import os
import re


def read_json(path, default=None):
    """The JSON in @path, or @default when it is missing or cut short."""
    with contextlib.suppress(OSError, ValueError):
        with open(path) as f:
            return json.load(f)
    return default


def write_json(path, obj, indent=1):
    """Writes @obj to @path atomically (a temporary file renamed over it)."""
    with open(path + ".tmp", "w") as f:
        json.dump(obj, f, indent=indent, sort_keys=True)
        f.write("\n")
    os.replace(path + ".tmp", path)


def read_jsonl(path):
    """Every JSON object in a JSON Lines file ([] if there is no file); a line
    cut short by a kill is skipped."""
    out = []
    with contextlib.suppress(OSError):
        with open(path) as f:
            for line in f:
                with contextlib.suppress(ValueError):
                    e = json.loads(line)
                    if isinstance(e, dict):
                        out.append(e)
    return out


def read_tsv(path):
    """A tab-separated table with a header line -> a list of dicts of strings."""
    with open(path) as f:
        lines = f.read().splitlines()
    if not lines:
        return []
    header = lines[0].split("\t")
    return [dict(zip(header, line.split("\t"))) for line in lines[1:] if line]


def public_command(command):
    """@command as a page may print it: the values of options that name this
    machine's files (--out, --config, --build, --resume, --server-build) as
    placeholders, so that a generated page carries no machine path."""
    command = re.sub(r"(--out[ =])(\S+)", r"\1DIR", command)
    command = re.sub(r"(--resume[ =])(\S+)", r"\1DIR", command)
    command = re.sub(r"(--build[ =])(\S+)", r"\1BUILD_DIR", command)
    command = re.sub(r"(--config[ =])(\S+)", lambda m: m.group(1) + os.path.basename(m.group(2)), command)
    command = re.sub(r"(--server-build[ =])([^=\s]+)=(\S+)", r"\1\2=BUILD_DIR", command)
    return command
