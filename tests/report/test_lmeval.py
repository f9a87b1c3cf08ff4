"""lm-evaluation-harness samples as recorded results (docs/llm.md): ``dsreg eval
--predictions-format lm-eval samples.jsonl --record --model NAME``.

The samples files here are written in the layout ``lm_eval --log_samples`` writes (one JSON
object a line: ``doc_id``, ``doc``, ``target``, ``arguments``, ``resps``, ``filtered_resps``,
``filter``, ``metrics``, the hashes and ``acc``); the last test makes one with a real run of
lm-evaluation-harness (its ``dummy`` model, offline) and skips where it is not installed."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dsreg
from dsreg import Registry
from dsreg.errors import PredictionsError
from dsreg.formats.corrections import corrections_table
from dsreg.objects.hashing import hash_file
from dsreg.overlays.write import write_overlay

PRODUCER = {"name": "test", "version": "1", "params": {}, "inputs": {}}


def questions(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` four-choice questions; rows 3 and 7 (where there are) repeat row 1's question and
    choices (as MMLU repeats some across subjects), with other answers."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        q = {"id": f"q{i:03d}", "question": f"Question {i}: which is {i % 5}?",
             "choices": [f"option {i}-{c}" for c in range(4)],
             "answer": int(rng.integers(0, 4))}  # fmt: skip
        out.append(q)
    for dup in (d for d in (3, 7) if d < n):
        out[dup] = {**out[1], "id": out[dup]["id"], "answer": (out[1]["answer"] + dup) % 4}
    return out


def add_set(reg: Registry, rows: list[dict[str, Any]], folder: Path, name: str = "qa") -> None:
    """Register ``rows`` as a label-only question set: the answer position is the class, the
    question text and choices are metadata columns."""
    path = folder / f"{name}.parquet"
    table = pa.table({k: [r[k] for r in rows] for k in ("id", "question", "choices", "answer")})
    pq.write_table(table, path)
    dsreg.add(
        name, table=path, id_column="id", label_column="answer", classes=["0", "1", "2", "3"],
        tag="original", registry=reg,
    )  # fmt: skip


def sample_line(doc_id: int, doc: dict[str, Any], lls: list[float], *, text: bool = True) -> str:
    """One line as lm_eval --log_samples writes it for a multiple_choice task (recent versions
    write the loglikelihoods as text; ``text=False``: as numbers, as older ones did)."""
    pairs = [[str(v), "False"] if text else [v, False] for v in lls]
    answer = int(np.argmax(lls))
    prompt = f"Question: {doc.get('question')}\nAnswer:"
    record = {
        "doc_id": doc_id,
        "doc": doc,
        "target": str(doc["answer"]),
        "arguments": {
            f"gen_args_{i}": {"arg_0": prompt, "arg_1": f" {c}"}
            for i, c in enumerate(doc["choices"])
        },
        "resps": [[p] for p in pairs],
        "filtered_resps": pairs,
        "filter": "none",
        "metrics": ["acc"],
        "doc_hash": "0" * 64,
        "prompt_hash": "1" * 64,
        "target_hash": "2" * 64,
        "acc": float(answer == doc["answer"]),
    }
    return json.dumps(record)


def write_samples(
    path: Path, docs: list[tuple[int, dict[str, Any]]], seed: int = 1, **kw: Any
) -> np.ndarray:
    """Write the samples of ``(doc_id, doc)`` pairs in that order; each doc's answer (the
    choice of largest loglikelihood), in the same order."""
    rng = np.random.default_rng(seed)
    lines, answers = [], []
    for doc_id, doc in docs:
        lls = (-rng.random(len(doc["choices"]))).tolist()
        answers.append(int(np.argmax(lls)))
        lines.append(sample_line(doc_id, doc, lls, **kw))
    path.write_text("\n".join(lines) + "\n")
    return np.array(answers)


@pytest.fixture
def qa(
    make_registry: Callable[..., Registry], tmp_path: Path
) -> tuple[Registry, list[dict[str, Any]]]:
    reg = make_registry()
    rows = questions(12)
    add_set(reg, rows, tmp_path)
    return reg, rows


def test_samples_in_any_order_record_the_argmax_and_cite_the_file(
    qa: tuple[Registry, list[dict[str, Any]]], tmp_path: Path
) -> None:
    reg, rows = qa
    order = np.random.default_rng(5).permutation(len(rows))
    path = tmp_path / "samples_qa_2026-01-01T00-00-00.jsonl"
    chosen = write_samples(path, [(int(i), rows[i]) for i in order])
    want = np.empty(len(rows), dtype=np.int32)
    want[order] = chosen
    report = dsreg.evaluate(
        "qa@original", path, predictions_format="lm-eval", record=True, model="dummy",
        registry=reg,
    )  # fmt: skip
    (m,) = report.models
    correct = int((want == np.array([r["answer"] for r in rows])).sum())
    assert m.scores["original"].correct[1] == correct
    assert m.predictions.digest == hash_file(path) and m.predictions.format == "lm-eval"
    cited = dsreg.cite_result("qa@original", model="dummy", registry=reg)
    assert cited.predictions == hash_file(path)  # what cite --model cites: the samples file
    stored = np.load(reg.store.path(reg_result(reg).predictions))
    np.testing.assert_array_equal(stored, want)


def reg_result(reg: Registry) -> Any:
    from dsreg.registry.reader import LocalReader

    return LocalReader(reg).result("qa", "dummy").record


def test_older_numeric_layout_and_concatenated_subtasks_align(
    qa: tuple[Registry, list[dict[str, Any]]], tmp_path: Path
) -> None:
    """Two subtasks' files concatenated (doc_ids restart at 0 in each) align by content; rows
    of equal question and choices (1, 3, 7) are told apart by doc_id where it fits."""
    reg, rows = qa
    path = tmp_path / "group.jsonl"
    docs = [(i, rows[i]) for i in range(6)] + [(i, rows[6 + i]) for i in range(6)]
    chosen = write_samples(path, docs, text=False)
    aligned = dsreg.record("qa@original", path, model="m", predictions_format="lm-eval",
                           registry=reg)  # fmt: skip
    assert aligned[0].source == hash_file(path)
    stored = np.load(reg.store.path(aligned[0].predictions))
    # Rows 0-5 by their doc_id; the second file's docs 0-5 are rows 6-11: row 7 (a repeat of
    # row 1, doc_id 1) finds row 1 taken and takes the first row of its content left.
    np.testing.assert_array_equal(stored, chosen)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("question", r"doc_id 4 \(line 5\) matches no row: its question differs from row 4's"),
        ("choices", r"doc_id 4 \(line 5\) matches no row: its choices differ from row 4's"),
        ("limit", r"cover 11 of the 12 rows; row 11 \('Question 11"),
        ("repeat", r"doc_id 2 \(line 13\) repeats the question and choices of an earlier doc"),
        ("generate", r"doc_id 0 \(line 1\) is a generate_until sample .* exact-answer set"),
        ("filters", r"holds the lines of 2 filters \('none', 'strict-match'\)"),
        ("json", r"line 3 is not valid JSON"),
        ("no-question", r"doc_id 0 \(line 1\): the doc has no 'question'"),
    ],
)
def test_samples_that_do_not_align_are_refused_in_one_line(
    qa: tuple[Registry, list[dict[str, Any]]],
    tmp_path: Path,
    registry_state: Callable[[Path], Any],
    change: str,
    message: str,
) -> None:
    reg, rows = qa
    docs = [(i, dict(r)) for i, r in enumerate(rows)]
    if change == "question":
        docs[4][1]["question"] += "?"
    if change == "choices":
        docs[4][1]["choices"] = [*rows[4]["choices"][:3], "another"]
    if change == "limit":
        docs = docs[:11]
    if change == "repeat":
        docs.append((2, rows[2]))
    if change == "no-question":
        docs[0][1].pop("question")
    path = tmp_path / "samples.jsonl"
    write_samples(path, docs)
    lines = path.read_text().splitlines()
    if change == "generate":
        first = json.loads(lines[0])
        first["filtered_resps"], first["resps"] = ["Paris"], [["Paris"]]
        lines[0] = json.dumps(first)
    if change == "filters":
        lines += [json.dumps({**json.loads(x), "filter": "strict-match"}) for x in lines]
    if change == "json":
        lines[2] = lines[2][:-1]
    path.write_text("\n".join(lines) + "\n")
    before = registry_state(reg.root)
    with pytest.raises(PredictionsError, match=message) as e:
        dsreg.evaluate("qa@original", path, predictions_format="lm-eval", record=True,
                       model="m", registry=reg)  # fmt: skip
    assert "\n" not in str(e.value)
    assert registry_state(reg.root) == before


def test_a_set_without_question_texts_and_other_inputs_are_refused(
    make_registry: Callable[..., Registry], tmp_path: Path, cli: Callable[..., Any]
) -> None:
    reg = make_registry()
    labels = tmp_path / "labels.csv"
    labels.write_text("label\n0\n1\n2\n")
    dsreg.add("plain", labels=labels, tag="original", registry=reg)
    path = tmp_path / "s.jsonl"
    write_samples(path, [(i, r) for i, r in enumerate(questions(3))])
    r = cli("eval", "plain@original", str(path), "--predictions-format", "lm-eval",
            "--registry", str(reg.root))  # fmt: skip
    assert r.exit_code == 1 and "carry no question text and choices" in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = cli("eval", "plain@original", str(path), "--predictions-format", "lm-evl",
            "--registry", str(reg.root))  # fmt: skip
    assert r.exit_code == 1 and "choose dsreg or lm-eval" in r.stderr
    r = cli("eval", "plain@original", str(path), "--record", "--model", "m",
            "--registry", str(reg.root))  # fmt: skip
    assert r.exit_code == 1 and ".jsonl" in r.stderr


def test_answers_outside_the_classes_are_refused(
    make_registry: Callable[..., Registry], tmp_path: Path
) -> None:
    """A set whose answers never use the last position has fewer classes than choices."""
    reg = make_registry()
    rows = [{**r, "answer": r["answer"] % 3} for r in questions(6)]
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({k: [r[k] for r in rows] for k in rows[0]}), path)
    dsreg.add("three", table=path, id_column="id", label_column="answer", tag="original",
              registry=reg)  # fmt: skip
    samples = tmp_path / "s.jsonl"
    docs = [(i, r) for i, r in enumerate(rows)]
    samples.write_text("\n".join(sample_line(i, r, [-1.0, -2.0, -3.0, -0.5]) for i, r in docs))
    with pytest.raises(PredictionsError, match=r"chose choice 3, but the set has 3 classes"):
        dsreg.record("three@original", samples, model="m", predictions_format="lm-eval",
                     registry=reg)  # fmt: skip


# -- a real lm-evaluation-harness run --------------------------------------------------------------

# What ``lm_eval --model dummy --tasks qa --include_path FOLDER --log_samples`` does, through
# the harness's own API: its command line indexes every task it ships (thousands of YAML files,
# minutes) before it runs one; the task manager here reads the test's folder alone. The samples
# are written by the harness's EvaluationTracker, as the command line writes them.
RUN = textwrap.dedent(
    """
    import sys
    import lm_eval
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.tasks import TaskManager

    tasks = TaskManager(include_path=sys.argv[1], include_defaults=False)
    results = lm_eval.simple_evaluate(
        model="dummy", tasks=["dsreg_qa"], task_manager=tasks, log_samples=True
    )
    samples = results.pop("samples")
    tracker = EvaluationTracker(output_path=sys.argv[2])
    tracker.save_results_aggregated(results=results, samples=samples)
    for name in results["configs"]:
        tracker.save_results_samples(task_name=name, samples=samples[name])
    """
)


@pytest.mark.skipif(
    importlib.util.find_spec("lm_eval") is None,
    reason="lm-evaluation-harness is not installed (pip install lm-eval: the dev extra has it)",
)
def test_a_real_lm_eval_run_is_recorded_and_rescored_on_a_reannotation(
    tmp_path: Path, cli: Callable[..., Any]
) -> None:
    rows = questions(40, seed=2)
    data = tmp_path / "qa.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "dsreg_qa.yaml").write_text(
        textwrap.dedent(
            f"""
            task: dsreg_qa
            dataset_path: json
            dataset_kwargs:
              data_files:
                test: {data}
            test_split: test
            output_type: multiple_choice
            doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
            doc_to_choice: "{{{{choices}}}}"
            doc_to_target: answer
            metric_list:
              - metric: acc
                aggregation: mean
                higher_is_better: true
            """
        )
    )
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1",
           "HF_HOME": str(tmp_path / "hf"), "TOKENIZERS_PARALLELISM": "false"}  # fmt: skip
    run = subprocess.run(
        [sys.executable, "-c", RUN, str(tmp_path), str(tmp_path / "out")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    (samples,) = (tmp_path / "out").rglob("samples_dsreg_qa_*.jsonl")
    logged = [json.loads(x) for x in samples.read_text().splitlines()]
    assert len(logged) == len(rows)

    reg = dsreg.init(registry=tmp_path / "reg")
    add_set(reg, rows, tmp_path)
    r = cli("eval", "qa@original", str(samples), "--predictions-format", "lm-eval",
            "--record", "--model", "dummy", "--registry", str(reg.root), "--json")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    scored = json.loads(r.stdout)["models"][0]
    acc = np.mean([s["acc"] for s in logged])  # lm-eval's own accuracy
    assert scored["scores"]["original"]["accuracy"]["top1"] == pytest.approx(acc)
    assert scored["predictions"]["digest"] == hash_file(samples)

    # A re-annotation tagged after the result was recorded: ten answers corrected.
    answers = np.array([r["answer"] for r in rows])
    chosen = np.empty(len(rows), dtype=int)
    for s in logged:
        chosen[s["doc_id"]] = int(np.argmax([float(v[0]) for v in s["filtered_resps"]]))
    fixed = np.arange(10)
    corrected = answers.copy()
    corrected[fixed] = chosen[fixed]  # the model's answers there become the right ones
    table = corrections_table(
        rows=fixed, example_ids=[rows[i]["id"] for i in fixed], given_label=answers[fixed],
        suggested_label=corrected[fixed], verdict=["correctable"] * len(fixed),
    )  # fmt: skip
    snap = dsreg.show("qa@original", registry=reg).snapshot
    d = write_overlay(reg, base=snap, kind="manual", table=table, producer=PRODUCER)
    dsreg.tag("qa@redux", "qa@original", overlays=[d], view="corrected", registry=reg)
    r = cli("leaderboard", "qa", "--registry", str(reg.root), "--json")
    assert r.exit_code == 0, r.stderr
    board = json.loads(r.stdout)
    redux = next(b for b in board["revisions"] if b["tag"] == "redux")
    got = redux["scores"]["dummy"]["corrected"]
    assert got["correct"] == int((chosen == corrected).sum())
    assert got["interval"][0] <= got["accuracy"] <= got["interval"][1]
    original = board["revisions"][0]["scores"]["dummy"]["original"]
    assert original["accuracy"] == pytest.approx(acc)
