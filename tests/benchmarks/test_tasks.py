"""The task suite (benchmarks/tasks) and its runner's naive-baseline path; no model needed.

Every family makes valid, seeded instances; its ground truth is right on a tiny instance checked
by hand; its checker accepts the true answer in more than one format and rejects a plausible
mistake; the recorded split covers every family once, half and half. The last test runs the
baseline's program (and a product Turn) through the real sandbox with a scripted model.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import tasks  # noqa: E402
from tasks import (  # noqa: E402
    clean_missing,
    correlation_test,
    dedupe_contacts,
    describe_column,
    events_jsonl,
    fill_gaps,
    filter_rows,
    group_aggregate,
    join_tables,
    linear_fit,
    log_status,
    monthly_series,
    nested_tickets,
    orders_json,
    pivot_wide,
    sensor_summary,
    stock_counts,
    top_k,
)
from tasks.base import TaskInstance  # noqa: E402
from tasks.checking import numbers, tags  # noqa: E402

SEEDS = (1, 2, 3)
FAMILY_NAMES = sorted(tasks.FAMILIES)


def b(text: str) -> bytes:
    return text.encode()


def run_reference(instance: TaskInstance, root: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The instance's reference program run here (trusted code) in a workspace-like folder:
    its printed output and the artifacts it wrote."""
    (root / "files").mkdir(parents=True)
    for file in instance.files:
        (root / file.path).write_text(file.content, encoding="utf-8")
    monkeypatch.chdir(root)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(instance.reference, f"<{instance.family}>", "exec"), {"__name__": "__main__"})
    found = {p: (root / p).read_bytes() for p in instance.artifacts if (root / p).exists()}
    return out.getvalue(), found


def perturbed(text: str) -> str:
    """Every number in ``text`` moved (integers stay integers): a wrong answer in the right
    format."""

    def move(match: re.Match[str]) -> str:
        token = match.group(0)
        if "." in token:
            decimals = len(token.split(".")[1])
            return f"{float(token) * 1.37 + 1.1:.{decimals}f}"
        return str(int(token) + 7)

    return re.sub(r"\d+(?:\.\d+)?", move, text)


# --- every family -------------------------------------------------------------------------


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_a_family_makes_valid_seeded_instances(name: str) -> None:
    family = tasks.FAMILIES[name]
    made = [family.instance(seed) for seed in SEEDS]
    for seed, instance in zip(SEEDS, made, strict=True):
        assert (instance.family, instance.seed) == (name, seed)
        assert instance.files and instance.artifacts and instance.reference
        for file in instance.files:
            assert file.content.strip(), file.name
            assert file.path in instance.task, f"the task does not name {file.path}"
            if file.name.endswith(".csv"):
                rows = list(csv.reader(io.StringIO(file.content)))
                assert len(rows) > 5 and {len(r) for r in rows} == {len(rows[0])}
            elif file.name.endswith(".json"):
                json.loads(file.content)
        for path in instance.artifacts:
            assert path.startswith("artifacts/") and path in instance.task
        json.dumps(dict(instance.truth))  # reportable
        assert not instance.check("", {}).ok
        again = family.instance(seed)  # the seed alone decides the instance
        assert again.task == instance.task and again.files == instance.files
        assert again.truth == instance.truth
    assert len({inst.files for inst in made}) == len(SEEDS), "fresh data per seed"


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_the_checker_accepts_the_reference_and_rejects_moved_numbers(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    instance = tasks.FAMILIES[name].instance(7)
    answer, files = run_reference(instance, tmp_path, monkeypatch)
    assert instance.check(answer, files) == tasks.Verdict(True), answer
    assert not instance.check(answer, {}).ok, "no artifact"
    wrong = {path: b(perturbed(data.decode())) for path, data in files.items()}
    assert not instance.check(perturbed(answer), wrong).ok
    assert not instance.check(answer, wrong).ok, "a wrong artifact with a right answer"


def test_the_suite_has_the_shapes_users_bring() -> None:
    assert len(tasks.FAMILIES) >= 12
    headers = [
        f.content.splitlines()[0]
        for family in tasks.FAMILIES.values()
        for f in family.instance(1).files
        if f.name.endswith(".csv")
    ]
    odd = [h for h in headers if re.search(r"[ .()%$/]", h)]
    assert len(odd) >= 8, "column names with spaces, dots, units"
    formats = [fam for fam in tasks.FAMILIES.values() if "@" in fam.instance(1).task]
    decimals = [fam for fam in tasks.FAMILIES.values() if "decimals" in fam.instance(1).task]
    assert len(formats) >= 5 and len(decimals) >= 8


# --- the split ----------------------------------------------------------------------------


def test_the_split_covers_every_family_once_half_and_half() -> None:
    halves, seed, rule = tasks.recorded()
    assert sorted(halves) == FAMILY_NAMES
    assert list(halves.values()).count("tune") == list(halves.values()).count("heldout")
    drawn = tasks.batches()
    assert drawn[0][0] == seed
    for batch_seed, batch in drawn:  # the first split, then each batch added later
        assert len(batch) % 2 == 0
        assert tasks.by_rule(list(batch), batch_seed) == batch, "the rule gives each batch"
    assert "shuffle" in rule
    assert sorted(tasks.families_of("tune") + tasks.families_of("heldout")) == FAMILY_NAMES
    assert tasks.families_of("both") == list(halves)


# --- each family on a tiny instance checked by hand --------------------------------------


def test_group_aggregate_by_hand() -> None:
    rows = [
        ["2025-01-02", "Leeds", "DHL", 2.0, 10.00],
        ["2025-01-03", "Leeds", "UPS", 4.0, 20.50],
        ["2025-01-04", "Bristol", "DHL", 6.0, 7.25],
    ]
    total = group_aggregate.build(0, rows, "Warehouse", "Cost.GBP", "sum")
    assert total.truth["figures"] == {"Bristol": 7.25, "Leeds": 30.5}
    out = total.artifacts[0]
    assert out == "artifacts/total_cost_gbp_by_warehouse.csv"
    semicolons = b("warehouse;total cost\nLEEDS;30.50\nbristol;7.25\n")
    assert total.check("Leeds: £30.50, Bristol: £7.25", {out: semicolons}).ok
    assert total.check("Bristol 7.25\nLeeds 30.5", {out: b("Bristol,7.25\nLeeds,30.5\n")}).ok
    means = b("Warehouse,Cost.GBP\nLeeds,15.25\nBristol,7.25\n")
    assert not total.check("Leeds 15.25, Bristol 7.25", {out: means}).ok
    assert not total.check("Saved.", {out: semicolons}).ok, "the answer must give the figures"
    with_total = b("Warehouse,Cost\nLeeds,30.5\nBristol,7.25\nAll,37.75\n")
    assert not total.check("Leeds 30.5 Bristol 7.25", {out: with_total}).ok
    mean = group_aggregate.build(0, rows, "Carrier", "Weight (kg)", "mean")
    assert mean.truth["figures"] == {"DHL": 4.0, "UPS": 4.0}


def test_describe_column_by_hand() -> None:
    rows = [["t", "ST-01", 10.0, 50.0, pm] for pm in (1.0, 2.0, 3.0, 4.0, 10.0)]
    instance = describe_column.build(0, rows, "PM2.5")
    std = math.sqrt((9 + 4 + 1 + 0 + 36) / 4)  # the sample std, n - 1
    assert dict(instance.truth) == {
        "column": "PM2.5",
        "count": 5,
        "mean": 4.0,
        "median": 3.0,
        "std": round(std, 2),
        "min": 1.0,
        "max": 10.0,
    }
    out = instance.artifacts[0]
    data = b('{"Count": 5, "Mean": "4.00", "Median": 3, "Std": 3.5355, "MIN": 1, "MAX": 10}')
    answer = "@COUNT[5] @mean[4] @median[3.0] @std[3.54] @min[1.0] @max[10]"
    assert instance.check(answer, {out: data}).ok
    population = round(math.sqrt(50 / 5), 2)  # 3.16: the population std
    wrong = answer.replace("3.54", str(population))
    assert not instance.check(wrong, {out: data}).ok
    assert not instance.check(answer.replace("@std[3.54]", ""), {out: data}).ok


def test_correlation_test_by_hand() -> None:
    from scipy import stats

    xs, ys = [1.0, 2.0, 3.0, 4.0, 5.0], [2.0, 4.0, 5.0, 4.0, 5.0]
    rows = [[f"S{i}", x, 7.0, y] for i, (x, y) in enumerate(zip(xs, ys, strict=True))]
    instance = correlation_test.build(0, rows, "Study Hours/Week", "Exam Score (%)")
    r = 6 / math.sqrt(10 * 6)  # sxy / sqrt(sxx * syy)
    t = r * math.sqrt(3) / math.sqrt(1 - r * r)
    p = 2 * stats.t.sf(t, df=3)
    assert (instance.truth["r"], instance.truth["p_value"]) == (round(r, 3), round(p, 4))
    assert instance.truth["r"] == 0.775 and instance.truth["p_value"] == 0.124
    assert instance.truth["significant"] is False
    files = {
        "artifacts/correlation.json": b('{"R": 0.7746, "P_Value": 0.12402, "significant": "no"}')
    }
    assert instance.check("@R[0.775] @p-value[1.240e-01] @Significant[No]", files).ok
    assert not instance.check("@r[0.775] @p_value[0.062] @significant[no]", files).ok, "one-sided"
    assert not instance.check("@r[0.775] @p_value[0.124] @significant[yes]", files).ok


def test_filter_rows_by_hand() -> None:
    rows = [
        ["ORD-1", "A", "Spain", 300.00, "shipped", "2024-01-01"],
        ["ORD-2", "B", "Spain", 120.00, "shipped", "2024-01-02"],  # below the threshold
        ["ORD-3", "C", "Spain", 500.50, "cancelled", "2024-01-03"],
        ["ORD-4", "D", "France", 900.00, "shipped", "2024-01-04"],
        ["ORD-5", "E", "Spain", 250.25, "pending", "2024-01-05"],
    ]
    instance = filter_rows.build(0, rows, "Spain", 200)
    assert instance.truth["order_ids"] == ["ORD-1", "ORD-5"]
    assert (instance.truth["count"], instance.truth["total"]) == (2, 550.25)
    out = instance.artifacts[0]
    ids_only = b("Order ID\nORD-5\nORD-1\n")
    assert instance.check("2 orders totalling €550.25", {out: ids_only}).ok
    with_cancelled = b("Order ID\nORD-1\nORD-3\nORD-5\n")
    assert not instance.check("3 orders, 1050.75", {out: with_cancelled}).ok
    assert not instance.check("2 orders", {out: ids_only}).ok, "the total is asked for"


def test_monthly_series_by_hand() -> None:
    rows = [
        ["2025-01-30", 100, 40, 30.0],
        ["2025-01-31", 300, 90, 30.0],
        ["2025-02-01", 50, 20, 30.0],
        ["2025-02-02", 150, 60, 30.0],
        ["2025-03-01", 500, 200, 30.0],
    ]
    total = monthly_series.build(0, rows, "Page Views", "sum")
    assert total.truth["figures"] == {"2025-01": 400, "2025-02": 200, "2025-03": 500}
    assert total.truth["top_month"] == "2025-03"
    mean = monthly_series.build(0, rows, "Page Views", "mean")
    assert mean.truth["figures"] == {"2025-01": 200, "2025-02": 100, "2025-03": 500}
    out = total.artifacts[0]
    month_ends = b("Date,Page Views\n2025-01-31,400\n2025-02-28,200.0\n2025-03-31,500\n")
    assert total.check("@top_month[March 2025]", {out: month_ends}).ok
    assert total.check(
        "@top_month[2025-03]", {out: b("month,v\n2025-03,500\n2025-01,400\n2025-02,200\n")}
    ).ok
    assert not total.check("@top_month[2025-01]", {out: month_ends}).ok
    averages = b("month,page_views\n2025-01,200\n2025-02,100\n2025-03,500\n")
    assert not total.check("@top_month[2025-03]", {out: averages}).ok


def test_join_tables_by_hand() -> None:
    customers = [["C1", "Ana Ito", "Consumer"], ["C2", "Ben Khan", "Corporate"]]
    customers.append(["C3", "Eva Park", "Consumer"])
    invoices = [
        ["INV-1", "C1", "2025-01-01", 100.00],
        ["INV-2", "C2", "2025-01-02", 50.50],
        ["INV-3", "C3", "2025-01-03", 25.25],
        ["INV-4", "C9", "2025-01-04", 1000.00],  # no such customer: left out
    ]
    instance = join_tables.build(0, customers, invoices)
    assert instance.truth["figures"] == {"Consumer": 125.25, "Corporate": 50.5}
    assert instance.truth["unmatched"] == 1
    out = instance.artifacts[0]
    right = b("Segment,Total ($)\nconsumer,125.25\nCORPORATE,50.50\n")
    assert instance.check("Consumer $125.25; Corporate $50.50", {out: right}).ok
    unknown = b("Segment,Total ($)\nConsumer,125.25\nCorporate,50.5\nUnknown,1000.0\n")
    assert not instance.check("Consumer 125.25 Corporate 50.5", {out: unknown}).ok


def test_log_status_by_hand() -> None:
    def line(request: str, status: int) -> str:
        stamp = "[01/Jan/2025:00:00:01 +0000]"
        return f'1.1.1.1 - - {stamp} "{request} HTTP/1.1" {status} 10 "-" "curl/8.5.0" rt=0.1'

    lines = [
        line("GET /a?x=1", 200),
        line("GET /a", 500),
        line("POST /b", 503),
        line("GET /a?y=2", 502),
        line("GET /c", 404),
    ]
    instance = log_status.build(0, lines)
    assert instance.truth == {
        "status_counts": {"200": 1, "404": 1, "500": 1, "502": 1, "503": 1},
        "server_errors": 3,
        "worst_path": "/a",
    }
    out = instance.artifacts[0]
    reversed_tabs = b("requests\tstatus\n1\t200\n1\t404\n1\t500\n1\t502\n1\t503\n")
    assert instance.check("@server_errors[ 3 ] @worst_path[/A]", {out: reversed_tabs}).ok
    assert not instance.check("@server_errors[3] @worst_path[/a?y=2]", {out: reversed_tabs}).ok
    assert not instance.check("@server_errors[2] @worst_path[/a]", {out: reversed_tabs}).ok
    missing_404 = b("status,requests\n200,1\n500,1\n502,1\n503,1\n")
    assert not instance.check("@server_errors[3] @worst_path[/a]", {out: missing_404}).ok


def test_nested_tickets_by_hand() -> None:
    def ticket(tier: str, *events: tuple[str, str | None]) -> dict[str, Any]:
        listed = [{"type": kind, **({"by": by} if by else {})} for kind, by in events]
        return {"id": "T", "customer": {"plan": {"tier": tier}}, "events": listed}

    export = {
        "tickets": [
            ticket("Pro", ("opened", None), ("reply", "agent"), ("reply", "customer")),
            ticket("Pro", ("opened", None), ("reply", "agent"), ("reply", "agent")),
            ticket("Free", ("opened", None), ("reply", "agent"), ("note", None)),
        ]
    }
    instance = nested_tickets.build(0, export)
    assert instance.truth == {
        "Free": {"tickets": 1, "avg_agent_replies": 1.0},
        "Pro": {"tickets": 2, "avg_agent_replies": 1.5},
    }
    out = instance.artifacts[0]
    reordered = b("Tier,Avg agent replies,Tickets\npro,1.50,2\nFREE,1,1\n")
    assert instance.check("Pro: 2 tickets, 1.5 replies; Free: 1 ticket, 1.00", {out: reordered}).ok
    every_reply = b("tier,tickets,avg_agent_replies\nPro,2,2.0\nFree,1,1.0\n")
    assert not instance.check("Pro 2 2.0 Free 1 1.0", {out: every_reply}).ok


def test_top_k_by_hand() -> None:
    rows = [
        ["Alex Kerr", "T", 10, 300, 10, 20.0],  # 30.0 per game
        ["Bo Diaz", "T", 20, 400, 10, 20.0],  # 20.0
        ["Cruz Fox", "T", 2, 100, 10, 20.0],  # 50.0, but fewer than 5 games
        ["Dmitri Gray", "T", 30, 450, 10, 20.0],  # 15.0
        ["Eli Holm", "T", 12, 120, 10, 20.0],  # 10.0
    ]
    instance = top_k.build(0, rows, "points", 3, 5)
    assert instance.truth["top"] == [["Alex Kerr", 30.0], ["Bo Diaz", 20.0], ["Dmitri Gray", 15.0]]
    out = instance.artifacts[0]
    assert out == "artifacts/top3_points_per_game.csv"
    ranked = b("rank,player,ppg\n1,alex kerr,30\n2,Bo Diaz,20.00\n3,DMITRI GRAY,15\n")
    answer = "1. Alex Kerr (30.0)\n2. Bo Diaz (20.0)\n3. Dmitri Gray (15.0)"
    assert instance.check(answer, {out: ranked}).ok
    unfiltered = b("player,ppg\nCruz Fox,50\nAlex Kerr,30\nBo Diaz,20\n")
    assert not instance.check("Cruz Fox, Alex Kerr, Bo Diaz", {out: unfiltered}).ok
    assert not instance.check("Bo Diaz, Alex Kerr, Dmitri Gray", {out: ranked}).ok, "order"


def test_clean_missing_by_hand() -> None:
    rows = [
        ["R1", 30, 50000, "Austin", 3],
        ["R2", "NA", 60000, "Boston", 4],  # dropped
        ["R3", 40, "-", "Boston", 2],  # filled
        ["R4", "-", 10000, "Denver", 5],  # dropped
        ["R5", 50, 80000, "Austin", 1],
        ["R6", 25, "n/a", "Seattle", 3],  # filled
        ["R7", 45, 30000, "Chicago", 4],
    ]
    instance = clean_missing.build(0, rows)
    # kept R1 R3 R5 R6 R7; known incomes 50000 80000 30000 -> median 50000
    assert dict(instance.truth) == {
        "dropped": 2,
        "median_income": 50000.0,
        "mean_income": 52000.0,  # (50000 + 50000 + 80000 + 50000 + 30000) / 5
        "kept_rows": 5,
    }
    out = instance.artifacts[0]
    cleaned = (
        "resp. id,age,annual income (usd)\n"
        "R1,30,50000\nR3,40,50000.0\nR5,50,80000\nR6,25,50000\nR7,45,30000\n"
    )
    answer = "@Dropped[2] @median_income[$50,000.00] @mean_income[52,000]"
    assert instance.check(answer, {out: b(cleaned)}).ok
    dash_kept = "@dropped[1] @median_income[50000] @mean_income[45000]"  # '-' read as a value
    assert not instance.check(dash_kept, {out: b(cleaned)}).ok
    unfilled = cleaned.replace("R3,40,50000.0", "R3,40,")
    assert not instance.check(answer, {out: b(unfilled)}).ok


def test_linear_fit_by_hand() -> None:
    rows = [[f"W{i}", x, 5.0, y] for i, (x, y) in enumerate([(1, 3), (2, 5), (3, 7), (4, 10)])]
    instance = linear_fit.build(0, rows, "TV Spend ($k)", 10.0)
    # sxy = 11.5, sxx = 5: slope 2.3, intercept 6.25 - 2.3 * 2.5 = 0.5; SSE 0.3, SST 26.75
    assert dict(instance.truth) == {
        "predictor": "TV Spend ($k)",
        "at": 10.0,
        "slope": 2.3,
        "intercept": 0.5,
        "r_squared": round(1 - 0.3 / 26.75, 3),
        "predicted_units": 23.5,
    }
    out = instance.artifacts[0]
    data = b('{"Slope": 2.3, "Intercept": 0.5, "R_squared": 0.9888}')
    answer = "@slope[2.30] @intercept[0.5] @r_squared[0.9888] @predicted_units[23.50]"
    assert instance.check(answer, {out: data}).ok
    swapped = b('{"slope": 0.43, "intercept": -0.19, "r_squared": 0.989}')  # x on y
    assert not instance.check(answer, {out: swapped}).ok


def test_pivot_wide_by_hand() -> None:
    rows = [
        ["EMEA", "Q1", "Hardware", 100.0],
        ["EMEA", "Q1", "Software", 50.0],
        ["EMEA", "Q2", "Hardware", 10.0],
        ["EMEA", "Q3", "Hardware", 20.0],
        ["EMEA", "Q4", "Hardware", 30.0],
        ["APAC", "Q1", "Services", 1.0],
        ["APAC", "Q2", "Services", 2.0],
        ["APAC", "Q3", "Services", 3.0],
        ["APAC", "Q4", "Services", 40.5],
    ]
    instance = pivot_wide.build(0, rows)
    assert instance.truth["wide"] == {
        "APAC": {"Q1": 1.0, "Q2": 2.0, "Q3": 3.0, "Q4": 40.5},
        "EMEA": {"Q1": 150.0, "Q2": 10.0, "Q3": 20.0, "Q4": 30.0},
    }
    assert instance.truth["top_q4_region"] == "APAC"
    out = instance.artifacts[0]
    pandas_form = b(
        "Quarter,Q1,Q2,Q3,Q4\nRegion,,,,\nAPAC,1.0,2.0,3.0,40.5\nEMEA,150.0,10.0,20.0,30.0\n"
    )
    assert instance.check("@top_q4_region[apac]", {out: pandas_form}).ok
    reordered = b("Region,2024-Q4,2024-Q3,2024-Q2,2024-Q1\nEMEA,30,20,10,150\nAPAC,40.5,3,2,1\n")
    assert instance.check("@top_q4_region[APAC]", {out: reordered}).ok
    means = b("Region,Q1,Q2,Q3,Q4\nAPAC,1,2,3,40.5\nEMEA,75,10,20,30\n")
    assert not instance.check("@top_q4_region[APAC]", {out: means}).ok
    assert not instance.check("@top_q4_region[EMEA]", {out: pandas_form}).ok


def test_orders_json_by_hand() -> None:
    orders = [
        {
            "order_id": "SO-1",
            "customer": {"name": "Aiko", "country": "Japan"},
            "items": [
                {"sku": "A", "qty": 2, "unit_price": 4.5},
                {"sku": "B", "qty": 1, "unit_price": 12.0},
            ],
        },
        {
            "order_id": "SO-2",
            "customer": {"name": "Bruno", "country": "Brazil"},
            "items": [{"sku": "D", "qty": 1, "unit_price": 129.0}],
        },
        {
            "order_id": "SO-3",
            "customer": {"name": "Hana", "country": "Japan"},
            "items": [{"sku": "C", "qty": 3, "unit_price": 0.99}],
        },
    ]
    instance = orders_json.build(0, orders)
    assert instance.truth == {"figures": {"Brazil": 129.0, "Japan": 23.97}, "top_country": "Brazil"}
    out = instance.artifacts[0]
    right = b("revenue,country\n23.97,japan\n129,Brazil\n")
    assert instance.check("@top_country[brazil] @top_revenue[129.00]", {out: right}).ok
    first_items_only = b("country,revenue\nJapan,21.0\nBrazil,129.0\n")
    assert not instance.check("@top_country[Brazil] @top_revenue[129]", {out: first_items_only}).ok
    assert not instance.check("@top_country[Japan] @top_revenue[129]", {out: right}).ok


def test_dedupe_contacts_by_hand() -> None:
    rows = [
        ["Ada Abe", "ada.abe0@example.com", "2024-05-01", "pro"],
        ["Ada Abe", " ADA.ABE0@EXAMPLE.COM ", "2024-02-01", "free"],
        ["Bo Berg", "bo.berg1@mail.test", "2024-03-03", "team"],
        ["Cai Cruz", "cai.cruz2@corp.example", "2024-01-09", "free"],
        ["Cai Cruz", "Cai.cruz2@corp.example", "2024-07-09", "free"],
        ["Cai Cruz", "cai.cruz2@corp.example ", "2024-08-09", "pro"],
    ]
    instance = dedupe_contacts.build(0, rows)
    assert (instance.truth["unique_contacts"], instance.truth["rows_removed"]) == (3, 3)
    out = instance.artifacts[0]
    kept = b(
        "Full Name,E-mail,Signup Date,Plan\n"
        "Ada Abe, ADA.ABE0@EXAMPLE.COM ,2024-02-01,free\n"
        "Bo Berg,bo.berg1@mail.test,2024-03-03,team\n"
        "Cai Cruz,cai.cruz2@corp.example,2024-01-09,free\n"
    )
    assert instance.check("@unique_contacts[3] @rows_removed[3]", {out: kept}).ok
    latest = kept.replace(b"2024-02-01,free", b"2024-05-01,pro")
    assert not instance.check("@unique_contacts[3] @rows_removed[3]", {out: latest}).ok
    case_only = kept + b"Cai Cruz,cai.cruz2@corp.example ,2024-08-09,pro\n"
    assert not instance.check("@unique_contacts[3] @rows_removed[3]", {out: case_only}).ok
    assert not instance.check("@unique_contacts[4] @rows_removed[2]", {out: kept}).ok


def test_sensor_summary_by_hand() -> None:
    hours = [10.0, 11.0, 12.0, 12.5, 13.0, 14.0, 40.0, "", "NA", 1.0]
    rows = [[f"P{i}", "Leeds", 100.0, h, 2.0] for i, h in enumerate(hours)]
    instance = sensor_summary.build(0, rows)
    # known: 1, 10, 11, 12, 12.5, 13, 14, 40; Q1 = 10.75, Q3 = 13.25 (linear), fences 7, 17
    assert (instance.truth["q1"], instance.truth["q3"]) == (10.75, 13.25)
    assert instance.truth["outlier_parcels"] == ["P6", "P9"]
    out = instance.artifacts[0]
    right = b("Parcel #,Depot,Transit Time (h)\nP6,Leeds,40.0\nP9,Leeds,1.0\n")
    assert instance.check("@q1[10.75] @q3[13.25] @outliers[2]", {out: right}).ok
    one_missed = right.split(b"P9")[0]
    assert not instance.check("@q1[10.75] @q3[13.25] @outliers[2]", {out: one_missed}).ok
    exclusive = "@q1[10.25] @q3[13.75] @outliers[2]"  # another quantile method
    assert not instance.check(exclusive, {out: right}).ok


def test_stock_counts_by_hand() -> None:
    rows = [
        ["AB-120", "North", "2025-02-01", 10],
        ["ab 120", "North", "2025-03-01", 7],
        [" AB120", "South", "2025-01-01", 5],
        ["CK-300", "North", "2025-04-01", 20],
        ["ck300", "North", "2025-02-01", 99],
    ]
    instance = stock_counts.build(0, rows)
    assert instance.truth == {"rows_kept": 3, "total_qty": 32}
    out = instance.artifacts[0]
    kept = b(
        "Item Code,Warehouse,Counted On,Qty\nab 120,North,2025-03-01,7\n"
        "AB120,South,2025-01-01,5\nCK-300,North,2025-04-01,20\n"
    )
    assert instance.check("@rows_kept[3] @total_qty[32]", {out: kept}).ok
    earliest = kept.replace(b"ab 120,North,2025-03-01,7", b"AB-120,North,2025-02-01,10")
    assert not instance.check("@rows_kept[3] @total_qty[35]", {out: earliest}).ok
    by_item_only = b("Item Code,Warehouse,Counted On,Qty\nab 120,North,2025-03-01,7\n"
                     "CK-300,North,2025-04-01,20\n")  # fmt: skip
    assert not instance.check("@rows_kept[2] @total_qty[27]", {out: by_item_only}).ok


def test_events_jsonl_by_hand() -> None:
    events = [
        {"type": "export", "user": {"id": "u1", "plan": "pro"}, "props": {"duration_ms": 1500}},
        {"type": "export", "user": {"id": "u2", "plan": "pro"}, "props": {"duration_ms": 2500}},
        {"type": "upload", "user": {"id": "u2", "plan": "pro"}, "props": {"duration_ms": 9000}},
        {"type": "export", "user": {"id": "u3", "plan": "free"}, "props": {"duration_ms": 3250}},
        {"type": "login", "user": {"id": "u3", "plan": "free"}},
    ]
    instance = events_jsonl.build(0, events)
    assert instance.truth == {"figures": {"free": [1, 3.25], "pro": [2, 2.0]}, "slowest": "free"}
    out = instance.artifacts[0]
    right = b("plan,exports,mean_seconds\npro,2,2.00\nfree,1,3.25\n")
    assert instance.check("@slowest_plan[free] @mean_seconds[3.25]", {out: right}).ok
    with_uploads = b("plan,exports,mean_seconds\npro,3,4.33\nfree,1,3.25\n")
    assert not instance.check("@slowest_plan[pro] @mean_seconds[4.33]", {out: with_uploads}).ok


def test_fill_gaps_by_hand() -> None:
    rows = [
        ["SKU-1", "Tools", "10.00", 1],
        ["SKU-2", "Tools", "n/a", 2],
        ["SKU-3", "Tools", "30.00", 3],
        ["SKU-4", "Furniture", "1,200.00", 4],
        ["SKU-5", "Furniture", "", 5],
        ["SKU-6", "Furniture", "-", 6],
    ]
    instance = fill_gaps.build(0, rows)
    # Tools median 20 fills SKU-2; Furniture median 1200 fills SKU-5 and SKU-6
    assert (instance.truth["filled"], instance.truth["mean_price"]) == (3, 610.0)
    out = instance.artifacts[0]
    right = b("SKU,Category,Unit Price,Stock qty\nSKU-1,Tools,10.0,1\nSKU-2,Tools,20.0,2\n"
              "SKU-3,Tools,30.0,3\nSKU-4,Furniture,1200.0,4\nSKU-5,Furniture,1200.0,5\n"
              "SKU-6,Furniture,1200.0,6\n")  # fmt: skip
    assert instance.check("@filled[3] @mean_price[610.00]", {out: right}).ok
    overall = right.replace(b"SKU-2,Tools,20.0", b"SKU-2,Tools,1200.0")  # not per category
    assert not instance.check("@filled[3] @mean_price[610.00]", {out: overall}).ok
    dropped = b"\n".join(right.split(b"\n")[:-2]) + b"\n"
    assert not instance.check("@filled[3] @mean_price[610.00]", {out: dropped}).ok


def test_tolerant_reading() -> None:
    assert 1234.5 in numbers("total: 1,234.50 EUR") and 0.00012 in numbers("p = 1.2e-04")
    assert tags("@P-Value[ 0.01 ] @top month[2025-03]") == {"pvalue": "0.01", "topmonth": "2025-03"}


# --- the runner: the naive baseline's program through the real sandbox -------------------


async def test_the_baseline_and_product_arms_run_in_the_sandbox(tmp_path: Path) -> None:
    from fleet_core.sandbox.isolation import find_bwrap

    if find_bwrap() is None:
        pytest.skip("bubblewrap not available")
    import bench_tasks

    from fleet_core.api import FleetRuntime
    from fleet_core.config import load_config
    from fleet_core.engine.lm import StaticLmProvider
    from fleet_core.engine.scripted_lm import scripted_lm

    instance = tasks.FAMILIES["group_aggregate"].instance(3)
    fenced = f"```python\n{instance.reference}```"
    elsewhere = "```python\nimport os\nprint(os.getcwd())\nraise ValueError('no')\n```"
    lm = scripted_lm([fenced, elsewhere, fenced])
    environ = {
        "FLEET_STATE_DIR": str(tmp_path / "state"),
        "FLEET_MLFLOW_DESTINATION": "off",
        "FLEET_ENGINE_PROFILE": "small",
    }
    config = load_config(environ=environ, cwd=tmp_path)
    runtime = await FleetRuntime.open(config, lm_provider=StaticLmProvider(lm))
    try:
        src = tmp_path / "src"
        right = await bench_tasks.run_baseline(runtime, instance, src, timeout=60)
        assert (right.status, right.verdict, right.model_calls) == (
            "completed",
            tasks.Verdict(True),
            1,
        )
        prompt = lm.engine_script.requests[0]
        assert instance.task in prompt and instance.files[0].content.splitlines()[1] in prompt
        failed = await bench_tasks.run_baseline(
            runtime, instance, src, timeout=60, session_id="baseline2"
        )
        assert failed.status == "failed" and not failed.verdict.ok
        assert failed.transcript["answer"].strip() == "/workspace", "it ran in the sandbox"
        assert "ValueError" in failed.transcript["error"]
        product = await bench_tasks.run_product(runtime, instance, src)
        assert (product.status, product.verdict.ok, product.route) == ("completed", True, "flex")
        assert product.answer_kind == "submitted"
        assert product.split["sandbox"] > 0, "the reference program ran cells in the sandbox"
        assert product.split["host"] <= product.seconds
    finally:
        await runtime.close()


def test_the_report_gives_each_arm_its_answer_kinds_and_time_split() -> None:
    import bench_tasks

    def run(arm: str, seconds: float, kind: str | None, split: dict[str, float | None]) -> object:
        return bench_tasks.Outcome(
            family="top_k", half="heldout", arm=arm, run=1, seed=1, status="completed",
            correct=kind == "submitted", why="ok", seconds=seconds, model_calls=2,
            prompt_tokens=10, completion_tokens=5, answer_kind=kind, split=split,
        )  # fmt: skip

    split = {"prompt": 6.0, "generation": 2.0, "model_other": 0.0, "model_start": 3.0,
             "sandbox": 1.0, "host": 1.0}  # fmt: skip
    outcomes = [
        run("product", 10.0, "submitted", split),
        run("product", 20.0, "extracted", {**split, "prompt": 16.0}),
        run("baseline", 5.0, None, {}),
    ]
    summary = bench_tasks.summarize(outcomes)  # type: ignore[arg-type]
    product = summary["heldout"]["product"]
    assert product["answer_kinds"] == {"submitted": 1, "extracted": 1}
    assert product["median_split"]["prompt"] == 11.0
    assert product["median_split"]["host_sandbox_share"] == round(4 / 30, 4)
    assert summary["heldout"]["baseline"]["median_split"] == {}
    rendered = bench_tasks.table(summary)
    assert "| extracted 1, submitted 1 | 11.0 / 2.0 / 0.0 / 3.0 / 1.0 / 1.0 |" in rendered
    assert "13.3%" in rendered and "| heldout | baseline | -" not in rendered
