"""Whether the stateful phase reached each hold operation with a real hold.

Usage: contract-stateful.py HAR...

Each HAR file is one stateful run of schemathesis (--report har). A hold
operation counts as reached when, in the same run, it was sent the id of a
hold that a `POST /slots/{id}/hold` of that run answered (201 or a 200
replay) and did not answer 404: `GET /holds/{id}`, `POST
/holds/{id}/confirm`, `POST /holds/{id}/extend`, `POST /holds/{id}/move`,
`DELETE /holds/{id}`; and
`GET /holds?idempotency_key=` when it answered 200 with such a hold (only
that hold's key finds it). So the ids came from the run's own answers, as
openapi.yaml's links carry them, not from a guess. Exit 1 when one of the
six was never reached.
"""

import json
import re
import sys
from collections import Counter
from urllib.parse import urlsplit

HOLD = re.compile(r"^/slots/[^/]+/hold$")
OPERATIONS = [
    ("GET", re.compile(r"^/holds/([^/]+)$"), "GET /holds/{id}"),
    ("POST", re.compile(r"^/holds/([^/]+)/confirm$"), "POST /holds/{id}/confirm"),
    ("POST", re.compile(r"^/holds/([^/]+)/extend$"), "POST /holds/{id}/extend"),
    ("POST", re.compile(r"^/holds/([^/]+)/move$"), "POST /holds/{id}/move"),
    ("DELETE", re.compile(r"^/holds/([^/]+)$"), "DELETE /holds/{id}"),
]
FIND = "GET /holds?idempotency_key="


def body(response):
    try:
        return json.loads(response["content"].get("text") or "null")
    except ValueError:
        return None


def reached(har_path):
    """Counter of (operation, status) answered for a hold this run made."""
    with open(har_path, encoding="utf-8") as f:
        entries = json.load(f)["log"]["entries"]
    made, seen = set(), Counter()
    for entry in entries:
        request, response = entry["request"], entry["response"]
        method, path = request["method"].upper(), urlsplit(request["url"]).path
        status = response["status"]
        if method == "POST" and HOLD.match(path) and status in (200, 201):
            hold = body(response)
            if isinstance(hold, dict) and "id" in hold:
                made.add(str(hold["id"]))
            continue
        if method == "GET" and path == "/holds":
            hold = body(response)
            if status == 200 and isinstance(hold, dict) and str(hold.get("id")) in made:
                seen[(FIND, status)] += 1
            continue
        for expected, pattern, name in OPERATIONS:
            match = pattern.match(path)
            if method == expected and match and match.group(1) in made and status != 404:
                seen[(name, status)] += 1
    return seen


def main():
    total = Counter()
    for path in sys.argv[1:]:
        total.update(reached(path))
    missing = []
    for name in [name for _, _, name in OPERATIONS] + [FIND]:
        answers = sorted((status, n) for (op, status), n in total.items() if op == name)
        if answers:
            shown = ", ".join(f"{n}x {status}" for status, n in answers)
            print(f"contract: stateful: {name} reached with the run's own holds: {shown}")
        else:
            missing.append(name)
            print(f"contract: stateful: {name} NOT reached with a hold the run made")
    sys.exit(1 if missing or not sys.argv[1:] else 0)


if __name__ == "__main__":
    main()
