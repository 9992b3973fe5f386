#!/usr/bin/env python3
"""The scheduler's web port under slow clients (slowloris): N connections each send a request
line and then one header line every --interval seconds, never finishing; a connection the server
cuts is opened again at once, so the attack holds for --duration. Meanwhile a prober asks GET
/healthz every 100 ms from another address and records how long each answer took.

The attackers connect from --sources loopback addresses (127.0.1.1, 127.0.1.2, ...) so that the
per-address cap (--http-max-connections-per-ip, 32 by default) admits them all: the point is the
server holding 200 slow connections at once, not the cap refusing them. Stops by itself.

  bench/http/slow_clients.py --port HTTP_PORT [--clients 200] [--duration 30] [--interval 2]
  bench/http/run.sh [BUILD_DIR]    brings up a private scheduler, runs this, tears it down
"""
import argparse
import socket
import statistics
import threading
import time


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def probe(port, stop, latencies, failures):
    while not stop.is_set():
        start = time.monotonic()
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")
                head = s.recv(64)
            if head.startswith(b"HTTP/1.1 200"):
                latencies.append(time.monotonic() - start)
            else:
                failures.append(head[:32])
        except OSError as error:
            failures.append(str(error))
        time.sleep(0.1)


class SlowClient:
    def __init__(self, port, source):
        self.port, self.source = port, source
        self.sock, self.opened, self.next_line = None, 0.0, 0.0

    def open(self):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind((self.source, 0))
        s.settimeout(2)
        s.connect(("127.0.0.1", self.port))
        s.sendall(b"GET /api/v1/sweeps HTTP/1.1\r\nHost: bench\r\n")
        s.setblocking(False)
        self.sock, self.opened = s, time.monotonic()
        self.next_line = self.opened

    def closed_by_server(self):
        try:
            return self.sock.recv(4096) == b""
        except BlockingIOError:
            return False
        except OSError:
            return True


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, required=True, help="the scheduler's HTTP port")
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--sources", type=int, default=10, help="loopback source addresses")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of attack")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between header lines")
    args = parser.parse_args()

    clients = [SlowClient(args.port, f"127.0.1.{1 + i % args.sources}") for i in range(args.clients)]
    for client in clients:
        client.open()
    stop, latencies, failures = threading.Event(), [], []
    prober = threading.Thread(target=probe, args=(args.port, stop, latencies, failures))
    prober.start()
    cuts, lifetimes, refused = 0, [], 0
    end = time.monotonic() + args.duration
    while time.monotonic() < end:
        now = time.monotonic()
        for client in clients:
            cut = client.closed_by_server()
            if not cut and now >= client.next_line:
                try:
                    client.sock.send(b"X-Slow: 1\r\n")
                    client.next_line = now + args.interval
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError:
                    cut = True
            if cut:
                cuts += 1
                lifetimes.append(now - client.opened)
                client.sock.close()
                try:
                    client.open()
                except OSError:
                    refused += 1
                    client.opened = now
                    client.sock = socket.socket()  # closed: counted as cut again next turn
        time.sleep(0.05)
    stop.set()
    prober.join()
    for client in clients:
        client.sock.close()

    print(f"slow clients        {args.clients} from {args.sources} addresses, a header line "
          f"every {args.interval:g} s, {args.duration:g} s")
    print(f"healthz answered    {len(latencies)}, failed {len(failures)} {failures[:3]}")
    if latencies:
        ms = [1000 * x for x in latencies]
        print(f"healthz latency ms  p50 {statistics.median(ms):.2f}  p99 {percentile(ms, 0.99):.2f}"
              f"  max {max(ms):.2f}")
    print(f"connections cut     {cuts} (reopened; {refused} reconnects refused)")
    if lifetimes:
        print(f"slow conn lifetime  median {statistics.median(lifetimes):.2f} s, max "
              f"{max(lifetimes):.2f} s")
    return 0 if latencies and not failures else 1


if __name__ == "__main__":
    raise SystemExit(main())
