"""Whether a scheduler address stays on this machine: the test before a bearer token is sent
without TLS (the C++ clients' clients/cpp/loopback.h, the same rules).

Decided on the RESOLVED addresses (socket.getaddrinfo), not on the text: a name such as
"localhost.attacker.example" or a hosts-file entry can point anywhere. Resolving asks the
system resolver only; nothing is sent to the address itself. A resolver that answers gRPC's
own lookup differently (DNS under an attacker's control) is out of its reach: use TLS there.
"""

import ipaddress
import socket


def _host_of(address):
    """The host of "host:port", "[v6]:port", a bare v6 address or "host"."""
    if address.startswith("["):
        return address[1:address.find("]")] if "]" in address else address[1:]
    if address.count(":") == 1:
        return address.split(":", 1)[0]
    return address


def _hosts_of(target):
    """The hosts a gRPC target names: dns:///h:p, dns://authority/h:p, ipv4:/ipv6: lists."""
    for prefix in ("ipv4:", "ipv6:"):
        if target.startswith(prefix):
            return [_host_of(a) for a in target[len(prefix):].split(",") if a]
    if target.startswith("dns://"):
        rest = target[len("dns://"):]
        target = rest[rest.find("/") + 1:] if "/" in rest else ""
    elif target.startswith("dns:"):
        target = target[len("dns:"):]
    return [_host_of(target)]


def _is_loopback(ip):
    address = ipaddress.ip_address(ip.split("%", 1)[0])  # drop an IPv6 zone
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def resolves_only_to_loopback(target):
    """True when every address `target` resolves to is loopback (127.0.0.0/8, ::1,
    ::ffff:127.0.0.0/104), or it is a Unix socket; False when any is not. Raises ValueError
    when it names no host or does not resolve (nobody can then tell where a token would go)."""
    if target.startswith("unix:") or target.startswith("unix-abstract:"):
        return True
    hosts = _hosts_of(target)
    if not hosts or not all(hosts):
        raise ValueError(f"scheduler address '{target}': no host (expected host:port)")
    for host in hosts:
        try:
            found = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except socket.gaierror as e:
            raise ValueError(f"scheduler address '{target}': cannot resolve '{host}' ({e})") \
                from None
        if not found or not all(_is_loopback(info[4][0]) for info in found):
            return False
    return True
