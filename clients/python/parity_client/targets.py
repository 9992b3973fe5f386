"""Scheduler addresses that name several replicas (the C++ clients' clients/cpp/scheduler_target.h,
the same rules; docs/operations.md §High availability).

    "host:port"                   one scheduler (a DNS name may still have several records)
    "a:port,b:port,[v6]:port"     a list: IP literals become gRPC's ipv4:/ipv6: target, host
                                  names are resolved here, once, into one
    "dns:///name:port", "ipv4:…", "ipv6:…", "unix:…"   gRPC's own target syntax, as is

Every channel balances calls round_robin over its addresses and retries a call that failed
UNAVAILABLE (up to 4 attempts, 0.1 s doubling to 1 s), so a dead replica is skipped.
"""

import ipaddress
import json
import socket

SERVICE_CONFIG = json.dumps({
    "loadBalancingConfig": [{"round_robin": {}}],
    "methodConfig": [{
        "name": [{"service": "parity.v1.SweepService"}, {"service": "parity.v1.WorkerService"},
                 {"service": "parity.v1.TokenService"}, {"service": "grpc.health.v1.Health"}],
        "retryPolicy": {"maxAttempts": 4, "initialBackoff": "0.1s", "maxBackoff": "1s",
                        "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]},
    }],
})

# What every channel to the scheduler gets.
CHANNEL_OPTIONS = [("grpc.service_config", SERVICE_CONFIG), ("grpc.enable_retries", 1)]

_SCHEMES = ("dns:", "ipv4:", "ipv6:", "unix:", "unix-abstract:")


def _split(entry, address):
    if entry.startswith("["):
        host, sep, port = entry[1:].partition("]:")
    else:
        host, sep, port = entry.rpartition(":")
        if ":" in host:
            sep = ""
    if not sep or not host or not port:
        raise ValueError(f"scheduler address '{address}': '{entry}': expected host:port "
                         "(an IPv6 address in brackets)")
    return host, port


def _is_ip(host, version):
    try:
        return ipaddress.ip_address(host).version == version
    except ValueError:
        return False


def scheduler_target(address):
    """(target, server_name): the gRPC target for `address` and, for a list with host names, the
    first name (what TLS should check). Raises ValueError for a malformed list or a name that
    does not resolve."""
    address = address.strip()
    if "://" in address or address.startswith(_SCHEMES) or "," not in address:
        return address, ""
    entries = []
    for part in address.split(","):
        part = part.strip()
        if not part:
            raise ValueError(f"scheduler address '{address}': an empty entry in the list")
        entries.append(_split(part, address))
    server_name = next((h for h, _ in entries if not _is_ip(h, 4) and not _is_ip(h, 6)), "")
    for family, scheme in ((socket.AF_INET, "ipv4:"), (socket.AF_INET6, "ipv6:")):
        resolved = []
        for host, port in entries:
            try:
                found = socket.getaddrinfo(host, port, family, socket.SOCK_STREAM)
            except socket.gaierror:
                found = []
            if not found:
                resolved = None
                break
            for info in found:
                ip = info[4][0]
                resolved.append(f"{ip}:{port}" if family == socket.AF_INET else f"[{ip}]:{port}")
        if resolved:
            return scheme + ",".join(dict.fromkeys(resolved)), server_name
    raise ValueError(f"scheduler address '{address}': some host of the list does not resolve "
                     "(to addresses of one family); give IP addresses, or one DNS name with a "
                     "record per replica (dns:///name:port)")
