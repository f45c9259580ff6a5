"""Summaries of what leaves the context (C8): incremental, structured, bounded, never lost.

* :class:`Summarizer` asks a model for the new summary and falls back to :func:`extractive_summary`
  when the model fails, hangs or writes junk;
* :class:`Ledger` keeps exact identifiers (paths, URLs, numbers, errors, names) verbatim, extracted
  deterministically, with secrets redacted by :func:`redact_secrets` (re-exported from
  :mod:`contextmem.redaction`, the one detector every sink uses);
* :mod:`~contextmem.summarize.prompts` holds the English and Chinese prompts; :mod:`.revise` checks the
  model's reply and reconciles it with the extractive draft it corrected.
"""

from .extractive import extractive_summary, truncate_to_tokens
from .ledger import Ledger, LedgerEntry, build_ledger, extract_identifiers, find_secrets, redact_secrets
from .prompts import detect_language, parse_sections, render_transcript, summary_prompt
from .summarizer import MIN_SUMMARY_TOKENS, Summarizer, Summary, SummarySource, merge_archive_refs

__all__ = [
    "MIN_SUMMARY_TOKENS",
    "Ledger",
    "LedgerEntry",
    "Summarizer",
    "Summary",
    "SummarySource",
    "build_ledger",
    "detect_language",
    "extract_identifiers",
    "extractive_summary",
    "find_secrets",
    "merge_archive_refs",
    "parse_sections",
    "redact_secrets",
    "render_transcript",
    "summary_prompt",
    "truncate_to_tokens",
]
