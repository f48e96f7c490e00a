"""Parse a JDK 17 G1 log written with

  -Xlog:gc*=info,gc+plab=debug,gc+ergo+cset=debug:file=F:uptime,level,tags

into one record per pause and one per concurrent mark cycle.

A pause's copied bytes come from the PLAB statistics G1 prints at debug
level ("Young PLAB allocation: ... used: N B" is what was copied into
survivor regions, "Old PLAB allocation: ... used: N B" what was promoted or,
in a mixed collection, copied out of old regions; "direct allocated" adds
objects too large for a PLAB). Pause lengths are wall time as G1 reports
them; "User=/Sys=/Real=" are the OS times of the pause with a 10 ms grain.
"""

import re

HEAD = re.compile(r"^\[([\d.]+)s\]\[(\w+)\s*\]\[([\w,]+)\s*\] (?:GC\((\d+)\) )?(.*)$")
PAUSE_END = re.compile(
    r"^Pause (Young \(([\w ]+)\) \((.*?)\)(?: \(.*?\))?|Remark|Cleanup|Full \((.*?)\)) "
    r"(\d+)M->(\d+)M\((\d+)M\) ([\d.]+)ms$"
)
PLAB_USED = re.compile(r"^(Young|Old) PLAB allocation: .* used: (\d+)B")
PLAB_DIRECT = re.compile(r"^(Young|Old) other allocation: .* direct allocated: (\d+)B.* failure used: (\d+)B")
CSET = re.compile(r"^Finish choosing collection set old regions\. Initial: (\d+), optional: (\d+)")
REGIONS = re.compile(r"^(Eden|Survivor|Old|Humongous) regions: (\d+)->(\d+)")
CPU = re.compile(r"^User=([\d.]+)s Sys=([\d.]+)s Real=([\d.]+)s")
WORKERS = re.compile(r"^Using (\d+) workers of (\d+) for (evacuation|marking|full compaction)")
REGION_SIZE = re.compile(r"Heap Region Size: (\d+)M")
CONC = re.compile(r"^(Concurrent Mark From Roots|Concurrent Mark Cycle|Concurrent Rebuild Remembered Sets|Concurrent Undo Cycle) ([\d.]+)ms$")


def parse(text):
    """(pauses, concurrent cycles, region size in bytes)."""
    gcs = {}
    region = None
    for line in text.splitlines():
        m = HEAD.match(line)
        if not m:
            continue
        t, _level, _tags, gcid, msg = m.groups()
        if region is None:
            r = REGION_SIZE.search(msg)
            if r:
                region = int(r.group(1)) << 20
        if gcid is None:
            continue
        g = gcs.setdefault(int(gcid), {"id": int(gcid), "pauses": [], "conc": {}, "cur": {}})
        cur = g["cur"]
        if (p := PAUSE_END.match(msg)):
            kind = p.group(1)
            if kind.startswith("Young"):
                kind = "Young " + p.group(2)
            elif kind.startswith("Full"):
                kind = "Full"
            rec = {
                "id": int(gcid), "end_s": float(t), "kind": kind, "cause": p.group(3) or p.group(4) or "",
                "heap_before_mib": int(p.group(5)), "heap_after_mib": int(p.group(6)),
                "heap_capacity_mib": int(p.group(7)), "pause_ms": float(p.group(8)),
            }
            rec.update(cur)
            g["pauses"].append(rec)
            g["cur"] = {}
        elif (p := PLAB_USED.match(msg)):
            cur[p.group(1).lower() + "_plab_used"] = int(p.group(2))
        elif (p := PLAB_DIRECT.match(msg)):
            cur[p.group(1).lower() + "_direct"] = int(p.group(2))
            cur[p.group(1).lower() + "_failure_used"] = int(p.group(3))
        elif (p := CSET.match(msg)):
            cur["old_cset_regions"] = int(p.group(1)) + int(p.group(2))
        elif (p := REGIONS.match(msg)):
            cur[p.group(1).lower() + "_regions"] = (int(p.group(2)), int(p.group(3)))
        elif (p := WORKERS.match(msg)):
            cur["workers"] = int(p.group(1))
        elif msg.startswith("To-space exhausted") or msg.startswith("Evacuation Failure"):
            cur["evacuation_failure"] = True
        elif (p := CPU.match(msg)):
            if g["pauses"]:
                last = g["pauses"][-1]
                last["user_s"], last["sys_s"], last["real_s"] = (float(x) for x in p.groups())
        elif (p := CONC.match(msg)):
            g["conc"][p.group(1)] = float(p.group(2))
            if p.group(1) in ("Concurrent Mark Cycle", "Concurrent Undo Cycle"):
                g["conc"]["end_s"] = float(t)
    pauses, conc = [], []
    for g in sorted(gcs.values(), key=lambda g: g["id"]):
        for p in g["pauses"]:
            p["copied_bytes"] = sum(p.get(k, 0) for k in ("young_plab_used", "old_plab_used", "young_direct", "old_direct"))
            p["promoted_or_old_bytes"] = p.get("old_plab_used", 0) + p.get("old_direct", 0)
            pauses.append(p)
        if "end_s" in g["conc"]:
            c = dict(g["conc"])
            c["id"] = g["id"]
            conc.append(c)
    return pauses, conc, region


def in_window(records, start_s, end_s):
    return [r for r in records if start_s <= r["end_s"] < end_s]
