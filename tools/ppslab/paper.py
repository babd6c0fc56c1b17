# SPDX-License-Identifier: MIT
"""The papers' published figures that the reports set beside ours."""

# TOMCCAP 2008, 10 Mbit/s, 50 ms RTT, drop-tail (section 7.2).
PAPER_TABLE_II = {  # throughput of the video flow, window 2 frames (the paper's units)
    20: {"tcp": (0.76, 0.11), "minbuf(1,0)": (0.60, 0.05), "minbuf(1,3)": (0.72, 0.04)},
    40: {"tcp": (0.56, 0.04), "minbuf(1,0)": (0.47, 0.04), "minbuf(1,3)": (0.54, 0.03)},
}
PAPER_TABLE_III = {  # % of windows dropped by the sender, 20 flows
    4: {"tcp": (45, 3), "minbuf(1,0)": (28, 2), "minbuf(1,3)": (27, 2)},
    2: {"tcp": (58, 5), "minbuf(1,0)": (37, 2), "minbuf(1,3)": (34, 3)},
}
PAPER_FIGURES = [
    # (window, flows, tolerance, {transport: percent}, the paper's words)
    (4, 20, 500, {"tcp": 40, "minbuf(1,0)": 80, "minbuf(1,3)": 80},
     "Fig. 8: 80% of windows arrive in less than 500 ms for MIN_BUF flows, only 40% for TCP (20 flows, window 4)"),
    (2, 20, 400, {"minbuf(1,0)": 80, "minbuf(1,3)": 80},
     "Fig. 9: with MIN_BUF, 80% arrive within 300-400 ms (20 flows, window 2)"),
]

# IWQoS 2002 Tables 1-3 (forward path, no ECN): [rate_mbit][rtt_ms][config]
PAPER_D200 = {
    30: {100: dict(tcp=0.73, m10=0.99, m13=0.98, m20=0.91), 50: dict(tcp=0.72, m10=0.99, m13=0.99, m20=0.97),
         25: dict(tcp=0.84, m10=1.00, m13=0.99, m20=0.99)},
    12: {100: dict(tcp=0.53, m10=0.98, m13=0.95, m20=0.86), 50: dict(tcp=0.62, m10=0.99, m13=0.99, m20=0.97),
         25: dict(tcp=0.60, m10=0.99, m13=0.98, m20=0.98)},
}
PAPER_D500 = {
    30: {100: dict(tcp=0.91, m10=1.00, m13=1.00, m20=0.99), 50: dict(tcp=0.92, m10=1.00, m13=0.99, m20=0.99),
         25: dict(tcp=0.94, m10=1.00, m13=1.00, m20=1.00)},
    12: {100: dict(tcp=0.80, m10=1.00, m13=0.99, m20=0.99), 50: dict(tcp=0.88, m10=1.00, m13=1.00, m20=0.99),
         25: dict(tcp=0.86, m10=1.00, m13=1.00, m20=0.99)},
}
PAPER_MEAN_MS = {
    30: {100: dict(tcp=226.31, m10=62.91, m13=76.19, m20=152.14), 50: dict(tcp=218.84, m10=37.09, m13=51.54, m20=89.74),
         25: dict(tcp=138.61, m10=19.71, m13=28.29, m20=48.21)},
    12: {100: dict(tcp=369.22, m10=69.73, m13=91.42, m20=162.26), 50: dict(tcp=260.27, m10=38.50, m13=49.17, m20=87.90),
         25: dict(tcp=296.25, m10=25.94, m13=39.08, m20=61.31)},
}
PAPER_NT = {
    30: {100: dict(tcp=1.00, m10=0.66, m13=0.96, m20=1.02), 50: dict(tcp=1.00, m10=0.71, m13=0.87, m20=1.13),
         25: dict(tcp=1.00, m10=0.76, m13=0.92, m20=0.91)},
    12: {100: dict(tcp=1.00, m10=0.67, m13=0.92, m20=1.13), 50: dict(tcp=1.00, m10=0.76, m13=1.06, m20=1.08),
         25: dict(tcp=1.00, m10=0.89, m13=1.08, m20=1.12)},
}
