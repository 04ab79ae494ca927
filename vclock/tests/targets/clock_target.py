# A clock reader for vclock's tests: for each line on stdin, prints the wall clock and the
# monotonic clock as this process sees them (ns); "q" ends it. Python reads both through
# glibc's clock_gettime, that is through the vDSO.
import sys
import time

for line in sys.stdin:
    if line.strip() == "q":
        break
    print(time.time_ns(), time.monotonic_ns(), flush=True)
