"""fill.py fill split|each|cluster set|mset KEYS SIZE PORT...: writes keys
key:%012d for 0..KEYS-1 with SIZE-byte values: `split` spreads them over the
ports (doors to one store), `each` writes all of them to every port,
`cluster` sends each to its Redis Cluster master (CRC16 slots, from the
first port's CLUSTER NODES). `mset`: MSET of 128 keys per command, else
pipelined SETs, 1000 per batch; failed batches are retried.
`mset` batches hold fewer keys when 128 values would pass 512 KiB (a
64 KiB value: 7 per MSET). The value is SIZE bytes of $FILL_BYTE (one
character, default x: an overwrite pass can write other bytes).
fill.py del split PERCENT KEYS PORT...: deletes the keys key:%012d of
0..KEYS-1 whose number modulo 100 is below PERCENT (DEL of 128 keys per
command, spread over the ports); prints the seconds it took.
fill.py check KEYS SAMPLE PORT: GETs SAMPLE random keys, prints the hits
(follows -MOVED).
Used by scripts/bench-throughput and scripts/bench-scale."""
import os, queue, random, socket, sys, threading, time

FMT = b"key:%012d"

def cmd(*args):
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)

class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.f = self.s.makefile("rb")
    def reply(self):
        line = self.f.readline()
        if not line:
            raise SystemExit("fill.py: connection closed")
        if line[:1] == b"$":
            n = int(line[1:])
            return None if n < 0 else self.f.read(n + 2)[:-2]
        if line[:1] == b"-":
            return Exception(line[1:].strip().decode(errors="replace"))
        return line.strip()

def crc16(data, table=[]):
    if not table:
        for i in range(256):
            c = i << 8
            for _ in range(8):
                c = ((c << 1) ^ 0x1021) if c & 0x8000 else (c << 1)
            table.append(c & 0xFFFF)
    c = 0
    for b in data:
        c = ((c << 8) & 0xFFFF) ^ table[(c >> 8) ^ b]
    return c

def masters(port):
    c = Conn(port)
    c.s.sendall(cmd(b"CLUSTER", b"NODES"))
    owner = [None] * 16384
    for line in c.reply().decode().splitlines():
        f = line.split()
        if "master" not in f[2].split(","):
            continue
        p = int(f[1].split("@")[0].rsplit(":", 1)[1])
        for r in f[8:]:
            if r.startswith("["):
                continue
            lo, _, hi = r.partition("-")
            for slot in range(int(lo), int(hi or lo) + 1):
                owner[slot] = p
    return owner

def fill(mode, how, keys, size, ports, only=None):
    value = os.environ.get("FILL_BYTE", "x").encode()[:1] * size
    per = min(128, max(1, (512 << 10) // (size + 20))) if how in ("mset", "del") else 1000
    work = {p: queue.Queue() for p in ports}
    if mode == "cluster":
        owner = masters(ports[0])
        groups = {}
        for i in range(keys):
            k = FMT % i
            groups.setdefault(owner[crc16(k) % 16384], []).append(k)
        work = {p: queue.Queue() for p in groups}
        for p, ks in groups.items():
            for j in range(0, len(ks), per):
                work[p].put(ks[j:j + per])
    else:
        if only is None:
            batches = [range(j, min(j + per, keys)) for j in range(0, keys, per)]
        else:
            picked = [i for i in range(keys) if only(i)]
            batches = [picked[j:j + per] for j in range(0, len(picked), per)]
        for n, b in enumerate(batches):
            for p in (ports if mode == "each" else [ports[n % len(ports)]]):
                work[p].put(b)
    # ours: 4 MSETs of 128 keys per node run 4 x 64 keys at once, half the
    # node's client request slots (`[limits] max_client_requests`, 512).
    conns = 4 if how in ("mset", "del") else 2
    failed = []

    def worker(port):
        c = Conn(port)
        q = work[port]
        while not failed:
            try:
                batch = q.get_nowait()
            except queue.Empty:
                return
            ks = [k if isinstance(k, bytes) else FMT % k for k in batch]
            if how == "mset":
                payload, n = cmd(b"MSET", *[x for k in ks for x in (k, value)]), 1
            elif how == "del":
                payload, n = cmd(b"DEL", *ks), 1
            else:
                payload, n = b"".join(cmd(b"SET", k, value) for k in ks), len(ks)
            for attempt in range(8):
                c.s.sendall(payload)
                errors = [r for r in (c.reply() for _ in range(n)) if isinstance(r, Exception)]
                if not errors:
                    break
                time.sleep(0.1 * (attempt + 1))
            else:
                failed.append("port %d: %s" % (port, errors[0]))

    threads = [threading.Thread(target=worker, args=(p,)) for p in work for _ in range(conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failed:
        raise SystemExit("fill.py: a batch failed 8 times: " + failed[0])

def check(keys, sample, port):
    rng = random.Random(7)
    conns = {port: Conn(port)}
    hits = 0
    for _ in range(sample):
        k, p = FMT % rng.randrange(keys), port
        for _ in range(3):
            if p not in conns:
                conns[p] = Conn(p)
            conns[p].s.sendall(cmd(b"GET", k))
            r = conns[p].reply()
            if isinstance(r, Exception) and str(r).startswith("MOVED"):
                p = int(str(r).split()[2].rsplit(":", 1)[1])
                continue
            break
        if isinstance(r, Exception):
            raise SystemExit("fill.py: GET %s: %s" % (k.decode(), r))
        hits += r is not None
    print(hits)

if sys.argv[1] == "fill":
    t0 = time.time()
    fill(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), [int(p) for p in sys.argv[6:]])
    print("%.1f" % (time.time() - t0))
elif sys.argv[1] == "del":
    t0 = time.time()
    pct = int(sys.argv[3])
    fill(sys.argv[2], "del", int(sys.argv[4]), 0, [int(p) for p in sys.argv[5:]], only=lambda i: i % 100 < pct)
    print("%.1f" % (time.time() - t0))
else:
    check(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
