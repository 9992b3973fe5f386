"""The Python client never sends a bearer token in plaintext off this machine (issue #23): the
loopback decision is made on the RESOLVED addresses (socket.getaddrinfo), before any channel
exists; insecure_plaintext=True (or PARITY_INSECURE_PLAINTEXT=1) allows it; TLS or no token
needs no check. No scheduler is needed and nothing is sent anywhere: 192.0.2.1 (TEST-NET-1) is
only refused or put into a channel that is never used, and names are resolved by a stand-in
resolver where the test needs one to point off loopback.

    PYTHONPATH=build/clients/python python3 -m unittest clients/python/tests/test_plaintext_guard.py
"""

import os
import socket
import unittest
from unittest import mock

import grpc

import parity_client
from parity_client.loopback import resolves_only_to_loopback

TOKEN = "parity_test-admin-0123456789abcdefghijklmnopqrstu"
OFF_LOOPBACK = "192.0.2.1:1"


def _resolver(table):
    """A stand-in for socket.getaddrinfo: name -> list of IP strings."""

    def getaddrinfo(host, port, family=0, type=0, proto=0, flags=0):
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET6 if ":" in ip else socket.AF_INET, socket.SOCK_STREAM, 6, "",
                 (ip, 0)) for ip in table[host]]

    return getaddrinfo


class LoopbackTest(unittest.TestCase):
    def test_numeric_targets(self):
        cases = {
            "127.0.0.1:50051": True, "127.8.9.10:1": True, "[::1]:1": True,
            "[::ffff:127.0.0.1]:1": True, "localhost:50051": True, "dns:///127.0.0.1:1": True,
            "dns://192.0.2.53/127.0.0.1:1": True, "ipv4:127.0.0.1:1,127.0.0.2:2": True,
            "unix:/run/parity.sock": True,
            OFF_LOOPBACK: False, "0.0.0.0:1": False, "[::ffff:192.0.2.1]:1": False,
            "[2001:db8::1]:1": False, "ipv4:127.0.0.1:1,192.0.2.1:1": False,
        }
        for target, expected in cases.items():
            self.assertEqual(resolves_only_to_loopback(target), expected, target)
        with self.assertRaises(ValueError, msg="no host"):
            resolves_only_to_loopback(":50051")

    def test_a_name_is_judged_by_what_it_resolves_to(self):
        table = {"localhost": ["192.0.2.7"], "sched.internal": ["127.0.0.1", "::1"],
                 "split.example": ["127.0.0.1", "192.0.2.8"]}
        with mock.patch("socket.getaddrinfo", _resolver(table)):
            self.assertFalse(resolves_only_to_loopback("localhost:50051"),
                             "a 'localhost' that resolves off loopback is not loopback")
            self.assertTrue(resolves_only_to_loopback("sched.internal:50051"))
            self.assertFalse(resolves_only_to_loopback("split.example:50051"),
                             "every resolved address must be loopback, not just one")
            with self.assertRaises(ValueError):
                resolves_only_to_loopback("unknown.example:1")


class ClientGuardTest(unittest.TestCase):
    def setUp(self):
        patcher = mock.patch.dict(os.environ, {}, clear=False)
        patcher.start()
        self.addCleanup(patcher.stop)
        for name in ("PARITY_TOKEN", "PARITY_TOKEN_FILE", "PARITY_TLS_CA",
                     "PARITY_INSECURE_PLAINTEXT", "PARITY_SCHEDULER"):
            os.environ.pop(name, None)

    def _refused(self, **kwargs):
        def no_channel(*args, **kw):
            raise AssertionError("a channel was made before the refusal")
        with mock.patch("grpc.insecure_channel", no_channel):
            with self.assertRaises(parity_client.ParityError) as refused:
                parity_client.connect(**kwargs)
        return refused.exception

    def test_a_token_in_plaintext_off_loopback_is_refused_before_any_channel(self):
        error = self._refused(address=OFF_LOOPBACK, token=TOKEN)
        self.assertEqual(error.code, grpc.StatusCode.INVALID_ARGUMENT)
        for words in ("refusing to send the bearer token in plaintext", "tls_ca=FILE (PARITY_TLS_CA)",
                      "insecure_plaintext=True (PARITY_INSECURE_PLAINTEXT=1)"):
            self.assertIn(words, error.message)
        self.assertNotIn(TOKEN, str(error))

    def test_a_name_that_resolves_off_loopback_is_refused(self):
        with mock.patch("socket.getaddrinfo", _resolver({"localhost": ["192.0.2.7"]})):
            self._refused(address="localhost:50051", token=TOKEN)

    def test_the_token_from_the_environment_is_guarded_too(self):
        os.environ["PARITY_TOKEN"] = TOKEN
        os.environ["PARITY_SCHEDULER"] = OFF_LOOPBACK
        self._refused()

    def test_insecure_plaintext_allows_it_and_only_builds_the_channel(self):
        for kwargs, env in (({"insecure_plaintext": True}, {}),
                            ({}, {"PARITY_INSECURE_PLAINTEXT": "1"})):
            os.environ.update(env)
            client = parity_client.connect(address=OFF_LOOPBACK, token=TOKEN, **kwargs)
            # Never connected: no call is made and the channel is not asked to connect.
            client.close()
            os.environ.pop("PARITY_INSECURE_PLAINTEXT", None)

    def test_a_bad_environment_value_names_the_variable(self):
        os.environ["PARITY_INSECURE_PLAINTEXT"] = "maybe"
        with self.assertRaises(parity_client.ParityError) as refused:
            parity_client.connect(address="127.0.0.1:1", token=TOKEN)
        self.assertIn("PARITY_INSECURE_PLAINTEXT='maybe'", refused.exception.message)

    def test_no_token_or_loopback_needs_nothing(self):
        parity_client.connect(address=OFF_LOOPBACK).close()
        parity_client.connect(address="127.0.0.1:1", token=TOKEN).close()


if __name__ == "__main__":
    unittest.main()
