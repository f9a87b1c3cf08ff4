"""Published re-annotations of question sets as overlays (docs/questions.md): MMLU-Redux's
error types (``--format mmlu-redux``) and a status file's keep, revise and reject (``--format
status``, as the Platinum benchmarks publish).

``records`` reads the file as it was published (its separator, its encoding, its columns by
name), ``rules`` turns each record's category into a verdict for a row, and ``fit`` finds each
record's rows (by example id or by content), settles the rows several records name, and builds
the corrections table and the summary.
"""

from dsreg.overlays.published.fit import PUBLISHED_FORMATS, import_published

__all__ = ["PUBLISHED_FORMATS", "import_published"]
