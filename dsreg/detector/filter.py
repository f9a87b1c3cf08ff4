"""Find label issues by confident learning: ``cleanlab.filter.find_label_issues`` in numpy.

Every ``filter_by`` of cleanlab 2.x is supported and gives cleanlab's mask, defined with stable
sorts (see :mod:`dsreg.detector.count`). The probabilities are read in row chunks, at most three
passes plus one for ranking by a score that needs whole rows; memory is a few ``n``-length
vectors plus one chunk's temporaries.

The public functions take cleanlab's arguments: ``labels`` (array_like of int, shape (n,), in
``[0, k)``), ``pred_probs`` (array_like of shape (n, k), a ``.npy`` or Parquet path, or a
``ProbabilitySource``) and, dsreg's own, ``chunk_rows`` (rows read at a time; it never changes
a result). Their docstrings describe the other parameters.
"""

from __future__ import annotations

from typing import Any, NamedTuple, TypedDict, Unpack

import numpy as np
import numpy.typing as npt

from dsreg.detector.count import BoolArray, ProbsLike, Scan, count_issues
from dsreg.detector.joint import check_joint, round_preserving_row_totals
from dsreg.detector.options import FILTER_BY, RANK_BY, DetectorOptions
from dsreg.detector.source import FloatArray, IntArray
from dsreg.errors import InvalidInputError

__all__ = [
    "CLEANLAB_DEFAULTS",
    "FILTER_BY",
    "CleanlabKeywords",
    "find_label_issues",
    "find_predicted_neq_given",
]

_PRUNING = ("prune_by_noise_rate", "prune_by_class", "both")
#: prune_by_noise_rate gathers single margins when fewer than this fraction of all (row, class)
#: entries belong to a pruned pair, and computes whole rows otherwise. Never changes a result.
SPARSE_PAIRS_BELOW = 0.25
_LOW_SCORE = ("low_normalized_margin", "low_self_confidence")
#: Candidates offered before :class:`_TopMargins` first trims them and raises its cutoffs.
_FIRST_COMPACTION = 1 << 16


def check_filter_options(
    k: int, options: DetectorOptions, *, confident_joint: npt.ArrayLike | None = None
) -> None:
    """Raise :class:`InvalidInputError` for options cleanlab would reject, ignore or warn on
    (the options that decide which rows are flagged, for ``k`` classes)."""
    filter_by, frac_noise = options.filter_by, options.frac_noise
    num_to_remove_per_class = options.num_to_remove_per_class
    min_examples_per_class = options.min_examples_per_class
    if filter_by not in FILTER_BY:
        raise InvalidInputError(
            f"filter_by must be one of {', '.join(FILTER_BY)}; got {filter_by!r}"
        )
    if not isinstance(frac_noise, (int, float)) or not 0.0 < float(frac_noise) <= 1.0:
        raise InvalidInputError(f"frac_noise must be in (0, 1], got {frac_noise!r}")
    if filter_by not in _PRUNING and (frac_noise != 1.0 or num_to_remove_per_class is not None):
        raise InvalidInputError(
            "frac_noise and num_to_remove_per_class only apply to filter_by "
            f"'prune_by_noise_rate', 'prune_by_class' or 'both', not {filter_by!r}"
        )
    if num_to_remove_per_class is not None:
        counts = np.asarray(num_to_remove_per_class)
        if counts.shape != (k,) or counts.dtype.kind not in "iu" or (counts < 0).any():
            raise InvalidInputError(
                f"num_to_remove_per_class must hold {k} non-negative integers, one per class; "
                f"got {num_to_remove_per_class!r}"
            )
    if (
        isinstance(min_examples_per_class, bool)
        or not isinstance(min_examples_per_class, (int, np.integer))
        or min_examples_per_class < 0
    ):
        raise InvalidInputError(
            f"min_examples_per_class must be a non-negative integer, got {min_examples_per_class!r}"
        )
    if confident_joint is not None:
        if filter_by == "confident_learning":
            raise InvalidInputError(
                "filter_by='confident_learning' re-estimates the confident joint; "
                "drop confident_joint= or choose another filter_by"
            )
        check_joint(confident_joint, k)


def keep_at_least_n_per_class(
    prune_count_matrix: npt.NDArray[Any], n: int, *, frac_noise: float = 1.0
) -> npt.NDArray[np.int_]:
    """cleanlab's ``_keep_at_least_n_per_class``: leave ``n`` examples in every class.

    Parameters
    ----------
    prune_count_matrix : numpy.ndarray, shape (k, k)
        The confident joint, transposed: ``[true, given]``.
    n : int
        Examples to keep per class.
    frac_noise : float, default 1.0
        Fraction of the off-diagonal counts to keep.

    Returns
    -------
    numpy.ndarray of int, shape (k, k)
    """
    prune_count_matrix_diagonal = np.diagonal(prune_count_matrix)
    new_diagonal = np.maximum(prune_count_matrix_diagonal, n)
    diff_per_col = new_diagonal - prune_count_matrix_diagonal
    num_noise_rates_per_col = np.maximum(
        np.count_nonzero(prune_count_matrix, axis=0) - 1.0,
        1.0,
    )
    new_mat = prune_count_matrix - diff_per_col / num_noise_rates_per_col
    new_mat[new_mat < 0] = 0
    np.fill_diagonal(new_mat, new_diagonal)
    new_mat = _reduce_prune_counts(new_mat, frac_noise)
    return round_preserving_row_totals(new_mat).astype(int)


def _reduce_prune_counts(prune_count_matrix: npt.NDArray[Any], frac_noise: float = 1.0) -> Any:
    new_mat = prune_count_matrix * frac_noise
    np.fill_diagonal(new_mat, prune_count_matrix.diagonal())
    np.fill_diagonal(
        new_mat,
        prune_count_matrix.diagonal() + np.sum(prune_count_matrix - new_mat, axis=0),
    )
    return new_mat.astype(int)


def _prune_count_matrix(
    scan: Scan, confident_joint: npt.NDArray[Any], options: DetectorOptions
) -> npt.NDArray[Any]:
    pcm: npt.NDArray[Any] = keep_at_least_n_per_class(
        confident_joint.T, n=options.min_examples_per_class, frac_noise=options.frac_noise
    )
    if options.num_to_remove_per_class is not None:
        remove = np.asarray(options.num_to_remove_per_class)
        # cleanlab's arithmetic verbatim (it divides columns by row sums); a class without
        # estimated noise divides by zero there too, silently, and then prunes nothing.
        with np.errstate(divide="ignore", invalid="ignore"):
            psy = pcm / np.sum(pcm, axis=1)
            noise_per_s = psy.sum(axis=1) - psy.diagonal()
            tmp = (psy.T * remove / noise_per_s).T
            np.fill_diagonal(tmp, scan.counts - remove)
            pcm = round_preserving_row_totals(tmp)
    return pcm


def _prunable(scan: Scan, min_examples_per_class: int) -> BoolArray:
    # cleanlab skips a class with at most min_examples_per_class examples, and drops the mask
    # of a class with a single example (``if len(mask) > 1``).
    return np.asarray(scan.counts > max(min_examples_per_class, 1))


def _prune_by_class(scan: Scan, pcm: npt.NDArray[Any], min_examples_per_class: int) -> BoolArray:
    """For each class, flag its ``n_c - pcm[c, c]`` lowest self-confidences."""
    mask = np.zeros(scan.n, dtype=bool)
    sc = scan.self_confidence
    for c in np.flatnonzero(_prunable(scan, min_examples_per_class)):
        num_issues = int(scan.counts[c] - pcm[c, c])
        if num_issues >= 1:
            rows = scan.class_rows(int(c))
            mask[rows[np.argsort(sc[rows], kind="stable")[:num_issues]]] = True
    return mask


class _Candidates(NamedTuple):
    """Entries offered to :class:`_TopMargins`: pair ids, negated margins, rows."""

    pair: npt.NDArray[np.int64]
    neg: FloatArray
    row: IntArray


class _TopMargins:
    """Streaming exact top-m selection for every (given class, other class) pair.

    cleanlab's ``_prune_by_count`` flags, for given class ``c`` and each other class ``j``,
    the ``m = pcm[j, c]`` rows labelled ``c`` with the largest ``p[:, j] - p[:, c]``, ties to
    the lower row (stable ``argsort(-margin)``). Rows arrive in ascending order, so once a
    pair holds ``m`` candidates, a later row can only enter with a strictly larger margin:
    ``cutoff`` is that bar (``-inf`` until the pair is full, ``+inf`` for pairs not pruned).
    Candidates are kept sorted by (pair, -margin, row) and trimmed to ``m`` per pair.

    Entries are found (``offered``, ``offered_pairs``: reading the cutoffs only) on the pass's
    threads and kept (``keep``: trimming, raising the cutoffs) in row order on one. A chunk
    may be searched against cutoffs older than the rows kept just before it: those are lower,
    so it offers more entries, never fewer; and every cutoff comes from earlier rows.
    """

    def __init__(self, take: npt.NDArray[np.int64], dtype: np.dtype[Any]) -> None:
        k = take.shape[0]
        self.k = k
        # C order, so that flat pair ids c * k + j index both tables.
        self.take = np.ascontiguousarray(take).reshape(-1)
        self.cutoff = np.ascontiguousarray(np.where(take > 0, -np.inf, np.inf), dtype=dtype)
        # Each class's lowest cutoff: a row whose largest margin does not pass it offers nothing.
        self.floor = self.cutoff.min(axis=1)
        self.pair = np.zeros(0, dtype=np.int64)
        self.neg = np.zeros(0, dtype=dtype)
        self.row = np.zeros(0, dtype=np.int64)
        self.pending: list[_Candidates] = []
        self.pending_size = 0
        self.limit = _FIRST_COMPACTION

    def offered(self, positions: IntArray, margin: FloatArray, lab: IntArray) -> _Candidates | None:
        """The entries of whole rows that pass the cutoffs: ``margin[i, j]`` for the row at
        ``positions[i]``, labelled ``lab[i]``. The rows must come after every row kept."""
        # Flat indices: numpy's 2-D nonzero is several times slower than the 1-D one.
        flat = np.flatnonzero(margin > self.cutoff[lab])
        if not flat.size:
            return None
        r, j = np.divmod(flat, self.k)
        return _candidates(lab[r] * self.k + j, margin.reshape(-1)[flat], positions[r])

    def offered_pairs(
        self, pair: IntArray, margin: FloatArray, positions: IntArray
    ) -> _Candidates | None:
        """Single entries that pass: the margin of the row at ``positions`` towards ``pair``."""
        hit = np.flatnonzero(margin > self.cutoff.reshape(-1)[pair])
        if not hit.size:
            return None
        return _candidates(pair[hit], margin[hit], positions[hit])

    def keep(self, found: _Candidates | None) -> None:
        """Keep what a chunk offered, chunks in row order."""
        if found is None:
            return
        self.pending.append(found)
        self.pending_size += found.pair.size
        if self.pending_size > self.limit:
            self.compact()

    def compact(self) -> None:
        if not self.pending:
            return
        pair = np.concatenate([self.pair, *(p.pair for p in self.pending)])
        neg = np.concatenate([self.neg, *(p.neg for p in self.pending)])
        row = np.concatenate([self.row, *(p.row for p in self.pending)])
        self.pending, self.pending_size = [], 0
        order = _order_candidates(pair, neg, row)
        pair, neg, row = pair[order], neg[order], row[order]
        first = np.flatnonzero(np.concatenate(([True], pair[1:] != pair[:-1])))
        group_start = np.repeat(first, np.diff(np.concatenate((first, [pair.size]))))
        rank = np.arange(pair.size) - group_start
        need = self.take[pair]
        keep = rank < need
        full = keep & (rank == need - 1)
        np.put(self.cutoff, pair[full], -neg[full])
        self.floor = self.cutoff.min(axis=1)
        self.pair, self.neg, self.row = pair[keep], neg[keep], row[keep]
        # Trimmed again once as many entries wait as survive, so trimming stays amortised
        # O(total): often enough that the cutoffs rise early and few entries pass them.
        self.limit = max(_FIRST_COMPACTION, self.pair.size)

    def rows(self) -> IntArray:
        self.compact()
        return self.row.astype(np.intp)


def _candidates(pair: IntArray, margin: FloatArray, positions: IntArray) -> _Candidates:
    return _Candidates(pair.astype(np.int64, copy=False), -margin, positions)


def _order_candidates(
    pair: npt.NDArray[np.int64], neg: FloatArray, row: npt.NDArray[np.int64]
) -> IntArray:
    """Order by (pair, -margin, row): cleanlab's stable ``argsort(-margin)`` within each pair."""
    if neg.dtype == np.float64 or pair.size == 0 or int(pair.max()) >= 1 << 31:
        return np.lexsort((row, neg, pair))
    # Pack (pair, value) into one uint64 whose integer order is the float order, and let
    # numpy's (SIMD, unstable) sort do the work; only equal keys then need ordering by row.
    # Adding +0.0 turns -0.0 into +0.0, which a comparison treats as equal anyway.
    bits = (neg.astype(np.float32) + np.float32(0)).view(np.uint32)
    bits = np.where(bits >> 31 == 1, ~bits, bits | np.uint32(1 << 31))
    key = (pair.astype(np.uint64) << np.uint64(32)) | bits.astype(np.uint64)
    order = np.argsort(key)
    ordered = key[order]
    tie = ordered[1:] == ordered[:-1]
    if tie.any():
        edge = np.zeros(ordered.size, dtype=bool)
        edge[1:] |= tie
        edge[:-1] |= tie
        at = np.flatnonzero(edge)
        tied = order[at]
        # Tie runs are contiguous, so sorting their members by (key, row) in place fixes them.
        order[at] = tied[np.lexsort((row[tied], key[tied]))]
    return order


def _prune_by_noise_rate(
    scan: Scan, pcm: npt.NDArray[Any], min_examples_per_class: int
) -> BoolArray:
    """One pass over the chunks selecting cleanlab's ``_prune_by_count`` rows for all pairs."""
    take = pcm.T.astype(np.int64)  # take[c, j]: rows labelled c to prune towards class j
    np.fill_diagonal(take, 0)
    take[~_prunable(scan, min_examples_per_class)] = 0
    mask = np.zeros(scan.n, dtype=bool)
    if not take.any():
        return mask
    top = _TopMargins(take, scan.dtype)
    pruned = take > 0
    per_class = np.count_nonzero(pruned, axis=1)
    # Usually few (given, other) pairs are pruned at all; then gathering just their margins
    # beats computing all n x k of them.
    if np.dot(scan.counts, per_class) < SPARSE_PAIRS_BELOW * scan.n * scan.k:
        _offer_pairs(scan, top, pruned, per_class)
    else:
        _offer_rows(scan, top)
    mask[top.rows()] = True
    return mask


def _rounded_margin(values: FloatArray, self_conf: FloatArray) -> FloatArray:
    """``values - self_conf`` as cleanlab computes it, in the input dtype.

    float16 differences of values in [0, 1] are exact in float32, so rounding that once is
    float16's result, and numpy's float32 loops are much faster than its float16 ones.
    """
    dtype = values.dtype
    if dtype != np.float16:
        return np.asarray(values - self_conf)
    wide = values.astype(np.float32) - self_conf.astype(np.float32)
    return wide.astype(dtype)


def _offer_pairs(scan: Scan, top: _TopMargins, pruned: BoolArray, per_class: IntArray) -> None:
    k = scan.k
    indptr = np.concatenate(([0], np.cumsum(per_class)))
    columns = np.nonzero(pruned)[1]  # row-major: each class's pruned columns, ascending
    sc = scan.self_confidence

    def entries(start: int, chunk: FloatArray) -> _Candidates | None:
        lab = scan.labels[start : start + len(chunk)]
        per_row = per_class[lab]
        total = int(per_row.sum())
        if total == 0:
            return None
        row = np.repeat(np.arange(len(lab)), per_row)
        offset = np.arange(total) - np.repeat(np.cumsum(per_row) - per_row, per_row)
        given = lab[row]
        other = columns[indptr[given] + offset]
        margin = _rounded_margin(chunk[row, other], sc[start + row])
        return top.offered_pairs(given * k + other, margin, row.astype(np.int64) + start)

    for found in scan.map_chunks(entries):
        top.keep(found)


def _offer_rows(scan: Scan, top: _TopMargins) -> None:
    dtype = scan.dtype
    work = np.dtype(np.float32) if dtype == np.float16 else dtype
    sc = scan.self_confidence
    argmax = scan.argmax

    def entries(start: int, chunk: FloatArray) -> _Candidates | None:
        stop = start + len(chunk)
        lab = scan.labels[start:stop]
        row_sc = sc[start:stop]
        # A row's largest margin is its maximum less its self-confidence (rounding is monotone,
        # so no margin of the row exceeds it): rows where that does not pass the lowest cutoff
        # of their class, most rows once the cutoffs have risen, offer nothing.
        best = chunk[np.arange(len(chunk)), argmax[start:stop]]
        local = np.flatnonzero(_rounded_margin(best, row_sc) > top.floor[lab])
        if local.size == 0:
            return None
        positions = local.astype(np.int64) + start
        part, part_lab, part_sc = chunk[local], lab[local], row_sc[local]
        # cleanlab: pred_probs[:, j] - pred_probs[:, c] in the input dtype (see
        # _rounded_margin; inlined here to widen the chunk once).
        margin = part.astype(work, copy=False) - part_sc.astype(work, copy=False)[:, None]
        if margin.dtype != dtype:
            margin = margin.astype(dtype)
        return top.offered(positions, margin, part_lab)

    for found in scan.map_chunks(entries):
        top.keep(found)


def find_predicted_neq_given(labels: npt.ArrayLike, pred_probs: ProbsLike) -> BoolArray:
    """Rows whose argmax differs from the given label (cleanlab's baseline).

    Returns
    -------
    numpy.ndarray of bool, shape (n,)
    """
    scan = Scan(labels, pred_probs)
    return np.asarray(scan.argmax != scan.labels)


def _lowest(scores: FloatArray, count: int) -> BoolArray:
    """Mask of ``np.argsort(scores, kind="stable")[:count]`` without sorting everything."""
    mask = np.zeros(scores.size, dtype=bool)
    if count <= 0:
        return mask
    if count >= scores.size:
        mask[:] = True
        return mask
    bar = np.partition(scores, count - 1)[count - 1]
    below = scores < bar
    mask |= below
    ties = np.flatnonzero(scores == bar)[: count - int(below.sum())]
    mask[ties] = True
    return mask


def issue_mask(
    scan: Scan, options: DetectorOptions, *, confident_joint: npt.ArrayLike | None = None
) -> BoolArray:
    """:func:`find_label_issues`'s mask on an existing :class:`Scan` (options checked by
    :func:`check_filter_options`)."""
    filter_by, min_examples_per_class = options.filter_by, options.min_examples_per_class
    if filter_by in _LOW_SCORE:
        sc = scan.self_confidence
        if filter_by == "low_self_confidence":
            scores = sc
        else:
            max_other = scan.max_other
            if max_other is None:
                raise InvalidInputError("low_normalized_margin needs Scan(need_max_other=True)")
            scores = (sc - max_other + 1) / 2
        return _lowest(scores, count_issues(scan, "off_diagonal"))
    if filter_by == "confident_learning":
        mask = scan.off_diagonal()
    elif filter_by == "predicted_neq_given":
        mask = np.asarray(scan.argmax != scan.labels)
    else:
        cj = scan.confident_joint() if confident_joint is None else np.asarray(confident_joint)
        pcm = _prune_count_matrix(scan, cj, options)
        if filter_by == "prune_by_class":
            mask = _prune_by_class(scan, pcm, min_examples_per_class)
        elif filter_by == "prune_by_noise_rate":
            mask = _prune_by_noise_rate(scan, pcm, min_examples_per_class)
        else:
            mask = _prune_by_class(scan, pcm, min_examples_per_class)
            mask &= _prune_by_noise_rate(scan, pcm, min_examples_per_class)
    # cleanlab clears rows whose given label is the argmax within 1e-6.
    return np.asarray(mask & ~scan.reduce_mask)


class CleanlabKeywords(TypedDict, total=False):
    """The keywords of cleanlab's ``find_label_issues`` that :func:`find_label_issues` takes,
    typed; each one left out takes cleanlab's default (:data:`CLEANLAB_DEFAULTS`)."""

    filter_by: str
    frac_noise: float
    num_to_remove_per_class: npt.ArrayLike | None
    min_examples_per_class: int
    confident_joint: npt.ArrayLike | None
    return_indices_ranked_by: str | None
    rank_by_kwargs: dict[str, Any] | None
    chunk_rows: int | None


CLEANLAB_DEFAULTS: CleanlabKeywords = {
    "filter_by": "prune_by_noise_rate",
    "frac_noise": 1.0,
    "num_to_remove_per_class": None,
    "min_examples_per_class": 1,
    "confident_joint": None,
    "return_indices_ranked_by": None,
    "rank_by_kwargs": None,
    "chunk_rows": None,
}


def find_label_issues(
    labels: npt.ArrayLike, pred_probs: ProbsLike, **keywords: Unpack[CleanlabKeywords]
) -> npt.NDArray[Any]:
    """Identify examples whose given label is likely wrong (confident learning).

    cleanlab's signature, so that a call of ``cleanlab.filter.find_label_issues`` runs here
    unchanged (``dsreg.detector.detector.detect`` takes a :class:`DetectorOptions` instead): its
    keywords are one typed group, :class:`CleanlabKeywords`, and a keyword cleanlab has but
    this function does not take (``n_jobs``, ``verbose``) raises ``TypeError`` as an unknown
    keyword does.

    Parameters
    ----------
    labels : array_like of int, shape (n,)
        Given labels in ``[0, k)``.
    pred_probs : array_like, shape (n, k), or a path or ProbabilitySource
        Out-of-sample predicted probabilities; a ``.npy`` or Parquet path is read in chunks.
    filter_by, frac_noise, num_to_remove_per_class, min_examples_per_class, chunk_rows
        As :class:`~dsreg.detector.options.DetectorOptions` holds them, with its defaults.
    confident_joint : array_like, shape (k, k), optional
        Use this confident joint instead of estimating it.
    return_indices_ranked_by : str, optional
        ``"self_confidence"``, ``"normalized_margin"`` or ``"confidence_weighted_entropy"``:
        return row indices ordered by that label-quality score (lowest first, ties to the
        lower row) instead of a mask.
    rank_by_kwargs : dict, optional
        ``{"adjust_pred_probs": bool}`` for the ranking score.

    Returns
    -------
    numpy.ndarray
        Boolean mask of shape (n,), or int indices of shape (m,) if ranked.

    Raises
    ------
    ProbabilitiesError
        Invalid probabilities or labels.
    InvalidInputError
        Invalid options, including options cleanlab would silently ignore.
    """
    from dsreg.detector.rank import check_rank_options, rank_issues

    unknown = sorted(set(keywords) - set(CLEANLAB_DEFAULTS))
    if unknown:
        raise TypeError(f"find_label_issues() got an unexpected keyword argument {unknown[0]!r}")
    kw: CleanlabKeywords = {**CLEANLAB_DEFAULTS, **keywords}
    filter_by, ranked_by, chunk_rows = (
        kw["filter_by"],
        kw["return_indices_ranked_by"],
        kw["chunk_rows"],
    )
    confident_joint = kw["confident_joint"]
    options = DetectorOptions(
        filter_by=filter_by,
        rank_by=ranked_by or RANK_BY[0],
        rank_by_kwargs=kw["rank_by_kwargs"],
        frac_noise=kw["frac_noise"],
        num_to_remove_per_class=kw["num_to_remove_per_class"],
        min_examples_per_class=kw["min_examples_per_class"],
        chunk_rows=chunk_rows,
    )
    need_max_other = filter_by == "low_normalized_margin"
    scan = Scan(labels, pred_probs, chunk_rows=chunk_rows, need_max_other=need_max_other)
    check_filter_options(scan.k, options, confident_joint=confident_joint)
    ranked = ranked_by is not None
    if ranked:
        check_rank_options(options.rank_by, options.rank_by_kwargs)
    mask = issue_mask(scan, options, confident_joint=confident_joint)
    if not ranked:
        return mask
    rows, _ = rank_issues(scan, mask, rank_by=options.rank_by, rank_by_kwargs=kw["rank_by_kwargs"])
    return rows
