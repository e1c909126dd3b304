"""Prints fence edits as SQL at a steady rate, for psql to apply one commit each (bench/soak).

Usage: python3 bench/soak-edits.py FENCES PER_SECOND | psql ...
Fences are f-1 .. f-FENCES, as bench/job-lib.sh's load_fences makes them. Every second, PER_SECOND
edits: 70 % move a live fence a little, 15 % delete one, 15 % re-create a deleted one with a new
shape (while there is one), so the fence count stays near FENCES and every kind of edit the
stream carries (update, delete, insert of a tombstoned id) runs all the time. Runs until killed.
"""
import random
import sys
import time

fences, per_second = int(sys.argv[1]), int(sys.argv[2])
live = [f"f-{i}" for i in range(1, fences + 1)]
deleted = []


def take(ids):
    """Removes and returns a random id of ids in O(1)."""
    i = random.randrange(len(ids))
    ids[i], ids[-1] = ids[-1], ids[i]
    return ids.pop()


def edit():
    roll = random.random()
    if roll < 0.15 and deleted:
        fence = take(deleted)
        live.append(fence)
        x, y, r = random.random() * 30, random.random() * 30, 0.002 + random.random() * 0.018
        return (f"INSERT INTO fences (id, geom) VALUES ('{fence}', "
                f"ST_SetSRID(ST_Buffer(ST_MakePoint({x:.6f}, {y:.6f}), {r:.6f}, 24), 4326));")
    if roll < 0.30 and len(live) > 1:
        fence = take(live)
        deleted.append(fence)
        return f"DELETE FROM fences WHERE id = '{fence}';"
    fence = random.choice(live)
    dx, dy = random.uniform(-1e-4, 1e-4), random.uniform(-1e-4, 1e-4)
    return f"UPDATE fences SET geom = ST_Translate(geom, {dx:.7f}, {dy:.7f}) WHERE id = '{fence}';"


# Each second's edits spread over the second, on a schedule that does not drift with the time
# printing takes.
interval = 1.0 / per_second
next_at = time.monotonic()
while True:
    print(edit(), flush=True)
    next_at += interval
    time.sleep(max(0.0, next_at - time.monotonic()))
