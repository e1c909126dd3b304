# CPU time of a PostgreSQL server started on DATA, for the benchmarks that share its cores with what
# they measure (bench/job, bench/restores, bench/source). Sourced from the repository's root.
pg_cpu_s() {  # CPU seconds of the bench PostgreSQL: the postmaster, its live backends, and those reaped
  python3 - "$(head -1 "$DATA/postmaster.pid")" <<'PY'
import os, sys
pm, total = sys.argv[1], 0
for pid in filter(str.isdigit, os.listdir('/proc')):
    try:
        stat = open(f'/proc/{pid}/stat').read()
    except OSError:
        continue
    f = stat[stat.rindex(')') + 2:].split()
    if pid == pm:
        total += sum(int(x) for x in f[11:15])
    elif f[1] == pm:
        total += int(f[11]) + int(f[12])
print(total / os.sysconf('SC_CLK_TCK'))
PY
}
