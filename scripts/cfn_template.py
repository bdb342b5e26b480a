"""template.yaml as CloudFormation reads it: the short-form intrinsics
(!Ref, !Sub, !GetAtt, ...) in their long form ({"Ref": ...}, {"Fn::Sub": ...}),
for the checks `make validate` runs (check-template-graph.py,
check-template-alarms.py)."""

import yaml


class _Loader(yaml.SafeLoader):
    """YAML with CloudFormation's short-form intrinsics (!Ref, !Sub, ...)."""


def _intrinsic(loader, tag_suffix, node):
    name = "Ref" if tag_suffix == "Ref" else "Fn::" + tag_suffix
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
        if tag_suffix == "GetAtt":
            value = value.split(".", 1)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    return {name: value}


_Loader.add_multi_constructor("!", _intrinsic)


def load(path):
    """The template at `path`, parsed."""
    with open(path, encoding="utf-8") as handle:
        return yaml.load(handle, Loader=_Loader)  # noqa: S506 (safe loader subclass)
