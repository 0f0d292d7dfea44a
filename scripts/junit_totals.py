"""Add up pytest's JUnit reports and print one closing line for all suites."""
import sys
import xml.etree.ElementTree as ET

totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
for path in sys.argv[1:]:
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as exc:
        print(f"unreadable report {path}: {exc}")
        totals["errors"] += 1
        continue
    for suite in root.iter("testsuite"):
        for key in totals:
            totals[key] += int(suite.get(key, 0))
failed = totals["failures"] + totals["errors"]
passed = totals["tests"] - failed - totals["skipped"]
print(f"{passed} passed, {failed} failed, {totals['skipped']} skipped")
sys.exit(1 if failed or totals["tests"] == 0 else 0)
