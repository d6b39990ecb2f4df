#!/usr/bin/env python3
"""trace/host.py: the host side of trace/trace, the part that is data: the scenarios and the reports.

    host.py prepare OUT BUILD --batch FILE    one scenario per line of FILE (split with shlex)
    host.py prepare OUT BUILD -- ARGS...      one scenario from ARGS (SAMPLE [OPTIONS] [-- FLAGS])
        writes OUT/N/ (N from 1): responder.cmd and requester.cmd (each argument followed by a NUL),
        the flag files the VMs look for (spoil, kill, cm, netem, lose) and names (for the report); prints
        how many scenarios there are
    host.py report OUT [--opcodes] [-v] [--batch] [--json PATH]
        after the VMs ran: OUT/N/report.txt for each scenario (the ladder, or only its opcodes), printed
        unless --batch; with --json, the ladder as data too: into PATH, or with --batch PATH/N.json

trace/trace wires the processes (the two VMs, tcpdump, the programs); the pairs come from
tests/pairs.bash. Exit status: 2 on a bad scenario (a bad command line), 1 when something is missing.
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys

from ladder import CM_MESSAGES

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SERVER = "10.77.0.1"  # host A: the responder, receiver or server
CLIENT = "10.77.0.2"  # host B: the requester
# What --lose-cm takes: the messages of an RC connection and its teardown, by short name, with their MAD
# attribute IDs from ladder.py's table (trace/trace's lose_cm filters on the ID).
CM_LOSABLE = {name.split()[1]: attr for attr, name in CM_MESSAGES.items()
              if name.split()[1] in ("REQ", "REP", "RTU", "DREQ", "DREP")}


def die(message):
    print(f"trace: {message}", file=sys.stderr)
    sys.exit(1)


def usage_error(message):
    print(f"trace: {message}", file=sys.stderr)
    sys.exit(2)


def pair(sample):
    """SAMPLE's pair from the one table, tests/pairs.bash; None for an unknown sample."""
    run = subprocess.run(["bash", os.path.join(ROOT, "tests", "pairs.bash"), sample], capture_output=True, text=True)
    return json.loads(run.stdout) if run.returncode == 0 else None


def provider(out):
    """The provider both VMs run (OUT/provider, written by trace/trace): rxe or siw."""
    return read(os.path.join(out, "provider"), "rxe").strip() or "rxe"


def scenario(d, build, args):
    """Parse one scenario's command line (ARGS) and write what the VMs run into folder D."""
    sample, cm, spoil, kill, timeout, netem, lose, extra_resp, flags = None, False, False, False, "10", "", "", [], []
    lose_nth = ""
    restart, restart_when = "", ""
    i = 0
    while i < len(args):
        arg = args[i]
        value = args[i + 1] if i + 1 < len(args) else None
        if arg == "--cm":
            cm = True
        elif arg == "--responder":
            if value is None:
                usage_error("--responder needs FLAGS")
            extra_resp = value.split()
            i += 1
        elif arg == "--spoil-rkey":
            spoil = True
        elif arg == "--kill-responder":
            kill = True
        elif arg == "--restart-responder":
            if not value or "\n" in value:
                usage_error("--restart-responder needs TEXT, a part of one line the responder prints")
            restart = value
            i += 1
        elif arg == "--restart-when":
            if not value or "\n" in value:
                usage_error("--restart-when needs TEXT, a part of one line the requester prints")
            restart_when = value
            i += 1
        elif arg == "--netem":
            if not re.fullmatch(r"[a-z0-9.% ]+", value or ""):
                usage_error('--netem takes a netem spec such as "loss 5%"')
            netem = value
            i += 1
        elif arg == "--lose-cm":
            if value not in CM_LOSABLE:
                usage_error("--lose-cm takes " + ", ".join(CM_LOSABLE))
            lose = value
            i += 1
        elif arg == "--lose-nth":
            if not re.fullmatch(r"[1-9][0-9]{0,3}", value or ""):
                usage_error("--lose-nth takes N, 1 to 9999: the Nth full-size data packet the requester sends is lost")
            lose_nth = value
            i += 1
        elif arg == "--timeout":
            if not re.fullmatch(r"[1-9][0-9]{0,2}", value or ""):
                usage_error("--timeout takes 1 to 999 seconds")
            timeout = value
            i += 1
        elif arg == "--":
            flags = args[i + 1:]
            break
        elif arg.startswith("-"):
            usage_error(f"unknown option '{arg}' (see ./lab trace --help)")
        else:
            if sample is not None:
                usage_error(f"one sample at a time (got '{sample}' and '{arg}')")
            sample = arg
        i += 1
    if not sample:
        usage_error("which sample? (see ./lab trace --help)")
    p = pair(sample)
    if p is None:
        usage_error(f"unknown sample '{sample}' (see ./lab trace --help)")
    if p.get("cm_only") and (kill or spoil):
        usage_error(f"{sample} connects with RDMA CM only: --kill-responder and --spoil-rkey need descriptor files")
    if lose and sample == "ud":
        usage_error("--lose-cm: ud's RDMA CM makes no connection (a SIDR lookup, no REQ ... DREP)")
    iwarp = provider(os.path.dirname(d)) == "siw"
    if iwarp and p.get("files_only"):
        usage_error(f"{sample} connects with descriptor files only, and iWARP connects only through RDMA CM")
    if iwarp and lose:
        usage_error("--lose-cm drops RoCE's CM messages (MADs in UDP); iWARP's are TCP and MPA frames")
    if lose_nth and (lose or netem):
        usage_error("--lose-nth loses one packet on purpose: leave out --lose-cm and --netem")
    if iwarp and (kill or spoil):
        usage_error("--kill-responder and --spoil-rkey work with descriptor files; iWARP connects only through RDMA CM")
    # (file_transfer: RDMA CM only, with or without --cm; iWARP: RDMA CM only)
    cm = cm or bool(p.get("cm_only")) or bool(lose) or iwarp
    if cm and p.get("files_only"):
        usage_error(f"{sample} connects with descriptor files only: leave out --cm and --lose-cm")
    if cm and kill:
        usage_error("--kill-responder works with descriptor files, not --cm")
    if cm and spoil:
        usage_error("--spoil-rkey works with descriptor files, not --cm")
    if restart_when and not restart:
        usage_error("--restart-when goes with --restart-responder")
    if restart and not cm:
        usage_error("--restart-responder works with RDMA CM (--cm): a restarted responder writes new descriptor files nobody reads")
    if not p["exports"] and spoil:
        usage_error(f"--spoil-rkey: {sample} exports no memory (no rkey)")
    resp, req = os.path.join(build, p["resp"]), os.path.join(build, p["req"])
    if not os.access(req, os.X_OK):
        die(f"{req} is missing: ./lab build first")

    resp_args, req_args = p["resp_args"], p["req_args"]
    if sample == "bench":  # (bench's sides take the same knobs)
        resp_args, req_args = resp_args + flags, flags
    elif flags:
        req_args = flags
    resp_args = resp_args + extra_resp
    share = os.path.join(d, "share")
    os.makedirs(share, exist_ok=True)
    if p.get("group"):  # a multicast group (multicast): each side names it; no server address, no -cm
        rcmd = [resp, "-t", timeout] + resp_args
        qcmd = [req, "-t", timeout] + req_args
    elif cm:
        rcmd = [resp, "-cm", "-t", timeout] + resp_args
        qcmd = [req, "-cm", "-sa", SERVER, "-t", timeout] + req_args
        if p["cm_clients"] > 1:
            # An RDMA CM client makes one connection: as many clients as the server takes, one after another.
            if not flags:
                qcmd = [req, "-cm", "-sa", SERVER, "-t", timeout] + p["cm_req_args"]
            qcmd = ["bash", "-c", 'for ((i = 0; i < $0; i++)); do "$@" || exit; done', str(p["cm_clients"])] + qcmd
    else:
        ma = mb = []
        if p["exports"]:
            ma = mb = ["-m", f"{share}/resource.desc"]
            if spoil or kill:
                ma = ["-m", f"{share}/real.mmap"]
        ld = f"{share}/responder.real.desc" if kill else f"{share}/responder.desc"
        rcmd = [resp, "-ld", ld, "-re", f"{share}/requester.desc"] + ma + ["-t", timeout] + resp_args
        qcmd = [req, "-ld", f"{share}/requester.desc", "-re", f"{share}/responder.desc"] + mb + ["-t", timeout] + req_args
    for name, cmd in (("responder.cmd", rcmd), ("requester.cmd", qcmd)):
        with open(os.path.join(d, name), "w") as f:
            f.write("".join(arg + "\0" for arg in cmd))
    for name, wanted in (("spoil", spoil), ("kill", kill), ("cm", cm)):
        if wanted:
            open(os.path.join(d, name), "w").close()
    # What the responder prints once the requester may start: an RDMA CM server listens, a multicast
    # receiver has attached its QP (a datagram sent before is not its own).
    ready = "attached to" if p.get("group") else "listening on port" if cm else ""
    for name, value in (("ready", ready), ("netem", netem), ("lose", lose and f"{lose} 0x{CM_LOSABLE[lose]:04x}"),
                        ("lose-nth", lose_nth), ("restart", restart and f"{restart}\n{restart_when}")):
        if value:
            with open(os.path.join(d, name), "w") as f:
                f.write(value + "\n")
    title = sample + (" (RDMA CM)" if cm else "") + (f", link: netem {netem}" if netem else "") + \
        (f", link: every other CM {lose} lost" if lose else "") + \
        (f", link: the requester's data packet {lose_nth} lost" if lose_nth else "") + \
        (f", responder killed and started again after \"{restart}\"" if restart else "")
    with open(os.path.join(d, "names"), "w") as f:
        f.write(f"{os.path.basename(resp)}\n{os.path.basename(req)}\n{title}\n")


def prepare(out, build, batch, args):
    if batch is None:
        os.makedirs(os.path.join(out, "1"), exist_ok=True)
        scenario(os.path.join(out, "1"), build, args)
        return 1
    try:
        with open(batch) as f:
            lines = f.read().splitlines()
    except OSError:
        die(f"cannot read {batch}")
    n = 0
    for line in lines:
        if re.match(r"\s*(#|$)", line):
            continue
        n += 1
        d = os.path.join(out, str(n))
        os.makedirs(d, exist_ok=True)
        try:
            words = shlex.split(line, comments=True)
        except ValueError as e:
            usage_error(f"{batch}: {line}: {e}")
        scenario(d, build, words)
    if n == 0:
        usage_error(f"{batch} names no scenario")
    return n


def scenarios(out):
    """The scenario folders OUT/N, in the order of N."""
    names = [n for n in os.listdir(out) if n[0].isdigit() and os.path.isdir(os.path.join(out, n))]
    return [os.path.join(out, n) for n in sorted(names, key=lambda n: [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", n)])]


def read(path, default=""):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return default


def counters(path):
    """A counters file ("device/name value" a line, sorted) as a dict, in the file's order."""
    values = {}
    for line in read(path).splitlines():
        name, _, value = line.partition(" ")
        values[name] = value
    return values


def ladder(d, opcodes, names=None, json_path=None):
    """Scenario D's ladder as text (only its opcodes with OPCODES); with JSON_PATH, also as data there."""
    which = provider(os.path.dirname(d))
    cmd = [sys.executable, os.path.join(HERE, "ladder.py")] + (["--opcodes"] if opcodes else []) + \
          (["--iwarp"] if which == "siw" else []) + \
          [os.path.join(d, "trace.pcap"), "--requester", CLIENT, "--responder", SERVER]
    if names:
        cmd += ["--requester-name", names[1], "--responder-name", names[0]]
    if json_path:
        title = read(os.path.join(d, "names")).splitlines()[2:3] or [""]
        cmd += ["--json", json_path, "--provider", which, "--title", title[0], "--sample", title[0].split(" ")[0].rstrip(",")]
        # the programs' steps with their times, and host B's capture to place the requester's (trace/trace)
        for flag, name in (("--responder-steps", "responder.steps"), ("--requester-steps", "requester.steps"),
                           ("--requester-pcap", "trace-b.pcap")):
            if os.path.exists(os.path.join(d, name)):
                cmd += [flag, os.path.join(d, name)]
    return subprocess.run(cmd, stdout=subprocess.PIPE, text=True).stdout


def report(d, verbose, json_path=None):
    """What one scenario printed, as the learner reads it (and with JSON_PATH, its ladder as data there)."""
    names = read(os.path.join(d, "names")).splitlines()
    text = []
    for who in ("responder", "requester"):
        rc = read(os.path.join(d, f"{who}.rc"), "?").strip()
        output = read(os.path.join(d, f"{who}.out"))
        lines = output.splitlines()
        last = lines[-1] if lines else ""
        if verbose:
            text.append(f"---- {who} ----\n{output}")
        if rc == "0":
            text.append(f"{who}: {last}\n")
        elif rc == "137":
            text.append(f"{who}: killed (SIGKILL), as asked\n")
        else:
            failed = next((line for line in lines if "failed" in line), last)
            text.append(f"{who}: exit status {rc}: {failed}\n")
    text.append("\n")
    text.append(ladder(d, False, names, json_path))
    if provider(os.path.dirname(d)) == "siw":
        text.append("\nsiw counters: none (siw has no hw_counters; TCP's are in nstat inside the VMs)\n")
    else:
        text.append("\nrxe counters that changed:\n")
    for host in ("a", "b"):
        before = counters(os.path.join(d, f"counters-{host}.before"))
        after = counters(os.path.join(d, f"counters-{host}.after"))
        for name, old in before.items():
            # (lifespan is a setting of the counters, in ms, not a count)
            if name not in after or name.endswith("/lifespan") or after[name] == old:
                continue
            try:
                change = int(after[name]) - int(old)
            except ValueError:
                continue
            text.append(f"  host {host.upper()} {name:<28} +{change}\n")
    lose = read(os.path.join(d, "lose")).partition(" ")[0]
    if lose:
        lost = [read(os.path.join(d, f"lost-{host}"), "?").strip() for host in ("a", "b")]
        text.append(f"\nCM {lose} dropped on the way out (--lose-cm): host A {lost[0]}, host B {lost[1]}\n")
    if os.path.exists(os.path.join(d, "lose-nth")):
        n, lost = read(os.path.join(d, "lose-nth")).strip(), read(os.path.join(d, "lost-nth"), "?").strip()
        text.append(f"\nfull-size data packets the requester sent that were lost on purpose (--lose-nth {n}): {lost}\n")
    text.append(f"\ncapture: {d}/trace.pcap (open it in Wireshark, or: tshark -r {d}/trace.pcap -V)\n")
    return "".join(text)


def json_path_of(d, json_path, batch):
    """Where scenario D's ladder goes as data: JSON_PATH itself, or in a batch JSON_PATH/N.json; None if not asked."""
    if not json_path or not batch:
        return json_path
    os.makedirs(json_path, exist_ok=True)
    return os.path.join(json_path, os.path.basename(d) + ".json")


def report_all(out, opcodes, verbose, batch, json_path=None):
    folders = scenarios(out)
    for d in folders:
        pcap = os.path.join(d, "trace.pcap")
        if not os.path.exists(pcap) or os.path.getsize(pcap) == 0:
            die(f"no capture in {d} (see {out}/host-a.log)")
        where = json_path_of(d, json_path, batch)
        if where and os.path.exists(where):
            os.remove(where)  # (an earlier run's document must not pass for this one's)
        text = ladder(d, True, json_path=where) if opcodes else report(d, verbose, where)
        if where and not os.path.exists(where):
            die(f"could not write {where} (ladder.py says why, above)")
        with open(os.path.join(d, "report.txt"), "w") as f:
            f.write(text)
        if not batch:
            sys.stdout.write(text)
    if batch:
        print(f"trace: {len(folders)} report(s) in {out}/*/report.txt", file=sys.stderr)


def main():
    if sys.argv[1:2] == ["prepare"]:
        # (by hand: a scenario's own "--" must reach it untouched)
        rest = sys.argv[2:]
        if len(rest) == 4 and rest[2] == "--batch":
            print(prepare(rest[0], rest[1], rest[3], None))
        elif len(rest) >= 3 and rest[2] == "--":
            print(prepare(rest[0], rest[1], None, rest[3:]))
        else:
            usage_error("usage: host.py prepare OUT BUILD (--batch FILE | -- ARGS...)")
        return 0
    ap = argparse.ArgumentParser(prog="host.py report")
    ap.add_argument("command", choices=["report"])
    ap.add_argument("out")
    ap.add_argument("--opcodes", action="store_true")
    ap.add_argument("-v", dest="verbose", action="store_true")
    ap.add_argument("--batch", action="store_true")
    ap.add_argument("--json", metavar="PATH")
    a = ap.parse_args()
    report_all(a.out, a.opcodes, a.verbose, a.batch, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
