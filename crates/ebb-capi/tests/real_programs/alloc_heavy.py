"""An allocation-heavy Python workload with deterministic output.

Run by crates/ebb-capi/tests/real_programs.rs with PYTHONMALLOC=malloc (so every object
goes through malloc) with and without LD_PRELOAD=libebb.so; the two outputs must be
identical. Everything printed is a count or a digest, never an address or a time, and
nothing depends on the string hash seed.
"""
import gc
import hashlib
import json
import queue
import random
import threading
from collections import Counter, OrderedDict, defaultdict, deque


def digest(obj):
    return hashlib.sha256(repr(obj).encode()).hexdigest()[:16]


def words(rng, n):
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(1, 12))) for _ in range(n)]


def dicts_and_lists(rng):
    vocab = words(rng, 20000)
    counts = Counter(rng.choice(vocab) for _ in range(200000))
    index = defaultdict(list)
    for i, w in enumerate(vocab):
        index[w[0]].append((w, i))
    table = {f"key-{i}-{w}": [w] * (i % 7) for i, w in enumerate(vocab)}
    for k in list(table)[::3]:
        del table[k]
    od = OrderedDict((w, len(w)) for w in vocab[:5000])
    for w in vocab[:5000:2]:
        od.move_to_end(w)
    nested = [[j * i for j in range(i % 50)] for i in range(20000)]
    nested.sort(key=lambda row: (len(row), sum(row)))
    print("counter", len(counts), digest(sorted(counts.most_common(50))))
    print("index", len(index), digest(sorted((k, len(v)) for k, v in index.items())))
    print("table", len(table), digest(sorted(table.items())[:1000]))
    print("ordered", digest(list(od.items())[:1000]))
    print("nested", sum(map(len, nested)), digest(nested[-3:]))


def strings(rng):
    parts = words(rng, 50000)
    text = " ".join(parts)
    upper = text.upper().replace("A", "<a>")
    pieces = upper.split("<a>")
    built = ""
    for p in pieces[:20000]:
        built += p[:3]  # grows one string by realloc
    fmt = [f"{i:08d}:{w!r}:{len(w)}" for i, w in enumerate(parts)]
    enc = text.encode("utf-8") * 3
    dec = enc.decode("utf-8")
    uni = "".join(chr(0x400 + (i % 200)) for i in range(100000))
    print("strings", len(text), len(pieces), len(built), digest(built[-200:]))
    print("format", digest(fmt[::997]), len(dec), len(uni.encode("utf-16")))


def json_round_trip(rng):
    doc = {
        "users": [
            {
                "id": i,
                "name": "".join(rng.choice("xyzw") for _ in range(10)),
                "tags": [rng.randint(0, 1000) for _ in range(rng.randint(0, 20))],
                "score": round(rng.random() * 1000, 6),
                "nested": {"a": [None, True, False, {"b": "c" * (i % 30)}]},
            }
            for i in range(30000)
        ]
    }
    text = json.dumps(doc, sort_keys=True)
    back = json.loads(text)
    again = json.dumps(back, sort_keys=True, indent=1)
    assert back == doc
    assert json.loads(again) == doc
    print("json", len(text), len(again), hashlib.sha256(text.encode()).hexdigest()[:16])


def big_buffers():
    buf = bytearray()
    for i in range(4096):
        buf += bytes([i % 251]) * 16384  # 64 MiB grown by realloc
    blocks = [bytes([i]) * (1 << 20) for i in range(32)]  # 1 MiB each
    total = sum(len(b) for b in blocks)
    del blocks
    huge = b"x" * (48 << 20)
    print("buffers", len(buf), hashlib.sha256(buf).hexdigest()[:16], total, len(huge))


def cycles():
    class Node:
        def __init__(self, i):
            self.i = i
            self.peers = []

    for round_ in range(5):
        nodes = [Node(i) for i in range(20000)]
        for i, n in enumerate(nodes):
            n.peers.append(nodes[(i * 7 + round_) % len(nodes)])
            n.peers.append(nodes[(i + 1) % len(nodes)])
        del nodes
        gc.collect()
    print("cycles ok")


def threads():
    # Producers allocate objects, consumers free them: cross-thread frees.
    q = queue.Queue(maxsize=1000)
    results = []
    lock = threading.Lock()

    def produce(seed):
        rng = random.Random(seed)
        for _ in range(20000):
            q.put({"seed": seed, "payload": [rng.random() for _ in range(rng.randint(1, 40))],
                   "text": "t" * rng.randint(0, 500)})
        q.put(None)

    def consume():
        local = 0
        done = 0
        while done < 2:
            item = q.get()
            if item is None:
                done += 1
                continue
            local += len(item["payload"]) + len(item["text"])
        with lock:
            results.append(local)

    def churn(seed):
        rng = random.Random(seed)
        keep = deque(maxlen=500)
        acc = 0
        for i in range(100000):
            obj = [i] * rng.randint(0, 64) if i % 3 else str(i) * rng.randint(1, 30)
            keep.append(obj)
            acc += len(obj)
        with lock:
            results.append(acc)

    ts = [threading.Thread(target=produce, args=(s,)) for s in range(4)]
    ts += [threading.Thread(target=consume) for _ in range(2)]
    ts += [threading.Thread(target=churn, args=(s,)) for s in range(100, 104)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print("threads", len(results), sum(results))


def main():
    rng = random.Random(20240601)
    dicts_and_lists(rng)
    strings(rng)
    json_round_trip(rng)
    big_buffers()
    cycles()
    threads()
    print("done")


if __name__ == "__main__":
    main()
