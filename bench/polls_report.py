#!/usr/bin/env python3
"""bench/polls_report.py POLLS_TSV: the table of bench/run --polls.

Reads the rows polls_suite wrote (system, round, polls per second, the
consumer backends' user + system microseconds per poll, their CPU as a
percentage of one CPU) and prints one markdown row per system: the medians
over its rounds and every round's figure, then the median and range of the
rounds' job_state / floor ratios of CPU per poll.
"""
import csv
import statistics
import sys


def main(path):
    rows = list(csv.DictReader(open(path), delimiter="\t"))
    systems = list(dict.fromkeys(r["system"] for r in rows))
    per = {}
    print("| system | rounds | polls/s, median | consumers' CPU, % of one CPU, median "
          "| CPU us per poll, median (each round) |")
    print("|---|---:|---:|---:|---|")
    for s in systems:
        rs = [r for r in rows if r["system"] == s]
        us = [float(r["cpu_us_per_poll"]) for r in rs]
        per[s] = {int(r["round"]): float(r["cpu_us_per_poll"]) for r in rs}
        print("| %s | %d | %.0f | %.1f | %.1f (%s) |" % (
            s, len(rs), statistics.median(float(r["polls_per_s"]) for r in rs),
            statistics.median(float(r["consumers_cpu_pct"]) for r in rs),
            statistics.median(us), " ".join("%.1f" % x for x in us)))
    if "floor" in per and "job_state" in per:
        ratios = [per["job_state"][k] / per["floor"][k]
                  for k in sorted(per["floor"]) if k in per["job_state"] and per["floor"][k] > 0]
        if ratios:
            print()
            print("job_state / floor, CPU per poll, median of %d rounds (lowest to highest): "
                  "%.2f (%.2f to %.2f)" % (len(ratios), statistics.median(ratios),
                                            min(ratios), max(ratios)))


if __name__ == "__main__":
    main(sys.argv[1])
