"""What Flink's REST API says of a running geofence job, as one line of numbers (bench/soak).

Usage: python3 bench/soak-sample.py REST_PORT JOB_ID
Prints, space-separated: locations out of the location source since the job started; the last
completed checkpoint's checkpointed (uploaded) size and full state size in bytes; checkpoints
completed and failed since the job started; and, summed over the fence index's subtasks, the
pending_locations (held) and fence_history_versions gauges and the fence_segments_rewritten counter.
"""
import json
import sys
import time
import urllib.parse
import urllib.request

rest, job = sys.argv[1], sys.argv[2]


def get(path):
    with urllib.request.urlopen(f"http://localhost:{rest}{path}", timeout=30) as response:
        return json.load(response)


# Flink fetches the metrics it serves when asked, if its copy is older than the fetcher's
# interval (1 s under the job's launcher), and answers from its copy meanwhile: zeros for a job
# asked first. So ask, let the fetch land, and ask again.
index = next(v for v in get(f"/jobs/{job}")["vertices"] if "Fence index" in v["name"])
base = f"/jobs/{job}/vertices/{index['id']}/subtasks/metrics"
get(base)
time.sleep(2)
vertices = get(f"/jobs/{job}")["vertices"]
records = sum(v["metrics"]["write-records"] for v in vertices if v["name"].startswith("Source: Location lines"))
checkpoints = get(f"/jobs/{job}/checkpoints")
latest = checkpoints["latest"]["completed"] or {"checkpointed_size": 0, "state_size": 0}
# The fence index's gauges, by the ends of their ids (the ids carry the operator's scope).
gauges = {}
for name in ("pending_locations", "fence_history_versions", "fence_segments_rewritten"):
    ids = [m["id"] for m in get(base) if m["id"].endswith("." + name)]
    values = get(f"{base}?get={urllib.parse.quote(ids[0])}&agg=sum") if ids else []
    gauges[name] = round(values[0]["sum"]) if values else -1
print(records, latest["checkpointed_size"], latest["state_size"], checkpoints["counts"]["completed"],
      checkpoints["counts"]["failed"], gauges["pending_locations"], gauges["fence_history_versions"],
      gauges["fence_segments_rewritten"])
