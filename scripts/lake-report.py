#!/usr/bin/env python3
"""The report of an attempt lake, from Spark, ClickHouse or DuckDB.

    scripts/lake-report.py --engine spark|clickhouse|duckdb LAKE \
        [--since T] [--until T] [--workflow NAME] [--horizon 48h] [--skip-bad-files] [--iceberg]

prints the report as JSON, with the keys of `attempt-ledger report --format
json`: `duckdb` runs `attempt-ledger report --lake` (the product's own rules
and report queries over the lake, the same sections); `spark` and `clickhouse` run
queries/lake/<engine>/report.sql and shape its results here, for the
sections those queries derive (workflows, rates, attempts, tokens, cost_usd,
waste_share, by_served_provider, by_served_model, by_workflow,
amplification, by_primary_route, fallbacks). Each adds a `lake` section:
what was read, and how many attempts of the reported workflows fell outside
the horizon around the window.

Before a report, every file of the lake is checked from its footer, as
`attempt-ledger lake check` does: a file that cannot be read, belongs to
another lake or to a node the lake does not know, or has other columns
refuses the report, naming each once; with --skip-bad-files the engines
read the other files and the `lake` section lists what was left out.

spark needs pyspark (and Java); clickhouse needs chdb; both read footers
with pyarrow. All are in tests/python/lake/requirements.txt. The SQL files
run unchanged on a cluster: see docs/scale-out.md.
"""

import argparse
import datetime as dt
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUERIES = ROOT / "queries" / "lake"
# The lake layout this runner reads (src/lake/mod.rs, FORMAT_VERSION).
FORMAT_VERSION = 2

# The report's bounds on its lists (src/report/fold.rs).
WORKFLOWS = 100
ROUTES = 50
FALLBACKS = 50
OTHER = "other"
PER_USD = 1e12
OUTCOMES = ["primary_success", "retry_recovery", "fallback_recovery", "degraded", "fail_closed", "queued",
            "in_flight"]
TERMINAL = OUTCOMES[:5]
# Why a cost is unknown (queries/rules/rules.sql, unknown_cost_reason).
UNKNOWN_COST_REASONS = ["no_usage", "other_currency", "no_price", "no_tier_price", "no_kind_price"]


def parse_time(text):
    """RFC 3339 or a date (midnight UTC), as `report` takes them."""
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
            return dt.datetime.fromisoformat(text).replace(tzinfo=dt.timezone.utc)
        value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"`{text}` is not a time: RFC 3339 or YYYY-MM-DD")
    if value.tzinfo is None:
        raise argparse.ArgumentTypeError(f"`{text}` has no time zone: add Z or an offset")
    return value.astimezone(dt.timezone.utc)


def parse_horizon(text):
    match = re.fullmatch(r"(\d+)\s*([smhd]?)", text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"`{text}` is not a duration such as 48h, 90m or 2d")
    unit = {"": 3600, "s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)]
    seconds = int(match.group(1)) * unit
    if seconds > 366 * 86400:
        raise argparse.ArgumentTypeError("the horizon is at most a year")
    return dt.timedelta(seconds=seconds)


# An added column no file of the lake holds yet (every file predates it)
# reads as NULL of its type: the engines' types of the manifest's.
SPARK_TYPES = {"VARCHAR": "string", "BIGINT": "bigint", "BOOLEAN": "boolean"}
CLICKHOUSE_TYPES = {"VARCHAR": "String", "BIGINT": "Int64", "BOOLEAN": "Bool"}


# The added columns the reports read: a lake older than one lacks it in
# its manifest too.
REPORTED_ADDED = [("reasoning_output_tokens", "BIGINT"), ("cost_currency", "VARCHAR"), ("batch", "BOOLEAN"),
                  ("service_tier", "VARCHAR"), ("billing_account", "VARCHAR"),
                  ("cache_write_1h_input_tokens", "BIGINT"), ("web_search_requests", "BIGINT")]


def absent_added_columns(manifest, files):
    """The added columns (the manifest's and those the reports read) that
    none of `files` holds, with their types."""
    import pyarrow.parquet as pq

    held = set()
    for path in files:
        held.update(pq.read_schema(path).names)
    added = [(c["name"], c["type"]) for c in manifest["schema"] if c.get("added")]
    added += [c for c in REPORTED_ADDED if c[0] not in {name for name, _ in added}]
    return [(name, kind) for name, kind in added if name not in held]


# The footer's Arrow types as the manifest's DuckDB types.
DUCKDB_TYPES = {"string": "VARCHAR", "large_string": "VARCHAR", "int64": "BIGINT", "int32": "INTEGER",
                "int16": "SMALLINT", "int8": "TINYINT", "uint64": "UBIGINT", "uint32": "UINTEGER",
                "double": "DOUBLE", "float": "FLOAT", "bool": "BOOLEAN", "date32[day]": "DATE",
                "timestamp[us]": "TIMESTAMP", "timestamp[us, tz=UTC]": "TIMESTAMP WITH TIME ZONE"}


def walk(folder):
    """Every file under `folder` but hidden ones (staged files), sorted."""
    out = []
    if not folder.is_dir():
        return out
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith("."):
            continue
        out.extend(walk(entry) if entry.is_dir() else [entry])
    return out


def known_nodes(lake):
    nodes = set()
    folder = lake / "_nodes"
    if folder.is_dir():
        for entry in folder.iterdir():
            if entry.is_dir() and any(entry.glob("claim-*.json")):
                nodes.add(entry.name)
    return nodes


def listed_files(lake, nodes):
    """What the finished export records list: path -> (node, export id, rows)."""
    listed = {}
    for node in nodes:
        for record_path in sorted((lake / "_nodes" / node / "exports").glob("*.json")):
            try:
                record = json.loads(record_path.read_text())
            except (OSError, ValueError):
                continue
            if record.get("state") == "finished":
                for f in record.get("files", []):
                    listed["attempts/" + f["path"]] = (node, record["export_id"], f["rows"])
    return listed


def expired_before(lake):
    """The day before which `lake expire` took every day out (_expired.json), or None."""
    try:
        return dt.date.fromisoformat(json.loads((lake / "_expired.json").read_text())["before"])
    except FileNotFoundError:
        return None


def expired(rel, horizon):
    """Whether `rel` (attempts/day=YYYY-MM-DD/...) is of a day before the lake's horizon."""
    parts = rel.split("/")
    if horizon is None or len(parts) < 2 or not parts[1].startswith("day="):
        return False
    try:
        return dt.date.fromisoformat(parts[1][4:]) < horizon
    except ValueError:
        return False


def placement(rel, buckets):
    parts = rel.split("/")
    if len(parts) == 4 and parts[0] == "attempts" and re.fullmatch(r"day=\d{4}-\d{2}-\d{2}", parts[1]) \
            and re.fullmatch(r"bucket=\d+", parts[2]) and int(parts[2][7:]) < buckets:
        try:
            dt.date.fromisoformat(parts[1][4:])
        except ValueError:
            pass
        else:
            if parts[3].endswith(".parquet") and not parts[3].startswith("_"):
                return None
            return "foreign: not a Parquet file of the lake (Spark reads every file of a partition folder)"
    return (f"misplaced: not in a partition folder of this lake (attempts/day=YYYY-MM-DD/bucket=NN/, "
            f"{buckets} buckets)")


def survey(lake, manifest):
    """(good attempts files, good price files, bad files, whether files of expired days were left out)
    as src/lake/survey.rs finds them."""
    import pyarrow.parquet as pq

    nodes = known_nodes(lake)
    horizon = expired_before(lake)
    # Days the lake expired are left out, and none of their files is missing.
    listed = {rel: v for rel, v in listed_files(lake, nodes).items() if not expired(rel, horizon)}
    expected = [(c["name"], c["type"]) for c in manifest["schema"]]
    # A file written before the lake's trailing added columns lacks them.
    required = max((i + 1 for i, c in enumerate(manifest["schema"]) if not c.get("added")), default=0)
    good, bad, seen = [], [], set()
    left_out = False

    def attempts_of(rel):
        return listed[rel][2] if rel in listed else None

    for path in walk(lake / "attempts"):
        rel = path.relative_to(lake).as_posix()
        if expired(rel, horizon):
            left_out = True
            continue
        reason = placement(rel, manifest["buckets"])
        if reason is None:
            seen.add(rel)
            try:
                meta = pq.read_metadata(path)
            except Exception as error:  # pyarrow's own words for what is wrong
                reason = f"unreadable: {str(error).splitlines()[0]}"
            else:
                kv = {k.decode(errors="replace"): v.decode(errors="replace")
                      for k, v in (meta.metadata or {}).items()}
                columns = [(f.name, DUCKDB_TYPES.get(str(f.type), str(f.type)))
                           for f in meta.schema.to_arrow_schema()]
                lake_id, node = kv.get("lake_id"), kv.get("node", "")
                if lake_id is None:
                    reason = "foreign: its footer names no lake (not written by an attempt-ledger export)"
                elif lake_id != manifest["lake_id"]:
                    reason = f"foreign: written for lake {lake_id}, not this lake ({manifest['lake_id']})"
                elif node not in nodes:
                    reason = f"unknown node: `{node}` has no claim in this lake (_nodes/{node}/)"
                elif not required <= len(columns) <= len(expected) or [c[0] for c in columns] != [
                        c[0] for c in expected[:len(columns)]] or any(
                        got[1] != want[1] for got, want in zip(columns, expected)
                        if got[1] in DUCKDB_TYPES.values()):
                    reason = "wrong schema: its columns are not the manifest's"
                elif rel in listed and kv.get("export_id", "") != listed[rel][1]:
                    reason = (f"replaced: export {kv.get('export_id', '')} wrote it, but the lake's record of "
                              f"this path names export {listed[rel][1]}")
        if reason is None:
            good.append(path)
        else:
            bad.append({"path": rel, "reason": reason, "attempts": attempts_of(rel)})
    for rel, (node, export_id, rows) in listed.items():
        if rel not in seen and not any(b["path"] == rel for b in bad):
            bad.append({"path": rel, "reason": f"missing: export {export_id} of node {node} wrote it, and it "
                                               f"is not in the lake", "attempts": rows})
    good_prices = []
    for path in walk(lake / "prices"):
        rel = path.relative_to(lake).as_posix()
        try:
            meta = pq.read_metadata(path)
        except Exception as error:
            bad.append({"path": rel, "reason": f"unreadable: {str(error).splitlines()[0]}", "attempts": None})
            continue
        kv = {k.decode(errors="replace"): v.decode(errors="replace") for k, v in (meta.metadata or {}).items()}
        if not rel.endswith(".parquet"):
            reason = "not a Parquet file of the lake"
        elif path.stem not in nodes:
            reason = f"unknown node: `{path.stem}` has no claim in this lake (_nodes/{path.stem}/)"
        elif kv.get("lake_id", manifest["lake_id"]) != manifest["lake_id"]:
            reason = f"foreign: written for lake {kv['lake_id']}, not this lake ({manifest['lake_id']})"
        else:
            good_prices.append(path)
            continue
        bad.append({"path": rel, "reason": reason, "attempts": None})
    bad.sort(key=lambda b: b["path"])
    return good, good_prices, bad, left_out


def refusal(lake, bad):
    lines = [f"the lake {lake} has {len(bad)} files no reader can use:"]
    lines += [f"  {b['path']}: {b['reason']}" for b in bad]
    lines.append(f"Move them out of the lake (`attempt-ledger lake check {lake}` shows the whole lake), or read "
                 f"without them with --skip-bad-files: the report then says how many attempts' worth of files it "
                 f"left out")
    return "\n".join(lines)


def statements(sql):
    """The file's statements, each with the result name a `-- result:` line
    before it gives (None for the others)."""
    out, current, name = [], [], None
    for line in sql.splitlines():
        marker = re.match(r"\s*--\s*result:\s*(\w+)", line)
        if marker:
            name = marker.group(1)
            continue
        code = re.sub(r"--.*$", "", line) if line.lstrip().startswith("--") else line
        current.append(code)
        if code.rstrip().endswith(";"):
            text = "\n".join(current).strip().rstrip(";").strip()
            if text:
                out.append((name, text))
            current, name = [], None
    return out


def substitute(sql, values):
    return re.sub(r"\$\{(\w+)\}", lambda m: values[m.group(1)], sql)


class Spark:
    name = "spark"

    def __init__(self, lake, files=None, prices=None, absent=()):
        from pyspark.sql import SparkSession
        from pyspark.sql.functions import lit

        builder = SparkSession.builder
        # Under spark-submit (or Databricks) the cluster's master stands;
        # run by itself, a local Spark on two cores.
        if "ATTEMPT_LEDGER_SPARK_MASTER" in os.environ or "PYSPARK_GATEWAY_PORT" not in os.environ:
            builder = builder.master(os.environ.get("ATTEMPT_LEDGER_SPARK_MASTER", "local[2]"))
        self.spark = (
            builder
            .appName("attempt-ledger lake report")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", os.environ.get("ATTEMPT_LEDGER_SPARK_PARTITIONS", "8"))
            .getOrCreate()
        )
        self.spark.sparkContext.setLogLevel("ERROR")
        attempts = [str(f) for f in files] if files is not None else [str(lake / "attempts")]
        # Every file's columns, whichever Spark opens first: a file written
        # before an added column reads it as NULL.
        rows = self.spark.read.option("basePath", str(lake / "attempts")).option("mergeSchema", "true") \
            .parquet(*attempts)
        for name, duckdb_type in absent:
            rows = rows.withColumn(name, lit(None).cast(SPARK_TYPES[duckdb_type]))
        rows.createOrReplaceTempView("lake_rows")
        prices = [str(f) for f in prices] if prices is not None else [str(lake / "prices")]
        self.spark.read.parquet(*prices).createOrReplaceTempView("lake_price_rows")

    def timestamp(self, t):
        if t is None:
            return "CAST(NULL AS TIMESTAMP_NTZ)"
        return f"TIMESTAMP_NTZ '{t.strftime('%Y-%m-%d %H:%M:%S.%f')}'"

    def text(self, s):
        if s is None:
            return "CAST(NULL AS STRING)"
        # Spark's string literals take backslash escapes: hex says it exactly.
        return f"decode(unhex('{s.encode().hex()}'), 'UTF-8')"

    def params(self):
        return {}

    def close(self):
        self.spark.stop()

    def reset(self):
        """Drops what one report cached, so the next runs in the same session."""
        self.spark.catalog.clearCache()
        for table in self.spark.catalog.listTables():
            if table.isTemporary and table.name not in ("lake_rows", "lake_price_rows"):
                self.spark.catalog.dropTempView(table.name)

    def run(self, sql, want):
        frame = self.spark.sql(sql)
        if not want:
            return None
        return [row.asDict() for row in frame.collect()]


class ClickHouse:
    name = "clickhouse"
    renamed = {"route_provider": "primary_provider", "route_model": "primary_model",
               "to_provider": "fallback_provider", "to_model": "fallback_model"}

    def __init__(self, lake, sources=None, connect=True, files=None, prices=None, absent=()):
        self.lake = lake
        self.sources = dict(sources or {})
        self.absent = absent
        # Only some files (the others are bad): a glob of alternatives, which
        # ClickHouse expands across folders.
        for key, chosen in [("attempts", files), ("prices", prices)]:
            if chosen is not None and not self.sources.get(key):
                relative = ",".join(f.relative_to(lake).as_posix() for f in chosen)
                self.sources[key] = f"file({self.quote(str(lake) + '/{' + relative + '}')}, Parquet)"
        if connect:
            from chdb import session

            self.session = session.Session()
            if files is not None or prices is not None:
                self.session.query("SET max_query_size = 268435456", "CSV")

    @staticmethod
    def quote(text):
        return "'" + str(text).replace("\\", "\\\\").replace("'", "\\'") + "'"

    def timestamp(self, t):
        if t is None:
            return "CAST(NULL AS Nullable(DateTime64(6, 'UTC')))"
        return f"toDateTime64('{t.strftime('%Y-%m-%d %H:%M:%S.%f')}', 6, 'UTC')"

    def text(self, s):
        if s is None:
            return "CAST(NULL AS Nullable(String))"
        return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"

    def params(self):
        quote = self.quote
        return {
            "attempts_files": self.sources.get("attempts")
            or f"file({quote(self.lake / 'attempts' / '*' / '*' / '*.parquet')}, Parquet)",
            "price_files": self.sources.get("prices") or f"file({quote(self.lake / 'prices' / '*.parquet')}, Parquet)",
            "db": f"lake_report_{os.getpid()}",
            "absent_columns": "".join(f", CAST(NULL AS Nullable({CLICKHOUSE_TYPES[t]})) AS {name}"
                                      for name, t in self.absent),
        }

    def reset(self):
        pass

    def close(self):
        # Closed before the interpreter exits: a session left open makes
        # the exit wait some ten seconds for chdb's background threads.
        self.session.query(f"DROP DATABASE IF EXISTS {self.params()['db']}", "CSV")
        self.session.close()

    def run(self, sql, want):
        result = self.session.query(sql, "JSONEachRow" if want else "CSV")
        if not want:
            return None
        text = result.bytes().decode()
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
        return [{self.renamed.get(k, k): v for k, v in row.items()} for row in rows]


def number(value):
    """Integers as the engines return them (Decimal, a quoted Int128) as int."""
    return None if value is None else int(value)


def usd(pico):
    return float(int(pico)) / PER_USD


def share(part, whole):
    whole = float(whole)
    return None if whole == 0.0 else float(part) / whole


def fold(rows, keep, key, renamed, add):
    """src/report/fold.rs: keep the first `keep`, add the rest into their
    `other` row (a kept one of that key, else a new one at the end)."""
    if len(rows) <= keep:
        return rows
    kept = rows[:keep]
    for row in rows[keep:]:
        other = renamed(row)
        for k in kept:
            if key(k) == key(other):
                add(k, row)
                break
        else:
            kept.append(other)
    return kept


def counts(row):
    total = {"total": number(row["workflows"])}
    total.update({o: number(row[o]) for o in OUTCOMES})
    return total


def rates(c):
    terminal = sum(c[o] for o in TERMINAL)
    return {o: share(c[o], terminal) for o in TERMINAL}


def shape(results, lake_section):
    outcomes = results["outcomes"]
    total = next((r for r in outcomes if r["is_total"] in (True, 1)), None)
    by_name = [dict(r) for r in outcomes if r["is_total"] not in (True, 1)]
    w = {k: number(v) for k, v in results["waste"][0].items()}
    workflows = counts(total) if total else {"total": 0, **{o: 0 for o in OUTCOMES}}
    amplification = results["amplification"]

    def per_workflow(row):
        return {"mean": share(number(row["attempts"]), number(row["workflows"])), "p50": number(row["p50"]),
                "p99": number(row["p99"]), "max": number(row["max"])}

    all_layers = next((r for r in amplification if r["layer"] == "all"), None)

    def add_named(into, row):
        for k in ["workflows", *OUTCOMES, "attempts", "wasted_attempts", "cost_pusd", "wasted_cost_pusd"]:
            into[k] = number(into[k]) + number(row[k])

    by_name = fold(by_name, WORKFLOWS, lambda r: r["workflow_name"], lambda r: {**r, "workflow_name": OTHER},
                   add_named)

    def route_key(r, prefix):
        return (r[f"{prefix}_route_group"], r[f"{prefix}_provider"], r[f"{prefix}_model"])

    other_route = {"route_group": None, "provider": OTHER, "model": OTHER}

    def renamed_route(r, prefixes):
        out = dict(r)
        for prefix in prefixes:
            for part, value in other_route.items():
                out[f"{prefix}_{part}"] = value
        return out

    def add_fields(fields):
        def add(into, row):
            for k in fields:
                into[k] = number(into[k]) + number(row[k])
        return add

    route_counts = ["workflows", "terminal", *TERMINAL]
    routes = fold([dict(r) for r in results["routes"]], ROUTES, lambda r: route_key(r, "primary"),
                  lambda r: renamed_route(r, ["primary"]), add_fields(route_counts))
    fallbacks = fold([dict(r) for r in results["fallbacks"]], FALLBACKS,
                     lambda r: (route_key(r, "primary"), route_key(r, "fallback"), r["reason"]),
                     lambda r: renamed_route(r, ["primary", "fallback"]), add_fields(["workflows", "recovered"]))
    served = results["served"]
    return {
        "workflows": workflows,
        "rates": rates(workflows),
        "attempts": {
            "total": w["attempts"],
            "wasted": w["wasted_attempts"],
            "per_workflow": per_workflow(all_layers) if all_layers
            else {"mean": None, "p50": None, "p99": None, "max": None},
        },
        "tokens": {
            "total": {"input": w["input_tokens"], "output": w["output_tokens"],
                      "cached_input": w["cached_input_tokens"], "cache_write_input": w["cache_write_input_tokens"],
                      "reasoning_output": w["reasoning_output_tokens"],
                      "cache_write_1h_input": w["cache_write_1h_input_tokens"]},
            "wasted": {"input": w["wasted_input_tokens"], "output": w["wasted_output_tokens"],
                       "cached_input": w["wasted_cached_input_tokens"],
                       "cache_write_input": w["wasted_cache_write_input_tokens"],
                       "reasoning_output": w["wasted_reasoning_output_tokens"],
                       "cache_write_1h_input": w["wasted_cache_write_1h_input_tokens"]},
        },
        "cost_usd": {
            "total": usd(w["cost_pusd"]),
            "wasted": usd(w["wasted_cost_pusd"]),
            "unknown_cost_attempts": w["unknown_cost_attempts"],
            "wasted_unknown_cost_attempts": w["wasted_unknown_cost_attempts"],
            "unknown_cost_reasons": {reason: w[reason] for reason in UNKNOWN_COST_REASONS},
            "region_unpriced_attempts": w["region_unpriced_attempts"],
            "web_search_requests": w["web_search_requests"],
            "wasted_web_search_requests": w["wasted_web_search_requests"],
        },
        "waste_share": {
            "attempts": share(w["wasted_attempts"], w["attempts"]),
            "tokens": share(float(w["wasted_input_tokens"] + w["wasted_output_tokens"]),
                            float(w["input_tokens"] + w["output_tokens"])),
            "input_tokens": share(w["wasted_input_tokens"], w["input_tokens"]),
            "output_tokens": share(w["wasted_output_tokens"], w["output_tokens"]),
            "cost": share(w["wasted_cost_pusd"], w["cost_pusd"]),
        },
        "by_served_provider": [
            {"served_provider": r["served_provider"], "attempts": number(r["attempts"]),
             "rerouted_attempts": number(r["rerouted_attempts"]), "cost_usd": usd(r["cost_pusd"]),
             "wasted_cost_usd": usd(r["wasted_cost_pusd"]), "unknown_cost_attempts": number(r["unknown_cost_attempts"]),
             "prices_as_of": r["prices_as_of"]}
            for r in served if r["served_model"] is None
        ],
        "by_served_model": [
            {"served_provider": r["served_provider"], "served_model": r["served_model"],
             "attempts": number(r["attempts"]), "wasted_attempts": number(r["wasted_attempts"]),
             "rerouted_attempts": number(r["rerouted_attempts"]), "input_tokens": number(r["input_tokens"]),
             "output_tokens": number(r["output_tokens"]), "cached_input_tokens": number(r["cached_input_tokens"]),
             "cost_usd": usd(r["cost_pusd"]), "wasted_cost_usd": usd(r["wasted_cost_pusd"]),
             "unknown_cost_attempts": number(r["unknown_cost_attempts"]), "prices_as_of": r["prices_as_of"]}
            for r in served if r["served_model"] is not None
        ],
        "by_workflow": [
            {"workflow": r["workflow_name"], "workflows": counts(r), "rates": rates(counts(r)),
             "attempts": number(r["attempts"]), "wasted_attempts": number(r["wasted_attempts"]),
             "cost_usd": usd(r["cost_pusd"]), "wasted_cost_usd": usd(r["wasted_cost_pusd"])}
            for r in by_name
        ],
        "amplification": [
            {"layer": r["layer"], "attempts": number(r["attempts"]), "per_workflow": per_workflow(r)}
            for r in amplification
        ],
        "by_primary_route": [
            {"route_group": r["primary_route_group"], "provider": r["primary_provider"],
             "model": r["primary_model"], **{k: number(r[k]) for k in route_counts},
             "primary_success_rate": share(number(r["primary_success"]), number(r["terminal"]))}
            for r in routes
        ],
        "fallbacks": [
            {"primary_route_group": r["primary_route_group"], "primary_provider": r["primary_provider"],
             "primary_model": r["primary_model"], "fallback_route_group": r["fallback_route_group"],
             "fallback_provider": r["fallback_provider"], "fallback_model": r["fallback_model"],
             "reason": r["reason"], "workflows": number(r["workflows"]), "recovered": number(r["recovered"])}
            for r in fallbacks
        ],
        "lake": lake_section,
    }


def parameters(engine, args):
    """The SQL file's parameters for one report, as the engine's literals."""
    return {
        "read_from": engine.timestamp(args.since - args.horizon if args.since else None),
        "read_until": engine.timestamp(args.until + args.horizon if args.until else None),
        "since": engine.timestamp(args.since),
        "until": engine.timestamp(args.until),
        "workflow": engine.text(args.workflow),
        **engine.params(),
    }


def engine_report(engine, args, manifest, skipped):
    engine.reset()
    windowed = args.since is not None or args.until is not None
    values = parameters(engine, args)
    sql = (QUERIES / engine.name / "report.sql").read_text()
    results = {}
    for number_in_file, (name, statement) in enumerate(statements(sql), 1):
        try:
            rows = engine.run(substitute(statement, values), name is not None)
        except Exception as error:  # the engine's own error, named by the statement it failed on
            first = statement.splitlines()[0]
            sys.exit(f"error: {engine.name} failed on statement {number_in_file} of "
                     f"queries/lake/{engine.name}/report.sql ({first}): {error}")
        if name:
            results[name] = rows
    copies = results["copies"][0]
    lake_section = {
        "engine": engine.name,
        "lake_id": manifest["lake_id"],
        "copies_read": number(copies["copies_read"]),
        "attempts": number(copies["attempts"]),
        "horizon_hours": args.horizon.total_seconds() / 3600.0 if windowed else None,
        "attempts_outside_horizon": number(results["outside"][0]["attempts_outside_horizon"]),
        "skipped_files": skipped,
        "skipped_attempts": sum(b["attempts"] or 0 for b in skipped),
    }
    return shape(results, lake_section)


def duckdb_report(args):
    binary = os.environ.get("ATTEMPT_LEDGER_BIN", "attempt-ledger")
    command = [binary, "report", "--lake", str(args.lake), "--format", "json", "--no-audit",
               "--horizon", f"{int(args.horizon.total_seconds())}s"]
    for flag, value in [("--since", args.since), ("--until", args.until)]:
        if value is not None:
            command += [flag, value.isoformat().replace("+00:00", "Z")]
    if args.workflow is not None:
        command += ["--workflow", args.workflow]
    if args.skip_bad_files:
        command.append("--skip-bad-files")
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"error: {' '.join(command)} failed:\n{done.stderr}")
    return json.loads(done.stdout)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", required=True, choices=["spark", "clickhouse", "duckdb"])
    parser.add_argument("lake", type=Path)
    parser.add_argument("--since", type=parse_time)
    parser.add_argument("--until", type=parse_time)
    parser.add_argument("--workflow")
    parser.add_argument("--horizon", type=parse_horizon, default=dt.timedelta(hours=48),
                        help="how far around --since/--until the lake is read (48h)")
    parser.add_argument("--print-sql", action="store_true",
                        help="clickhouse: print the statements with their parameters instead of running them "
                             "(for clickhouse-client --multiquery on a server)")
    parser.add_argument("--attempts-source", metavar="EXPR",
                        help="clickhouse: the table function of the attempts files, e.g. "
                             "s3('https://bucket.s3.amazonaws.com/lake/attempts/*/*/*.parquet', 'Parquet')")
    parser.add_argument("--prices-source", metavar="EXPR", help="clickhouse: the same for the prices files")
    parser.add_argument("--iceberg", action="store_true",
                        help="clickhouse: read the attempts of the lake's Iceberg table (`export --table-format "
                             "iceberg`) by ClickHouse's own Iceberg reader, from the table's latest metadata")
    parser.add_argument("--skip-bad-files", action="store_true",
                        help="report from the lake's good files when some cannot be read or do not belong to it "
                             "(by default such a lake is refused, naming them)")
    parser.add_argument("--batch", type=Path, metavar="FILE",
                        help="a JSON list of {since, until, workflow, horizon} objects: one engine session "
                             "answers each, and a JSON list of reports is printed")
    args = parser.parse_args()
    args.lake = args.lake.resolve()
    if not (args.lake / "_lake.json").exists():
        sys.exit(f"error: no attempt lake at {args.lake}: its _lake.json is missing")
    try:
        manifest = json.loads((args.lake / "_lake.json").read_text())
    except (OSError, ValueError) as error:
        sys.exit(f"error: {args.lake / '_lake.json'} is not an attempt lake's manifest: {error}")
    if manifest.get("format_version") != FORMAT_VERSION:
        sys.exit(f"error: {args.lake / '_lake.json'} is lake format version {manifest.get('format_version')}; "
                 f"this runner reads version {FORMAT_VERSION}")
    cases = [args]
    if args.batch:
        cases = []
        for i, case in enumerate(json.loads(args.batch.read_text())):
            try:
                cases.append(argparse.Namespace(
                    lake=args.lake,
                    since=parse_time(case["since"]) if case.get("since") else None,
                    until=parse_time(case["until"]) if case.get("until") else None,
                    workflow=case.get("workflow"),
                    horizon=parse_horizon(case["horizon"]) if case.get("horizon") else args.horizon,
                    skip_bad_files=args.skip_bad_files,
                ))
            except (argparse.ArgumentTypeError, AttributeError, TypeError) as error:
                sys.exit(f"error: {args.batch}: case {i}: {error}")
    sources = {"attempts": args.attempts_source, "prices": args.prices_source}
    if args.iceberg:
        if args.engine != "clickhouse" or args.attempts_source:
            sys.exit("error: --iceberg is for --engine clickhouse, without --attempts-source")
        if not (args.lake / "metadata").is_dir():
            sys.exit(f"error: the lake {args.lake} has no Iceberg table (no metadata/): export with --table-format iceberg")
        # The table's columns are the lake's, by field id; `day` is the
        # partition folder's in the files, derived here as the table does.
        sources["attempts"] = "(SELECT *, toDate(started_at) AS day FROM icebergLocal('.'))"
        # chdb opens local tables only under its working folder.
        os.chdir(args.lake)
    if args.print_sql:
        if args.engine != "clickhouse":
            sys.exit("error: --print-sql is for --engine clickhouse (Spark runs the file itself: see docs/scale-out.md)")
        engine = ClickHouse(args.lake, sources, connect=False)
        values = parameters(engine, args)
        sql = (QUERIES / "clickhouse" / "report.sql").read_text()
        for name, statement in statements(sql):
            print(f"-- result: {name}" if name else "", substitute(statement, values) + ";", sep="\n")
        return
    engine, skipped = None, []
    if args.engine != "duckdb":
        good, good_prices, skipped, left_out = survey(args.lake, manifest)
        if skipped and (not args.skip_bad_files or not good):
            sys.exit("error: " + refusal(args.lake, skipped))
        if not good:
            sys.exit(f"error: the attempt lake {args.lake} holds no attempts yet: export to it first")
        if not good_prices:
            sys.exit(f"error: the attempt lake {args.lake} has no usable prices/<node>.parquet: export to it again")
        for bad in skipped:
            print(f"skipped {bad['path']}: {bad['reason']}", file=sys.stderr)
        # A glob of the lake's folders would take files the survey left out.
        chosen = (good, good_prices) if skipped or left_out else (None, None)
        # The Iceberg table has every column, NULL in files written before it.
        absent = () if args.iceberg else absent_added_columns(manifest, good)
        if args.engine == "spark":
            engine = Spark(args.lake, *chosen, absent=absent)
        else:
            engine = ClickHouse(args.lake, sources, files=chosen[0], prices=chosen[1], absent=absent)
    try:
        reports = [duckdb_report(case) if engine is None else engine_report(engine, case, manifest, skipped)
                   for case in cases]
    finally:
        if engine is not None:
            engine.close()
    json.dump(reports if args.batch else reports[0], sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
