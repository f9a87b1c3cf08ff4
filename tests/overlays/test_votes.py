"""Vote import: the published label-errors counts, every verdict rule, and every refusal."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsreg.errors import InputPathError, VotesError
from dsreg.overlays.votes import (
    CORRECTIONS_SCHEMA,
    VERDICTS,
    VoteImport,
    import_votes,
    verdict_for,
)

CIFAR10_CLASSES = [
    "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck",
]  # fmt: skip
DIGITS = [str(i) for i in range(10)]


def _label_errors_dir() -> Path:
    env = os.environ.get("DSREG_SHARED_DATA")
    if env:
        root = Path(env)
        return root / "label-errors" if (root / "label-errors").is_dir() else root
    return Path(__file__).resolve().parents[3] / "shared" / "data" / "label-errors"


LABEL_ERRORS = _label_errors_dir()


def record(
    id: int | str,
    given_label: int | str,
    guessed_label: int | str,
    url: str | None = None,
    **mturk: int,
) -> dict[str, Any]:
    out: dict[str, Any] = {"id": id}
    if url is not None:
        out["url"] = url
    out |= {
        "given_original_label": given_label,
        "our_guessed_label": guessed_label,
        "mturk": {key.replace("off_topic", "off-topic"): value for key, value in mturk.items()},
    }
    return out


@pytest.fixture
def write(tmp_path: Path) -> Callable[[object, str], Path]:
    """Write JSON (any object) or CSV (a str) to a file and return its path."""

    def _write(content: object, name: str = "votes.json") -> Path:
        path = tmp_path / name
        text = content if isinstance(content, str) else json.dumps(content)
        path.write_text(text, encoding="utf-8")
        return path

    return _write


def run(
    path: Path,
    *,
    labels: Sequence[int],
    ids: Sequence[str] | pa.Array | None = None,
    classes: Sequence[str] = ("a", "b", "c"),
    threshold: int = 3,
    format: str = "label-errors",
) -> VoteImport:
    return import_votes(
        path,
        format=format,  # type: ignore[arg-type]
        threshold=threshold,
        dataset="toy",
        example_ids=[str(i) for i in range(len(labels))] if ids is None else ids,
        labels=np.asarray(labels, dtype=np.int64),
        classes=classes,
    )


# --- the published figures ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "classes", "expected", "raters"),
    [
        (
            "mnist",
            DIGITS,
            dict(checked=100, errors=15, non_error=85, correctable=10, multi_label=0,
                 neither=3, non_agreement=2),
            None,  # where guessed equals given a vote counts twice, so totals vary
        ),
        (
            "cifar10",
            CIFAR10_CLASSES,
            dict(checked=275, errors=54, non_error=221, correctable=18, multi_label=0,
                 neither=4, non_agreement=32),
            5,
        ),
    ],
)  # fmt: skip
def test_release_reproduces_published_counts(
    name: str, classes: list[str], expected: dict[str, int], raters: int | None
) -> None:
    votes = LABEL_ERRORS / f"{name}_mturk.json"
    if not votes.is_file():
        pytest.skip(f"label-errors data not found at {LABEL_ERRORS} (set DSREG_SHARED_DATA)")
    labels = np.load(LABEL_ERRORS / f"{name}_test_set_original_labels.npy")

    result = import_votes(
        votes,
        format="label-errors",
        threshold=3,
        dataset=name,
        example_ids=[str(i) for i in range(len(labels))],
        labels=labels,
        classes=classes,
    )

    assert result.summary == expected
    assert result.params == {"format": "label-errors", "threshold": 3, "raters": raters}
    table = result.table
    assert table.schema == CORRECTIONS_SCHEMA
    assert table.num_rows == expected["checked"]
    rows = table["row"].to_pylist()
    assert rows == sorted(rows)
    assert table["example_id"].to_pylist() == [str(row) for row in rows]
    assert table["given_label"].to_pylist() == labels[rows].tolist()
    assert table["score"].null_count == table.num_rows
    source = {r["id"]: r for r in json.loads(votes.read_text())}
    for row in table.to_pylist():
        assert row["suggested_label"] == source[row["row"]]["our_guessed_label"]


# --- the verdict rule -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("counts", "verdict"),
    [
        (dict(given=3, guessed=0), "non_error"),  # exactly t
        (dict(given=2, guessed=2, both=2, neither=2), "non_agreement"),  # all just below t
        (dict(given=3, guessed=5), "non_error"),  # given is checked first
        (dict(given=2, guessed=3), "correctable"),
        (dict(given=0, guessed=3, both=3), "correctable"),  # guessed before both
        (dict(given=0, guessed=0, both=3), "multi_label"),
        (dict(given=0, guessed=0, both=3, neither=3), "multi_label"),  # both before neither
        (dict(given=0, guessed=0, both=2, neither=3), "neither"),
        (dict(given=1, guessed=1, both=1, neither=1), "non_agreement"),
    ],
)
def test_verdict_rule_order_and_boundaries(counts: dict[str, int], verdict: str) -> None:
    assert verdict_for(threshold=3, **counts) == verdict


def test_each_verdict_lands_in_table_and_summary(write: Callable[..., Path]) -> None:
    path = write(
        [
            record(4, 0, 1, given=1, guessed=1, both=1, neither=2),
            record(0, 0, 1, given=3, guessed=0, both=0, neither=2),
            record(1, 1, 2, given=2, guessed=3, both=0, neither=0),
            record(2, 2, 0, given=0, guessed=2, both=3, neither=0),
            record(3, 0, 2, given=1, guessed=1, both=0, neither=3),
        ]
    )

    result = run(path, labels=[0, 1, 2, 0, 0])

    assert result.table["row"].to_pylist() == [0, 1, 2, 3, 4]
    assert result.table["verdict"].to_pylist() == [
        "non_error",
        "correctable",
        "multi_label",
        "neither",
        "non_agreement",
    ]
    assert result.summary == {
        "checked": 5,
        "errors": 4,
        "non_error": 1,
        "correctable": 1,
        "multi_label": 1,
        "neither": 1,
        "non_agreement": 1,
    }
    assert result.params == {"format": "label-errors", "threshold": 3, "raters": 5}


def test_missing_count_is_null_in_votes_and_zero_for_the_rule(
    write: Callable[..., Path],
) -> None:
    # MNIST records have no "both"
    path = write([record(0, 0, 1, given=1, guessed=1, neither=2)])

    table = run(path, labels=[0], threshold=2).table

    assert table["verdict"].to_pylist() == ["neither"]
    assert table["votes"].to_pylist() == [
        dict(given=1, guessed=1, both=None, neither=2, neutral=None, off_topic=None)
    ]


def test_threshold_changes_the_verdict(write: Callable[..., Path]) -> None:
    path = write([record(0, 0, 1, given=2, guessed=3, both=0, neither=0)])

    assert run(path, labels=[0], threshold=2).table["verdict"].to_pylist() == ["non_error"]
    assert run(path, labels=[0], threshold=3).table["verdict"].to_pylist() == ["correctable"]
    assert run(path, labels=[0], threshold=4).table["verdict"].to_pylist() == ["non_agreement"]


# --- how records name examples --------------------------------------------------------------


def test_imdb_string_ids_and_label_names(write: Callable[..., Path]) -> None:
    ids = ["test/neg/0_2", "test/neg/1_3", "test/pos/2_9", "test/pos/3_8"]
    path = write(
        [
            record(ids[1], "Negative", "Positive",
                   url="https://labelerrors.com/static/imdb/test/neg/1_3.txt",
                   given=0, guessed=3, neutral=2, off_topic=0),
            record(ids[2], "Positive", "Negative",
                   url="https://labelerrors.com/static/imdb/test/pos/2_9.txt",
                   given=1, guessed=1, neutral=3, off_topic=0),
            record(ids[3], "Positive", "Negative",
                   url="https://labelerrors.com/static/imdb/test/pos/3_8.txt",
                   given=4, guessed=0, neutral=0, off_topic=1),
        ]
    )  # fmt: skip

    result = run(path, labels=[0, 0, 1, 1], ids=ids, classes=["negative", "positive"])

    table = result.table.to_pylist()
    assert [r["example_id"] for r in table] == ids[1:]
    assert [r["row"] for r in table] == [1, 2, 3]
    assert [(r["given_label"], r["suggested_label"]) for r in table] == [(0, 1), (1, 0), (1, 0)]
    # neutral 3 >= t, yet IMDB has no "neither": not categorised as anything but non_agreement
    assert [r["verdict"] for r in table] == ["correctable", "non_agreement", "non_error"]
    assert table[1]["votes"] == dict(
        given=1, guessed=1, both=None, neither=None, neutral=3, off_topic=0
    )


def test_url_path_names_the_example_before_the_integer_id(write: Callable[..., Path]) -> None:
    # ImageNet: the id is the validation file's number, not a row; only the url says which
    # example it is (and the release spells it with a double slash)
    ids = [
        "val/n01440764/ILSVRC2012_val_00000293.JPEG",
        "val/n01443537/ILSVRC2012_val_00000236.JPEG",
        "val/n01484850/ILSVRC2012_val_00000002.JPEG",
    ]
    url = "https://labelerrors.com//static/imagenet/"
    path = write(
        [
            record(293, 0, 2, url=url + ids[0], given=5, guessed=0, both=0, neither=0),
            record(236, 1, 2, url=url + ids[1], given=0, guessed=5, both=0, neither=0),
        ]
    )

    result = import_votes(
        path,
        format="label-errors",
        threshold=3,
        dataset="imagenet-val",  # not the release's name "imagenet"
        example_ids=pa.array(ids),
        labels=np.array([0, 1, 2]),
        classes=["tench", "goldfish", "great white shark"],
    )

    assert result.table["row"].to_pylist() == [0, 1]
    assert result.table["example_id"].to_pylist() == ids[:2]
    assert result.table["verdict"].to_pylist() == ["non_error", "correctable"]


def test_integer_id_that_is_not_a_row_is_caught_by_the_label_check(
    write: Callable[..., Path],
) -> None:
    # the ImageNet file against a snapshot whose ids are not the release's paths
    labels = [0] * 300
    labels[2] = 1
    path = write(
        [
            record(2, 0, 1, url="https://labelerrors.com//static/imagenet/val/x/2.JPEG",
                   given=5, guessed=0, both=0, neither=0),
        ]
    )  # fmt: skip

    with pytest.raises(VotesError, match=r"1 records give a label that differs") as info:
        run(path, labels=labels, classes=["tench", "goldfish"])
    assert "id 2 -> row 2 ('2'): file says 0 ('tench'), snapshot says 1 ('goldfish')" in str(
        info.value
    )


def test_rows_by_number_against_path_ids_say_how_to_register_the_ids(
    write: Callable[..., Path],
) -> None:
    # IMDB-style: the release numbers its files, the snapshot was added as a tree (paths, in
    # another order): the numbers name the wrong rows, and the error says what to do (#15).
    ids = ["neg/0.txt", "pos/1.txt", "neg/2.txt"]
    path = write([record(1, 0, 1, given=5, guessed=0, both=0, neither=0)])
    with pytest.raises(VotesError, match="differs") as info:
        run(path, labels=[0, 1, 0], ids=ids)
    assert "are paths such as 'neg/0.txt'" in str(info.value)
    assert "--ids ids.txt" in str(info.value)
    path = write([record(7, 0, 1, given=5, guessed=0, both=0, neither=0)])
    with pytest.raises(VotesError, match="name no example") as info:
        run(path, labels=[0, 1, 0], ids=ids)
    assert "--ids ids.txt" in str(info.value)
    # numeric ids: no such advice
    path = write([record(1, 0, 1, given=5, guessed=0, both=0, neither=0)])
    with pytest.raises(VotesError, match="differs") as info:
        run(path, labels=[0, 1, 0])
    assert "--ids" not in str(info.value)


def test_chunked_array_ids_are_accepted(write: Callable[..., Path]) -> None:
    path = write([record("b", 1, 0, given=3, guessed=0, both=0, neither=0)])
    ids = pa.chunked_array([["a"], ["b", "c"]])

    result = run(path, labels=[0, 1, 2], ids=ids)

    assert result.table["row"].to_pylist() == [1]


# --- refusals -------------------------------------------------------------------------------


def test_label_mismatch_names_count_and_first_few(write: Callable[..., Path]) -> None:
    path = write([record(i, 1, 0, given=5, guessed=0, both=0, neither=0) for i in range(8)])

    with pytest.raises(VotesError) as info:
        run(path, labels=[0] * 8)

    message = str(info.value)
    assert (
        "8 records give a label that differs from the label of the row they name in 'toy'"
        in message
    )
    assert "id 0 -> row 0 ('0'): file says 1 ('b'), snapshot says 0 ('a')" in message
    assert "id 4 -> row 4" in message
    assert "id 5 -> row 5" not in message
    assert "and 3 more" in message


def test_unknown_example_ids_and_rows_are_named(write: Callable[..., Path]) -> None:
    path = write(
        [
            record("nope", 0, 1, given=5, guessed=0, both=0, neither=0),
            record(10, 0, 1, given=5, guessed=0, both=0, neither=0),
            record(-1, 0, 1, given=5, guessed=0, both=0, neither=0),
            record(0, 0, 1, given=5, guessed=0, both=0, neither=0),
        ]
    )

    with pytest.raises(VotesError, match=r"3 records name no example of 'toy' \(3 rows\)") as info:
        run(path, labels=[0, 0, 0])
    message = str(info.value)
    assert "id 'nope' (tried 'nope')" in message
    assert "id 10 (tried row 10)" in message
    assert "id -1 (tried row -1)" in message


def test_same_example_voted_twice(write: Callable[..., Path]) -> None:
    path = write(
        [
            record(1, 0, 1, given=5, guessed=0, both=0, neither=0),
            record(7, 0, 1, url="https://labelerrors.com/static/toy/1",
                   given=5, guessed=0, both=0, neither=0),
        ]
    )  # fmt: skip

    with pytest.raises(VotesError, match=r"1 examples are voted more than once") as info:
        run(path, labels=[0, 0])
    assert "row 1 ('1') by id 1 and id 7" in str(info.value)


@pytest.mark.parametrize(
    ("given_label", "guessed_label", "shown"),
    [
        (0, 3, "guessed label 3"),
        (0, "dog", "guessed label 'dog'"),
        (-1, 1, "given label -1"),
        ("zebra", 1, "given label 'zebra'"),
    ],
)
def test_labels_outside_classes_are_refused(
    write: Callable[..., Path], given_label: int | str, guessed_label: int | str, shown: str
) -> None:
    path = write([record(0, given_label, guessed_label, given=5, guessed=0)])

    with pytest.raises(VotesError, match="labels are not classes of 'toy'") as info:
        run(path, labels=[0])
    assert shown in str(info.value)


def test_audioset_multi_label_is_refused(write: Callable[..., Path]) -> None:
    path = write(
        [
            {
                "id": 2,
                "url": "http://youtu.be/lL5jq1TDiXQ?start=30&end=40",
                "given_original_labels": ["Cheering", "Crowd"],
                "our_guessed_labels": ["Speech"],
                "mturk": {"Cheering": 4, "Crowd": 3, "Speech": 1},
            }
        ]
    )

    with pytest.raises(VotesError, match=r"multi-label.*AudioSet"):
        run(path, labels=[0, 0, 0])


def test_amazon_votes_are_refused(write: Callable[..., Path]) -> None:
    path = write(
        [
            {
                "id": 0,
                "url": "https://labelerrors.com/static/amazon/0.txt",
                "given_original_label": "Positive",
                "our_guessed_label": "Neutral",
                "mturk": {"positive": 3, "negative": 0, "neutral": 2, "off-topic": 0},
            }
        ]
    )

    with pytest.raises(VotesError, match=r"Amazon format.*not supported"):
        run(path, labels=[0], classes=["negative", "neutral", "positive"])


@pytest.mark.parametrize("threshold", [0, -1, True, 2.5])
def test_threshold_below_one_is_refused(write: Callable[..., Path], threshold: Any) -> None:
    path = write([record(0, 0, 1, given=5, guessed=0)])

    with pytest.raises(VotesError, match="threshold must be"):
        run(path, labels=[0], threshold=threshold)


@pytest.mark.parametrize(
    ("content", "pattern"),
    [
        ("", r"votes\.json is empty"),
        ("  \n", r"votes\.json is empty"),
        ("[]", r"votes\.json holds no votes"),
        ('[{"id": 0,', r"votes\.json is not valid JSON: .* at line 1, column"),
        ('{"id": 0}', r"votes\.json holds a JSON dict"),
        ("[3]", r"record 0 is a JSON int, not an object"),
        ('[{"id": 0, "given_original_label": 0, "our_guessed_label": 1}]', r"has no 'mturk'"),
        ('[{"id": 0, "our_guessed_label": 1, "mturk": {}}]', r"no 'given_original_label'"),
        ('[{"id": 1.5, "given_original_label": 0, "our_guessed_label": 1, "mturk": {}}]',
         r"id must be an integer or a string; got 1\.5"),
        ('[{"given_original_label": 0, "our_guessed_label": 1, "mturk": {}}]',
         r"has neither id nor url"),
        ('[{"id": 0, "given_original_label": 0, "our_guessed_label": 1, "mturk": []}]',
         r"mturk must be an object"),
        ('[{"id": 0, "given_original_label": 0, "our_guessed_label": 1,'
         ' "mturk": {"given": -1, "guessed": 0}}]', r"'given' must be a whole number >= 0"),
        ('[{"id": 0, "given_original_label": 0, "our_guessed_label": 1,'
         ' "mturk": {"given": 1, "guessed": 0, "maybe": 2}}]', r"unknown vote counts \['maybe'\]"),
        ('[{"id": 0, "given_original_label": 0, "our_guessed_label": 1,'
         ' "mturk": {"given": 1}}]', r"mturk has no 'guessed' count"),
    ],
)  # fmt: skip
def test_malformed_json_names_file_and_problem(
    write: Callable[..., Path], content: str, pattern: str
) -> None:
    path = write(content)

    with pytest.raises(VotesError, match=pattern):
        run(path, labels=[0, 0])


def test_missing_file_is_a_path_error(tmp_path: Path) -> None:
    with pytest.raises(InputPathError, match=r"votes file .* does not exist"):
        run(tmp_path / "absent.json", labels=[0])


def test_snapshot_columns_of_different_lengths_are_refused(write: Callable[..., Path]) -> None:
    path = write([record(0, 0, 1, given=5, guessed=0)])

    with pytest.raises(VotesError, match="has 2 example ids but 3 labels"):
        run(path, labels=[0, 0, 0], ids=["0", "1"])


def test_unknown_format_is_refused(write: Callable[..., Path]) -> None:
    path = write([record(0, 0, 1, given=5, guessed=0)])

    with pytest.raises(VotesError, match="unknown votes format 'amazon'"):
        run(path, labels=[0], format="amazon")


# --- CSV ------------------------------------------------------------------------------------

HEADER = "example_id,given_label,suggested_label,given,guessed,both,neither\n"


def test_csv_happy_path(write: Callable[..., Path]) -> None:
    path = write(
        HEADER
        + "img/c.png,cat,dog,0,4,1,0\n"
        + "img/a.png,0,,4,,,1\n"  # index labels, no suggestion, no both
        + "img/b.png,dog,1,1,1,0,3\n",
        "votes.csv",
    )

    result = run(
        path,
        labels=[0, 1, 0],
        ids=["img/a.png", "img/b.png", "img/c.png"],
        classes=["cat", "dog"],
        format="csv",
    )

    assert result.table.schema == CORRECTIONS_SCHEMA
    assert result.table.to_pylist() == [
        dict(row=0, example_id="img/a.png", given_label=0, suggested_label=None,
             verdict="non_error", score=None,
             votes=dict(given=4, guessed=None, both=None, neither=1, neutral=None,
                        off_topic=None)),
        dict(row=1, example_id="img/b.png", given_label=1, suggested_label=1,
             verdict="neither", score=None,
             votes=dict(given=1, guessed=1, both=0, neither=3, neutral=None, off_topic=None)),
        dict(row=2, example_id="img/c.png", given_label=0, suggested_label=1,
             verdict="correctable", score=None,
             votes=dict(given=0, guessed=4, both=1, neither=0, neutral=None, off_topic=None)),
    ]  # fmt: skip
    assert result.summary["checked"] == 3
    assert result.summary["errors"] == 2
    # every line's counts add up to 5, so 5 raters is recorded as provenance
    assert result.params == {"format": "csv", "threshold": 3, "raters": 5}


def test_csv_columns_in_any_order(write: Callable[..., Path]) -> None:
    path = write(
        "given,guessed,both,neither,example_id,given_label,suggested_label\n3,2,0,0,1,b,a\n",
        "votes.csv",
    )

    result = run(path, labels=[0, 1], format="csv")

    assert result.table["row"].to_pylist() == [1]
    assert result.params["raters"] == 5


@pytest.mark.parametrize(
    ("body", "pattern"),
    [
        ("example_id,given_label,suggested_label,given,guessed,both\n0,a,b,5,0,0\n",
         r"header must be .* missing \['neither'\], unexpected \[\]"),
        (HEADER + "9,a,b,5,0,0,0\n", r"1 records name no example of 'toy'.*line 2 \('9'\)"),
        (HEADER + "0,b,a,5,0,0,0\n",
         r"1 records give a label that differs.*line 2 \('0'\) -> row 0 \('0'\): "
         r"file says 1 \('b'\), snapshot says 0 \('a'\)"),
        (HEADER + "0,a,b,5,0,0,0\n0,a,c,5,0,0,0\n", r"row 0 \('0'\) by line 2 .* and line 3"),
        (HEADER + "0,a,b,five,0,0,0\n", r"line 2: given must be a whole number >= 0; got 'five'"),
        (HEADER + "0,a,b,-1,0,0,0\n", r"given must be a whole number"),
        (HEADER + "0,a,zebra,5,0,0,0\n", r"suggested label 'zebra'"),
        (HEADER + "0,a,,2,3,0,0\n", r"counts 3 votes for the suggested label but names none"),
        (HEADER + "0,a,b,,0,0,0\n", r"line 2 has no 'given' count"),
        (HEADER + "0,a,b,5,0,0\n", r"line 2 has 6 fields; the header has 7"),
        (HEADER, r"holds no votes"),
    ],
)  # fmt: skip
def test_csv_refusals(write: Callable[..., Path], body: str, pattern: str) -> None:
    path = write(body, "votes.csv")

    with pytest.raises(VotesError, match=pattern):
        run(path, labels=[0, 1], format="csv")


def test_csv_label_that_is_a_name_and_another_index_is_ambiguous(
    write: Callable[..., Path],
) -> None:
    path = write(HEADER + "0,1,0,5,0,0,0\n", "votes.csv")

    with pytest.raises(VotesError, match="ambiguous"):
        run(path, labels=[0], classes=["1", "0"], format="csv")


# --- property -------------------------------------------------------------------------------

counts = st.integers(min_value=0, max_value=5)
votes_strategy = st.fixed_dictionaries(
    {"given": counts, "guessed": counts}, optional={"both": counts, "neither": counts}
)


@settings(max_examples=60, deadline=None)
@given(
    mturk=st.lists(votes_strategy, min_size=1, max_size=20),
    threshold=st.integers(min_value=1, max_value=5),
    data=st.data(),
)
def test_property_verdicts_partition_records(
    mturk: list[dict[str, int]], threshold: int, data: st.DataObject
) -> None:
    n = 30
    rows = data.draw(st.lists(st.integers(0, n - 1), min_size=len(mturk), max_size=len(mturk),
                              unique=True))  # fmt: skip
    labels = np.arange(n) % 3
    records = [
        {
            "id": row,
            "given_original_label": int(labels[row]),
            "our_guessed_label": int((labels[row] + 1) % 3),
            "mturk": votes,
        }
        for row, votes in zip(rows, mturk, strict=True)
    ]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "votes.json"
        path.write_text(json.dumps(records), encoding="utf-8")
        result = run(path, labels=labels.tolist(), threshold=threshold)

    summary = result.summary
    assert sum(summary.get(verdict, 0) for verdict in VERDICTS) == summary["checked"]
    assert summary["checked"] == len(records)
    assert "unreviewed" not in summary  # no record says how many votes it wanted
    assert summary["errors"] == summary["checked"] - summary["non_error"]
    table = result.table.to_pylist()
    assert [r["row"] for r in table] == sorted(rows)
    by_row = dict(zip(rows, mturk, strict=True))
    for r in table:
        votes = by_row[r["row"]]
        assert (r["verdict"] == "non_error") == (votes["given"] >= threshold)
        assert (r["verdict"] == "correctable") == (votes["given"] < threshold <= votes["guessed"])
        assert {k: v for k, v in r["votes"].items() if v is not None} == votes
        assert r["given_label"] == labels[r["row"]]
