"""Several scheduler replicas from the Python client (issue #25): the address forms
(targets.py), and a client given two addresses that carries on when one replica is killed —
two real server processes (a stand-in SweepService that names its port in each answer), one
killed with SIGKILL mid-way.

    PYTHONPATH=build/clients/python python3 -m unittest clients/python/tests/test_targets.py
"""

import os
import random
import signal
import socket
import subprocess
import sys
import textwrap
import time
import unittest

import parity_client
from parity_client.errors import ParityError
from parity_client.targets import scheduler_target

# A SweepService whose ListSweeps answers one sweep whose owner is this process's port.
_SERVER = textwrap.dedent("""
    import sys
    from concurrent import futures
    import grpc
    from parity.v1 import run_pb2, sweep_service_pb2 as api, sweep_service_pb2_grpc
    port = sys.argv[1]
    class Service(sweep_service_pb2_grpc.SweepServiceServicer):
        def ListSweeps(self, request, context):
            return api.ListSweepsResponse(sweeps=[run_pb2.Sweep(sweep_id="s-" + port, owner=port,
                                                                )])
    server = grpc.server(futures.ThreadPoolExecutor(4))
    sweep_service_pb2_grpc.add_SweepServiceServicer_to_server(Service(), server)
    server.add_insecure_port("127.0.0.1:" + port)
    server.start()
    print("ready", flush=True)
    server.wait_for_termination()
""")


def _free_port():
    for _ in range(50):
        port = random.randint(24000, 24999)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    raise RuntimeError("no free port in 24000-24999")


class TargetTest(unittest.TestCase):
    def test_single_addresses_and_grpc_syntax_pass_through(self):
        for address in ("localhost:50051", "dns:///scheduler.parity:50051",
                        "ipv4:127.0.0.1:1,127.0.0.1:2", "ipv6:[::1]:1", "unix:/run/s.sock"):
            self.assertEqual(scheduler_target(address), (address, ""))

    def test_lists_become_one_target(self):
        self.assertEqual(scheduler_target("127.0.0.1:5001, 127.0.0.2:5002"),
                         ("ipv4:127.0.0.1:5001,127.0.0.2:5002", ""))
        self.assertEqual(scheduler_target("[::1]:5001,[::1]:5002"),
                         ("ipv6:[::1]:5001,[::1]:5002", ""))
        target, name = scheduler_target("localhost:5001,127.0.0.1:5002")
        self.assertTrue(target.startswith("ipv4:127.0.0.1:5001"), target)
        self.assertEqual(name, "localhost", "TLS checks the first host name given")

    def test_malformed_lists_are_refused(self):
        for address in ("127.0.0.1:1,", "127.0.0.1,127.0.0.2:2", "host-that-does-not-resolve."
                        "invalid:1,127.0.0.1:2"):
            with self.assertRaises(ValueError, msg=address):
                scheduler_target(address)
        with self.assertRaises(ParityError) as refused:
            parity_client.Client("127.0.0.1:1,:2")
        self.assertIn("expected host:port", str(refused.exception))


class FailoverTest(unittest.TestCase):
    def setUp(self):
        self.servers = {}
        for _ in range(2):
            port = _free_port()
            process = subprocess.Popen([sys.executable, "-c", _SERVER, str(port)],
                                       stdout=subprocess.PIPE, env=os.environ)
            self.assertEqual(process.stdout.readline().strip(), b"ready")
            self.servers[port] = process

    def tearDown(self):
        for process in self.servers.values():
            if process.poll() is None:
                process.kill()
            process.wait()

    def test_client_with_two_addresses_carries_on_when_one_is_killed(self):
        ports = list(self.servers)
        client = parity_client.Client(",".join(f"127.0.0.1:{p}" for p in ports), timeout=5)
        answered = {client.list_sweeps()[0].owner for _ in range(20)}
        self.assertEqual(answered, {str(p) for p in ports}, "round_robin uses both")
        os.kill(self.servers[ports[0]].pid, signal.SIGKILL)
        self.servers[ports[0]].wait()
        started = time.monotonic()
        after = [client.list_sweeps()[0].owner for _ in range(20)]  # none may fail
        self.assertEqual(set(after), {str(ports[1])})
        self.assertLess(time.monotonic() - started, 5.0)
        client.close()


if __name__ == "__main__":
    unittest.main()
