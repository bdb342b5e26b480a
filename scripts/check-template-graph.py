"""The template's dependency graph, as CloudFormation will see it.

Translates template.yaml with the SAM translator (offline, the same
samtranslator `sam` uses) and checks that the migrate custom resource
depends, directly or transitively, on everything its Delete path needs.
CloudFormation deletes a resource only after every resource that depends on
it, so whatever `Migrations` (transitively) depends on is still there when
it sends the Delete request; anything else may already be gone, and then the
function cannot answer and the stack waits `ServiceTimeout` and ends in
DELETE_FAILED / ROLLBACK_FAILED.

The Delete path: the invoked function, its alias, version, role (and any
policy attached to it), security group and log group; its subnets; every
security-group rule on the function's group; the route tables associated
with those subnets, the associations themselves, their routes, and every
gateway VPC endpoint on those route tables (the response is a PUT to a
pre-signed S3 URL, reachable only through the S3 gateway endpoint). The set
is derived from the translated template, not listed by name, so a new rule
or association is covered without editing this file.

Usage: python check-template-graph.py TEMPLATE  (exit status 1 on a finding)
"""

import os
import re
import sys

# A region for the translator's pseudo parameters; no AWS call is made.
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")

from cfn_template import load
from samtranslator.parser.parser import Parser
from samtranslator.translator.translator import Translator

CUSTOM_RESOURCE = "Migrations"


def translate(path):
    template = load(path)
    # The translator wants S3 code locations; `sam build`/`sam package`
    # would put them there. The graph does not depend on them.
    for resource in template.get("Resources", {}).values():
        if resource.get("Type") == "AWS::Serverless::Function":
            resource.setdefault("Properties", {})["CodeUri"] = "s3://bucket/code.zip"
    globals_function = template.get("Globals", {}).get("Function", {})
    if "CodeUri" in globals_function:
        globals_function["CodeUri"] = "s3://bucket/code.zip"
    # Tracing's managed policy is resolved from this map, not from IAM.
    translator = Translator(managed_policy_map={}, sam_parser=Parser())
    return translator.translate(sam_template=template, parameter_values={})


def references(value, names):
    """Logical ids `value` refers to (Ref, GetAtt, Sub)."""
    found = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "Ref" and isinstance(inner, str) and inner in names:
                found.add(inner)
            elif key == "Fn::GetAtt":
                target = inner[0] if isinstance(inner, list) else inner.split(".", 1)[0]
                if target in names:
                    found.add(target)
            elif key == "Fn::Sub":
                text = inner[0] if isinstance(inner, list) else inner
                for token in re.findall(r"\$\{([^}!]+)\}", text):
                    target = token.split(".", 1)[0]
                    if target in names:
                        found.add(target)
                if isinstance(inner, list):
                    found |= references(inner[1:], names)
            else:
                found |= references(inner, names)
    elif isinstance(value, list):
        for inner in value:
            found |= references(inner, names)
    return found


def graph(resources):
    names = set(resources)
    edges = {}
    for name, resource in resources.items():
        depends = resource.get("DependsOn", [])
        depends = [depends] if isinstance(depends, str) else list(depends)
        edges[name] = set(depends) | references(resource.get("Properties", {}), names)
    return edges


def closure(edges, start):
    seen, stack = set(), [start]
    while stack:
        for target in edges.get(stack.pop(), ()):
            if target not in seen:
                seen.add(target)
                stack.append(target)
    return seen


def delete_path(resources, edges):
    """Every resource the custom resource's Delete needs, with why."""
    names = set(resources)
    props = {name: res.get("Properties", {}) for name, res in resources.items()}
    token = props[CUSTOM_RESOURCE].get("ServiceToken")
    needed = {}

    def need(name, why):
        needed.setdefault(name, why)

    # The alias (or function) the ServiceToken names, and what they stand on.
    invoked = references(token, names)
    functions = set()
    for name in invoked:
        need(name, "the ServiceToken")
        if resources[name]["Type"] == "AWS::Lambda::Function":
            functions.add(name)
        functions |= {
            ref for ref in references(props[name], names)
            if resources[ref]["Type"] == "AWS::Lambda::Function"
        }
        # An alias names a version, which names the function.
        for ref in references(props[name], names):
            functions |= {
                inner for inner in references(props[ref], names)
                if resources[inner]["Type"] == "AWS::Lambda::Function"
            }
    if not functions:
        sys.exit(f"graph: cannot find the function behind {CUSTOM_RESOURCE}'s ServiceToken")
    groups, subnets = set(), set()
    for function in functions:
        need(function, "the invoked function")
        fprops = props[function]
        for role in references(fprops.get("Role"), names):
            need(role, f"the role of {function}")
            for other, res in resources.items():
                if res["Type"] in ("AWS::IAM::Policy", "AWS::IAM::RolePolicy") and role in references(
                    props[other], names
                ):
                    need(other, f"a policy on {role}")
        for group in references(fprops.get("LoggingConfig", {}), names):
            need(group, f"the log group of {function}")
        vpc = fprops.get("VpcConfig", {})
        groups |= references(vpc.get("SecurityGroupIds"), names)
        subnets |= references(vpc.get("SubnetIds"), names)
    if not subnets:
        sys.exit("graph: the migrate function has no VPC subnets; this check expects them")
    for group in groups:
        need(group, "the function's security group")
    for subnet in subnets:
        need(subnet, "a subnet of the function")

    route_tables = set()
    for name, res in resources.items():
        kind, p = res["Type"], props[name]
        if kind in ("AWS::EC2::SecurityGroupEgress", "AWS::EC2::SecurityGroupIngress"):
            if references(p, names) & groups:
                need(name, "a rule on the function's security group")
        if kind == "AWS::EC2::SubnetRouteTableAssociation":
            if references(p.get("SubnetId"), names) & subnets:
                need(name, "puts a function subnet on its route table")
                route_tables |= references(p.get("RouteTableId"), names)
    for table in route_tables:
        need(table, "the route table of a function subnet")
    gateways = 0
    for name, res in resources.items():
        kind, p = res["Type"], props[name]
        if kind == "AWS::EC2::Route" and references(p.get("RouteTableId"), names) & route_tables:
            need(name, "a route of a function subnet")
        if (
            kind == "AWS::EC2::VPCEndpoint"
            and p.get("VpcEndpointType") == "Gateway"
            and references(p.get("RouteTableIds"), names) & route_tables
        ):
            need(name, "the gateway endpoint the response PUT goes through")
            gateways += 1
    if not route_tables or not gateways:
        sys.exit("graph: no route table with a gateway endpoint for the function's subnets")
    return needed


def main(path):
    resources = translate(path)["Resources"]
    if CUSTOM_RESOURCE not in resources:
        sys.exit(f"graph: no {CUSTOM_RESOURCE} resource in {path}")
    edges = graph(resources)
    reached = closure(edges, CUSTOM_RESOURCE)
    needed = delete_path(resources, edges)
    missing = sorted(name for name in needed if name not in reached)
    for name in missing:
        print(
            f"graph: {CUSTOM_RESOURCE} does not depend on {name} "
            f"({resources[name]['Type']}: {needed[name]}); CloudFormation may delete it "
            f"before the custom resource's Delete runs"
        )
    if missing:
        return 1
    print(f"graph: {CUSTOM_RESOURCE} depends on all {len(needed)} resources its Delete path needs")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "template.yaml"))
