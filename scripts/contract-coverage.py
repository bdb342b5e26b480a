"""Which documented answers the fuzzer reached, and the rest explained.

Usage: contract-coverage.py OPENAPI EXPLAINED HAR...

A documented answer is an operation's status in OPENAPI, and for a 409 each
of its `x-reasons`. The HAR files (schemathesis --report har) hold every
request the fuzzer sent and what came back. Every documented answer must be
reached, or be a row of EXPLAINED's table (docs/CONTRACT.md): `| METHOD
/path | STATUS [reason] | why | where a test reaches it |`, or `*` in the
first cell for an answer of every operation. Exit 1 when one
is neither; a row for an answer that was reached is reported, not an error
(a seed can reach it one run and not the next).
"""

import json
import re
import sys
from urllib.parse import urlsplit

import yaml

METHODS = ("get", "post", "put", "patch", "delete")


def documented(openapi):
    """{(METHOD, template): {answer, ...}}; an answer is "409 reason" or "200"."""
    answers = {}
    for template, item in openapi["paths"].items():
        for method in METHODS:
            operation = item.get(method)
            if not operation:
                continue
            found = set()
            for status, response in operation.get("responses", {}).items():
                status = str(status)
                reasons = []
                for media in (response.get("content") or {}).values():
                    reasons += media.get("x-reasons", [])
                if status == "409" and reasons:
                    found.update(f"409 {reason}" for reason in reasons)
                else:
                    found.add(status)
            answers[(method.upper(), template)] = found
    return answers


def matcher(templates):
    """A function from (method, path) to its template: literal segments first."""
    compiled = sorted(
        ((template.count("{"), template, re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", template) + "$"))
         for template in templates),
    )

    def match(path):
        for _, template, pattern in compiled:
            if pattern.match(path):
                return template
        return None

    return match


def reached(har_paths, match):
    seen = set()
    for path in har_paths:
        with open(path, encoding="utf-8") as f:
            entries = json.load(f)["log"]["entries"]
        for entry in entries:
            request, response = entry["request"], entry["response"]
            template = match(urlsplit(request["url"]).path)
            if template is None:
                continue
            status = str(response["status"])
            answer = status
            if status == "409":
                try:
                    answer = f"409 {json.loads(response['content'].get('text') or '{}')['reason']}"
                except (ValueError, KeyError, TypeError):
                    pass
            seen.add((request["method"].upper(), template, answer))
    return seen


def explained(path):
    """{(METHOD, template, answer)} from the table rows of EXPLAINED."""
    rows = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            cells = [cell.strip().strip("`") for cell in line.strip().strip("|").split("|")]
            if len(cells) < 4 or not re.match(r"^([A-Z]+ /|\*$)", cells[0]):
                continue
            if cells[0] == "*":  # the answer on every operation
                rows.add(("*", "*", cells[1]))
                continue
            method, template = cells[0].split(" ", 1)
            rows.add((method, template, cells[1]))
    return rows


def main():
    openapi_path, explained_path, *har_paths = sys.argv[1:]
    with open(openapi_path, encoding="utf-8") as f:
        answers = documented(yaml.safe_load(f))
    match = matcher({template for _, template in answers})
    seen = reached(har_paths, match)
    told = explained(explained_path)
    total = sum(len(found) for found in answers.values())
    missing, covered_by_row, reached_rows = [], 0, []
    for (method, template), found in sorted(answers.items()):
        for answer in sorted(found):
            key = (method, template, answer)
            is_told = key in told or ("*", "*", answer) in told
            if key in seen:
                if key in told:
                    reached_rows.append(key)
            elif is_told:
                covered_by_row += 1
            else:
                missing.append(key)
    # Methods a path does not have are API Gateway's `$default` route (405
    # with `Allow`, which tests/local.rs pins): schemathesis's coverage phase
    # sends them, and they are no operation's answers.
    undocumented = sorted(
        key for key in seen if (key[0], key[1]) in answers and key[2] not in answers[(key[0], key[1])]
    )
    # A row for an answer openapi.yaml does not document is stale.
    stale = sorted(
        row for row in told
        if row[0] != "*" and row[2] not in answers.get((row[0], row[1]), set())
    )
    hit = total - covered_by_row - len(missing)
    print(
        f"contract: {hit} of {total} documented answers reached by the fuzzer, "
        f"{covered_by_row} explained in {explained_path}, {len(missing)} neither"
    )
    for method, template, answer in reached_rows:
        print(f"contract: reached this run, though explained: {method} {template} {answer}")
    for method, template, answer in undocumented:
        print(f"contract: reached but not documented: {method} {template} {answer}")
    for method, template, answer in missing:
        print(f"contract: NOT reached and not explained: {method} {template} {answer}")
    for method, template, answer in stale:
        print(f"contract: {explained_path} explains an undocumented answer: {method} {template} {answer}")
    sys.exit(1 if missing or undocumented or stale else 0)


if __name__ == "__main__":
    main()
