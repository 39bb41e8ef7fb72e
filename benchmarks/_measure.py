"""Run one command and print ``wall_s exit_code peak_rss_kib`` on stdout (used by convert_speed.py).

Usage: python -I -S benchmarks/_measure.py LOG -- ARGV...

Why a separate small process: Linux charges a child's ``ru_maxrss`` with the RSS of the process
that forked it (and, for vfork/posix_spawn, with that process's *peak*): the pre-exec image counts.
Spawning the measured command from the benchmark harness (numpy, rich, page-cache reads) would put
a floor of tens of MiB under every figure. This launcher imports nothing but ``os``, ``sys`` and
``time`` (run it with ``-I -S``), forks and execs the command, and reads ``ru_maxrss`` for that
child alone from ``os.wait4``. The harness measures the remaining floor by running ``true``.

Wall time is ``time.perf_counter`` from just before ``fork`` to ``wait4`` returning, so the measured
command's interpreter start-up is included and this launcher's own start-up is not. The child's
stdout and stderr go to LOG.
"""

import os
import sys
import time


def main() -> int:
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        sys.stderr.write(__doc__)
        return 2
    log, argv = sys.argv[1], sys.argv[3:]
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # child: stdout/stderr to the log, stdin closed
        try:
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.execvp(argv[0], argv)
        except BaseException as exc:  # exec failed: report like a shell would
            os.write(2, f"cannot run {argv[0]}: {exc}\n".encode())
        os._exit(127)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    os.close(fd)
    sys.stdout.write(f"{wall:.6f} {os.waitstatus_to_exitcode(status)} {usage.ru_maxrss}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
