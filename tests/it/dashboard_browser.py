"""Loads every page of the built-in dashboard in Debian's headless Chromium,
driven through chromium-driver by Selenium, against a service holding the
demo's simulated incidents, and checks what a person sees against the JSON
the service answers scripts with.

usage: dashboard_browser.py BASE_URL READ_TOKEN SCREENSHOT_DIR WORKFLOW_ID SINCE UNTIL
Exits non-zero with the first difference found.
"""

import json
import os
import re
import sys
import time
import urllib.parse
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

BASE, TOKEN, SHOTS, WORKFLOW_ID, SINCE, UNTIL = sys.argv[1:7]
NIGHT = "?" + urllib.parse.urlencode({"since": SINCE, "until": UNTIL})

# Selenium must not download a driver: Debian's matches Debian's browser.
os.environ["SE_OFFLINE"] = "true"


def api(path):
    request = urllib.request.Request(BASE + path, headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.load(response)


def browser():
    options = Options()
    options.binary_location = "/usr/bin/chromium"
    for flag in [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1280,1800",
        f"--user-data-dir={os.path.join(SHOTS, 'profile')}",
    ]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def console_errors(driver):
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def visit(driver, path, shot=None):
    driver.get(BASE + path)
    errors = console_errors(driver)
    check(not errors, f"{path}: the console logged errors: {errors}")
    check(not driver.find_elements(By.CSS_SELECTOR, "[data-error]"), f"{path}: an error page: {driver.page_source[:2000]}")
    if shot:
        driver.save_screenshot(os.path.join(SHOTS, f"{shot}.png"))


def collect(driver, selector, *attributes):
    """Attributes of every element matching selector, in document order (one
    round trip, not one per element)."""
    return driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]))"
        ".map(e => arguments[1].map(a => a === 'text' ? e.textContent : e.getAttribute(a)));",
        selector,
        list(attributes),
    )


def value_of(text):
    return None if text == "null" else float(text)


def lookup(report, path):
    if path == "final_success":
        w = report["workflows"]
        delivered = w["primary_success"] + w["retry_recovery"] + w["fallback_recovery"]
        terminal = delivered + w["degraded"] + w["fail_closed"]
        return delivered / terminal if terminal else None
    if path == "tokens.wasted.input+output":
        return report["tokens"]["wasted"]["input"] + report["tokens"]["wasted"]["output"]
    node = report
    for key in path.split("."):
        node = node[key]
    return node


def shown(text):
    """The number a person reads: $1,234.56 -> 1234.56, 81.23 % -> 0.8123."""
    text = text.strip()
    if text == "–":
        return None
    scale = 0.01 if text.endswith("%") else 1.0
    number = float(re.sub(r"[^0-9.\-]", "", text))
    return number * scale


def decimals(text):
    digits = re.sub(r"[^0-9.]", "", text)
    places = len(digits.split(".")[1]) if "." in digits else 0
    return places + (2 if text.strip().endswith("%") else 0)


def same_figures(driver, report, page):
    figures = collect(driver, "[data-figure]", "data-figure", "data-value", "text")
    check(len(figures) >= 5, f"{page}: only {len(figures)} figures")
    for path, raw, text in figures:
        want = lookup(report, path)
        got = value_of(raw)
        check(got == want, f"{page}: {path} is {got} on the page, {want} in the report")
        if want is not None:
            read = shown(text)
            check(abs(read - want) <= 0.5 * 10 ** -decimals(text) + 1e-12, f"{page}: {path} reads {text!r}, the report says {want}")
    return len(figures)


def charts_drawn(driver, page, expected):
    ids = [c[0] for c in collect(driver, "figure.chart", "data-chart")]
    for chart in expected:
        check(chart in ids, f"{page}: no chart {chart} (has {ids})")
    for chart in ids:
        marks = driver.execute_script(
            "const svg = document.querySelector(`figure[data-chart='${arguments[0]}'] > svg`);"
            "return svg ? svg.querySelectorAll('polygon, path, polyline, rect, line').length : -1;",
            chart,
        )
        check(marks > 10, f"{page}: chart {chart} has {marks} marks")
        width = driver.execute_script(
            "return document.querySelector(`figure[data-chart='${arguments[0]}'] > svg`).getBoundingClientRect().width;", chart)
        check(width > 300, f"{page}: chart {chart} is {width}px wide")


def column_sums(driver, chart):
    sums = {}
    for column, raw in collect(driver, f"table[data-series='{chart}'] td", "data-column", "data-value"):
        value = value_of(raw)
        if value is not None:
            sums[column] = sums.get(column, 0.0) + value
    return sums


def close(a, b):
    return abs(a - b) <= 1e-9 * max(1.0, abs(b))


def table_rows(driver, name):
    rows = driver.execute_script(
        "return Array.from(document.querySelectorAll(`table[data-table='${arguments[0]}'] tbody tr`))"
        ".map(r => Object.fromEntries(Array.from(r.querySelectorAll('td[data-field]')).map(c => [c.dataset.field, c.dataset.value])));",
        name,
    )
    return [r for r in rows if r]


def same_rows(driver, name, want, fields, page):
    rows = table_rows(driver, name)
    check(len(rows) == len(want), f"{page}: {name} has {len(rows)} rows, the report {len(want)}")
    for row, expected in zip(rows, want):
        for field in fields:
            got, should = value_of(row[field]), lookup(expected, field)
            check(got == should, f"{page}: {name}.{field} is {got}, the report says {should}")


def main():
    os.makedirs(SHOTS, exist_ok=True)
    driver = browser()
    checked = 0
    try:
        # Tokens are on: a page asks to sign in, then shows what was asked for.
        driver.get(BASE + "/cost" + NIGHT)
        check("/login" in driver.current_url, f"not sent to sign in: {driver.current_url}")
        driver.find_element(By.NAME, "token").send_keys(TOKEN)
        driver.find_element(By.CSS_SELECTOR, "form button").click()
        WebDriverWait(driver, 30).until(lambda d: "/login" not in d.current_url)
        check(driver.current_url == BASE + "/cost" + NIGHT, f"after signing in: {driver.current_url}")

        visit(driver, "/" + NIGHT, "overview")
        since = driver.find_element(By.CSS_SELECTOR, "time[data-range='from']").text
        until = driver.find_element(By.CSS_SELECTOR, "time[data-range='until']").text
        report = api("/api/v1/report?" + urllib.parse.urlencode({"since": since, "until": until}))
        check(report["workflows"]["total"] > 1000, f"the demo night holds {report['workflows']['total']} workflows")
        checked += same_figures(driver, report, "overview")
        charts_drawn(driver, "overview", ["outcome-shares", "outcome-counts"])
        counts = column_sums(driver, "outcome-counts")
        for outcome, count in report["workflows"].items():
            if outcome != "total":
                check(counts.get(outcome, 0.0) == count, f"overview: chart sums {counts.get(outcome)} {outcome}, report {count}")
        same_rows(driver, "by_primary_route", report["by_primary_route"],
                  ["workflows", "primary_success", "fallback_recovery", "fail_closed", "primary_success_rate"], "overview")
        same_rows(driver, "fallbacks", report["fallbacks"], ["workflows", "recovered"], "overview")

        visit(driver, "/cost" + NIGHT, "cost")
        checked += same_figures(driver, report, "cost")
        charts_drawn(driver, "cost", ["cost-by-served-provider", "cost-by-requested-provider", "cost-by-served-model",
                                      "wasted-cost-by-served-provider", "wasted-tokens"])
        for chart, total in [("cost-by-served-provider", report["cost_usd"]["total"]),
                             ("cost-by-requested-provider", report["cost_usd"]["total"]),
                             ("cost-by-served-model", report["cost_usd"]["total"]),
                             ("wasted-cost-by-served-provider", report["cost_usd"]["wasted"])]:
            drawn = sum(column_sums(driver, chart).values())
            check(close(drawn, total), f"cost: {chart} sums to {drawn}, the report says {total}")
        served = column_sums(driver, "cost-by-served-provider")
        for provider in report["by_served_provider"]:
            check(close(served.get(provider["served_provider"], 0.0), provider["cost_usd"]),
                  f"cost: {provider['served_provider']} drawn {served.get(provider['served_provider'])}, report {provider['cost_usd']}")
        requested = column_sums(driver, "cost-by-requested-provider")
        check(served != requested, "cost: the demo's gateway reroute shows as a difference between asked and served")
        wasted_tokens = sum(column_sums(driver, "wasted-tokens").values())
        check(wasted_tokens == lookup(report, "tokens.wasted.input+output"), f"cost: wasted tokens drawn {wasted_tokens}")
        same_rows(driver, "by_served_provider", report["by_served_provider"],
                  ["attempts", "rerouted_attempts", "cost_usd", "wasted_cost_usd"], "cost")
        same_rows(driver, "by_served_model", report["by_served_model"],
                  ["attempts", "wasted_attempts", "input_tokens", "output_tokens", "cost_usd"], "cost")

        visit(driver, "/attempts" + NIGHT, "attempts")
        checked += same_figures(driver, report, "attempts")
        charts_drawn(driver, "attempts", ["attempts-by-layer", "retry-ratio", "latency"])
        layers = column_sums(driver, "attempts-by-layer")
        for row in report["amplification"]:
            if row["layer"] != "all":
                check(layers.get(row["layer"], 0.0) == row["attempts"], f"attempts: {row['layer']} drawn {layers.get(row['layer'])}, report {row['attempts']}")
        check(sum(layers.values()) == report["attempts"]["total"], "attempts: layers sum to the attempts")
        same_rows(driver, "amplification", report["amplification"], ["attempts", "per_workflow.max"], "attempts")
        same_rows(driver, "error_classes", report["error_classes"], ["attempts", "cost_usd"], "attempts")

        # Capacity: the headroom and 429 charts say what the report's sections
        # say, and the breakers are drawn and listed as the report has them.
        visit(driver, "/capacity" + NIGHT, "capacity")
        charts_drawn(driver, "capacity", ["headroom", "rate-limited", "breakers"])
        limited = column_sums(driver, "rate-limited")
        by_kind = {}
        for row in report["rate_limits"]:
            by_kind[row["kind"]] = by_kind.get(row["kind"], 0) + row["attempts"]
        check(by_kind and {k: v for k, v in limited.items() if v} == by_kind,
              f"capacity: 429s drawn by kind {limited}, the report's rate_limits {by_kind}")
        lowest = {}
        for column, raw in collect(driver, "table[data-series='headroom'] td", "data-column", "data-value"):
            if value_of(raw) is not None:
                lowest[column] = min(lowest.get(column, 1.0), value_of(raw))
        for row in report["headroom"]:
            route = f"{row['served_provider']}/{row['served_model']}"
            if row["min_ratio"] is not None:
                check(lowest.get(route) is not None and lowest[route] <= row["min_ratio"],
                      f"capacity: {route} drawn as low as {lowest.get(route)}, its {row['kind']} at {row['min_ratio']}")
        check(min(lowest.values()) == min(r["min_ratio"] for r in report["headroom"] if r["min_ratio"] is not None),
              f"capacity: the lowest drawn {lowest}, the report's lowest differ")
        same_rows(driver, "headroom", report["headroom"], ["min_ratio", "attempts_below_10pct", "rate_limited"], "capacity")
        same_rows(driver, "circuits", report["circuits"],
                  ["workflows_started", "outcomes.fallback_recovery", "fallback_cost_usd", "primary_cost_usd", "probes"],
                  "capacity")
        bars = driver.execute_script(
            "return document.querySelector(\"figure[data-chart='breakers'] > svg\").querySelectorAll('rect').length;")
        check(bars >= len(report["circuits"]), f"capacity: {bars} bars for {len(report['circuits'])} breaker intervals")

        # The audit: the same findings as its JSON route, and an example opens
        # its workflow.
        visit(driver, "/attempts" + NIGHT)
        driver.find_element(By.CSS_SELECTOR, "nav a[href^='/audit']").click()
        WebDriverWait(driver, 30).until(lambda d: "/audit" in d.current_url)
        check(driver.current_url == BASE + "/audit" + NIGHT, f"the nav link keeps the filters: {driver.current_url}")
        visit(driver, "/audit" + NIGHT, "audit")
        audit = api("/api/v1/audit?" + urllib.parse.urlencode({"since": since, "until": until}))
        policy = driver.find_element(By.CSS_SELECTOR, "[data-policy]").text
        check(policy == "the built-in rules", f"audit: policy shown as {policy!r}")
        rows = table_rows(driver, "findings")
        check(len(rows) == len(audit["findings"]), f"audit: {len(rows)} findings shown, {len(audit['findings'])} in the JSON")
        for row, want in zip(rows, audit["findings"]):
            # The retry budget counts minutes, the other findings workflows.
            count = "minutes" if want["minutes"] is not None else "workflows"
            for field in [count, "attempts", "input_tokens", "output_tokens", "cost_usd"]:
                check(value_of(row[field]) == want[field], f"audit: {want['finding']}.{field} {row[field]} vs {want[field]}")
            if want["amplification"] is not None:
                shown = driver.find_element(
                    By.CSS_SELECTOR, f"tr[data-finding='{want['finding']}'] [data-field='amplification']"
                ).get_attribute("data-value")
                check(value_of(shown) == want["amplification"],
                      f"audit: {want['finding']} amplification {shown} vs {want['amplification']}")
        check(any((f["workflows"] or 0) > 0 for f in audit["findings"]), "audit: the demo night has findings")
        example = driver.find_element(By.CSS_SELECTOR, "a[data-example]")
        example_id = example.text
        example.click()
        WebDriverWait(driver, 30).until(lambda d: "/workflow" in d.current_url)
        check(not console_errors(driver), "audit example: console errors")
        shown = [r[0] for r in collect(driver, "[data-figure='workflow_id']", "data-value")]
        check(shown == [example_id], f"audit: the example opened {shown}, not {example_id}")

        # Tuning: the curve as its JSON route has it, and a replay asked for
        # in the page's own form.
        visit(driver, "/tune" + NIGHT, "tune")
        tune = api("/api/v1/tune?" + urllib.parse.urlencode({"since": since, "until": until}))
        overall = [l for l in tune["curve"]
                   if l["layer"] == "all" and l["after_class"] == "all" and l["primary_route"] == "all"]
        check(len(overall) >= 5, f"tune: {len(overall)} overall lines")
        same_rows(driver, "curve", overall, ["undelivered_before", "delivered", "attempts", "cost_usd", "elapsed_ms"], "tune")
        field = driver.find_element(By.CSS_SELECTOR, "input[name='limits']")
        field.send_keys("max_retries.sdk=2 no_retry_on=quota")
        field.submit()
        WebDriverWait(driver, 30).until(lambda d: "limits=" in d.current_url)
        check(not console_errors(driver), "tune replay: console errors")
        replay = api("/api/v1/tune?" + urllib.parse.urlencode(
            [("since", since), ("until", until), ("set", "max_retries.sdk=2"), ("set", "no_retry_on=quota")]))["replay"]
        lost = driver.find_element(By.CSS_SELECTOR, "[data-figure='success_lost']").get_attribute("data-value")
        check(value_of(lost) == replay["success_lost"] and replay["success_lost"] > 0,
              f"tune: success lost {lost} on the page, {replay['success_lost']} in the JSON")
        rows = table_rows(driver, "replay")
        outcomes = ["primary_success", "retry_recovery", "fallback_recovery", "degraded", "queued", "in_flight", "fail_closed"]
        for row, outcome in zip(rows, outcomes):
            check(value_of(row["before"]) == replay["before"][outcome] and value_of(row["after"]) == replay["after"][outcome],
                  f"tune: {outcome} {row} vs {replay['before'][outcome]} -> {replay['after'][outcome]}")
        check(value_of(rows[len(outcomes)]["after"]) == replay["attempts"]["after"], f"tune: attempts {rows[len(outcomes)]}")

        # The workflow page: every attempt, in the order the report's rules use.
        detail = api("/api/v1/workflows/" + urllib.parse.quote(WORKFLOW_ID, safe=""))
        visit(driver, "/workflow?" + urllib.parse.urlencode({"id": WORKFLOW_ID}), "workflow")
        shown_ids = [r[0] for r in collect(driver, "tr[data-attempt-id]", "data-attempt-id")]
        check(shown_ids == [a["attempt_id"] for a in detail["attempts"]], f"workflow: attempts {shown_ids}, JSON {detail['attempts']}")
        check(len(shown_ids) >= 3, f"workflow: {len(shown_ids)} attempts")
        seqs = [value_of(r[0]) for r in collect(driver, "td[data-field='seq']", "data-value")]
        check(seqs == sorted(seqs), f"workflow: attempts out of order {seqs}")
        for path, raw, _ in collect(driver, "[data-figure]", "data-figure", "data-value", "text"):
            if path in ("cost_usd", "wasted_cost_usd", "unknown_cost_attempts"):
                check(value_of(raw) == detail[path], f"workflow: {path} {raw} vs {detail[path]}")
            elif path in ("workflow_id", "outcome"):
                check(raw == detail[path], f"workflow: {path} {raw} vs {detail[path]}")
        # Its routes' breakers: listed and drawn above its attempts.
        check(detail["circuits"], "workflow: the busiest workflow of the 429s met no breaker")
        same_rows(driver, "circuits", detail["circuits"], ["attempts"], "workflow")
        bars = driver.execute_script(
            "return document.querySelector(\"figure[data-chart='timeline'] > svg\").querySelectorAll('rect').length;")
        check(bars >= len(shown_ids) + len(detail["circuits"]),
              f"workflow: {bars} bars for {len(shown_ids)} attempts and {len(detail['circuits'])} breaker states")
        # Each row is labelled once, with its own attempt.
        labels = driver.execute_script(
            "return Array.from(document.querySelector(\"figure[data-chart='timeline'] > svg\").querySelectorAll('text'))"
            ".map(t => t.textContent.trim());")
        for a in detail["attempts"]:
            own = f"#{a['seq']} {a['layer']} {a['provider']}/{a['model']}"
            check(labels.count(own) == 1, f"workflow: the row label {own!r} appears {labels.count(own)} times in {labels}")
        # A search for an id nobody sent says so (the 404 is logged: not an error here).
        driver.get(BASE + "/workflow?id=no-such-workflow")
        check(driver.find_elements(By.CSS_SELECTOR, "[data-not-found]"), "workflow: unknown id not reported")
        driver.get_log("browser")

        # Alerts: the fallback rule fires on the fresh traffic; its link opens
        # the overview on the range around it.
        deadline = time.time() + 60
        while True:
            visit(driver, "/alerts")
            links = driver.find_elements(By.CSS_SELECTOR, "table[data-table='firing'] a[data-alert-link]")
            if links or time.time() > deadline:
                break
            time.sleep(1)
        check(links, "alerts: nothing firing after 60 s")
        driver.save_screenshot(os.path.join(SHOTS, "alerts.png"))
        links[0].click()
        WebDriverWait(driver, 30).until(lambda d: "/alerts" not in d.current_url)
        query = urllib.parse.parse_qs(urllib.parse.urlparse(driver.current_url).query)
        check("since" in query and "until" in query, f"alerts: the link has no range: {driver.current_url}")
        check(not console_errors(driver), "alerts link: console errors")
        total = driver.find_element(By.CSS_SELECTOR, "[data-figure='workflows.total']").get_attribute("data-value")
        check(float(total) > 0, "alerts: the alert's range holds no workflow")

        # Signing out ends the session.
        visit(driver, "/")
        driver.find_element(By.CSS_SELECTOR, "form.logout button").click()
        WebDriverWait(driver, 30).until(lambda d: "/login" in d.current_url)
        driver.get(BASE + "/")
        check("/login" in driver.current_url, f"after signing out: {driver.current_url}")
    finally:
        driver.quit()
    print(f"dashboard: {checked} figures equal the report's; screenshots in {SHOTS}")


if __name__ == "__main__":
    main()
