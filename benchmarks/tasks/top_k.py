"""Ranking and top-k: players ranked by a per-game rate, with a minimum-games condition."""

from __future__ import annotations

import itertools
import random
from collections.abc import Mapping
from typing import Any

from .base import TaskFamily, TaskFile, TaskInstance, Verdict, csv_text, rng_for
from .checking import close, first_problem, labelled_rows, norm, table

NAME = "top_k"
TOL = 0.011
HEADER = ["Player", "Team", "GP", "PTS", "AST", "Min/Game"]
METRICS = {"points": "PTS", "assists": "AST"}
TEAMS = ("Harbor Hawks", "Mesa Miners", "Lake Lynx", "Bay Bulls", "Ridge Rams")
FIRST = ("Alex", "Bo", "Cruz", "Dmitri", "Eli", "Femi", "Gus", "Hiro", "Ivo", "Jalen", "Kai")
LAST = ("Abe", "Brandt", "Costa", "Diaz", "Eze", "Fox", "Gray", "Holm", "Ivers", "Jones", "Kerr")


def generate(rng: random.Random) -> list[list[Any]]:
    names = rng.sample([f"{f} {last}" for f in FIRST for last in LAST], rng.randint(30, 60))
    rows = []
    for name in names:
        games = rng.randint(1, 82) if rng.random() < 0.2 else rng.randint(20, 82)
        points = round(games * rng.uniform(2, 28))
        assists = round(games * rng.uniform(0.5, 9))
        rows.append([name, rng.choice(TEAMS), games, points, assists, round(rng.uniform(8, 38), 1)])
    return rows


def build(seed: int, rows: list[list[Any]], metric: str, k: int, min_games: int) -> TaskInstance:
    column = HEADER.index(METRICS[metric])
    rates = sorted(
        ((round(r[column] / r[2], 2), str(r[0])) for r in rows if r[2] >= min_games),
        key=lambda pair: -pair[0],
    )
    top = rates[:k]
    name = f"{metric}_per_game"
    out = f"artifacts/top{k}_{name}.csv"
    task = (
        f"Rank the players in files/player_stats.csv by {metric} per game ({METRICS[metric]} "
        f"divided by GP, the games played), counting only players with at least {min_games} "
        f"games. Save the top {k} to {out} with the columns player and {name} (rounded to two "
        "decimals), best first, and list them in that order in the answer."
    )
    expected = [player for _, player in top]
    everyone = {norm(r[0]) for r in rows}

    def check(answer: str, files: Mapping[str, bytes]) -> Verdict:
        data = files.get(out)
        problem = "no artifact" if data is None else None
        if data is not None:
            rows_seen = table(data)
            order = [
                player
                for row in rows_seen
                for player in [next((c for c in row if norm(c) in everyone), None)]
                if player is not None
            ]
            found = labelled_rows(rows_seen, expected)
            values_ok = all(
                len(found.get(p, [])) == 1 and any(close(n, v, TOL) for n in found[p][0])
                for v, p in top
            )
            if [norm(p) for p in order] != [norm(p) for p in expected] or not values_ok:
                problem = f"artifact ranks {order} ({'values wrong' if not values_ok else 'ok'})"
        said = [norm(answer).find(norm(p)) for p in expected]
        if -1 in said or said != sorted(said):
            problem = first_problem(problem, f"the answer does not list {expected} in order")
        return Verdict(problem is None, problem or "ok")

    reference = f"""import os
import pandas as pd
os.makedirs("artifacts", exist_ok=True)
df = pd.read_csv("files/player_stats.csv")
df = df[df["GP"] >= {min_games}].copy()
df["{name}"] = (df["{METRICS[metric]}"] / df["GP"]).round(2)
top = df.sort_values("{name}", ascending=False).head({k})
top = top[["Player", "{name}"]].rename(columns={{"Player": "player"}})
top.to_csv("{out}", index=False)
print(top.to_string(index=False))
"""
    return TaskInstance(
        family=NAME,
        seed=seed,
        task=task,
        files=(TaskFile("player_stats.csv", csv_text(HEADER, rows)),),
        artifacts=(out,),
        truth={"metric": metric, "k": k, "min_games": min_games, "top": [[p, v] for v, p in top]},
        check=check,
        reference=reference,
    )


def fair(rows: list[list[Any]], metric: str, k: int, min_games: int) -> bool:
    """One right ranking (no tie around the top k), and the games condition matters: some
    player with fewer games would make the top k without it."""
    column = HEADER.index(METRICS[metric])
    rates = sorted((round(r[column] / r[2], 2) for r in rows if r[2] >= min_games), reverse=True)
    distinct = all(a - b >= 0.02 for a, b in itertools.pairwise(rates[: k + 1]))
    trap = any(r[2] < min_games and r[column] / r[2] > rates[k - 1] for r in rows)
    return len(rates) > k and distinct and trap


def make(seed: int) -> TaskInstance:
    rng = rng_for(NAME, seed)
    metric, k, min_games = rng.choice(tuple(METRICS)), rng.choice((3, 5)), rng.choice((10, 15, 20))
    while True:
        rows = generate(rng)
        if fair(rows, metric, k, min_games):
            return build(seed, rows, metric, k, min_games)


FAMILY = TaskFamily(NAME, "ranking and top-k with a condition", make)
