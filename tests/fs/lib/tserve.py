"""tserve.py - run a test's python script many times in one process, so
that a test pays for `import torch` (2 to 4 s of CPU) once, not once per
call (lib/begin.sh's fs_pyrun starts it; PT_NO_TSERVE=1 turns it off).

  python3 tserve.py < REQUESTS > ANSWERS

Each request is one line, fields separated by tabs:

  OUT  ERR  DIR  SCRIPT.py  ARG...

and runs SCRIPT.py as `cd DIR && python3 SCRIPT.py ARG...` would (runpy,
as __main__, its folder first on sys.path; DIR "-": where the server
runs), with file descriptors 1 and 2 on the files OUT and ERR, for 300 s
at most ($PT_TSERVE_LIMIT).  An argument holding a tab or a newline cannot
be sent: begin.sh runs such a call as a process of its own.  The answer is one line:
its exit status (124 when the time ran out).  The first line is "ready".

What a fresh process would not carry over stays the same: modules stay
imported (that is the point) and so does torch's global state, which the
test scripts do not change.  A script that starts processes of its own
with the spawn method (DCP's ranks) must run as a process of its own.
"""
import os
import runpy
import signal
import sys
import traceback

LIMIT = int(os.environ.get("PT_TSERVE_LIMIT", "300"))


class TimeLimit(Exception):
    pass


def on_alarm(signum, frame):
    raise TimeLimit()


def run(out, err, where, script, args):
    fo = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    fe = os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fo, 1)
    os.dup2(fe, 2)
    os.close(fo)
    os.close(fe)
    sys.argv = [script] + args
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    cwd = os.getcwd()
    rc = 0
    signal.alarm(LIMIT)
    try:
        if where != "-":
            os.chdir(where)
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        if e.code is None:
            rc = 0
        elif isinstance(e.code, int):
            rc = e.code
        else:
            print(e.code, file=sys.stderr)
            rc = 1
    except TimeLimit:
        print("tserve.py: %s: over %d s" % (script, LIMIT), file=sys.stderr)
        rc = 124
    except BaseException:  # noqa: BLE001 - reported as a crash would be
        traceback.print_exc()
        rc = 1
    finally:
        signal.alarm(0)
        sys.stdout.flush()
        sys.stderr.flush()
        os.chdir(cwd)
    return rc


def main():
    signal.signal(signal.SIGALRM, on_alarm)
    answers = os.fdopen(os.dup(1), "w")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    sys.path.insert(0, "")
    print("ready", file=answers, flush=True)
    for line in sys.stdin:
        f = line.rstrip("\n").split("\t")
        if len(f) < 4:
            print(2, file=answers, flush=True)
            continue
        rc = run(f[0], f[1], f[2], f[3], f[4:])
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        print(rc, file=answers, flush=True)


# a process spawned by a served script imports this file as __mp_main__:
# it must not serve (such a script runs as a process of its own)
if __name__ == "__main__":
    main()
