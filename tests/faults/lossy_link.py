#!/usr/bin/env python3
"""A user-space Ethernet link with latency and loss, for kernels without sch_netem.

Creates one TAP device in each of two network namespaces and carries every frame between them
through this process: each frame is held for the configured delay (in each direction) and dropped
at random with the configured probability, so the kernels at both ends see real late and missing
packets (TCP retransmits, RTT grows) rather than a proxy that only sleeps. A constant delay keeps
frames in order, as netem does with a delay and no jitter.

    lossy_link.py --a NS1:IF1 --b NS2:IF2 [--delay-ms 0] [--loss 0] [--seed N]

Prints "ready" on stdout once both devices exist (the caller then gives them addresses or puts
them on a bridge and brings them up). Commands on stdin, one a line, each answered with one line:
    set DELAY_MS LOSS   -> "ok delay_ms=.. loss=.."   (applies to frames read from then on)
    stats               -> a JSON object: frames read, forwarded and dropped per direction
Exits on end of stdin or SIGTERM; the TAP devices disappear with it.

Standard library only (ctypes for setns, since os.setns needs Python 3.12). Linux, root.
"""
import argparse
import ctypes
import fcntl
import heapq
import json
import os
import random
import select
import signal
import struct
import sys
import time

CLONE_NEWNET = 0x40000000
TUNSETIFF = 0x400454CA
IFF_TAP = 0x0002
IFF_NO_PI = 0x1000

_libc = ctypes.CDLL(None, use_errno=True)


def setns(fd):
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def open_tap(namespace, name):
    """A TAP device `name` created in `namespace` (a name under /run/netns): the device belongs to
    the network namespace that opens /dev/net/tun, so switch to it for the open and back."""
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    target = os.open(os.path.join("/run/netns", namespace), os.O_RDONLY)
    try:
        setns(target)
        fd = os.open("/dev/net/tun", os.O_RDWR)
        fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TAP | IFF_NO_PI))
    finally:
        setns(home)
        os.close(target)
        os.close(home)
    os.set_blocking(fd, False)
    return fd


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", required=True, help="NAMESPACE:IFNAME of one end")
    parser.add_argument("--b", required=True, help="NAMESPACE:IFNAME of the other end")
    parser.add_argument("--delay-ms", type=float, default=0.0)
    parser.add_argument("--loss", type=float, default=0.0, help="drop probability, 0..1")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()

    ends = []
    for spec in (args.a, args.b):
        namespace, _, name = spec.partition(":")
        ends.append(open_tap(namespace, name))
    fd_a, fd_b = ends
    peer = {fd_a: fd_b, fd_b: fd_a}
    label = {fd_a: "a_to_b", fd_b: "b_to_a"}
    stats = {
        d: {"read": 0, "forwarded": 0, "dropped": 0, "write_failed": 0} for d in label.values()
    }
    delay = args.delay_ms / 1000.0
    loss = args.loss
    rng = random.Random(args.seed)
    pending = []  # heap of (due, sequence, destination fd, frame)
    sequence = 0

    stop = False

    def on_term(signum, frame):
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    print("ready", flush=True)
    stdin = sys.stdin.fileno()
    os.set_blocking(stdin, False)
    command_buffer = b""
    watch = [fd_a, fd_b, stdin]
    while not stop:
        now = time.monotonic()
        while pending and pending[0][0] <= now:
            _, _, destination, frame = heapq.heappop(pending)
            direction = label[peer[destination]]
            try:
                os.write(destination, frame)
                stats[direction]["forwarded"] += 1
            except OSError:
                # A full device queue or a device going down: the frame is lost, as on a wire.
                stats[direction]["write_failed"] += 1
        timeout = max(0.0, pending[0][0] - now) if pending else 1.0
        try:
            readable, _, _ = select.select(watch, [], [], timeout)
        except InterruptedError:
            continue
        for fd in readable:
            if fd == stdin:
                try:
                    chunk = os.read(stdin, 4096)
                except BlockingIOError:
                    continue
                if not chunk:
                    stop = True
                    break
                command_buffer += chunk
                while b"\n" in command_buffer:
                    line, command_buffer = command_buffer.split(b"\n", 1)
                    words = line.decode().split()
                    if words[:1] == ["set"] and len(words) == 3:
                        delay = float(words[1]) / 1000.0
                        loss = float(words[2])
                        print(f"ok delay_ms={delay * 1000:g} loss={loss:g}", flush=True)
                    elif words == ["stats"]:
                        print(json.dumps(stats), flush=True)
                    elif words:
                        print(f"error: unknown command {line.decode()!r}", flush=True)
                continue
            # Drain what is queued on this device now; each frame is one read.
            for _ in range(256):
                try:
                    frame = os.read(fd, 65536)
                except (BlockingIOError, InterruptedError):
                    break
                except OSError:
                    break
                direction = label[fd]
                stats[direction]["read"] += 1
                if loss > 0 and rng.random() < loss:
                    stats[direction]["dropped"] += 1
                    continue
                sequence += 1
                heapq.heappush(pending, (time.monotonic() + delay, sequence, peer[fd], frame))
    print(json.dumps(stats), file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
