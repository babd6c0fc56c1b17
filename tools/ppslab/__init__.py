# SPDX-License-Identifier: MIT
"""ppslab: ppstream's network lab as one importable package.

The command-line tools beside this package (pps-netlab, pps-sweep, pps-peers,
pps-fanout, pps-gst-lab, pps-browser-lab, pps-protolat-bench,
pps-attack-table, pps-idr-amplification) parse their arguments and call it;
the test suites import it too. Modules, by concern:

    errors     the exceptions and exit statuses every tool shares
    process    bounded waits on child processes (pidfds), stopping them, signals
    files      JSON, JSON Lines and TSV files
    lab        the Lab context manager over pps-netlab, capacity-step traces,
               pps-linkem's files
    programs   where a build keeps its programs; the one place that builds a
               pps-server / pps-client command line, starts it (on loopback or
               in a lab) and reads its port
    records    ppstream wire records for raw peers (tests, attackers)
    metrics    percentile (nearest rank, as the client computes it), the
               per-run figures from the client's and server's logs
    report     numbers as the reports print them, Markdown tables, the sweep's report
    plots      the matplotlib figures
    paper      the papers' published figures
    wrappers   one wrapper per compared system (ppstream, gst-tcp, srt, the
               browser viewer, ppssink, ppssrc), one interface
    matrix, cells, sweep     pps-sweep: the matrix, one cell's analysis, the runner
    peers, fanout, gstlab, browserlab, protolat      the other runners
    attacks, attacktable, idr     hostile peers and the benchmarks that use them
    netlab     pps-netlab itself (namespaces, pps-linkem, cross traffic)
    version    the project's version (the C programs'), the tools' --version

A tool finds the package by Python's own rule: the directory of the script
run (a symbolic link to it resolved) is the first entry of the module path,
and the package sits beside the tools in the source tree, in the build tree
(build/tools/) and where pps-netlab is installed. Standard library only, but
for the plots (matplotlib), protolat (numpy) and the browser (selenium),
imported inside the functions that need them.
"""
