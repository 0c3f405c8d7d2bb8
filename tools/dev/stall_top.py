#!/usr/bin/env python3
"""Top stall sites of an Nsight Compute SASS source page: the instructions with the most warp-stall samples,
each with its share of all samples and its three largest stall reasons. Input: the CSV of
    ncu --import REPORT.ncu-rep --page source --csv --print-source sass > sass.csv
(the report profiled with --section SourceCounters; tools/dev/profile.sh does both).
usage: stall_top.py SASS_CSV [TOP]   (TOP instructions, default 45)
"""
import argparse
import csv


def num(x):
    try:
        return float(x.replace(',', ''))
    except ValueError:
        return 0.0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("csv_path", metavar="SASS_CSV")
    parser.add_argument("top", metavar="TOP", type=int, nargs="?", default=45)
    args = parser.parse_args()
    with open(args.csv_path, newline='') as f:
        rows = list(csv.reader(f))
    head = next(i for i, r in enumerate(rows) if 'Source' in r)
    cols = rows[head]
    data = [r for r in rows[head + 1:] if len(r) == len(cols)]
    total_col = next(c for c in cols if c.startswith('Warp Stall Sampling (All'))
    reason_cols = [c for c in cols if c.startswith('stall_') or c.endswith('(All Samples)') and c != total_col]
    ti = cols.index(total_col)
    si = cols.index('Source')
    ai = cols.index('Address') if 'Address' in cols else 0
    total = sum(num(r[ti]) for r in data)
    print('total samples', total)
    for r in sorted(data, key=lambda r: -num(r[ti]))[:args.top]:
        reasons = sorted(((num(r[cols.index(c)]), c) for c in reason_cols if num(r[cols.index(c)]) > 0), reverse=True)[:3]
        print('%6.2f%% %s %-60s %s' % (100 * num(r[ti]) / total, r[ai], r[si][:60],
                                       ' '.join('%s=%d' % (c[:28], v) for v, c in reasons)))


if __name__ == "__main__":
    main()
