"""Loads the records, groups them by user, and dumps the groups as sorted JSON on stdout."""
import collections
import json
import sys

with open(sys.argv[1]) as f:
    records = json.load(f)

by_user = collections.defaultdict(list)
for r in records:
    by_user[r["user"]].append(r)

groups = {}
for user, recs in by_user.items():
    recs.sort(key=lambda r: (r["ts"], r["id"]))
    words = collections.Counter(w for r in recs for w in r["text"].split())
    groups[user] = {
        "n": len(recs),
        "total": round(sum(r["amount"] for r in recs), 2),
        "categories": sorted({r["category"] for r in recs}),
        "first": recs[0]["id"],
        "last": recs[-1]["id"],
        "words": dict(words.most_common(5)),
        "tags": sorted({t for r in recs for t in r["tags"]}),
    }
del records, by_user
json.dump(groups, sys.stdout, sort_keys=True, indent=1)
sys.stdout.write("\n")
