#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Writes a help2man include file with a SETTINGS section for pps-server(1) or
pps-client(1): every key of the example INI that `pps-config-doc server|client`
prints (the loader's own key table), with its default and meaning.

  man-settings.py PPS_CONFIG_DOC server|client SYSCONFDIR OUTPUT
"""
import subprocess
import sys


def roff(text):
    """Text safe in a roff paragraph: backslashes escaped, no leading control character."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\\&" + text if text.startswith((".", "'")) else text


def main(argv):
    if len(argv) != 5 or argv[2] not in ("server", "client"):
        print(__doc__, file=sys.stderr)
        return 2
    config_doc, program, sysconfdir, output = argv[1:]
    ini = subprocess.run([config_doc, program], check=True, capture_output=True,
                         text=True).stdout
    out = ["[SETTINGS]",
           "Every setting can be given in the INI file read with \\fB\\-\\-config\\fR "
           "(section \\fB[SECTION]\\fR, then \\fIkey\\fR = \\fIvalue\\fR) or with "
           "\\fB\\-\\-set\\fR \\fISECTION.KEY=VALUE\\fR; each \\fB\\-\\-set\\fR wins over "
           "the file, the file over the default. "
           + roff("%s/ppstream/%s.ini holds every key with its default." % (sysconfdir, program))]
    section, comment = None, []
    for line in ini.splitlines():
        line = line.strip()
        if line.startswith("[") and line.endswith("]"):
            section, comment = line[1:-1], []
            out += [".SS " + roff("[%s]" % section)]
        elif line.startswith("#"):
            comment.append(line.lstrip("#").strip())
        elif "=" in line and section:
            key, value = (part.strip() for part in line.split("=", 1))
            out += [".TP",
                    "\\fB%s.%s\\fR = %s" % (roff(section), roff(key),
                                           roff(value) if value else '""'),
                    roff(" ".join(comment))]
            comment = []
        elif not line:
            comment = []
    with open(output, "w") as f:
        f.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
