"""Parses an OpenMetrics exposition (stdin) with the official Prometheus
Python client's strict parser and prints its samples as JSON, so the Rust
test compares what a real scraper reads, not our own rendering."""
import json
import sys

from prometheus_client.openmetrics.parser import text_string_to_metric_families

families = []
for family in text_string_to_metric_families(sys.stdin.read()):
    families.append({
        "name": family.name,
        "type": family.type,
        "samples": [{"name": s.name, "labels": s.labels, "value": s.value} for s in family.samples],
    })
json.dump(families, sys.stdout)
