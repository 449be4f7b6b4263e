"""The typed result file: old files load without losing a key, and docs/result.schema.json
is exactly the schema the types generate (and the documents satisfy it)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from result_docs import make_result, make_sweep

from sweep.record.result import TrialResult, iter_results, schema_document

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_FILE = ROOT / "docs" / "result.schema.json"
REGENERATE = ("python -c 'import json; from sweep.record.result import schema_document; "
              "print(json.dumps(schema_document(), indent=2))' > docs/result.schema.json")


def architecture_example() -> dict[str, Any]:
    """The schema-1 example of docs/ARCHITECTURE.md (what a file of the first version holds)."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    block = re.search(r"### result\.json.*?```json\n(.*?)```", text, re.S)
    assert block, "docs/ARCHITECTURE.md lost its result.json example"
    doc = json.loads(block.group(1))
    assert doc["status"] == "ok | failed | interrupted"  # the docs' shorthand for the three
    return {**doc, "status": "ok"}


def validate(doc: Any, schema: dict[str, Any], root: dict[str, Any], where: str = "$") -> list[str]:
    """The JSON Schema subset the generated schema uses: type, enum, anyOf, $ref, properties,
    required, items, additionalProperties."""
    if "$ref" in schema:
        return validate(doc, root["$defs"][schema["$ref"].rsplit("/", 1)[1]], root, where)
    if "anyOf" in schema:
        options = [validate(doc, s, root, where) for s in schema["anyOf"]]
        return [] if any(not o for o in options) else [f"{where}: matches no option ({options})"]
    if "enum" in schema and doc not in schema["enum"]:
        return [f"{where}: {doc!r} not in {schema['enum']}"]
    kind = schema.get("type")
    python = {"string": str, "integer": int, "number": (int, float), "boolean": bool,
              "null": type(None), "object": dict, "array": list}
    if kind is not None and (not isinstance(doc, python[kind]) or
                             (kind in ("integer", "number") and isinstance(doc, bool))):
        return [f"{where}: {type(doc).__name__} is not {kind}"]
    errors: list[str] = []
    if isinstance(doc, dict):
        errors += [f"{where}: {k} is required" for k in schema.get("required", []) if k not in doc]
        for k, v in doc.items():
            sub = schema.get("properties", {}).get(k, schema.get("additionalProperties", True))
            if isinstance(sub, dict):
                errors += validate(v, sub, root, f"{where}.{k}")
    if isinstance(doc, list) and isinstance(schema.get("items"), dict):
        for i, v in enumerate(doc):
            errors += validate(v, schema["items"], root, f"{where}[{i}]")
    return errors


def test_the_committed_schema_is_the_generated_one() -> None:
    assert json.loads(SCHEMA_FILE.read_text()) == schema_document(), f"regenerate: {REGENERATE}"


def test_schema_1_files_load_and_write_back_unchanged(tmp_path: Path) -> None:
    docs = [architecture_example()] + [doc for _, doc in make_sweep(tmp_path / "sweep")]
    docs.append(make_result(tmp_path / "other", 0, 8, status="failed", reason="oom")[1])
    for doc in docs:
        result = TrialResult.from_dict(doc)
        assert result.to_dict() == doc
        assert validate(doc, schema_document(), schema_document()) == []
    example = TrialResult.from_dict(docs[0])
    assert example.status == "ok" and example.trial.name == "b300-ddtree-b8-t4-w2048"
    assert example.cells[0].output_tok_s == 290.1 and example.metrics.tok_s_c1 == 290.1
    assert example.coding is not None and example.coding.problems[0]["name"] == "gcd"


def test_what_this_version_does_not_know_is_kept(tmp_path: Path) -> None:
    _, doc = make_result(tmp_path / "sweep", 0, 8)
    doc["from_the_future"] = {"x": 1}
    doc["cells"][0]["error_messages"] = ["HTTP 500"]
    del doc["trial"]["overrides"]  # an older writer did not record it
    result = TrialResult.from_dict(doc)
    assert result.extra == {"from_the_future": {"x": 1}}
    assert result.cells[0].extra == {"error_messages": ["HTTP 500"]}
    assert result.to_dict() == doc


def test_unreadable_files_are_skipped_by_the_readers(tmp_path: Path) -> None:
    make_result(tmp_path / "sweep", 0, 8)
    (tmp_path / "sweep" / "1").mkdir()
    (tmp_path / "sweep" / "1" / "result.json").write_text("[1, 2]")
    (tmp_path / "sweep" / "2").mkdir()
    (tmp_path / "sweep" / "2" / "result.json").write_text("{\"status\": ")
    assert [p.parent.name for p, _ in iter_results(tmp_path)] == ["0"]
