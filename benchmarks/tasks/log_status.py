"""Text/log parsing: an access log's requests counted per status code, and its worst path."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping
from datetime import datetime, timedelta

from .base import TaskFamily, TaskFile, TaskInstance, Verdict, rng_for
from .checking import check_tags, close, first_problem, number, table

NAME = "log_status"
OUT = "artifacts/status_counts.csv"
PATHS = (
    "/api/v1/orders",
    "/api/v1/items",
    "/api/v1/cart",
    "/login",
    "/static/app.js",
    "/health",
    "/api/v1/search",
)
STATUSES = (200, 200, 200, 200, 200, 201, 204, 301, 304, 400, 401, 403, 404, 404, 500, 502, 503)
AGENTS = ('"Mozilla/5.0 (X11; Linux x86_64)"', '"curl/8.5.0"', '"python-requests/2.32"')


def generate(rng: random.Random) -> list[str]:
    """Combined-log-format lines with the response time appended (``rt=<seconds>``); the 5xx
    responses lean towards one or two paths."""
    hot = rng.sample(PATHS, 2)
    when = datetime(2025, rng.randint(1, 12), rng.randint(1, 28), 8, 0, 0)
    lines = []
    for _ in range(rng.randint(150, 400)):
        when += timedelta(seconds=rng.randint(1, 40))
        status = rng.choice(STATUSES)
        path = rng.choice(hot) if status >= 500 and rng.random() < 0.6 else rng.choice(PATHS)
        paged = path.startswith("/api") and rng.random() < 0.4
        query = f"?page={rng.randint(1, 9)}" if paged else ""
        method = "POST" if path in ("/login", "/api/v1/cart") and rng.random() < 0.7 else "GET"
        ip = f"10.0.{rng.randint(0, 9)}.{rng.randint(2, 250)}"
        stamp = when.strftime("%d/%b/%Y:%H:%M:%S +0000")
        size = rng.randint(120, 48_000) if status < 300 else rng.randint(0, 600)
        lines.append(
            f'{ip} - - [{stamp}] "{method} {path}{query} HTTP/1.1" {status} {size} "-" '
            f"{rng.choice(AGENTS)} rt={rng.uniform(0.002, 2.5):.3f}"
        )
    return lines


def tally(lines: list[str]) -> tuple[Counter[int], Counter[str]]:
    """Requests per status code, and 5xx responses per path (query string dropped)."""
    counts: Counter[int] = Counter()
    worst: Counter[str] = Counter()
    for line in lines:
        request, after = line.split('"')[1], line.split('"')[2].split()
        status = int(after[0])
        counts[status] += 1
        if status >= 500:
            worst[request.split()[1].split("?")[0]] += 1
    return counts, worst


def build(seed: int, lines: list[str]) -> TaskInstance:
    counts, worst = tally(lines)
    server_errors = sum(n for status, n in counts.items() if status >= 500)
    top_path = worst.most_common(1)[0][0] if worst else ""
    task = (
        "files/access.log is a web server's access log (combined log format, one request per "
        "line, the response time appended as rt=<seconds>). Count the requests per HTTP status "
        f"code and save the counts to {OUT} with the columns status and requests. Then print "
        "the number of 5xx responses as @server_errors[N] and the request path (without its "
        "query string) with the most 5xx responses as @worst_path[/path]."
    )
    truth = {
        "status_counts": {str(k): v for k, v in sorted(counts.items())},
        "server_errors": server_errors,
        "worst_path": top_path,
    }

    def check(answer: str, files: Mapping[str, bytes]) -> Verdict:
        data = files.get(OUT)
        problem = "no artifact" if data is None else None
        if data is not None:
            got: dict[int, list[float]] = {}
            for row in table(data):
                values = [number(c) for c in row]
                found = [(i, int(v)) for i, v in enumerate(values) if v is not None and v in counts]
                if found:  # the row's status code, then its count among the other cells
                    index, status = found[0]
                    got[status] = [v for i, v in enumerate(values) if v is not None and i != index]
            wrong = [
                s for s, n in counts.items() if not any(close(v, n, 0) for v in got.get(s, []))
            ]
            problem = f"artifact: wrong or missing counts for {wrong}" if wrong else None
        expected = {"server_errors": server_errors, "worst_path": top_path}
        problem = first_problem(problem, check_tags(answer, expected, 0.0))
        return Verdict(problem is None, problem or "ok")

    reference = f"""import collections, csv, os
os.makedirs("artifacts", exist_ok=True)
counts = collections.Counter()
paths = collections.Counter()
with open("files/access.log") as f:
    for line in f:
        parts = line.split('"')
        status = int(parts[2].split()[0])
        counts[status] += 1
        if status >= 500:
            paths[parts[1].split()[1].split("?")[0]] += 1
with open("{OUT}", "w", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(["status", "requests"])
    for status in sorted(counts):
        writer.writerow([status, counts[status]])
errors = sum(n for s, n in counts.items() if s >= 500)
print(f"@server_errors[{{errors}}] @worst_path[{{paths.most_common(1)[0][0]}}]")
"""
    return TaskInstance(
        family=NAME,
        seed=seed,
        task=task,
        files=(TaskFile("access.log", "\n".join(lines) + "\n"),),
        artifacts=(OUT,),
        truth=truth,
        check=check,
        reference=reference,
    )


def make(seed: int) -> TaskInstance:
    rng = rng_for(NAME, seed)
    while True:  # one path clearly has the most 5xx responses
        lines = generate(rng)
        top = [n for _, n in tally(lines)[1].most_common(2)] + [0]
        if top[0] > top[1]:
            return build(seed, lines)


FAMILY = TaskFamily(NAME, "log parsing: counts per status code", make)
