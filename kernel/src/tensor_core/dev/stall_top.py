"""Top stall sites of an Nsight Compute SASS source page (CSV from `ncu --import R --page source --csv
--print-source sass`): the instructions with the most warp-stall samples, with their per-reason counts."""
import csv, sys

rows = list(csv.reader(open(sys.argv[1], newline='')))
head = next(i for i, r in enumerate(rows) if 'Source' in r)
cols = rows[head]
data = [r for r in rows[head + 1:] if len(r) == len(cols)]
def num(x):
    try: return float(x.replace(',', ''))
    except ValueError: return 0.0
total_col = next(c for c in cols if c.startswith('Warp Stall Sampling (All'))
reason_cols = [c for c in cols if c.startswith('stall_') or c.endswith('(All Samples)') and c != total_col]
ti = cols.index(total_col); si = cols.index('Source'); ai = cols.index('Address') if 'Address' in cols else 0
total = sum(num(r[ti]) for r in data)

print('total samples', total)
for r in sorted(data, key=lambda r: -num(r[ti]))[:int(sys.argv[2]) if len(sys.argv) > 2 else 45]:
    reasons = sorted(((num(r[cols.index(c)]), c) for c in reason_cols if num(r[cols.index(c)]) > 0), reverse=True)[:3]
    print('%6.2f%% %s %-60s %s' % (100 * num(r[ti]) / total, r[ai], r[si][:60], ' '.join('%s=%d' % (c[:28], v) for v, c in reasons)))
