#!/usr/bin/env python3
"""bench/cpu_report.py CPU_TSV: the table of bench/run --cpu.

Reads the rows cpu_suite wrote (mode, round, jobs, user and system
microseconds of the backend per job) and prints one markdown row per mode:
the medians over its rounds, every round's user time, and the ratio of
user + system time to the floor's (floor_cycle) in the same invocation.
"""
import csv
import statistics
import sys


def main(path):
    rows = list(csv.DictReader(open(path), delimiter="\t"))
    modes = list(dict.fromkeys(r["mode"] for r in rows))
    stats = {}
    for m in modes:
        rs = [r for r in rows if r["mode"] == m]
        user = [float(r["user_us_per_job"]) for r in rs]
        system = [float(r["sys_us_per_job"]) for r in rs]
        stats[m] = (rs, user, system,
                    statistics.median(user) + statistics.median(system))
    print("| mode | rounds | jobs per round, median | user us/job, median (each round) "
          "| system us/job, median | user + system | / floor_cycle |")
    print("|---|---:|---:|---|---:|---:|---:|")
    for m in modes:
        rs, user, system, total = stats[m]
        ratio = ("%.2f" % (total / stats["floor_cycle"][3])
                 if "floor_cycle" in stats else "-")
        print("| %s | %d | %d | %.1f (%s) | %.1f | %.1f | %s |" % (
            m, len(rs), statistics.median(int(r["jobs"]) for r in rs),
            statistics.median(user), " ".join("%.0f" % x for x in user),
            statistics.median(system), total, ratio))


if __name__ == "__main__":
    main(sys.argv[1])
