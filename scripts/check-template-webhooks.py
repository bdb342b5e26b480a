"""The webhook sender's and worker's permissions (SPEC §20, "On AWS"), as
the template grants them; neither `sam validate --lint` nor cfn-lint knows
what they should be.

  - WebhooksSendFunction, which sends requests to the internet, has no VPC,
    no SAM policies, no X-Ray (SAM would add xray:Put*), no event source,
    and its own role, whose only statement writes to the sender's own log
    group: no database, no secret, no invoke.
  - WebhooksDeliverFunction, in the VPC, may invoke exactly the sender
    (one statement, lambda:InvokeFunction on its ARN), and nothing else
    anywhere may; it is told the sender's name in WEBHOOK_SENDER_FUNCTION.

Usage: python check-template-webhooks.py TEMPLATE  (exit status 1 on a finding)
"""

import sys

from cfn_template import load

SENDER, WORKER = "WebhooksSendFunction", "WebhooksDeliverFunction"
SENDER_ARN = {"Fn::GetAtt": [SENDER, "Arn"]}


def as_list(value):
    return value if isinstance(value, list) else [value]


def statements(policies):
    """Every inline statement of a function's SAM `Policies` (templates such
    as AWSSecretsManagerGetSecretValuePolicy are named, not expanded)."""
    for policy in as_list(policies or []):
        if isinstance(policy, dict) and "Statement" in policy:
            yield from as_list(policy["Statement"])


def invokes(statement):
    actions = [a.lower() for a in as_list(statement.get("Action", []))]
    return any(a in ("lambda:invokefunction", "lambda:*", "*") for a in actions)


def check_sender(resources, findings):
    sender = resources.get(SENDER)
    if sender is None:
        return findings.append(f"{SENDER}: missing")
    props = sender.get("Properties", {})
    for key in ("VpcConfig", "Policies", "Events"):
        if key in props:
            findings.append(f"{SENDER}: has {key}; it needs none")
    if props.get("Tracing") != "PassThrough":
        findings.append(f"{SENDER}: Tracing is not PassThrough (SAM would add xray:Put* to its role)")
    role_ref = props.get("Role", {})
    role_name = role_ref.get("Fn::GetAtt", [None])[0] if isinstance(role_ref, dict) else None
    role = resources.get(role_name)
    if role is None or role["Type"] != "AWS::IAM::Role":
        return findings.append(f"{SENDER}: no role of its own (Role: !GetAtt <Role>.Arn)")
    rprops = role["Properties"]
    for key in ("ManagedPolicyArns", "PermissionsBoundary"):
        if key in rprops:
            findings.append(f"{role_name}: has {key}; the sender needs its log group only")
    log_group = props.get("LoggingConfig", {}).get("LogGroup", {}).get("Ref")
    wanted = {"Fn::Sub": "${" + f"{log_group}.Arn" + "}"}
    granted = [s for p in rprops.get("Policies", []) for s in as_list(p["PolicyDocument"]["Statement"])]
    for other, res in resources.items():
        if res["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy") and role_name in str(res["Properties"]):
            findings.append(f"{other}: a policy attached to {role_name}")
    if len(granted) != 1:
        return findings.append(f"{role_name}: {len(granted)} statements, wants 1 (its log group)")
    statement = granted[0]
    actions = sorted(as_list(statement.get("Action")))
    if statement.get("Effect") != "Allow" or actions != ["logs:CreateLogStream", "logs:PutLogEvents"]:
        findings.append(f"{role_name}: grants {actions}, wants logs:CreateLogStream and logs:PutLogEvents only")
    if statement.get("Resource") != wanted:
        findings.append(f"{role_name}: on {statement.get('Resource')}, wants its log group {wanted}")


def check_invokers(resources, findings):
    worker = resources.get(WORKER)
    if worker is None:
        return findings.append(f"{WORKER}: missing")
    props = worker["Properties"]
    if "VpcConfig" not in props:
        findings.append(f"{WORKER}: not in the VPC")
    env = props.get("Environment", {}).get("Variables", {})
    if env.get("WEBHOOK_SENDER_FUNCTION") != {"Ref": SENDER}:
        findings.append(f"{WORKER}: WEBHOOK_SENDER_FUNCTION is not !Ref {SENDER}")
    granted = [s for s in statements(props.get("Policies")) if invokes(s)]
    if len(granted) != 1:
        findings.append(f"{WORKER}: {len(granted)} invoke statements, wants 1")
    for statement in granted:
        if as_list(statement.get("Action")) != ["lambda:InvokeFunction"] or statement.get("Resource") != SENDER_ARN:
            findings.append(
                f"{WORKER}: invokes {statement.get('Action')} on {statement.get('Resource')}, wants lambda:InvokeFunction on {SENDER} only"
            )
    for name, resource in resources.items():
        if name == WORKER or resource["Type"] != "AWS::Serverless::Function":
            continue
        if any(invokes(s) for s in statements(resource["Properties"].get("Policies"))):
            findings.append(f"{name}: may invoke a function; only {WORKER} may (the sender)")


def main(path):
    resources = load(path)["Resources"]
    findings = []
    check_sender(resources, findings)
    check_invokers(resources, findings)
    for finding in findings:
        print(f"webhooks: {finding}")
    if findings:
        return 1
    print(f"webhooks: {SENDER} has its log group only; {WORKER} alone invokes it, and nothing else")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "template.yaml"))
