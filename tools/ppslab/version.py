# SPDX-License-Identifier: MIT
"""The project's version, the one every C program's --version prints: meson
writes it beside this module in the build and install trees (_version.py,
from project() in meson.build, as it writes pps-version.h for the C
programs); run from the source tree, it is read from that meson.build. And
the -V/--version option every tool adds to its parser."""
import os
import re


def project_version():
    """"0.1.0", or "" where neither the build's module nor meson.build is found."""
    try:
        from ._version import VERSION
        return VERSION
    except ImportError:
        pass
    meson_build = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "meson.build")
    try:
        with open(meson_build) as f:
            m = re.search(r"^project\(.*?\bversion\s*:\s*'([^']*)'", f.read(), re.M | re.S)
        return m.group(1) if m else ""
    except OSError:
        return ""


def add_version_option(parser, program):
    """-V/--version on @parser: "<program> <version>" on stdout, exit 0."""
    parser.add_argument("-V", "--version", action="version", version=f"{program} {project_version()}",
                        help="print the version and exit")
