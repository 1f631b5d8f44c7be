#!/usr/bin/python3
"""A TCP port on 127.0.0.1 for a throwaway server the tests start (etcd, ZooKeeper, MariaDB,
PostgreSQL, Redis), printed when run as a script.

The port is drawn below the kernel's ephemeral range (net.ipv4.ip_local_port_range), where
bind(port 0) and every outgoing connection take theirs: a port picked there could be taken by
one of the suite's thousands of client connections between the pick and the server's bind. Here
only another picker can take it, at random among some 22,000 ports; a fixture that can retry
(scripts/mariadb.sh) does so on "address in use"."""
import random
import socket


def free_port():
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        ephemeral_low = int(f.read().split()[0])
    low = 10000 if ephemeral_low > 20000 else 1024
    for _ in range(1000):
        port = random.randrange(low, ephemeral_low)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"free_port: no port in {low}..{ephemeral_low - 1} could be bound")


if __name__ == "__main__":
    print(free_port())
