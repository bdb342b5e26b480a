"""The template's function alarms, as CloudWatch will take them.

Two things neither `sam validate --lint` nor cfn-lint checks:
  - a metric-math alarm references at most 10 metrics (a hard CloudWatch
    limit: the stack would fail to deploy);
  - every function is in an Errors alarm, and every function API Gateway
    invokes in a Throttles alarm (a throttled request is a client's 5xx; a
    scheduled invocation is retried), so a function added to the template
    cannot go unwatched.

Usage: python check-template-alarms.py TEMPLATE  (exit status 1 on a finding)
"""

import sys

from cfn_template import load

MOST_METRICS = 10


def main(path):
    resources = load(path)["Resources"]
    functions = {name for name, r in resources.items() if r["Type"] == "AWS::Serverless::Function"}
    routed = {
        name
        for name in functions
        if any(e.get("Type") == "HttpApi" for e in resources[name]["Properties"].get("Events", {}).values())
    }
    watched = {"Errors": set(), "Throttles": set()}
    findings = []
    for name, resource in resources.items():
        if resource["Type"] != "AWS::CloudWatch::Alarm":
            continue
        stats = [m["MetricStat"] for m in resource["Properties"].get("Metrics", []) if "MetricStat" in m]
        if len(stats) > MOST_METRICS:
            findings.append(f"{name}: {len(stats)} metrics, CloudWatch takes at most {MOST_METRICS}")
        for stat in stats:
            metric = stat["Metric"]
            if metric.get("Namespace") != "AWS/Lambda" or metric.get("MetricName") not in watched:
                continue
            for dimension in metric.get("Dimensions", []):
                if dimension.get("Name") == "FunctionName":
                    watched[metric["MetricName"]].add(dimension["Value"].get("Ref"))
    for metric, names in watched.items():
        for name in sorted((functions if metric == "Errors" else routed) - names):
            findings.append(f"{name}: in no {metric} alarm")
    for finding in findings:
        print(f"alarms: {finding}")
    if findings:
        return 1
    print(f"alarms: every alarm within {MOST_METRICS} metrics; all {len(functions)} functions watched for errors, the {len(routed)} routed ones for throttles")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "template.yaml"))
