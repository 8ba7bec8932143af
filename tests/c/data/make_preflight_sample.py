#!/usr/bin/env python3
"""Writes preflight_sample.tsv, the decisions.jsonl lines test_preflight.c replays through
agentao_agent_preflight: every line whose tool the library registers, whose arguments do not
name the vectors' synthetic project root (the C test's workspace is a real temporary
directory), and that is not one of our documented deviations (tests/permissions_conformance.rs,
DECISION_DEVIATIONS; docs/deviations.md). Run from the repository root:

    python3 tests/c/data/make_preflight_sample.py tests/conformance/permissions/decisions.jsonl
"""
import json
import sys

TOOLS = {"read_file", "write_file", "replace", "run_shell_command", "web_fetch", "list_directory",
         "glob", "search_file_content", "ask_user", "todo_write"}
DEVIATIONS = {396, 761, 764, 799, 801, 802, 803, 809, 812, 830, 833, 837, 841, 847, 853, 889,
              893, 897, 900, 922, 929, 970}


def compact(v):
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


def main(path):
    out = []
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        v = json.loads(line)
        args = compact(v["args"])
        if v["tool"] not in TOOLS or n in DEVIATIONS or "/workspace/project" in args:
            continue
        run = v.get("run_rules") or {}
        fields = [str(n), v["mode"], compact(v["user_rules"]), compact(run.get("allow")),
                  compact(run.get("deny")), v["tool"], args, v["outcome"],
                  compact(v["reason"]), compact(v["matched_rule"])]
        assert not any("\t" in f or "\n" in f for f in fields)
        out.append("\t".join(fields))
    with open("tests/c/data/preflight_sample.tsv", "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")
    print(f"{len(out)} lines")


main(sys.argv[1])
